// deployment.js — one deployment's page: its settings with an Edit form
// (nodepools and priorities, autoscaling; a PATCH with If-Match, the API's
// errors next to the field they name), desired vs ready replicas over time
// and request rate / latency from GET /v1/deployments/{d}/metrics (the
// server's 15-minute history, so a reload loses nothing; replica counts
// sampled by this page fill in the seconds since its newest point), the
// last minute's requests, latency, cold starts and per-replica numbers,
// the replicas (a fetching one with its download's progress), each current
// replica's cold start (status.cold_starts: waiting, placement, fetch, load),
// the committed checkpoints (GET .../checkpoints, newest first), events,
// recent logs and a test-prediction box.
import { api, listAll, enc } from './api.js';
import { h, replace, field, table, link, badge, deleteButton, editForm, fmt } from './dom.js';
import { lineChart } from './chart.js';
import { poolsEditor, autoscaleFields } from './deployments.js';
import { fetchProgress } from './progress.js';

const ms = (v) => (v === null || v === undefined ? '—' : Number(v).toFixed(v < 10 ? 2 : 1) + ' ms');

function predictBox(dep) {
  const body = h('textarea', { name: 'predict-body', rows: '3', spellcheck: 'false' }, '{"inputs": "hello"}');
  const out = h('pre', { class: 'out', id: 'predict-out', 'aria-live': 'polite' });
  const form = h('form', { class: 'card', id: 'predict', novalidate: true },
    h('h2', {}, 'Test prediction'),
    field('Request body (JSON, sent as is to the model)', body, { name: 'body' }),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Send')), out);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    out.textContent = 'sending…';
    const t0 = performance.now();
    try {
      const res = await api('POST', `/v1/deployments/${enc(dep)}/predict`, body.value, { raw: true });
      const text = await res.text();
      out.textContent = `${res.status} from ${res.headers.get('X-Drover-Replica') || 'a replica'} in ${Math.round(performance.now() - t0)} ms\n${text}`;
    } catch (e) {
      out.textContent = `${e.status} ${e.code}: ${e.message}`;
    }
  });
  return form;
}

// Edit: the deployment d's nodepools and autoscaling (see editForm in dom.js).
function editDeployment(d, pools, base, done) {
  const poolsBox = poolsEditor(pools, d.nodepools);
  const auto = autoscaleFields(d.autoscale);
  return editForm({ id: 'edit-deployment', title: 'Edit deployment ' + d.id, path: base, version: d.resource_version, done,
    parts: [poolsBox.el, auto.el, h('p', { class: 'help' }, 'An emptied field goes back to its default.')],
    body: () => ({ nodepools: poolsBox.value(), autoscale: auto.value(true) }) });
}

function servingFacts(m) {
  const lat = m.latency_ms || {}, ttfb = m.ttfb_ms || {}, req = m.requests || {}, by = req.by_status || {};
  const cs = m.cold_starts || {};
  return h('dl', { class: 'facts' },
    h('dt', {}, `Requests (last ${m.window_seconds || 60} s)`),
    h('dd', { id: 'req-total' }, `${req.total ?? 0} (2xx ${by['2xx'] ?? 0}, 4xx ${by['4xx'] ?? 0}, 5xx ${by['5xx'] ?? 0})`),
    h('dt', {}, 'Requests / s'), h('dd', { id: 'req-rate' }, Number(m.requests_per_second || 0).toFixed(2)),
    h('dt', {}, 'Latency p50 / p90 / p99'), h('dd', { id: 'latency' }, `${ms(lat.p50)} / ${ms(lat.p90)} / ${ms(lat.p99)}`),
    h('dt', {}, 'First byte p50 / p99'), h('dd', {}, `${ms(ttfb.p50)} / ${ms(ttfb.p99)}`),
    h('dt', {}, 'In flight / queued'), h('dd', {}, `${m.in_flight ?? 0} / ${m.queued ?? 0}`),
    h('dt', {}, 'Cold starts'), h('dd', { id: 'cold-starts' }, String(cs.count ?? 0),
      cs.count ? ` (mean ${ms(cs.mean_duration_ms)}, last ${ms(cs.last_duration_ms)})` : ''));
}

