// deployments.js — Deployments: the list, New Deployment (a model onto one
// or more nodepools with priorities, and the autoscaling settings, each
// explained by a tooltip; the API validates and its errors land next to the
// field), and one deployment's page: desired vs ready replicas over time,
// request rate and latency from GET /v1/deployments/{d}/metrics when droverd
// has it, replicas, events, recent logs and a test-prediction box.
import { api, listAll, enc } from './api.js';
import { h, replace, field, table, link, badge, tip, showError, clearErrors, deleteButton, fmt, num } from './dom.js';
import { lineChart } from './chart.js';

const AUTOSCALE = [
  ['min_replicas', 'Min replicas', 1, 'Replicas kept even without traffic. 0 allows scale to zero: no cost while idle, but the first request waits for a cold start.'],
  ['max_replicas', 'Max replicas', 1, 'The autoscaler never asks for more replicas than this (at least min replicas).'],
  ['target_concurrency', 'Target concurrency', 4, 'Requests in flight (plus queued) per replica the autoscaler aims for; more load adds replicas.'],
  ['traffic_history_seconds', 'Traffic window (s)', 60, 'Load is averaged over this many seconds before deciding.'],
  ['scale_up_delay_seconds', 'Scale-up delay (s)', 0, 'How long load must stay high before replicas are added.'],
  ['scale_down_delay_seconds', 'Scale-down delay (s)', 300, 'How long load must stay low before replicas are removed.'],
  ['scale_to_zero_delay_seconds', 'Scale-to-zero delay (s)', 900, 'Idle time before the last replica goes (when min replicas is 0); at least the scale-down delay.'],
  ['cold_start_timeout_seconds', 'Cold-start timeout (s)', 300, 'How long the gateway holds requests while no replica is ready.'],
];

function poolRow(pools, i, onRemove) {
  const sel = h('select', { name: `nodepools[${i}]` },
    pools.map((p) => h('option', { value: `${p.cluster}/${p.id}` }, `${p.cluster} / ${p.id}`)));
  const prio = h('input', { type: 'number', name: `priority-${i}`, value: String(Math.max(0, 10 - i * 10)) });
  const row = h('div', { class: 'field pool-row', 'data-field': `nodepools[${i}]` },
    h('label', { for: (sel.id = 'np' + i + Math.random().toString(36).slice(2, 6)) }, `Nodepool ${i + 1}`),
    h('div', { class: 'inline' }, sel, h('label', { class: 'inline-label' }, 'priority', h('span', { class: 'sr' }, ` of nodepool ${i + 1}`), prio),
      i ? h('button', { type: 'button', onclick: onRemove, 'aria-label': 'remove nodepool ' + (i + 1) }, '✕') : null),
    h('div', { class: 'err', role: 'alert' }));
  return { row, value: () => { const [cluster, nodepool] = sel.value.split('/'); return { cluster, nodepool, priority: num(prio.value) }; } };
}

