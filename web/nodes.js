// nodes.js — Nodes: one card per node with its GPUs drawn as two bars each,
// memory and compute, divided into the shares of the replicas placed there
// (one colour per deployment); GPU source (detected / declared), health,
// utilization where the agent reports it, with sparklines of utilization
// and memory used sampled by this page while it is open (the API keeps no
// GPU history: they start empty on each visit); cordon, uncordon and drain.
import { api, listAll, enc } from './api.js';
import { h, replace, badge, fmt } from './dom.js';
import { sparkline } from './chart.js';

const SPARK_SAMPLES = 150;   // 5 minutes at the 2 s refresh
const known = (v) => v !== undefined && v !== null;

// GPU samples of the open page: "node/uuid" -> [{util, mem}], oldest first.
function record(history, nodes) {
  const seen = new Set();
  for (const n of nodes) {
    for (const g of (n.status && n.status.gpus) || []) {
      const key = n.id + '/' + g.uuid;
      seen.add(key);
      const s = history.get(key) || [];
      s.push({ util: known(g.utilization_percent) ? g.utilization_percent : null,
        mem: known(g.memory_used_mib) ? g.memory_used_mib : null });
      if (s.length > SPARK_SAMPLES) s.shift();
      history.set(key, s);
    }
  }
  for (const key of history.keys()) if (!seen.has(key)) history.delete(key);
}

function sparks(g, samples) {
  if (!samples || !samples.length) return null;
  const util = samples.map((s) => s.util), mem = samples.map((s) => s.mem);
  const mins = Math.max(1, Math.round((samples.length * 2) / 60));
  const out = [];
  if (util.some(known))
    out.push(h('span', { class: 'spark-box' }, 'util', sparkline('util', util, 100, `GPU ${g.index} utilization, last ${mins} min: now ${known(util[util.length - 1]) ? util[util.length - 1] + '%' : 'not reported'}`)));
  if (mem.some(known))
    out.push(h('span', { class: 'spark-box' }, 'memory used', sparkline('memory', mem, g.memory_mib, `GPU ${g.index} memory used, last ${mins} min: now ${fmt.mib(mem[mem.length - 1])} of ${fmt.mib(g.memory_mib)}`)));
  return out.length ? h('div', { class: 'sparks' }, out) : null;
}

// A stable colour class per deployment.
function colour(dep) {
  let x = 0;
  for (const ch of dep) x = (x * 31 + ch.charCodeAt(0)) >>> 0;
  return 'c' + (x % 8);
}

// One bar: segments [{label, part (0..1), cls}] over a track.
function bar(kind, segments, total) {
  const used = segments.reduce((a, s) => a + s.part, 0);
  const track = h('div', { class: 'bar ' + kind, role: 'img',
    'aria-label': `${kind}: ${Math.round(used * 100)}% allocated to ${segments.length} replica share(s) of ${total}` });
  for (const s of segments) {
    const seg = h('span', { class: 'seg ' + s.cls, title: s.label, 'data-replica': s.replica }, s.short);
    seg.style.width = Math.min(100, s.part * 100).toFixed(2) + '%';
    track.append(seg);
  }
  return track;
}

