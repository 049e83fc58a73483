// harness.mjs — what the console's browser runs share (t/console/e2e.mjs,
// t/console/ha.mjs): the "ok - …" / "FAIL - …" lines the shell counts,
// check(), screenshots under $ARTIFACTS, headless Chromium (Debian's
// /usr/bin/chromium, or $CHROMIUM, through playwright-core: failing to
// start is a failure, never a skip) and pages whose console errors and CSP
// violations are collected in problems (they must stay empty). "Failed to
// load resource" lines are the API's own refusals the checks ask for.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';

export const WAIT = 1000 * Number(process.env.T_WAIT || 90);
let failures = 0;
export const failed = () => failures;
export const ok = (name) => console.log('ok - ' + name);
export const fail = (name, why) => { failures++; console.log('FAIL - ' + name); if (why) console.log(String(why).split('\n').slice(0, 12).map((l) => '    # ' + l).join('\n')); };

// check NAME FN: FN resolves truthy (it may wait); an exception is a failure.
export async function check(name, fn) {
  try {
    const r = await fn();
    if (r === false) fail(name); else ok(name);
  } catch (e) {
    fail(name, e.message);
  }
}

const { ARTIFACTS } = process.env;
mkdirSync(ARTIFACTS, { recursive: true });
export const shot = (page, name) => page.screenshot({ path: `${ARTIFACTS}/${name}.png`, fullPage: true });

export let browser;
try {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-dev-shm-usage'],
    timeout: 60000,
  });
  ok('chromium starts');
} catch (e) {
  fail('chromium starts (the browser tests cannot run without it)', e.message);
  console.log(`0 passed, ${failures} failed`);
  process.exit(1);
}

export const problems = [];
export async function newPage(viewport) {
  const ctx = await browser.newContext({ viewport: viewport || { width: 1280, height: 900 } });
  const page = await ctx.newPage();
  page.setDefaultTimeout(WAIT);
  page.on('console', (m) => { if (m.type() === 'error' && !/^Failed to load resource/.test(m.text())) problems.push(m.text()); });
  page.on('pageerror', (e) => problems.push('page error: ' + e.message));
  return page;
}