function newDeploymentForm(ctx, models, pools) {
  const id = h('input', { name: 'id', autocomplete: 'off', placeholder: 'e.g. chat' });
  const model = h('select', { name: 'model' }, models.map((m) => h('option', { value: m.id }, m.id)));
  const rows = [];
  const rowsEl = h('div', { class: 'field', 'data-field': 'nodepools' }, h('div', { class: 'err', role: 'alert' }));
  const addRow = () => {
    const r = poolRow(pools, rows.length, () => { rows.splice(rows.indexOf(r), 1); r.row.remove(); });
    rows.push(r);
    rowsEl.before(r.row);
  };
  const auto = AUTOSCALE.map(([k, label, def, text]) => [k, h('input', { type: 'number', name: k, min: '0', value: String(def) }), label, text]);
  const packing = h('input', { type: 'checkbox', name: 'disable_packing' });
  const strict = h('input', { type: 'checkbox', name: 'strict_isolation' });
  const poolsBox = h('fieldset', {}, h('legend', {}, 'Nodepools ', tip('Replicas go to the highest-priority nodepool with room; overflow goes to the next.')), rowsEl,
    h('button', { type: 'button', id: 'add-pool', onclick: addRow }, 'Add a nodepool'));
  const form = h('form', { class: 'card', id: 'new-deployment', novalidate: true },
    h('h2', {}, 'New deployment'),
    field('Deployment id', id, { name: 'id' }),
    field('Model', model, { name: 'model' }),
    poolsBox,
    h('fieldset', {}, h('legend', {}, 'Autoscaling'),
      h('div', { class: 'row' }, auto.map(([k, input, label, text]) => field(label, input, { name: 'autoscale.' + k, tip: text })))),
    h('div', { class: 'row' },
      h('div', { class: 'field check', 'data-field': 'disable_packing' }, h('div', { class: 'label-row' }, h('label', {}, packing, ' Whole GPUs only'), tip('Give each replica whole GPUs instead of packing several replicas onto one GPU.')), h('div', { class: 'err' })),
      h('div', { class: 'field check', 'data-field': 'strict_isolation' }, h('div', { class: 'label-row' }, h('label', {}, strict, ' Strict isolation'), tip('Refuse to start a fractional replica on a node that cannot enforce its GPU share.')), h('div', { class: 'err' }))),
    h('p', { class: 'form-err', role: 'alert' }),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Deploy')));
  if (pools.length) addRow();
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors(form);
    const autoscale = {};
    for (const [k, input] of auto) if (input.value !== '') autoscale[k] = num(input.value);
    const body = { id: id.value.trim(), model: model.value, nodepools: rows.map((r) => r.value()), autoscale,
      disable_packing: packing.checked, strict_isolation: strict.checked };
    try {
      const d = await api('POST', '/v1/deployments', body);
      ctx.go('#/deployments/' + d.id);
    } catch (e) {
      showError(form, e);
    }
  });
  return form;
}

export async function deploymentsPage(ctx) {
  const list = h('div', { id: 'deployments' });
  let form = null;
  const toggle = ctx.canWrite ? h('button', { type: 'button', class: 'primary', id: 'new-deployment-btn', onclick: async () => {
    if (form) { form.remove(); form = null; return; }
    const [models, pools] = await Promise.all([listAll('/v1/models'), listAll('/v1/nodepools')]);
    form = newDeploymentForm(ctx, models, pools);
    list.before(form);
    form.querySelector('input').focus();
  } }, 'New deployment') : null;
  const el = h('section', {}, h('div', { class: 'head' }, h('h1', {}, 'Deployments'), toggle), list);
  async function refresh() {
    const deps = await listAll('/v1/deployments');
    replace(list, table([
      { label: 'Deployment', value: (d) => link('#/deployments/' + d.id, d.id) },
      { label: 'Model', value: (d) => d.model },
      { label: 'Nodepools', value: (d) => d.nodepools.map((p) => `${p.cluster}/${p.nodepool} (${p.priority})`).join(', ') },
      { label: 'Ready / desired', value: (d) => `${(d.status || {}).ready_replicas ?? 0} / ${(d.status || {}).desired_replicas ?? 0}` },
      { label: 'Replicas min–max', value: (d) => `${d.autoscale.min_replicas}–${d.autoscale.max_replicas}` },
      { label: 'Enabled', value: (d) => (d.enabled ? 'yes' : 'no') },
    ], deps, { empty: 'No deployments yet.' }));
  }
  return { el, refresh };
}

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

