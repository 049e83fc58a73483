// nodepools.js — nodepools: the list over every cluster, one nodepool's page
// (settings with an Edit form for the node autoscaling settings, and its
// nodes with their state), and the New Nodepool form used on a cluster's
// page, with its sortable, filterable instance-type picker.
import { api, listAll, enc } from './api.js';
import { h, replace, field, table, link, badge, tip, showError, clearErrors, deleteButton, editForm, fmt, num } from './dom.js';

export function nodesByState(p) {
  const by = (p.status && p.status.nodes) || {};
  const parts = Object.entries(by).filter(([, n]) => n > 0);
  if (!parts.length) return h('span', { class: 'muted' }, 'no nodes');
  return h('span', { class: 'states' }, parts.map(([s, n]) => h('span', {}, badge(s), ' ', n)));
}

// The instance-type picker: a table of the types the cluster's provider
// offers in its region; click a column header to sort, type to filter,
// tick one or more (the nodepool uses the cheapest that fits).
function typePicker(types) {
  const chosen = new Set();
  let sortKey = 'price_per_hour', dir = 1, filter = '';
  const cols = [
    ['id', 'Instance type'], ['gpu_type', 'GPU'], ['gpu_count', 'GPUs'], ['gpu_memory_mib', 'GPU memory'],
    ['vcpus', 'vCPU'], ['memory_mib', 'RAM'], ['price_per_hour', 'Price / h'], ['spot_price_per_hour', 'Spot / h'],
  ];
  const show = {
    gpu_memory_mib: (t) => fmt.mib(t.gpu_memory_mib), memory_mib: (t) => fmt.mib(t.memory_mib),
    price_per_hour: (t) => fmt.money(t.price_per_hour), spot_price_per_hour: (t) => fmt.money(t.spot_price_per_hour),
    gpu_type: (t) => t.gpu_type || 'none',
  };
  const search = h('input', { type: 'search', id: 'it-filter', placeholder: 'filter: L4, A100, local-…', autocomplete: 'off' });
  const body = h('tbody');
  const head = h('tr', {}, h('th', { scope: 'col' }, h('span', { class: 'sr' }, 'use')),
    cols.map(([k, label]) => h('th', { scope: 'col', 'data-key': k },
      h('button', { type: 'button', class: 'sort', onclick: () => { dir = sortKey === k ? -dir : 1; sortKey = k; draw(); } }, label))));
  function draw() {
    for (const th of head.querySelectorAll('th[data-key]'))
      th.setAttribute('aria-sort', th.dataset.key === sortKey ? (dir > 0 ? 'ascending' : 'descending') : 'none');
    const f = filter.toLowerCase();
    const rows = types.filter((t) => !f || [t.id, t.gpu_type || 'none'].some((s) => s.toLowerCase().includes(f)))
      .sort((a, b) => {
        const x = a[sortKey] ?? Infinity, y = b[sortKey] ?? Infinity;
        return (x < y ? -1 : x > y ? 1 : 0) * dir || a.id.localeCompare(b.id);
      });
    replace(body, rows.map((t) => {
      const box = h('input', { type: 'checkbox', value: t.id, 'aria-label': 'use ' + t.id, checked: chosen.has(t.id) });
      box.addEventListener('change', () => { if (box.checked) chosen.add(t.id); else chosen.delete(t.id); });
      return h('tr', { 'data-type': t.id }, h('td', {}, box),
        cols.map(([k, label]) => h('td', { 'data-label': label }, show[k] ? show[k](t) : String(t[k]))));
    }));
    if (!rows.length) replace(body, h('tr', {}, h('td', { colspan: cols.length + 1, class: 'empty' }, 'no instance type matches')));
  }
  search.addEventListener('input', () => { filter = search.value; draw(); });
  draw();
  const el = h('div', { class: 'field picker', 'data-field': 'instance_types' },
    h('label', { for: search.id }, 'Instance types'),
    search,
    h('div', { class: 'scroll' }, h('table', { class: 'types' }, h('thead', {}, head), body)),
    h('small', { class: 'help' }, 'Tick one or more; the cheapest type that fits a replica is used.'),
    h('div', { class: 'err', role: 'alert' }));
  return { el, chosen: () => [...chosen] };
}

