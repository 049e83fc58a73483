// harness.mjs — what the console's browser runs share (t/console/e2e.mjs,
// t/console/ha.mjs): the "ok - …" / "FAIL - …" lines the shell counts,
// check(), screenshots under $ARTIFACTS, headless Chromium (Debian's, its
// binary /usr/lib/chromium/chromium, else /usr/bin/chromium, or $CHROMIUM,
// through playwright-core, with the flags below: failing to start is a
// failure, never a skip) and pages whose console errors and CSP
// violations are collected in problems (they must stay empty). "Failed to
// load resource" lines are the API's own refusals the checks ask for.
import { chromium } from 'playwright-core';
import { existsSync, mkdirSync } from 'node:fs';

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

// Rewrites the API's answers to the requests matching `match` with
// edit(doc) (the answer's JSON, changed in place), until the returned
// function is called. The page's refreshes keep running meanwhile, and
// unroute does not wait for a handler in flight: Playwright lets that
// request through unchanged itself, and the handler's fulfill then throws
// "Route is already handled!" outside any check, ending the whole run (CI,
// session 22). An error after the stop is expected and ignored; one before
// is only logged: the checks read the page, so a rewrite the page needed
// and did not get still fails its check.
export const dropped = (e) => console.log('    # a made-up answer was dropped: ' + String(e.message || e).split('\n')[0]);
export async function rewriteAnswers(page, match, edit) {
  let stopped = false;
  const handler = async (route) => {
    try {
      const res = await route.fetch();
      const doc = await res.json();
      edit(doc);
      await route.fulfill({ response: res, json: doc });
    } catch (e) {
      if (!stopped) dropped(e);
    }
  };
  await page.route(match, handler);
  return async () => { stopped = true; await page.unroute(match, handler); };
}

export const shot = (page, name) => page.screenshot({ path: `${ARTIFACTS}/${name}.png`, fullPage: true });

// Chromium's own binary, not Debian's /usr/bin/chromium wrapper (a shell
// script that starts grep, findmnt, tr and ls and adds
// --enable-gpu-rasterization), and flags that start fewer processes: each
// costs this VM up to ~1 s of CPU (a renderer ~0.8 s) in page faults and
// start-up. Without them a launch ran 11 (browser, 2 zygotes, 2 crashpad
// handlers, GPU, network and storage services, the page's renderer, a
// spare renderer and one preloading the omnibox popup, browser UI the
// tests never show); with them 5 (browser, 2 zygotes, storage, the page's
// renderer): the GPU process and the network service in the browser, no
// crash reporter, no spare renderer, no popup. A second --disable-features
// replaces Playwright's, so its list (playwright-core 1.61.1,
// chromiumSwitches) is repeated first; likewise its --enable-features.
// docs/benchmarks.md has the CPU before and after. --no-zygote hung the
// launch with these flags: not used.
const PLAYWRIGHT_DISABLED = 'AvoidUnnecessaryBeforeUnloadCheckSync,BoundaryEventDispatchTracksNodeRemoval,' +
  'DestroyProfileOnBrowserClose,DialMediaRouteProvider,GlobalMediaControls,HttpsUpgrades,LensOverlay,MediaRouter,' +
  'PaintHolding,ThirdPartyStoragePartitioning,Translate,AutoDeElevate,RenderDocument,OptimizationHints,' +
  'msForceBrowserSignIn,msEdgeUpdateLaunchServicesPreferredVersion';
const DEBIAN_BINARY = '/usr/lib/chromium/chromium';
export const CHROMIUM = process.env.CHROMIUM || (existsSync(DEBIAN_BINARY) ? DEBIAN_BINARY : '/usr/bin/chromium');
export const CHROMIUM_ARGS = ['--no-sandbox', '--disable-dev-shm-usage',
  '--disable-features=' + PLAYWRIGHT_DISABLED + ',SpareRendererForSitePerProcess,' +
    'WebUIOmniboxPopup,WebUIOmniboxAimPopup,WebUIOmniboxFullPopup,PreloadTopChromeWebUI',
  '--enable-features=CDPScreenshotNewSurface,NetworkServiceInProcess2',
  '--in-process-gpu', '--disable-crashpad-for-testing'];

export let browser;
try {
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: CHROMIUM_ARGS,
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