export async function deploymentPage(ctx) {
  const [did] = ctx.params;
  const base = '/v1/deployments/' + enc(did);
  const facts = h('div', { class: 'summary' });
  const chart = h('div', { id: 'replica-chart' });
  const serving = h('div', { id: 'serving' });
  const reps = h('div', { id: 'replicas' });
  const events = h('div', { id: 'events' });
  const logs = h('pre', { class: 'logs', id: 'logs', tabindex: '0' });
  const samples = [];   // client-side samples {t, desired, ready} while the page is open
  const msg = h('p', { class: 'form-err', role: 'alert' });
  const del = deleteButton(ctx, { id: 'delete-deployment', what: 'deployment', word: did, path: base, next: '#/deployments', msg });
  const el = h('section', {},
    h('p', { class: 'crumbs' }, link('#/deployments', 'Deployments'), ' / ', did),
    h('div', { class: 'head' }, h('h1', {}, 'Deployment ' + did), h('div', { class: 'btns' }, del)), msg,
    facts,
    h('div', { class: 'grid2' },
      h('div', { class: 'card' }, h('h2', {}, 'Replicas: desired vs ready'), chart),
      h('div', { class: 'card' }, h('h2', {}, 'Requests'), serving)),
    ctx.canPredict ? predictBox(did) : null,
    h('h2', {}, 'Replicas'), reps,
    h('h2', {}, 'Events'), events,
    h('h2', {}, 'Recent logs'), logs);
  async function refresh() {
    const [d, rs, ev, lg, m] = await Promise.all([
      api('GET', base), listAll(base + '/replicas'),
      api('GET', `/v1/events?kind=deployment&object=${enc(did)}&limit=20`),
      api('GET', base + '/logs', undefined, { text: true }).catch((e) => `(no logs: ${e.message})`),
      api('GET', base + '/metrics').catch((e) => (e.status === 404 ? null : Promise.reject(e)))]);
    const st = d.status || {};
    samples.push({ t: Date.now(), desired: st.desired_replicas ?? 0, ready: st.ready_replicas ?? 0 });
    if (samples.length > 900) samples.shift();
    replace(facts, h('dl', { class: 'facts' },
      h('dt', {}, 'Model'), h('dd', {}, d.model),
      h('dt', {}, 'Ready / desired'), h('dd', { id: 'ready-desired' }, `${st.ready_replicas ?? 0} / ${st.desired_replicas ?? 0}`),
      h('dt', {}, 'Nodepools'), h('dd', {}, d.nodepools.map((p) => `${p.cluster}/${p.nodepool} (priority ${p.priority})`).join(', ')),
      h('dt', {}, 'Autoscaling'), h('dd', {}, `${d.autoscale.min_replicas}–${d.autoscale.max_replicas} replicas, target concurrency ${d.autoscale.target_concurrency}`),
      h('dt', {}, 'Enabled'), h('dd', {}, d.enabled ? 'yes' : 'no')));
    // desired vs ready: the server's history when it has one, else our samples
    const hist = m && Array.isArray(m.history) && m.history.length ? m.history : null;
    const pts = (k, hk) => (hist ? hist.map((x) => ({ t: x.t * 1000, v: x[hk] ?? 0 })) : samples.map((s) => ({ t: s.t, v: s[k] })));
    replace(chart, lineChart('desired vs ready replicas', [
      { name: 'desired', cls: 'desired', points: pts('desired', 'desired_replicas') },
      { name: 'ready', cls: 'ready', points: pts('ready', 'ready_replicas') }]),
    h('p', { class: 'small muted' }, hist ? 'from droverd’s metrics history' : 'sampled every 2 s while this page is open'));
    if (!m) {
      replace(serving, h('p', { class: 'muted', id: 'no-metrics' }, 'no serving metrics yet'));
    } else {
      const lat = m.latency_ms || {};
      replace(serving, h('dl', { class: 'facts' },
        h('dt', {}, 'Requests / s'), h('dd', {}, Number(m.requests_per_second || 0).toFixed(2)),
        h('dt', {}, 'Latency p50 / p99'), h('dd', {}, `${lat.p50 ?? '—'} / ${lat.p99 ?? '—'} ms`),
        h('dt', {}, 'In flight / queued'), h('dd', {}, `${m.in_flight ?? 0} / ${m.queued ?? 0}`)),
      hist ? lineChart('request rate', [{ name: 'req/s', cls: 'rps', points: hist.map((x) => ({ t: x.t * 1000, v: x.rps ?? 0 })) }]) : null,
      hist ? lineChart('latency', [
        { name: 'p50 ms', cls: 'p50', points: hist.map((x) => ({ t: x.t * 1000, v: x.p50_ms ?? 0 })) },
        { name: 'p99 ms', cls: 'p99', points: hist.map((x) => ({ t: x.t * 1000, v: x.p99_ms ?? 0 })) }]) : null);
    }
    replace(reps, table([
      { label: 'Replica', value: (r) => r.id },
      { label: 'State', value: (r) => badge((r.status || {}).state || 'pending') },
      { label: 'Node', value: (r) => r.node || '—' },
      { label: 'GPU share', value: (r) => (r.gpus || []).map((g) => `GPU ${g.index}: ${fmt.mib(g.memory_mib)}, ${g.compute_percent}%`).join('; ') || (r.whole_gpu ? 'whole GPU' : 'CPU') },
      { label: 'Restarts', value: (r) => (r.status || {}).restarts ?? 0 },
      { label: 'Reason', value: (r) => (r.status || {}).reason || '' },
    ], rs, { empty: 'No replicas.' }));
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