// The node autoscaling settings of a nodepool (min / max nodes, scale-down
// delay, consolidation), filled from values (a nodepool) or the defaults;
// used by New Nodepool and by Edit. value(forPatch): an emptied number is
// left out of a create and sent as null (back to the default) in a patch.
function sizingFields(values) {
  const v = values || { min_nodes: 0, max_nodes: 1, node_scale_down_delay_seconds: 300, consolidation: false };
  const number = (name) => h('input', { type: 'number', name, min: '0', inputmode: 'numeric', value: String(v[name] ?? '') });
  const min = number('min_nodes'), max = number('max_nodes'), delay = number('node_scale_down_delay_seconds');
  const consolidation = h('input', { type: 'checkbox', name: 'consolidation', checked: !!v.consolidation });
  const el = h('div', {},
    h('div', { class: 'row' },
      field('Min nodes', min, { name: 'min_nodes', tip: 'Nodes kept even when idle. 0 means no idle cost, but the first request after a quiet spell waits for a node to start (a cold start).' }),
      field('Max nodes', max, { name: 'max_nodes', tip: 'The autoscaler never runs more nodes than this, counting nodes still starting.' }),
      field('Scale-down delay (s)', delay, { name: 'node_scale_down_delay_seconds', tip: 'How long a node stays empty before it is released (never below min nodes).' })),
    h('div', { class: 'field check', 'data-field': 'consolidation' },
      h('div', { class: 'label-row' }, h('label', {}, consolidation, ' Consolidation'),
        tip('Empty under-used nodes by moving their replicas onto the other nodes, then release them.')),
      h('div', { class: 'err', role: 'alert' })));
  const n = (input, forPatch) => (input.value === '' ? (forPatch ? null : undefined) : num(input.value));
  return { el, value: (forPatch) => ({ min_nodes: n(min, forPatch), max_nodes: n(max, forPatch),
    node_scale_down_delay_seconds: n(delay, forPatch), consolidation: consolidation.checked }) };
}

export async function nodepoolForm(ctx, cluster) {
  const types = await listAll(`/v1/instance-types?provider=${enc(cluster.provider)}&region=${enc(cluster.region)}`);
  const picker = typePicker(types);
  const id = h('input', { name: 'id', required: true, autocomplete: 'off', placeholder: 'e.g. l4-pool' });
  const cap = h('select', { name: 'capacity_type' },
    h('option', { value: 'on_demand' }, 'on demand'), h('option', { value: 'spot' }, 'spot'),
    h('option', { value: 'spot_with_fallback' }, 'spot, falling back to on demand'));
  const sizing = sizingFields();
  const form = h('form', { class: 'card', id: 'new-nodepool', novalidate: true },
    h('h2', {}, `New nodepool in ${cluster.id}`),
    field('Nodepool id', id, { name: 'id' }),
    picker.el,
    field('Capacity type', cap, { name: 'capacity_type', tip: 'Spot machines cost less but the provider may take them back; with fallback, on-demand machines are used when no spot capacity is there.' }),
    sizing.el,
    h('p', { class: 'form-err', role: 'alert' }),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create nodepool')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors(form);
    const body = { id: id.value.trim(), instance_types: picker.chosen(), capacity_type: cap.value, ...sizing.value(false) };
    try {
      const p = await api('POST', `/v1/clusters/${enc(cluster.id)}/nodepools`, body);
      ctx.go(`#/clusters/${cluster.id}/nodepools/${p.id}`);
    } catch (e) {
      showError(form, e);
    }
  });
  return form;
}

// Edit: a nodepool's node autoscaling settings (see editForm in dom.js).
function editNodepool(p, base, done) {
  const sizing = sizingFields(p);
  return editForm({ id: 'edit-nodepool', title: 'Edit nodepool ' + p.id, path: base, version: p.resource_version, done,
    parts: [sizing.el], body: () => sizing.value(true) });
}