export async function deploymentPage(ctx) {
  const [did] = ctx.params;
  const base = '/v1/deployments/' + enc(did);
  const facts = h('div', { class: 'summary' });
  const chart = h('div', { id: 'replica-chart' });
  const serving = h('div', { id: 'serving' });
  const reps = h('div', { id: 'replicas' });
  const events = h('div', { id: 'events' });
  const colds = h('div', { id: 'cold-start-table' });
  const ckpts = h('div', { id: 'checkpoints' });
  const logs = h('pre', { class: 'logs', id: 'logs', tabindex: '0' });
  const samples = [];   // {t, desired, ready} seen by this page, newest seconds only
  const msg = h('p', { class: 'form-err', role: 'alert' });
  const del = deleteButton(ctx, { id: 'delete-deployment', what: 'deployment', word: did, path: base, next: '#/deployments', msg });
  let edit = null;
  const editBtn = ctx.canWrite ? h('button', { type: 'button', id: 'edit-deployment-btn', onclick: async () => {
    if (edit) { edit.remove(); edit = null; return; }
    try {
      const [d, pools] = await Promise.all([api('GET', base), listAll('/v1/nodepools')]);
      edit = editDeployment(d, pools, base, async (saved) => {
        edit.remove();
        edit = null;
        editBtn.focus();
        if (saved) await refresh();
      });
      msg.after(edit);
      edit.querySelector('select,input').focus();
      msg.textContent = '';
    } catch (e) {
      msg.textContent = e.message;
    }
  } }, 'Edit') : null;
  const el = h('section', {},
    h('p', { class: 'crumbs' }, link('#/deployments', 'Deployments'), ' / ', did),
    h('div', { class: 'head' }, h('h1', {}, 'Deployment ' + did), h('div', { class: 'btns' }, editBtn, del)), msg,
    facts,
    h('div', { class: 'grid2' },
      h('div', { class: 'card' }, h('h2', {}, 'Replicas: desired vs ready'), chart),
      h('div', { class: 'card' }, h('h2', {}, 'Requests'), serving)),
    ctx.canPredict ? predictBox(did) : null,
    h('h2', {}, 'Replicas'), reps,
    h('h2', {}, 'Cold starts'), colds,
    h('h2', {}, 'Checkpoints'), ckpts,
    h('h2', {}, 'Events'), events,
    h('h2', {}, 'Recent logs'), logs);
  async function refresh() {
    const [d, rs, ev, lg, m, cp] = await Promise.all([
      api('GET', base), listAll(base + '/replicas'),
      api('GET', `/v1/events?kind=deployment&object=${enc(did)}&limit=20`),
      api('GET', base + '/logs', undefined, { text: true }).catch((e) => `(no logs: ${e.message})`),
      api('GET', base + '/metrics'),
      api('GET', base + '/checkpoints').catch((e) => ({ error: e.message }))]);
    const st = d.status || {};
    replace(facts, h('dl', { class: 'facts' },
      h('dt', {}, 'Model'), h('dd', {}, d.model),
      h('dt', {}, 'Ready / desired'), h('dd', { id: 'ready-desired' }, `${st.ready_replicas ?? 0} / ${st.desired_replicas ?? 0}`),
      h('dt', {}, 'Nodepools'), h('dd', { id: 'dep-nodepools' }, d.nodepools.map((p) => `${p.cluster}/${p.nodepool} (priority ${p.priority})`).join(', ')),
      h('dt', {}, 'Autoscaling'), h('dd', { id: 'dep-autoscale' }, `${d.autoscale.min_replicas}–${d.autoscale.max_replicas} replicas, target concurrency ${d.autoscale.target_concurrency}${d.autoscale.ttft_slo_ms ? `, TTFT SLO ${d.autoscale.ttft_slo_ms} ms` : ''}${d.autoscale.e2e_slo_ms ? `, end-to-end SLO ${d.autoscale.e2e_slo_ms} ms` : ''}`),
      h('dt', {}, 'Enabled'), h('dd', {}, d.enabled ? 'yes' : 'no')));

    // desired vs ready: droverd's history (10 s steps), then what this page
    // saw since its newest point; all of it is ours after a restart of droverd
    const hist = Array.isArray(m.history) ? m.history : [];
    const lastT = hist.length ? hist[hist.length - 1].t * 1000 : 0;
    samples.push({ t: Date.now(), desired: st.desired_replicas ?? 0, ready: st.ready_replicas ?? 0 });
    while (samples.length && (samples[0].t <= lastT || samples.length > 450)) samples.shift();
    const line = (hk, k) => hist.map((x) => ({ t: x.t * 1000, v: x[hk] ?? 0 })).concat(samples.map((s) => ({ t: s.t, v: s[k] })));
    replace(chart, lineChart('desired vs ready replicas', [
      { name: 'desired', cls: 'desired', points: line('desired_replicas', 'desired') },
      { name: 'ready', cls: 'ready', points: line('ready_replicas', 'ready') }]),
    h('p', { class: 'small muted' }, hist.length ? `droverd’s history: ${hist.length} point${hist.length === 1 ? '' : 's'}, 10 s apart` : 'no history in droverd yet: sampled by this page'));
    const at = (x) => x.t * 1000;
    replace(serving, servingFacts(m),
      hist.length ? lineChart('request rate', [{ name: 'req/s', cls: 'rps', points: hist.map((x) => ({ t: at(x), v: x.rps ?? 0 })) }]) : null,
      hist.length ? lineChart('latency', [
        { name: 'p50', cls: 'p50', points: hist.map((x) => ({ t: at(x), v: x.p50_ms })) },
        { name: 'p99', cls: 'p99', points: hist.map((x) => ({ t: at(x), v: x.p99_ms })) }], { unit: ' ms' }) : null);

    const per = new Map((m.replicas || []).map((r) => [r.id, r]));
    const pm = (r) => per.get(r.id) || {};
    replace(reps, table([
      { label: 'Replica', value: (r) => r.id },
      { label: 'State', value: (r) => [badge((r.status || {}).state || 'pending'), fetchProgress(r.status)] },
      { label: 'Node', value: (r) => r.node || '—' },
      { label: 'GPU share', value: (r) => (r.gpus || []).map((g) => `GPU ${g.index}: ${fmt.mib(g.memory_mib)}, ${g.compute_percent}%`).join('; ') || (r.whole_gpu ? 'whole GPU' : 'CPU') },
      { label: 'Requests (60 s)', value: (r) => String(pm(r).requests ?? 0) },
      { label: 'Errors', value: (r) => String(pm(r).errors ?? 0) },
      { label: 'In flight', value: (r) => String(pm(r).in_flight ?? 0) },
      { label: 'Latency p50 / p99', value: (r) => `${ms((pm(r).latency_ms || {}).p50)} / ${ms((pm(r).latency_ms || {}).p99)}` },
      { label: 'Restarts', value: (r) => (r.status || {}).restarts ?? 0 },
      { label: 'Reason', value: (r) => (r.status || {}).reason || '' },
    ], rs, { empty: 'No replicas.' }));
    const secs = (v) => (v === null || v === undefined ? '—' : Number(v).toFixed(v < 10 ? 2 : 1) + ' s');
    replace(colds, table([
      { label: 'Replica', value: (c) => c.replica },
      { label: 'Waiting', value: (c) => secs(c.waiting_seconds) },
      { label: 'Placement', value: (c) => secs(c.placement_seconds) },
      { label: 'Fetch', value: (c) => secs(c.fetch_seconds) },
      { label: 'Load', value: (c) => secs(c.load_seconds) },
      { label: 'Total', value: (c) => secs(c.total_seconds) },
    ], Array.isArray(st.cold_starts) ? st.cold_starts : [], { empty: 'No replica has finished a cold start since droverd started.' }));
    replace(ckpts, cp.error ? h('p', { class: 'form-err' }, 'Checkpoints: ' + cp.error) : table([
      { label: 'Scope', value: (c) => h('code', {}, c.scope) },
      { label: 'Name', value: (c) => c.name },
      { label: 'Committed', value: (c) => (c.committed_at_ms ? fmt.age(new Date(c.committed_at_ms).toISOString()) + ' ago' : '—') },
      { label: 'Size', value: (c) => fmt.bytes(c.total_size) },
      { label: 'Files', value: (c) => String(c.files ?? '—') },
      { label: 'Digest', value: (c) => h('code', { title: c.digest || '' }, c.digest ? c.digest.slice(0, 12) : '—') },
    ], cp.items || [], { empty: d.checkpoint ? 'No checkpoint committed yet.' : 'None: this deployment has no checkpoint setting (checkpoint: {keep: N}).' }));
    const items = (ev.items || []).slice(-20).reverse();
    replace(events, table([
      { label: 'When', value: (e) => fmt.age(e.time) + ' ago' },
      { label: 'Type', value: (e) => e.type },
      { label: 'Reason', value: (e) => e.reason },
    ], items, { empty: 'No events yet.' }));
    const tail = String(lg).slice(-6000);
    if (logs.textContent !== tail) logs.textContent = tail || '(empty)';
  }
  return { el, refresh };
}
