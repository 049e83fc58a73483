// clusters.js — Compute → Clusters: the list (provider, region, nodepools,
// nodes, GPUs in use / total, cost per hour computed from the nodes'
// instance-type prices), New Cluster (provider and region pickers from the
// catalog), and one cluster's page (its nodepools, New Nodepool, delete with
// typed confirmation; it asks only for the cluster's own nodes and replicas).
import { api, listAll, instanceTypes, enc } from './api.js';
import { h, replace, field, table, link, showError, clearErrors, deleteButton, fmt } from './dom.js';
import { nodepoolForm, nodesByState } from './nodepools.js';

// Per-cluster sums over nodes and replicas: {nodes, gpus, gpusUsed, cost}.
export function clusterStats(clusterId, nodepools, nodes, replicas, types) {
  const byType = new Map(types.map((t) => [t.id, t]));
  const pools = new Map(nodepools.map((p) => [p.cluster + '/' + p.id, p]));
  const used = new Set();
  for (const r of replicas)
    if (r.node) for (const g of r.gpus || []) used.add(r.node + '/' + g.uuid);
  const s = { nodes: 0, gpus: 0, gpusUsed: 0, cost: 0 };
  for (const n of nodes) {
    if (n.cluster !== clusterId) continue;
    s.nodes++;
    const gpus = (n.status && n.status.gpus) || [];
    const t = byType.get(n.instance_type);
    s.gpus += gpus.length || (t ? t.gpu_count : 0);
    s.gpusUsed += gpus.filter((g) => used.has(n.id + '/' + g.uuid)).length;
    if (t && (!n.status || n.status.state !== 'lost')) {
      const pool = pools.get(n.cluster + '/' + n.nodepool);
      const spot = pool && pool.capacity_type !== 'on_demand' && t.spot_price_per_hour !== null;
      s.cost += spot ? t.spot_price_per_hour : t.price_per_hour;
    }
  }
  return s;
}

function newClusterForm(ctx, providers) {
  const id = h('input', { name: 'id', required: true, autocomplete: 'off', placeholder: 'e.g. gpu-east' });
  const provider = h('select', { name: 'provider' },
    providers.map((p) => h('option', { value: p.id }, `${p.name} (${p.id})`)));
  const region = h('select', { name: 'region' });
  const desc = h('input', { name: 'description', autocomplete: 'off' });
  const fillRegions = () => {
    const p = providers.find((x) => x.id === provider.value);
    replace(region, ((p && p.regions) || []).map((r) => h('option', { value: r.id }, `${r.name} (${r.id})`)));
  };
  provider.addEventListener('change', fillRegions);
  fillRegions();
  const form = h('form', { class: 'card', id: 'new-cluster', novalidate: true },
    h('h2', {}, 'New cluster'),
    field('Cluster id', id, { name: 'id', help: 'lowercase letters, digits and -' }),
    field('Provider', provider, { name: 'provider', tip: 'Where the machines come from: local runs agents on this head node; clouds provision instances.' }),
    field('Region', region, { name: 'region' }),
    field('Description', desc, { name: 'description' }),
    h('p', { class: 'form-err', role: 'alert' }),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create cluster')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors(form);
    try {
      const c = await api('POST', '/v1/clusters', { id: id.value.trim(), provider: provider.value, region: region.value, description: desc.value });
      ctx.go('#/clusters/' + c.id);
    } catch (e) {
      showError(form, e);
    }
  });
  return form;
}

