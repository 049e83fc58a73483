// e2e.mjs — drives the web console in headless Chromium (Debian's, with
// harness.mjs's flags, through playwright-core) against the droverd that
// t/console.sh started. Prints one "ok - …" / "FAIL - …" line per check
// (console.sh counts them) and saves a screenshot of each page under
// $ARTIFACTS. Chromium failing to start is a failure, never a skip.
//
// Environment: URL (droverd), ADMIN (an all-scope token), READ_TOKEN (a
// read-scope token of the same user), ARTIFACTS (screenshot dir),
// ART_DIGEST (the digest of artifact "weights", pushed by console.sh),
// STORE_SECRET (the secret access key of store "s3a", which must never show),
// BROKEN_REASON (status.reason of artifact "broken", a failed import),
// UPLOAD_ID (an unfinished upload of 8192 bytes, none of them sent),
// CHROMIUM (default /usr/lib/chromium/chromium, else /usr/bin/chromium), T_WAIT (seconds per wait, 90).
import { WAIT, failed, ok, fail, check, shot, browser, problems, newPage, rewriteAnswers, dropped } from './harness.mjs';

const { URL: BASE, ADMIN, READ_TOKEN, ART_DIGEST, BROKEN_REASON, UPLOAD_ID } = process.env;

async function signIn(page, token) {
  await page.goto(BASE + '/');
  await page.getByLabel('Personal access token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('#who-user').waitFor();
}

const page = await newPage();

await check('sign-in: the card says where the quick start\'s admin token is', async () => {
  await page.goto(BASE + '/');
  await page.getByLabel('Personal access token').waitFor();
  const hint = await page.locator('.signin #signin-hint').textContent();
  if (!hint.includes('.drover/admin.token') || !hint.includes('make up')) throw new Error('hint: ' + hint);
  return await page.locator('#signin-hint').isVisible();
});

await check('sign-in: no navigation and no user before signing in', async () => {
  await page.goto(BASE + '/#/deployments');
  await page.getByLabel('Personal access token').waitFor();
  const seen = [await page.locator('#nav').isVisible(), await page.locator('#who').isVisible(),
    await page.getByRole('link', { name: 'Deployments' }).isVisible()];
  if (seen.some((v) => v)) throw new Error('visible (nav, who, a nav link): ' + seen.join(', '));
  return true;
});

await check('sign-in: a wrong token is refused with the API\'s words', async () => {
  await page.goto(BASE + '/');
  await page.getByLabel('Personal access token').fill('drv_not_a_real_token');
  await shot(page, '01-signin');
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.locator('.signin .form-err:not(:empty)').waitFor();
  return (await page.locator('#who-user').count()) === 0;
});

await check('sign-in with the admin token shows the user and the token\'s scopes', async () => {
  await signIn(page, ADMIN);
  return (await page.locator('#who-user').textContent()) === 'admin' &&
         (await page.locator('#who-scopes').textContent()) === 'all' &&
         (await page.locator('#nav').isVisible());
});

await check('the token is kept in sessionStorage only', async () => {
  const s = await page.evaluate(() => [sessionStorage.getItem('drover.token'), localStorage.length, document.cookie]);
  return s[0] === ADMIN && s[1] === 0 && s[2] === '';
});

await check('New Cluster: provider and region pickers from the catalog; creates cluster c1', async () => {
  await page.locator('#new-cluster-btn').click();
  const form = page.locator('#new-cluster');
  const providers = await form.getByLabel('Provider').locator('option').allTextContents();
  if (!providers.some((p) => p.includes('(aws)')) || !providers.some((p) => p.includes('(local)')))
    throw new Error('providers offered: ' + providers.join(', '));
  await form.getByLabel('Provider').selectOption('aws');
  const awsRegions = await form.getByLabel('Region').locator('option').count();
  await form.getByLabel('Provider').selectOption('local');
  await form.getByLabel('Region').selectOption('local');
  await form.getByLabel('Cluster id').fill('c1');
  await form.getByLabel('Description').fill('made in the browser');
  await shot(page, '02-new-cluster');
  await form.getByRole('button', { name: 'Create cluster' }).click();
  await page.waitForURL(/#\/clusters\/c1$/);
  return awsRegions > 1;
});

await check('a validation error appears next to its field (bad cluster id)', async () => {
  await page.goto(BASE + '/#/clusters');
  await page.locator('#new-cluster-btn').click();
  const form = page.locator('#new-cluster');
  await form.getByLabel('Cluster id').fill('Bad_Id');
  await form.getByRole('button', { name: 'Create cluster' }).click();
  const err = form.locator('.field[data-field="id"] .err');
  await err.filter({ hasText: 'not a valid id' }).waitFor();
  return true;
});

await check('New Nodepool: instance-type table filters and sorts; max < min is refused next to Max nodes', async () => {
  await page.goto(BASE + '/#/clusters/c1');
  await page.locator('#new-nodepool-btn').click();
  const form = page.locator('#new-nodepool');
  const rows = form.locator('table.types tbody tr[data-type]');
  await rows.first().waitFor();
  const all = await rows.count();
  await form.locator('#it-filter').fill('l4');
  const filtered = await rows.evaluateAll((trs) => trs.map((t) => t.dataset.type));
  if (!(filtered.length > 0 && filtered.length < all && filtered.every((t) => t.includes('l4'))))
    throw new Error(`filter "l4": ${filtered.join(', ')} of ${all}`);
  await form.locator('th[data-key="gpu_count"] button').click();
  await form.locator('th[data-key="gpu_count"] button').click();
  const counts = await rows.evaluateAll((trs) => trs.map((t) => Number(t.children[3].textContent)));
  if (counts.join() !== [...counts].sort((a, b) => b - a).join()) throw new Error('not sorted by GPUs, descending: ' + counts);
  await form.getByLabel('Nodepool id').fill('np1');
  await form.getByLabel('use local-l4', { exact: true }).check();
  await form.getByLabel('Min nodes').fill('3');
  await form.getByLabel('Max nodes').fill('1');
  await form.getByRole('button', { name: 'Create nodepool' }).click();
  await form.locator('.field[data-field="max_nodes"] .err').filter({ hasText: 'must be >= min_nodes' }).waitFor();
  await shot(page, '03-nodepool-validation');
  return true;
});

await check('New Nodepool: created through the form, its nodes come up ready', async () => {
  const form = page.locator('#new-nodepool');
  await form.getByLabel('Min nodes').fill('1');
  await form.getByLabel('Max nodes').fill('2');
  await form.getByRole('button', { name: 'Create nodepool' }).click();
  await page.waitForURL(/#\/clusters\/c1\/nodepools\/np1$/);
  await page.locator('#nodepool-nodes .badge.s-ready').first().waitFor();
  await shot(page, '04-nodepool');
  return true;
});

await check('Register Model: the GPU recommendation for its size shows beside the form', async () => {
  await page.goto(BASE + '/#/models');
  await page.locator('#new-model-btn').click();
  const form = page.locator('#new-model');
  await form.getByLabel('Model id').fill('demo');
  await form.getByLabel('Command (one argument per line)').fill('drover-demo-model\n--weights-mib\n2');
  await form.getByLabel('Start-up timeout (s)').fill('60');
  await form.getByLabel('Size (billions of parameters)').fill('7');
  await page.locator('#rec-total').waitFor();
  const total = await page.locator('#rec-total').textContent();
  await shot(page, '05-register-model');
  await form.getByLabel('GPUs', { exact: true }).fill('1');
  await form.getByLabel('GPU memory (MiB)').fill('6000');
  await form.getByLabel('GPU compute (%)').fill('25');
  await form.getByLabel('CPU (millicores)').fill('500');
  await form.getByLabel('Memory (MiB)', { exact: true }).fill('512');
  await form.getByRole('button', { name: 'Register model' }).click();
  await page.locator('#models td', { hasText: 'demo' }).first().waitFor();
  return /GiB|MiB/.test(total);
});

await check('New Deployment: deploys the model to np1 with its autoscaling settings, each with a tooltip', async () => {
  await page.goto(BASE + '/#/deployments');
  await page.locator('#new-deployment-btn').click();
  const form = page.locator('#new-deployment');
  await form.waitFor();
  const tips = await form.locator('fieldset .tip[data-tip]').count();
  await form.getByLabel('Deployment id').fill('dep');
  await form.getByLabel('Model').selectOption('demo');
  await form.getByLabel('Nodepool 1', { exact: true }).selectOption('c1/np1');
  await form.getByLabel('Min replicas').fill('2');
  await form.getByLabel('Max replicas').fill('2');
  await shot(page, '06-new-deployment');
  await form.getByRole('button', { name: 'Deploy' }).click();
  await page.waitForURL(/#\/deployments\/dep$/);
  return tips >= 8;
});

await check('deployment page: 2 of 2 replicas ready, chart, events, serving metrics', async () => {
  await page.locator('#ready-desired', { hasText: '2 / 2' }).waitFor();
  // a flat line has no height: Playwright calls it hidden, so wait for it to exist
  await page.locator('#replica-chart svg polyline.ready').waitFor({ state: 'attached' });
  await page.locator('#serving #req-total').waitFor();
  await page.locator('#events tbody tr').first().waitFor();
  return (await page.locator('#no-metrics').count()) === 0;
});

await check('the test-prediction box gets an answer from a replica', async () => {
  for (let i = 0; i < 3; i++) {
    await page.locator('#predict-out').evaluate((e) => { e.textContent = ''; });
    await page.locator('#predict').getByRole('button', { name: 'Send' }).click();
    await page.locator('#predict-out', { hasText: /^200 from dep-/ }).waitFor();
  }
  await page.locator('#logs').filter({ hasNotText: '(empty)' }).waitFor();
  return true;
});

await check('after the predictions the page shows their count, a rate > 0, a latency and per-replica requests', async () => {
  await page.locator('#req-total', { hasText: /^[1-9]\d* \(2xx [1-9]/ }).waitFor();
  const rate = Number(await page.locator('#req-rate').textContent());
  await page.locator('#latency', { hasText: /^\d+(\.\d+)? ms \// }).waitFor();
  const perReplica = await page.locator('#replicas td[data-label="Requests (60 s)"]').allTextContents();
  await shot(page, '07-deployment');
  if (!(rate > 0)) throw new Error('requests / s shown: ' + rate);
  const sum = perReplica.reduce((a, x) => a + Number(x), 0);
  if (sum < 3) throw new Error('per-replica requests: ' + perReplica.join(', '));
  return true;
});

await check('the charts come from droverd\'s history, so a reload keeps them', async () => {
  await page.reload();
  await page.locator('#replica-chart p', { hasText: /history: [1-9]\d* points?,/ }).waitFor();
  await page.locator('#serving svg polyline.rps').first().waitFor({ state: 'attached' });
  return (await page.locator('#replica-chart svg polyline.desired').count()) > 0;
});

await check('Edit deployment: max replicas and a nodepool priority change with PATCH', async () => {
  await page.locator('#edit-deployment-btn').click();
  const form = page.locator('#edit-deployment');
  if ((await form.getByLabel('Max replicas').inputValue()) !== '2') throw new Error('the form does not start from the deployment');
  await form.getByLabel('Max replicas').fill('3');
  await form.getByLabel('priority of nodepool 1').fill('7');
  await shot(page, '07b-edit-deployment');
  await form.getByRole('button', { name: 'Save' }).click();
  await form.waitFor({ state: 'detached' });
  await page.locator('#dep-autoscale', { hasText: '2–3 replicas' }).waitFor();
  await page.locator('#dep-nodepools', { hasText: 'c1/np1 (priority 7)' }).waitFor();
  return true;
});

await check('Edit deployment: min above max is refused next to Max replicas, in the API\'s words', async () => {
  await page.locator('#edit-deployment-btn').click();
  const form = page.locator('#edit-deployment');
  await form.getByLabel('Min replicas').fill('5');
  await form.getByRole('button', { name: 'Save' }).click();
  await form.locator('.field[data-field="autoscale.max_replicas"] .err').filter({ hasText: 'must be >= min_replicas' }).waitFor();
  await shot(page, '07c-edit-deployment-error');
  await form.getByRole('button', { name: 'Cancel' }).click();
  await form.waitFor({ state: 'detached' });
  await page.locator('#dep-autoscale', { hasText: '2–3 replicas' }).waitFor();
  return true;
});

await check('fetch progress: the bar function draws bytes/total, rate and ETA, and nothing without status.fetch', async () => {
  const r = await page.evaluate(async () => {
    const { fetchProgress } = await import('/ui/progress.js');
    const full = fetchProgress({ state: 'fetching', fetch: { bytes: 1610612736, total: 4294967296, rate_bytes_per_s: 104857600, eta_seconds: 26 } });
    const noTotal = fetchProgress({ state: 'fetching', fetch: { bytes: 2048 } });
    return {
      none: [fetchProgress({ state: 'ready' }), fetchProgress({ state: 'fetching' }), fetchProgress(undefined), fetchProgress({ fetch: { total: 5 } })].every((x) => x === null),
      text: full.textContent, now: full.querySelector('[role=progressbar]').getAttribute('aria-valuenow'),
      width: full.querySelector('.fill').style.width,
      noTotal: noTotal.textContent, noTotalBar: noTotal.querySelector('.progress') === null,
    };
  });
  if (!r.none) throw new Error('drawn without status.fetch');
  if (r.text !== '1.5 GiB of 4.0 GiB (37%) · 100 MiB/s · ETA 26s') throw new Error('text: ' + r.text);
  if (r.now !== '37' || r.width !== '37.5%') throw new Error(`aria-valuenow ${r.now}, width ${r.width}`);
  if (r.noTotal !== '2.0 KiB fetched' || !r.noTotalBar) throw new Error('without a total: ' + r.noTotal);
  return true;
});

await check('import progress: files done of files with bytes hashed, "listing the source" before the count, nothing unless importing', async () => {
  const r = await page.evaluate(async () => {
    const { importProgress } = await import('/ui/progress.js');
    const half = importProgress({ state: 'importing', progress: { files_done: 1, files: 2, bytes: 3145728 } });
    const listing = importProgress({ state: 'importing', progress: { files_done: 0, files: 0, bytes: 0 } });
    return {
      none: [importProgress({ state: 'ready', progress: { files_done: 1, files: 2 } }), importProgress({ state: 'importing' }),
        importProgress(undefined), importProgress({ state: 'failed', reason: 'x' })].every((x) => x === null),
      text: half.textContent, now: half.querySelector('[role=progressbar]').getAttribute('aria-valuenow'),
      width: half.querySelector('.fill').style.width,
      listing: listing.textContent, listingBar: listing.querySelector('.progress') === null,
    };
  });
  if (!r.none) throw new Error('drawn when not importing');
  if (r.text !== '1 of 2 files · 3.0 MiB hashed' || r.now !== '50' || r.width !== '50%') throw new Error(JSON.stringify(r));
  if (r.listing !== 'listing the source · 0 B hashed' || !r.listingBar) throw new Error('before the count: ' + r.listing);
  return true;
});

await check('deployment page: a replica whose state is fetching shows its progress bar; the others none', async () => {
  // no replica of the demo model fetches anything: mark the first one fetching in the answer the page reads
  const isReplicas = (u) => u.pathname === '/v1/deployments/dep/replicas';
  const unroute = await rewriteAnswers(page, isReplicas, (doc) => {
    if (doc.items && doc.items[0])
      doc.items[0].status = { ...(doc.items[0].status || {}), state: 'fetching',
        fetch: { bytes: 805306368, total: 2147483648, rate_bytes_per_s: 52428800, eta_seconds: 26 } };
  });
  try {
    await page.goto(BASE + '/#/deployments/dep');
    const bar = page.locator('#replicas tbody tr .fetch .progress[role=progressbar]');
    await bar.waitFor();
    await page.locator('#replicas .badge.s-fetching').waitFor();
    const text = await page.locator('#replicas .fetch-text').allTextContents();
    const rows = await page.locator('#replicas tbody tr').count();
    await shot(page, '07d-deployment-fetching');
    if (text.length !== 1 || text[0] !== '768 MiB of 2.0 GiB (37%) · 50 MiB/s · ETA 26s') throw new Error('fetch lines: ' + text.join(' | '));
    if (rows < 2) throw new Error('replica rows: ' + rows);
    return (await bar.getAttribute('aria-valuenow')) === '37';
  } finally {
    await unroute();
  }
});

await check('Nodes: the GPU share bars show both replicas\' memory and compute shares', async () => {
  await page.goto(BASE + '/#/nodes');
  const segs = page.locator('.bar.memory .seg[data-replica]');
  await segs.nth(1).waitFor();
  const widths = await segs.evaluateAll((s) => s.map((e) => e.style.width));
  const compute = await page.locator('.bar.compute .seg[data-replica]').allTextContents();
  await shot(page, '08-nodes');
  // 6000 MiB of a local-l4's GPU, and 25 % compute each
  if (!widths.every((w) => parseFloat(w) > 20 && parseFloat(w) < 30)) throw new Error('widths ' + widths);
  return compute.length === 2 && compute.every((c) => c === '25%');
});

await check('Nodes: each GPU gets a memory-used sparkline sampled while the page is open', async () => {
  const spark = page.locator('.gpu svg.spark[data-kind="memory"]').first();
  await spark.waitFor({ state: 'attached' });
  const first = Number(await spark.getAttribute('data-samples'));
  // the page samples at each 2 s refresh: the line grows while it stays open
  await page.waitForFunction((n) => Number(document.querySelector('.gpu svg.spark[data-kind="memory"]').dataset.samples) >= n + 2, first);
  const label = await page.locator('.gpu svg.spark[data-kind="memory"]').first().getAttribute('aria-label');
  await shot(page, '08b-nodes-sparklines');
  if (!/memory used, last \d+ min: now \d+(\.\d+)? (MiB|GiB) of /.test(label)) throw new Error('label: ' + label);
  return (await page.locator('.gpu svg.spark[data-kind="memory"] polyline').count()) > 0;
});

await check('Clusters list: c1 on local with its nodepool, nodes, GPUs in use / total and cost', async () => {
  await page.goto(BASE + '/#/clusters');
  const row = page.locator('#clusters tbody tr', { hasText: 'c1' });
  await row.locator('td[data-label="GPUs in use / total"]', { hasText: /^1 \/ [1-9]/ }).waitFor();
  const cells = await row.locator('td').allTextContents();
  await shot(page, '09-clusters');
  return cells[1] === 'local' && cells[3] === '1' && Number(cells[4]) >= 1 && cells[6].startsWith('$');
});

await check('Cluster page: GPUs in use from the cluster\'s own replicas (its refresh asks GET /v1/replicas?cluster=c1, not every replica)', async () => {
  await page.goto(BASE + '/#/clusters/c1');
  await page.locator('#cluster-nodepools tbody tr').first().waitFor();
  await page.locator('.summary dd', { hasText: /^1 \/ [1-9]/ }).waitFor();
  // the next 2 s refresh, once this page alone is shown
  const req = await page.waitForRequest((r) => new URL(r.url()).pathname === '/v1/replicas');
  const q = new URL(req.url()).searchParams;
  if (q.get('cluster') !== 'c1') throw new Error('the page asked ' + req.url());
  return true;
});

await check('Nodepools list and Models list render', async () => {
  await page.goto(BASE + '/#/nodepools');
  await page.locator('#nodepools a', { hasText: 'c1/np1' }).waitFor();
  await shot(page, '10-nodepools');
  await page.goto(BASE + '/#/models');
  await page.locator('#models td', { hasText: 'drover-demo-model --weights-mib 2' }).waitFor();
  await shot(page, '11-models');
  return true;
});

await check('Artifacts list: the pushed artifact with its source, size, file count, short digest and age', async () => {
  await page.getByRole('link', { name: 'Artifacts' }).click();
  await page.waitForURL(/#\/artifacts$/);
  const row = page.locator('#artifacts tbody tr', { hasText: 'weights' });
  await row.waitFor();
  const cell = async (label) => (await row.locator(`td[data-label="${label}"]`).textContent()).trim();
  const got = { source: await cell('Source'), size: await cell('Size'), files: await cell('Files'), digest: await cell('Digest'), age: await cell('Age') };
  await shot(page, '11b-artifacts');
  // 5000 random bytes + 14 bytes of config.json
  if (got.source !== 'drover://' || got.size !== '4.9 KiB' || got.files !== '2' || got.digest !== ART_DIGEST.slice(0, 12) || !/^\d+s$/.test(got.age))
    throw new Error(JSON.stringify(got));
  return (await page.locator('#nav a.on').textContent()) === 'Artifacts';
});

await check('Artifact page: every file with its size and sha256, and the model that uses it', async () => {
  await page.locator('#artifacts a', { hasText: 'weights' }).click();
  await page.waitForURL(/#\/artifacts\/weights$/);
  await page.locator('#artifact-files tbody tr').nth(1).waitFor();
  const paths = await page.locator('#artifact-files td[data-label="Path"]').allTextContents();
  const sizes = await page.locator('#artifact-files td[data-label="Size"]').allTextContents();
  const shas = await page.locator('#artifact-files td[data-label="sha256"] code').evaluateAll((cs) => cs.map((c) => [c.textContent, c.title]));
  await page.locator('#artifact-models td', { hasText: 'uses-weights' }).waitFor();
  const digest = await page.locator('#artifact-digest').textContent();
  await shot(page, '11c-artifact');
  if (paths.join() !== 'model.bin,sub/config.json') throw new Error('paths: ' + paths);
  if (sizes.join() !== '4.9 KiB,14 B') throw new Error('sizes: ' + sizes);
  if (!shas.every(([t, full]) => t.length === 12 && /^[0-9a-f]{64}$/.test(full) && full.startsWith(t))) throw new Error('sha256: ' + JSON.stringify(shas));
  return digest === ART_DIGEST;
});

await check('Artifact page: delete while a model uses it shows the API\'s 409 reason and keeps it', async () => {
  await page.locator('#delete-artifact').click();
  const dlg = page.locator('dialog.confirm');
  await dlg.getByLabel('Type weights to confirm').fill('weights');
  const answer = page.waitForResponse((r) => r.request().method() === 'DELETE' && new URL(r.url()).pathname === '/v1/artifacts/weights');
  await dlg.getByRole('button', { name: 'Delete' }).click();
  const res = await answer;
  await page.locator('#artifact-msg', { hasText: "model 'uses-weights'" }).waitFor();
  await shot(page, '11d-artifact-delete-refused');
  if (res.status() !== 409) throw new Error('DELETE answered ' + res.status());
  return /#\/artifacts\/weights$/.test(page.url());
});

// An import in progress cannot be held still in a test: the answers the
// pages read get one more artifact, importing, a quarter of its files done.
const INCOMING = { id: 'incoming', owner: 'admin', source: 'https://mirror.test/w/', created_at: new Date().toISOString(),
  status: { state: 'importing', progress: { files_done: 3, files: 12, bytes: 1536 } } };
const INCOMING_TEXT = '3 of 12 files · 1.5 KiB hashed';

await check('Artifacts list: each artifact\'s state (ready; failed with its reason; importing with its progress) and the unfinished upload', async () => {
  const isList = (u) => u.pathname === '/v1/artifacts';
  const unroute = await rewriteAnswers(page, isList, (doc) => { doc.items = (doc.items || []).concat([INCOMING]); });
  try {
    await page.goto(BASE + '/#/artifacts');
    const row = (id) => page.locator('#artifacts tbody tr', { has: page.locator(`a[href="#/artifacts/${id}"]`) });
    await row('incoming').locator('.progress[role=progressbar]').waitFor();
    const got = {
      weights: await row('weights').locator('td[data-label="State"] .badge').textContent(),
      broken: await row('broken').locator('td[data-label="State"] .badge.s-failed').textContent(),
      reason: await row('broken').locator('.art-reason').textContent(),
      incoming: await row('incoming').locator('td[data-label="State"] .badge.s-importing').textContent(),
      pct: await row('incoming').locator('.progress').getAttribute('aria-valuenow'),
      text: await row('incoming').locator('.fetch-text').textContent(),
      weightsBars: await row('weights').locator('.progress, .art-reason').count(),
    };
    const up = page.locator('#uploads tbody tr', { hasText: UPLOAD_ID.slice(0, 12) });
    await up.waitFor();
    const ucell = async (label) => (await up.locator(`td[data-label="${label}"]`).textContent()).trim();
    Object.assign(got, { upSize: await ucell('Size'), upFiles: await ucell('Files'), upMissing: await ucell('Missing'),
      upTouched: await ucell('Last touched'), upExpires: await ucell('Expires'),
      upTitle: await up.locator('td[data-label="Upload"] code').getAttribute('title') });
    await shot(page, '11d2-artifacts-states');
    if (got.weights !== 'ready' || got.broken !== 'failed' || got.reason !== BROKEN_REASON || got.incoming !== 'importing' ||
        got.pct !== '25' || got.text !== INCOMING_TEXT || got.weightsBars !== 0)
      throw new Error(JSON.stringify(got));
    if (got.upTitle !== UPLOAD_ID || got.upSize !== '8.0 KiB' || got.upFiles !== '1' || got.upMissing !== '8.0 KiB' ||
        !/^(\d+m )?\d+s ago$/.test(got.upTouched) || !/^in 2[34]h \d+m$/.test(got.upExpires))
      throw new Error(JSON.stringify(got));
    return true;
  } finally {
    await unroute();
  }
});

await check('Artifact page: a failed import\'s state and reason; an importing one\'s progress', async () => {
  await page.goto(BASE + '/#/artifacts/broken');
  await page.locator('#artifact-state .badge.s-failed').waitFor();
  const reason = await page.locator('#artifact-reason').textContent();
  const noBar = await page.locator('#artifact-progress').count();
  await shot(page, '11d3-artifact-failed');
  if (reason !== BROKEN_REASON || noBar !== 0) throw new Error(JSON.stringify({ reason, noBar }));
  const isOne = (u) => u.pathname === '/v1/artifacts/incoming';
  await page.route(isOne, (r) => r.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify(INCOMING) }).catch(dropped));
  try {
    await page.goto(BASE + '/#/artifacts/incoming');
    await page.locator('#artifact-progress .progress[role=progressbar]').waitFor();
    const got = { state: await page.locator('#artifact-state').textContent(),
      text: await page.locator('#artifact-progress .fetch-text').textContent(),
      reasons: await page.locator('#artifact-reason').count(), size: await page.locator('#artifact-size').textContent() };
    await shot(page, '11d4-artifact-importing');
    if (got.state !== 'importing' || got.text !== INCOMING_TEXT || got.reasons !== 0 || got.size !== '—') throw new Error(JSON.stringify(got));
    return true;
  } finally {
    await page.unroute(isOne);
    // the list must end empty once weights goes (below): broken goes now
    const st = await page.evaluate(async (tok) => (await fetch('/v1/artifacts/broken', { method: 'DELETE', headers: { Authorization: 'Bearer ' + tok } })).status, ADMIN);
    if (st !== 200 && st !== 204) fail('DELETE /v1/artifacts/broken', 'answered ' + st);
  }
});

await check('deployment page: each replica\'s cold start (status.cold_starts) and the checkpoints section', async () => {
  await page.goto(BASE + '/#/deployments/dep');
  await page.locator('#cold-start-table tbody tr').nth(1).waitFor();
  const rows = await page.locator('#cold-start-table td[data-label="Replica"]').allTextContents();
  const totals = await page.locator('#cold-start-table td[data-label="Total"]').allTextContents();
  await page.locator('#checkpoints .empty', { hasText: 'no checkpoint setting' }).waitFor();
  await shot(page, '11e-deployment-cold-starts');
  if (!rows.every((r) => /^dep-/.test(r)) || !totals.every((t) => /^\d+(\.\d+)? s$/.test(t)))
    throw new Error('cold starts: ' + JSON.stringify({ rows, totals }));
  return true;
});

await check('deployment page: committed checkpoints are listed newest first with size, files and digest prefix (answer rewritten in the browser)', async () => {
  // the demo model writes no checkpoint: the list answer is made up here, as the fetch bar's status is
  const dg = 'ab'.repeat(32), now = Date.now();
  await page.route('**/v1/deployments/dep/checkpoints', (r) => r.fulfill({ status: 200, contentType: 'application/json',
    body: JSON.stringify({ items: [
      { scope: 'deployment:dep:0', name: 'step-20', committed_at_ms: now - 5000, digest: dg, total_size: 3 * 1048576, files: 2 },
      { scope: 'deployment:dep:0', name: 'step-10', committed_at_ms: now - 65000, digest: dg, total_size: 1024, files: 1 }] }) }).catch(dropped));
  await page.reload();
  await page.locator('#checkpoints tbody tr').nth(1).waitFor();
  const names = await page.locator('#checkpoints td[data-label="Name"]').allTextContents();
  const sizes = await page.locator('#checkpoints td[data-label="Size"]').allTextContents();
  const digest = await page.locator('#checkpoints td[data-label="Digest"]').first().textContent();
  const ages = await page.locator('#checkpoints td[data-label="Committed"]').allTextContents();
  await shot(page, '11e2-deployment-checkpoints');
  await page.unroute('**/v1/deployments/dep/checkpoints');
  const got = { names, sizes, digest, ages };
  if (names.join() !== 'step-20,step-10' || sizes.join() !== '3.0 MiB,1.0 KiB' || digest !== dg.slice(0, 12) || !/^\d+s ago$/.test(ages[0]))
    throw new Error(JSON.stringify(got));
  return true;
});

const apiCall = (method, path, body) => page.evaluate(async ([m, p, b, tok]) => {
  const r = await fetch(p, { method: m, headers: { Authorization: 'Bearer ' + tok, 'Content-Type': 'application/json' }, body: b ? JSON.stringify(b) : undefined });
  return { status: r.status, body: await r.text() };
}, [method, path, body, ADMIN]);

await check('New job: a refusal lands next to its field, then the job is submitted through the form', async () => {
  await page.getByRole('link', { name: 'Jobs' }).click();
  await page.waitForURL(/#\/jobs$/);
  await page.locator('#new-job-btn').click();
  const form = page.locator('#new-job');
  await form.getByLabel('Job id').fill('sleepy');
  await form.getByLabel('Command').fill('sleep 600');
  await form.getByLabel('Workers').fill('0');
  await form.getByLabel('GPUs').fill('0');
  await form.getByLabel('CPU (mCPU)').fill('100');
  await form.getByLabel('Memory (MiB)').fill('64');
  await form.getByLabel('Nodepool 1', { exact: true }).selectOption('c1/np1');
  await form.getByLabel('Max restarts').fill('0');
  await form.getByRole('button', { name: 'Submit' }).click();
  const err = form.locator('.field[data-field="workers"] .err');
  await err.filter({ hasText: /./ }).waitFor();
  await shot(page, '11e-new-job-refused');
  const none = await apiCall('GET', '/v1/jobs/sleepy');
  if (none.status !== 404) throw new Error('a refused job was queued: ' + none.status);
  await form.getByLabel('Workers').fill('1');
  await form.getByRole('button', { name: 'Submit' }).click();
  await page.waitForURL(/#\/jobs\/sleepy$/);
  const j = JSON.parse((await apiCall('GET', '/v1/jobs/sleepy')).body);
  return j.workers === 1 && j.runtime.command.join(' ') === 'sleep 600' && j.max_restarts === 0 &&
    !(j.resources.gpu && j.resources.gpu.count) && j.nodepools[0].nodepool === 'np1';
});

await check('Jobs list: the job shows its state, workers and attempt', async () => {
  await page.locator('#nav').getByRole('link', { name: 'Jobs' }).click();
  await page.waitForURL(/#\/jobs$/);
  const row = page.locator('#jobs tbody tr', { hasText: 'sleepy' });
  await row.locator('td[data-label="State"]', { hasText: 'running' }).waitFor();
  await row.locator('td[data-label="Workers ready / total"]', { hasText: '1 / 1' }).waitFor();
  const attempt = (await row.locator('td[data-label="Attempt"]').textContent()).trim();
  await shot(page, '11f-jobs');
  return attempt === '1' && (await page.locator('#nav a.on').textContent()) === 'Jobs';
});

await check('Job page: its state, placement by rank on a node, workers and events; Cancel asks, then the job is cancelled', async () => {
  await page.locator('#jobs a', { hasText: 'sleepy' }).click();
  await page.waitForURL(/#\/jobs\/sleepy$/);
  await page.locator('#job-state', { hasText: 'running' }).waitFor();
  await page.locator('#job-placement td[data-label="Rank"]', { hasText: '0' }).waitFor();
  const node = (await page.locator('#job-placement td[data-label="Node"]').first().textContent()).trim();
  await page.locator('#job-workers td[data-label="Worker"]', { hasText: 'sleepy-a1-r0' }).waitFor();
  await page.locator('#job-events tbody tr').first().waitFor();
  await shot(page, '11g-job');
  await page.locator('#cancel-job').click();
  const dlg = page.locator('dialog.confirm');
  await dlg.getByRole('button', { name: 'Keep it' }).click();
  await dlg.waitFor({ state: 'detached' });
  if (!(await page.locator('#job-state', { hasText: 'running' }).count())) throw new Error('"Keep it" changed the job');
  await page.locator('#cancel-job').click();
  const answer = page.waitForResponse((r) => r.request().method() === 'DELETE' && new URL(r.url()).pathname === '/v1/jobs/sleepy');
  await dlg.getByRole('button', { name: 'Cancel job' }).click();
  const res = await answer;
  await page.locator('#job-state', { hasText: 'cancelled' }).waitFor();
  await page.locator('#cancel-job', { hasText: 'Remove job' }).waitFor();
  await shot(page, '11h-job-cancelled');
  if (res.status() !== 202) throw new Error('DELETE answered ' + res.status());
  return node !== '' && node !== '—';
});

await check('Stores: the list shows the store; its page shows the secret as hidden and no answer carries it', async () => {
  const seen = [];
  const watch = async (r) => { if (new URL(r.url()).pathname.startsWith('/v1/stores')) seen.push(await r.text().catch(() => '')); };
  page.on('response', watch);
  await page.getByRole('link', { name: 'Stores' }).click();
  await page.waitForURL(/#\/stores$/);
  const row = page.locator('#stores tbody tr', { hasText: 's3a' });
  await row.locator('td[data-label="Bucket"]', { hasText: 'console-bucket' }).waitFor();
  const listText = await page.locator('main').textContent();
  await shot(page, '11i-stores');
  await page.locator('#stores a', { hasText: 's3a' }).click();
  await page.waitForURL(/#\/stores\/s3a$/);
  await page.locator('#store-secret', { hasText: 'hidden' }).waitFor();
  await page.locator('#store-key-id', { hasText: 'AKIACONSOLE' }).waitFor();
  const pageText = await page.locator('main').textContent();
  await shot(page, '11j-store');
  page.off('response', watch);
  if (!seen.length) throw new Error('no /v1/stores answer seen');
  const leaks = [listText, pageText, ...seen].filter((t) => t.includes(process.env.STORE_SECRET));
  if (leaks.length) throw new Error('the secret appears ' + leaks.length + ' time(s)');
  return (await page.locator('#delete-store').count()) === 1;
});

await check('New Store (admins): a bad endpoint is refused next to its field; then it is created, its secret hidden, and deleted', async () => {
  await page.goto(BASE + '/#/stores');
  await page.locator('#new-store-btn').click();
  const form = page.locator('#new-store');
  await form.getByLabel('Store id').fill('s3b');
  await form.getByLabel('Endpoint').fill('ftp://nope');
  await form.getByLabel('Bucket').fill('other-bucket');
  await form.getByLabel('Access key id').fill('AKIAFORM');
  await form.getByLabel('Secret access key').fill('form-secret-' + process.env.STORE_SECRET);
  const type = await form.getByLabel('Secret access key').getAttribute('type');
  await form.getByRole('button', { name: 'Create store' }).click();
  await form.locator('.field[data-field="endpoint"] .err').filter({ hasText: /./ }).waitFor();
  await shot(page, '11k-new-store-error');
  await form.getByLabel('Endpoint').fill('http://127.0.0.1:9');
  await form.getByRole('button', { name: 'Create store' }).click();
  await page.waitForURL(/#\/stores\/s3b$/);
  await page.locator('#store-secret', { hasText: 'hidden' }).waitFor();
  if ((await page.locator('main').textContent()).includes('form-secret-')) throw new Error('the secret is on the page');
  await page.locator('#delete-store').click();
  const dlg = page.locator('dialog.confirm');
  await dlg.getByLabel('Type s3b to confirm').fill('s3b');
  await dlg.getByRole('button', { name: 'Delete' }).click();
  await page.waitForURL(/#\/stores$/);
  await page.locator('#stores tbody tr', { hasText: 's3a' }).waitFor();
  if (await page.locator('#stores tbody tr', { hasText: 's3b' }).count()) throw new Error('s3b is still listed');
  return type === 'password';
});

await check('cordon from the Nodes page marks the node cordoned; uncordon undoes it', async () => {
  await page.goto(BASE + '/#/nodes');
  const card = page.locator('article.node').first();
  await card.locator('[data-act="cordon"]').click();
  await card.locator('.tag', { hasText: 'cordoned' }).waitFor();
  await card.locator('[data-act="uncordon"]').click();
  await card.locator('[data-act="cordon"]').waitFor();
  return true;
});

await check('phone width: the nodes, deployment, clusters, artifact, job and store pages fit without sideways scrolling', async () => {
  const phone = await newPage({ width: 390, height: 844 });
  await signIn(phone, ADMIN);
  const widths = [];
  for (const [hash, name] of [['#/nodes', '12-phone-nodes'], ['#/deployments/dep', '13-phone-deployment'], ['#/clusters', '14-phone-clusters'], ['#/artifacts/weights', '14b-phone-artifact'], ['#/jobs/sleepy', '14c-phone-job'], ['#/stores/s3a', '14d-phone-store']]) {
    await phone.goto(BASE + '/' + hash);
    await phone.locator('main section').waitFor();
    await phone.waitForTimeout(300);
    await shot(phone, name);
    widths.push(await phone.evaluate(() => document.documentElement.scrollWidth));
  }
  await phone.context().close();
  if (!widths.every((w) => w <= 390)) throw new Error('page widths at 390 px: ' + widths);
  return true;
});

await check('a read token sees every page and no button that writes', async () => {
  const ro = await newPage();
  await signIn(ro, READ_TOKEN);
  if ((await ro.locator('#who-scopes').textContent()) !== 'read') throw new Error('scopes shown: ' + (await ro.locator('#who-scopes').textContent()));
  const found = [];
  for (const [hash, ready, name] of [
    ['#/clusters', '#clusters tbody tr', '15-read-clusters'],
    ['#/clusters/c1', '#cluster-nodepools tbody tr', '16-read-cluster'],
    ['#/clusters/c1/nodepools/np1', '#nodepool-nodes tbody tr', '17-read-nodepool'],
    ['#/nodes', '.bar.memory .seg', '18-read-nodes'],
    ['#/models', '#models tbody tr', '19-read-models'],
    ['#/artifacts', '#artifacts tbody tr', '19b-read-artifacts'],
    ['#/artifacts/weights', '#artifact-files tbody tr', '19c-read-artifact'],
    ['#/deployments', '#deployments tbody tr', '20-read-deployments'],
    ['#/deployments/dep', '#replicas tbody tr', '21-read-deployment'],
    ['#/jobs/sleepy', '#job-state', '21b-read-job'],
    ['#/stores/s3a', '#store-secret', '21c-read-store']]) {
    await ro.goto(BASE + '/' + hash);
    await ro.locator(ready).first().waitFor();
    const writes = await ro.locator('main button.primary, main button.danger, main [data-act], main button[id^="edit-"], #predict, form.card').count();
    if (writes) found.push(`${hash}: ${writes}`);
    await shot(ro, name);
  }
  await ro.context().close();
  if (found.length) throw new Error('write controls seen: ' + found.join('; '));
  return true;
});

await check('Edit nodepool: max nodes, scale-down delay and consolidation change with PATCH; max < min is refused next to Max nodes', async () => {
  await page.goto(BASE + '/#/clusters/c1/nodepools/np1');
  await page.locator('#np-range').waitFor();
  await page.locator('#edit-nodepool-btn').click();
  const form = page.locator('#edit-nodepool');
  await form.getByLabel('Max nodes').fill('3');
  await form.getByLabel('Scale-down delay (s)').fill('120');
  await form.getByLabel('Consolidation').check();
  await form.getByRole('button', { name: 'Save' }).click();
  await form.waitFor({ state: 'detached' });
  await page.locator('#np-range', { hasText: '1–3' }).waitFor();
  await page.locator('#np-delay', { hasText: '120 s' }).waitFor();
  await page.locator('#np-consolidation', { hasText: 'on' }).waitFor();
  await page.locator('#edit-nodepool-btn').click();
  await form.getByLabel('Min nodes').fill('4');
  await form.getByRole('button', { name: 'Save' }).click();
  await form.locator('.field[data-field="max_nodes"] .err').filter({ hasText: 'must be >= min_nodes' }).waitFor();
  await shot(page, '22-edit-nodepool-error');
  await form.getByRole('button', { name: 'Cancel' }).click();
  await page.locator('#np-range', { hasText: '1–3' }).waitFor();
  return true;
});

await check('delete with typed confirmation: a wrong word keeps the button off; the right one deletes', async () => {
  await page.goto(BASE + '/#/deployments/dep');
  await page.locator('#delete-deployment').click();
  const dlg = page.locator('dialog.confirm');
  await dlg.getByLabel('Type dep to confirm').fill('de');
  const disabled = await dlg.getByRole('button', { name: 'Delete' }).isDisabled();
  await dlg.getByLabel('Type dep to confirm').fill('dep');
  await dlg.getByRole('button', { name: 'Delete' }).click();
  await page.waitForURL(/#\/deployments$/);
  await page.locator('#deployments .empty').waitFor();
  return disabled;
});

await check('Artifact page: once no model uses it, delete removes it', async () => {
  const st = await page.evaluate(async (tok) => (await fetch('/v1/models/uses-weights', { method: 'DELETE', headers: { Authorization: 'Bearer ' + tok } })).status, ADMIN);
  if (st !== 204 && st !== 200) throw new Error('DELETE /v1/models/uses-weights: ' + st);
  await page.goto(BASE + '/#/artifacts/weights');
  await page.locator('#artifact-models .empty').waitFor();
  await page.locator('#delete-artifact').click();
  const dlg = page.locator('dialog.confirm');
  await dlg.getByLabel('Type weights to confirm').fill('weights');
  await dlg.getByRole('button', { name: 'Delete' }).click();
  await page.waitForURL(/#\/artifacts$/);
  await page.locator('#artifacts .empty').waitFor();
  return true;
});

await check('Job page: an ended job\'s Remove job deletes it and returns to the list', async () => {
  await page.goto(BASE + '/#/jobs/sleepy');
  await page.locator('#cancel-job', { hasText: 'Remove job' }).click();
  const dlg = page.locator('dialog.confirm');
  const answer = page.waitForResponse((r) => r.request().method() === 'DELETE' && new URL(r.url()).pathname === '/v1/jobs/sleepy');
  await dlg.getByRole('button', { name: 'Remove job' }).click();
  const res = await answer;
  await page.waitForURL(/#\/jobs$/);
  await page.locator('#jobs .empty').waitFor();
  if (res.status() !== 200) throw new Error('DELETE answered ' + res.status());
  return true;
});

await check('sign-out forgets the token', async () => {
  await page.locator('#signout').click();
  await page.getByLabel('Personal access token').waitFor();
  return (await page.evaluate(() => sessionStorage.getItem('drover.token'))) === null &&
         !(await page.locator('#nav').isVisible()) && !(await page.locator('#who').isVisible());
});

await check('no console errors and no CSP violations on any page', async () => {
  if (problems.length) throw new Error(problems.join('\n'));
  return true;
});

await browser.close();
process.exit(failed() ? 1 : 0);
