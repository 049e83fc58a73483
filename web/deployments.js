// deployments.js — Deployments: the list, New Deployment (a model onto one
// or more nodepools with priorities, and the autoscaling settings, each
// explained by a tooltip; the API validates and its errors land next to the
// field), and the form parts that deployment.js reuses for its Edit form
// (poolsEditor, autoscaleFields). One deployment's page is deployment.js.
import { api, listAll } from './api.js';
import { h, replace, field, table, link, tip, showError, clearErrors, num } from './dom.js';

const AUTOSCALE = [
  ['min_replicas', 'Min replicas', 1, 'Replicas kept even without traffic. 0 allows scale to zero: no cost while idle, but the first request waits for a cold start.'],
  ['max_replicas', 'Max replicas', 1, 'The autoscaler never asks for more replicas than this (at least min replicas).'],
  ['target_concurrency', 'Target concurrency', 4, 'Requests in flight (plus queued) per replica the autoscaler aims for; more load adds replicas.'],
  ['traffic_history_seconds', 'Traffic window (s)', 60, 'Load is averaged over this many seconds before deciding.'],
  ['scale_up_delay_seconds', 'Scale-up delay (s)', 0, 'How long load must stay high before replicas are added.'],
  ['scale_down_delay_seconds', 'Scale-down delay (s)', 300, 'How long load must stay low before replicas are removed.'],
  ['scale_to_zero_delay_seconds', 'Scale-to-zero delay (s)', 900, 'Idle time before the last replica goes (when min replicas is 0); at least the scale-down delay.'],
  ['cold_start_timeout_seconds', 'Cold-start timeout (s)', 300, 'How long the gateway holds requests while no replica is ready.'],
  ['ttft_slo_ms', 'TTFT SLO (ms)', '', 'Optional. The time-to-first-token p99 to keep replicas sized for: the autoscaler learns each replica\'s service rate and scales to keep the predicted TTFT under it. Empty: sized by target concurrency.'],
  ['e2e_slo_ms', 'End-to-end SLO (ms)', '', 'Optional. The end-to-end p99 (arrival to the last byte) to size for, with or without the TTFT SLO; the larger need wins. Empty: off.'],
];

// One nodepool row: which nodepool, its priority, a remove button (not on
// the first row). `at` is {cluster, nodepool, priority} to start from.
function poolRow(pools, at, onRemove) {
  const opts = pools.map((p) => `${p.cluster}/${p.id}`);
  const cur = at ? `${at.cluster}/${at.nodepool}` : '';
  if (cur && !opts.includes(cur)) opts.push(cur);   // a nodepool since deleted stays visible
  const sel = h('select', {}, opts.map((o) => h('option', { value: o }, o.replace('/', ' / '))));
  if (cur) sel.value = cur;
  const prio = h('input', { type: 'number', value: String(at ? at.priority ?? 0 : 0) });
  sel.id = 'np' + Math.random().toString(36).slice(2, 8);
  const label = h('label', { for: sel.id });
  const prioText = h('span', { class: 'sr' });
  const remove = onRemove ? h('button', { type: 'button', onclick: onRemove }) : null;
  const row = h('div', { class: 'field pool-row' },
    label,
    h('div', { class: 'inline' }, sel, h('label', { class: 'inline-label' }, 'priority', prioText, prio), remove),
    h('div', { class: 'err', role: 'alert' }));
  // rows are renumbered after a removal, so errors naming nodepools[i] land on row i
  const number = (i) => {
    row.dataset.field = `nodepools[${i}]`;
    label.textContent = `Nodepool ${i + 1}`;
    prioText.textContent = ` of nodepool ${i + 1}`;
    sel.name = `nodepools[${i}]`;
    prio.name = `priority-${i}`;
    if (remove) remove.setAttribute('aria-label', 'remove nodepool ' + (i + 1));
  };
  return { row, number, value: () => { const [cluster, nodepool] = sel.value.split('/'); return { cluster, nodepool, priority: num(prio.value) }; } };
}

// The nodepools of a deployment with their priorities, as a fieldset;
// initial is the deployment's list (or none: one row, priorities 10, 0, …).
export function poolsEditor(pools, initial) {
  const rows = [];
  const tail = h('div', { class: 'field', 'data-field': 'nodepools' }, h('div', { class: 'err', role: 'alert' }));
  const renumber = () => rows.forEach((r, i) => r.number(i));
  const addRow = (at) => {
    const first = rows.length === 0;
    const r = poolRow(pools, at || { priority: Math.max(0, 10 - rows.length * 10) },
      first ? null : () => { rows.splice(rows.indexOf(r), 1); r.row.remove(); renumber(); });
    rows.push(r);
    tail.before(r.row);
    renumber();
  };
  const el = h('fieldset', {}, h('legend', {}, 'Nodepools ', tip('Replicas go to the highest-priority nodepool with room; overflow goes to the next.')), tail,
    h('button', { type: 'button', class: 'add-pool', onclick: () => addRow() }, 'Add a nodepool'));
  if (initial && initial.length) initial.forEach(addRow);
  else if (pools.length) addRow();
  return { el, value: () => rows.map((r) => r.value()) };
}

// The autoscaling settings as a fieldset of number fields, each with its
// tooltip, filled from values (a deployment's autoscale) or the defaults.
// value(forPatch): empty fields are left out of a create and sent as null
// (back to the default) in a merge patch.
export function autoscaleFields(values) {
  const auto = AUTOSCALE.map(([k, label, def, text]) => [k, h('input', { type: 'number', name: k, min: '0', value: String(values ? values[k] ?? '' : def) }), label, text]);
  const el = h('fieldset', {}, h('legend', {}, 'Autoscaling'),
    h('div', { class: 'row' }, auto.map(([k, input, label, text]) => field(label, input, { name: 'autoscale.' + k, tip: text }))));
  const value = (forPatch) => {
    const out = {};
    for (const [k, input] of auto) if (input.value !== '') out[k] = num(input.value); else if (forPatch) out[k] = null;
    return out;
  };
  return { el, value };
}

function newDeploymentForm(ctx, models, pools) {
  const id = h('input', { name: 'id', autocomplete: 'off', placeholder: 'e.g. chat' });
  const model = h('select', { name: 'model' }, models.map((m) => h('option', { value: m.id }, m.id)));
  const poolsBox = poolsEditor(pools);
  const auto = autoscaleFields();
  const packing = h('input', { type: 'checkbox', name: 'disable_packing' });
  const strict = h('input', { type: 'checkbox', name: 'strict_isolation' });
  const form = h('form', { class: 'card', id: 'new-deployment', novalidate: true },
    h('h2', {}, 'New deployment'),
    field('Deployment id', id, { name: 'id' }),
    field('Model', model, { name: 'model' }),
    poolsBox.el,
    auto.el,
    h('div', { class: 'row' },
      h('div', { class: 'field check', 'data-field': 'disable_packing' }, h('div', { class: 'label-row' }, h('label', {}, packing, ' Whole GPUs only'), tip('Give each replica whole GPUs instead of packing several replicas onto one GPU.')), h('div', { class: 'err' })),
      h('div', { class: 'field check', 'data-field': 'strict_isolation' }, h('div', { class: 'label-row' }, h('label', {}, strict, ' Strict isolation'), tip('Refuse to start a fractional replica on a node that cannot enforce its GPU share.')), h('div', { class: 'err' }))),
    h('p', { class: 'form-err', role: 'alert' }),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Deploy')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors(form);
    const body = { id: id.value.trim(), model: model.value, nodepools: poolsBox.value(), autoscale: auto.value(false),
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