export async function clustersPage(ctx) {
  const list = h('div', { id: 'clusters' });
  let form = null;
  const providers = ctx.canWrite ? (await api('GET', '/v1/providers')).items : [];
  const toggle = ctx.canWrite ? h('button', { type: 'button', class: 'primary', id: 'new-cluster-btn', onclick: () => {
    if (form) { form.remove(); form = null; return; }
    form = newClusterForm(ctx, providers);
    list.before(form);
    form.querySelector('input').focus();
  } }, 'New cluster') : null;
  const el = h('section', {}, h('div', { class: 'head' }, h('h1', {}, 'Clusters'), toggle), list);
  async function refresh() {
    const [clusters, nodepools, nodes, replicas, types] = await Promise.all([
      listAll('/v1/clusters'), listAll('/v1/nodepools'), listAll('/v1/nodes'), listAll('/v1/replicas'), instanceTypes()]);
    const rows = clusters.map((c) => ({ c, s: clusterStats(c.id, nodepools, nodes, replicas, types), np: nodepools.filter((p) => p.cluster === c.id).length }));
    replace(list, table([
      { label: 'Cluster', value: (r) => link('#/clusters/' + r.c.id, r.c.id) },
      { label: 'Provider', value: (r) => r.c.provider },
      { label: 'Region', value: (r) => r.c.region },
      { label: 'Nodepools', value: (r) => r.np },
      { label: 'Nodes', value: (r) => r.s.nodes },
      { label: 'GPUs in use / total', value: (r) => `${r.s.gpusUsed} / ${r.s.gpus}` },
      { label: 'Cost / hour', value: (r) => fmt.money(r.s.cost) },
    ], rows, { empty: ctx.canWrite ? 'No clusters yet: create one with New cluster.' : 'No clusters yet.' }));
  }
  return { el, refresh };
}

export async function clusterPage(ctx) {
  const [cid] = ctx.params;
  const c = await api('GET', '/v1/clusters/' + enc(cid));
  const summary = h('div', { class: 'summary' });
  const pools = h('div', { id: 'cluster-nodepools' });
  let form = null;
  const newPool = ctx.canWrite ? h('button', { type: 'button', class: 'primary', id: 'new-nodepool-btn', onclick: async () => {
    if (form) { form.remove(); form = null; return; }
    form = await nodepoolForm(ctx, c);
    pools.before(form);
    form.querySelector('input').focus();
  } }, 'New nodepool') : null;
  const msg = h('p', { class: 'form-err', role: 'alert' });
  const del = deleteButton(ctx, { id: 'delete-cluster', what: 'cluster', word: c.id,
    path: '/v1/clusters/' + enc(c.id) + '?cascade=true', next: '#/clusters', msg });
  const el = h('section', {},
    h('p', { class: 'crumbs' }, link('#/clusters', 'Clusters'), ' / ', c.id),
    h('div', { class: 'head' }, h('h1', {}, 'Cluster ' + c.id), h('div', { class: 'btns' }, newPool, del)), msg,
    summary, h('h2', {}, 'Nodepools'), pools);
  async function refresh() {
    const [nodepools, nodes, replicas, types] = await Promise.all([
      listAll('/v1/clusters/' + enc(cid) + '/nodepools'), listAll('/v1/nodes?cluster=' + enc(cid)), listAll('/v1/replicas?cluster=' + enc(cid)), instanceTypes()]);
    const s = clusterStats(cid, nodepools, nodes, replicas, types);
    replace(summary, h('dl', { class: 'facts' },
      h('dt', {}, 'Provider'), h('dd', {}, c.provider), h('dt', {}, 'Region'), h('dd', {}, c.region),
      h('dt', {}, 'Description'), h('dd', {}, c.description || '—'), h('dt', {}, 'Nodes'), h('dd', {}, s.nodes),
      h('dt', {}, 'GPUs in use / total'), h('dd', {}, `${s.gpusUsed} / ${s.gpus}`),
      h('dt', {}, 'Cost / hour'), h('dd', {}, fmt.money(s.cost))));
    replace(pools, table([
      { label: 'Nodepool', value: (p) => link(`#/clusters/${cid}/nodepools/${p.id}`, p.id) },
      { label: 'Instance types', value: (p) => p.instance_types.join(', ') },
      { label: 'Capacity', value: (p) => p.capacity_type },
      { label: 'Nodes (min–max)', value: (p) => `${p.min_nodes}–${p.max_nodes}` },
      { label: 'Nodes by state', value: (p) => nodesByState(p) },
    ], nodepools, { empty: 'No nodepools in this cluster yet.' }));
  }
  return { el, refresh };
}