function gpuView(node, g, replicas, samples) {
  const shares = replicas.flatMap((r) => (r.gpus || []).filter((x) => x.uuid === g.uuid).map((x) => ({ r, x })));
  const mem = shares.map(({ r, x }) => ({
    replica: r.id, cls: colour(r.deployment), short: r.deployment,
    part: g.memory_mib ? (x.memory_mib || g.memory_mib) / g.memory_mib : 0,
    label: `${r.id} (${r.deployment}): ${fmt.mib(x.memory_mib)}${r.whole_gpu ? ', whole GPU' : ''}`,
  }));
  const cpu = shares.map(({ r, x }) => ({
    replica: r.id, cls: colour(r.deployment), short: (x.compute_percent ?? 100) + '%',
    part: (x.compute_percent ?? 100) / 100, label: `${r.id} (${r.deployment}): ${x.compute_percent ?? 100}% compute`,
  }));
  const facts = [
    g.source, g.healthy === false ? 'unhealthy' + (g.health_reason ? ': ' + g.health_reason : '') : 'healthy',
    g.utilization_percent !== undefined && g.utilization_percent !== null ? `util ${g.utilization_percent}%` : null,
    g.memory_used_mib !== undefined && g.memory_used_mib !== null ? `${fmt.mib(g.memory_used_mib)} used` : null,
    g.temperature_c !== undefined && g.temperature_c !== null ? `${g.temperature_c} °C` : null,
  ].filter(Boolean);
  return h('div', { class: 'gpu', 'data-gpu': g.uuid },
    h('div', { class: 'gpu-head' }, h('b', {}, `GPU ${g.index}`), ` ${g.name} · ${fmt.mib(g.memory_mib)} · `,
      h('span', { class: g.healthy === false ? 'bad' : 'muted' }, facts.join(' · '))),
    sparks(g, samples),
    h('div', { class: 'bars' },
      h('span', { class: 'bar-label' }, 'memory'), bar('memory', mem, fmt.mib(g.memory_mib)),
      h('span', { class: 'bar-label' }, 'compute'), bar('compute', cpu, '100%')));
}

function nodeCard(ctx, n, replicas, act, history) {
  const st = n.status || {};
  const gpus = st.gpus || [];
  const mine = replicas.filter((r) => r.node === n.id);
  const btn = (label, verb) => h('button', { type: 'button', 'data-act': verb, onclick: () => act(n, verb) }, label);
  return h('article', { class: 'card node', 'data-node': n.id },
    h('div', { class: 'head' },
      h('h2', {}, n.id, ' ', badge(st.state || 'unknown'), n.cordoned ? h('span', { class: 'tag' }, 'cordoned') : null,
        n.draining ? h('span', { class: 'tag' }, 'draining') : null),
      ctx.canWrite ? h('div', { class: 'btns' },
        n.cordoned || n.draining ? btn('Uncordon', 'uncordon') : btn('Cordon', 'cordon'),
        n.draining ? null : btn('Drain', 'drain')) : null),
    h('p', { class: 'muted' }, `${n.cluster}/${n.nodepool} · ${n.instance_type} · ${st.address || 'no address yet'} · `,
      `${mine.length} replica(s) · last sync ${fmt.age(st.last_sync)} ago`),
    gpus.length ? gpus.map((g) => gpuView(n, g, mine, history.get(n.id + '/' + g.uuid)))
      : h('p', { class: 'muted' }, st.state === 'ready' ? 'No GPU on this node.' : 'GPUs appear once the agent reports them.'));
}

export async function nodesPage(ctx) {
  const list = h('div', { id: 'nodes' });
  const msg = h('p', { class: 'form-err', role: 'alert' });
  const history = new Map();
  async function act(n, verb) {
    if (verb === 'drain' && !confirm(`Drain ${n.id}? Its replicas move to other nodes.`)) return;
    try {
      await api('POST', `/v1/nodes/${enc(n.id)}/${verb}`);
      msg.textContent = '';
      await refresh();
    } catch (e) {
      msg.textContent = e.message;
    }
  }
  const el = h('section', {}, h('div', { class: 'head' }, h('h1', {}, 'Nodes')),
    h('p', { class: 'muted' }, 'Each GPU shows its memory and compute divided into the shares of the replicas placed on it.'),
    msg, list);
  async function refresh() {
    const [nodes, replicas] = await Promise.all([listAll('/v1/nodes'), listAll('/v1/replicas')]);
    record(history, nodes);
    replace(list, nodes.length ? nodes.map((n) => nodeCard(ctx, n, replicas, act, history))
      : h('p', { class: 'empty' }, 'No nodes yet: they come up when a nodepool has min nodes above 0 or a deployment needs room.'));
  }
  return { el, refresh };
}
