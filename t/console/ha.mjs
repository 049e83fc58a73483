// ha.mjs — the web console across several heads (t/console_ha.sh): in
// headless Chromium, one console loaded from the leader A and one from the
// standby B. Both sign in and list the clusters (B's calls follow its 503
// not_leader to A, cross-origin). Then A is SIGKILLed (A_PID): B takes
// over, and both pages — A's from a dead origin, without a reload — list a
// cluster made on B after the failover and create one through the form.
// Then head C is started (C_CMD; its pid in C_PIDFILE): the pages learn it
// from the roster; B is SIGKILLed (B_PID) and both pages, whose CSP (of
// their load) does not list C and whose heads are dead, load themselves
// from C; A's signs in there, lists and creates a cluster (c4).
// Prints "ok - …" / "FAIL - …" lines (console_ha.sh counts them).
//
// Environment: A_URL, B_URL, A_PID, ADMIN (an all-scope token), ARTIFACTS,
// CHROMIUM (default /usr/lib/chromium/chromium, else /usr/bin/chromium), T_WAIT (seconds per wait, 90).
import { spawn } from 'node:child_process';
import { openSync, writeFileSync } from 'node:fs';
import { WAIT, failed, check, shot, browser, problems, newPage } from './harness.mjs';

const { A_URL, B_URL, C_URL, A_PID, B_PID, C_LOG, C_PIDFILE, ADMIN } = process.env;
const cmdC = JSON.parse(process.env.C_CMD || '[]');
async function signIn(page, base) {
  await page.goto(base + '/');
  await page.getByLabel('Personal access token').fill(ADMIN);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#who-user').waitFor();
}
// a hash navigation: no reload (page A's origin dies below)
async function listClusters(page, want) {
  await page.evaluate(() => { location.hash = '#/models'; });
  await page.locator('#clusters').waitFor({ state: 'detached' });
  await page.evaluate(() => { location.hash = '#/clusters'; });
  await page.locator('#clusters tbody tr', { hasText: want }).waitFor();
  return true;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function role(url) {
  try { return (await (await fetch(url + '/healthz')).json()).role; } catch { return 'down'; }
}

const pa = await newPage(), pb = await newPage();
const trail = [];
pa.on('request', (r) => trail.push('> ' + r.method() + ' ' + r.url()));
pa.on('requestfailed', (r) => trail.push('x ' + r.url() + ' ' + (r.failure() || {}).errorText));
pa.on('response', (r) => trail.push('< ' + r.status() + ' ' + r.url()));
pa.on('console', (m) => trail.push('console ' + m.type() + ' ' + m.text()));
await check('sign-in on the leader A', async () => { await signIn(pa, A_URL); return true; });
await check('sign-in on the standby B (its calls follow the leader named in the 503)', async () => {
  await signIn(pb, B_URL);
  return (await pb.locator('#who-user').textContent()) === 'admin';
});
await check('B\'s console lists cluster c1 (read from A, cross-origin)', async () => {
  await listClusters(pb, 'c1');
  await shot(pb, 'ha-01-b-standby-clusters');
  return true;
});
await check('the token stays in the tab that was signed in (sessionStorage), no cookie', async () => {
  const s = await pb.evaluate(() => [sessionStorage.getItem('drover.token'), document.cookie]);
  return s[0] === ADMIN && s[1] === '';
});

process.kill(Number(A_PID), 'SIGKILL');
await check('after the SIGKILL of A, B leads', async () => {
  const until = Date.now() + WAIT;
  while (Date.now() < until && (await role(B_URL)) !== 'leader') await sleep(200);
  return (await role(B_URL)) === 'leader';
});
await check('cluster c2 created on B after the failover', async () => {
  const r = await fetch(B_URL + '/v1/clusters', {
    method: 'POST', headers: { Authorization: 'Bearer ' + ADMIN, 'Content-Type': 'application/json' },
    body: JSON.stringify({ id: 'c2', provider: 'local', region: 'local' }),
  });
  return r.status === 201;
});
await check('the console loaded from the dead head A lists c2 (it moved on to B)', async () => {
  try { await listClusters(pa, 'c2'); } catch (e) { throw new Error(e.message.split('\n')[0] + '; the page says: ' + trail.slice(-12).join(' | ')); }
  await shot(pa, 'ha-02-a-dead-clusters');
  return true;
});
await check('... and creates cluster c3 through the form', async () => {
  await pa.locator('#new-cluster-btn').click();
  const form = pa.locator('#new-cluster');
  await form.getByLabel('Provider').selectOption('local');
  await form.getByLabel('Region').selectOption('local');
  await form.getByLabel('Cluster id').fill('c3');
  await form.getByRole('button', { name: 'Create cluster' }).click();
  await pa.waitForURL(/#\/clusters\/c3$/);
  return true;
});
await check('the console loaded from B (now the leader) lists c3', async () => listClusters(pb, 'c3'));

// ---- a head C added after the pages loaded (their CSP does not list it) ----
const c = spawn(cmdC[0], cmdC.slice(1), { detached: true, stdio: ['ignore', openSync(C_LOG, 'a'), openSync(C_LOG, 'a')] });
writeFileSync(C_PIDFILE, String(c.pid));
c.unref();
const until = async (fn) => {
  const end = Date.now() + WAIT;
  while (Date.now() < end && !(await fn())) await sleep(200);
  return fn();
};
await check('head C, started now, stands by', async () => until(async () => (await role(C_URL)) === 'standby'));
await check('both consoles learn C from the roster (read again every 5 s)', async () => {
  const knows = async (p) => ((await p.evaluate(() => document.documentElement.dataset.heads || '')) || '').split(' ').includes(C_URL);
  return until(async () => (await knows(pa)) && (await knows(pb)));
});
process.kill(Number(B_PID), 'SIGKILL');
await check('after the SIGKILL of B, C leads', async () => until(async () => (await role(C_URL)) === 'leader'));
await check('the console loaded from dead A loads itself from C (its CSP did not list C) and signs in there', async () => {
  try {
    await pa.waitForURL((u) => u.origin === C_URL);
    await pa.getByLabel('Personal access token').fill(ADMIN);
    await pa.getByRole('button', { name: 'Sign in' }).click();
    await pa.locator('#who-user').waitFor();
    await listClusters(pa, 'c3');
  } catch (e) { throw new Error(e.message.split('\n')[0] + '; the page says: ' + trail.slice(-12).join(' | ')); }
  await shot(pa, 'ha-03-a-moved-to-c');
  return true;
});
await check('... and creates cluster c4 through the form there', async () => {
  await pa.locator('#new-cluster-btn').click();
  const form = pa.locator('#new-cluster');
  await form.getByLabel('Provider').selectOption('local');
  await form.getByLabel('Region').selectOption('local');
  await form.getByLabel('Cluster id').fill('c4');
  await form.getByRole('button', { name: 'Create cluster' }).click();
  await pa.waitForURL(/#\/clusters\/c4$/);
  return true;
});
await check('the console loaded from dead B moves to C too', async () => {
  await pb.waitForURL((u) => u.origin === C_URL);
  return true;
});
await check('no console error and no CSP violation on either page', async () => {
  if (problems.length) throw new Error(problems.join('\n'));
  return true;
});
await browser.close();
console.log(`${failed() ? 'some' : 'all'} checks done, ${failed()} failed`);
process.exit(failed() ? 1 : 0);