export function nodeTable(nodes) {
  return table([
    { label: 'Node', value: (n) => n.id },
    { label: 'State', value: (n) => h('span', {}, badge(n.status ? n.status.state : 'unknown'),
      n.cordoned ? ' cordoned' : '', n.draining ? ' draining' : '') },
    { label: 'Instance type', value: (n) => n.instance_type },
    { label: 'GPUs', value: (n) => ((n.status && n.status.gpus) || []).length },
    { label: 'Address', value: (n) => (n.status && n.status.address) || '—' },
    { label: 'Last sync', value: (n) => fmt.age(n.status && n.status.last_sync) },
  ], nodes, { empty: 'No nodes: the autoscaler adds them when replicas need room (or to reach min nodes).' });
}

export async function nodepoolsPage(ctx) {
  const list = h('div', { id: 'nodepools' });
  const el = h('section', {}, h('div', { class: 'head' }, h('h1', {}, 'Nodepools')),
    h('p', { class: 'muted' }, 'Nodepools are created inside a cluster: open a cluster to add one.'), list);
  async function refresh() {
    const pools = await listAll('/v1/nodepools');
    replace(list, table([
      { label: 'Nodepool', value: (p) => link(`#/clusters/${p.cluster}/nodepools/${p.id}`, `${p.cluster}/${p.id}`) },
      { label: 'Instance types', value: (p) => p.instance_types.join(', ') },
      { label: 'Capacity', value: (p) => p.capacity_type },
      { label: 'Nodes (min–max)', value: (p) => `${p.min_nodes}–${p.max_nodes}` },
      { label: 'Scale-down delay', value: (p) => p.node_scale_down_delay_seconds + ' s' },
      { label: 'Nodes by state', value: nodesByState },
    ], pools, { empty: 'No nodepools yet.' }));
  }
  return { el, refresh };
}

export async function nodepoolPage(ctx) {
  const [cid, pid] = ctx.params;
  const base = `/v1/clusters/${enc(cid)}/nodepools/${enc(pid)}`;
  const facts = h('div', { class: 'summary' });
  const nodes = h('div', { id: 'nodepool-nodes' });
  const msg = h('p', { class: 'form-err', role: 'alert' });
  const del = deleteButton(ctx, { id: 'delete-nodepool', what: 'nodepool', word: pid,
    path: base + '?cascade=true', next: '#/clusters/' + cid, msg });
  let edit = null;
  const editBtn = ctx.canWrite ? h('button', { type: 'button', id: 'edit-nodepool-btn', onclick: async () => {
    if (edit) { edit.remove(); edit = null; return; }
    try {
      edit = editNodepool(await api('GET', base), base, async (saved) => {
        edit.remove();
        edit = null;
        editBtn.focus();
        if (saved) await refresh();
      });
      msg.textContent = '';
      msg.after(edit);
      edit.querySelector('input').focus();
    } catch (e) {
      msg.textContent = e.message;
    }
  } }, 'Edit') : null;
  const el = h('section', {},
    h('p', { class: 'crumbs' }, link('#/clusters', 'Clusters'), ' / ', link('#/clusters/' + cid, cid), ' / ', pid),
    h('div', { class: 'head' }, h('h1', {}, 'Nodepool ' + pid), h('div', { class: 'btns' }, editBtn, del)), msg,
    facts, h('h2', {}, 'Nodes'), nodes);
  async function refresh() {
    const [p, ns] = await Promise.all([api('GET', base), listAll(`/v1/nodes?cluster=${enc(cid)}&nodepool=${enc(pid)}`)]);
    replace(facts, h('dl', { class: 'facts' },
      h('dt', {}, 'Instance types'), h('dd', {}, p.instance_types.join(', ')),
      h('dt', {}, 'Capacity type'), h('dd', {}, p.capacity_type),
      h('dt', {}, 'Nodes min–max'), h('dd', { id: 'np-range' }, `${p.min_nodes}–${p.max_nodes}`),
      h('dt', {}, 'Scale-down delay'), h('dd', { id: 'np-delay' }, p.node_scale_down_delay_seconds + ' s'),
      h('dt', {}, 'Consolidation'), h('dd', { id: 'np-consolidation' }, p.consolidation ? 'on' : 'off'),
      h('dt', {}, 'Nodes by state'), h('dd', {}, nodesByState(p))));
    replace(nodes, nodeTable(ns));
  }
  return { el, refresh };
}
