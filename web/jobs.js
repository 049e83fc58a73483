// jobs.js — Jobs: the list (state, workers ready / total, attempt, queue
// position, age) and one job's page: its facts (state, reason, why it waits,
// attempt, restarts, master), the placement by rank, the workers the agents
// report, events and Cancel. Cancel is DELETE /v1/jobs/{j} after a
// confirmation: a job that has not ended becomes cancelled (202) and stays;
// an ended one is removed (200) and the page goes back to the list. New
// job (writers): the job kind's main fields — id, command, workers,
// per-worker resources, nodepools with priorities (deployments.js's
// editor), priority, max_restarts, preemptible, checkpoints kept — each
// explained by a tooltip; the API validates, and its errors land next to
// the field they name.
import { api, listAll, enc } from './api.js';
import { h, replace, table, link, badge, fmt, field, tip, showError, clearErrors, num } from './dom.js';
import { poolsEditor } from './deployments.js';

const ENDED = ['succeeded', 'failed', 'cancelled'];
const st = (j) => j.status || {};
// status.workers is an object keyed by worker (an array is taken too); shown by rank
const workersOf = (s) => (Array.isArray(s.workers) ? s.workers : Object.values(s.workers || {}))
  .slice().sort((a, b) => String(a.id || '').localeCompare(String(b.id || ''), 'en', { numeric: true }));

// Ask before cancelling or removing a job (a <dialog>); resolves true/false.
function confirmJob(jid, ended) {
  return new Promise((resolve) => {
    const verb = ended ? 'Remove job' : 'Cancel job';
    const dlg = h('dialog', { class: 'confirm' },
      h('form', { method: 'dialog' },
        h('p', {}, ended ? 'This removes the ended job ' : 'This cancels job ', h('b', {}, jid),
          ended ? ' from the list.' : ': its workers are stopped (SIGTERM, then SIGKILL after the grace period).'),
        h('div', { class: 'actions' },
          h('button', { type: 'button', onclick: () => dlg.close('no') }, 'Keep it'),
          h('button', { type: 'submit', value: 'yes', class: 'danger' }, verb))));
    dlg.addEventListener('close', () => { dlg.remove(); resolve(dlg.returnValue === 'yes'); });
    document.body.append(dlg);
    dlg.showModal();
  });
}

// The command line as argv: split at spaces; "double quotes" keep one
// argument together.
function argv(line) {
  return (line.match(/"[^"]*"|\S+/g) || []).map((a) => (a.startsWith('"') && a.endsWith('"') && a.length > 1 ? a.slice(1, -1) : a));
}

function newJobForm(ctx, pools) {
  const id = h('input', { name: 'id', autocomplete: 'off', placeholder: 'e.g. finetune-1' });
  const cmd = h('input', { name: 'runtime.command', autocomplete: 'off', placeholder: 'drover-demo-train --steps 200 --checkpoint-every 20' });
  const n = (name, value, min) => h('input', { type: 'number', name, min: String(min), value: String(value) });
  const workers = n('workers', 1, 1), gpus = n('resources.gpu.count', 1, 0);
  const cpu = n('resources.cpu_millis', 1000, 1), mem = n('resources.memory_mib', 1024, 1);
  const prio = n('priority', 0, -1000), restarts = n('max_restarts', 3, 0), keep = n('checkpoint.keep', '', 1);
  keep.value = '';
  const preemptible = h('input', { type: 'checkbox', name: 'preemptible' });
  const poolsBox = poolsEditor(pools);
  const form = h('form', { class: 'card', id: 'new-job', novalidate: true },
    h('h2', {}, 'New job'),
    h('div', { class: 'row' },
      field('Job id', id, { name: 'id' }),
      field('Workers', workers, { name: 'workers', tip: 'The gang: all workers start together on one snapshot, or none does (torchrun ranks 0..N-1).' })),
    field('Command', cmd, { name: 'runtime.command', tip: 'Run by every worker with the torchrun environment (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK, DROVER_CHECKPOINT_DIR, ...). Split at spaces; "quotes" keep an argument whole.' }),
    h('fieldset', {}, h('legend', {}, 'Per worker'),
      h('div', { class: 'row' },
        field('GPUs', gpus, { name: 'resources.gpu.count', tip: 'Whole GPUs for each worker (0: CPU only).' }),
        field('CPU (mCPU)', cpu, { name: 'resources.cpu_millis' }),
        field('Memory (MiB)', mem, { name: 'resources.memory_mib' }))),
    poolsBox.el,
    h('div', { class: 'row' },
      field('Priority', prio, { name: 'priority', tip: 'Higher is admitted first; a higher-priority job may preempt preemptible ones.' }),
      field('Max restarts', restarts, { name: 'max_restarts', tip: 'Restarts of the whole gang after a failure or a lost node (preemptions do not count).' }),
      field('Checkpoints kept', keep, { name: 'checkpoint.keep', tip: 'Empty: checkpoints stay on each worker\'s node. A number: the storage layer keeps this many of each rank\'s newest, so a restarted rank resumes on any node.' })),
    h('div', { class: 'field check', 'data-field': 'preemptible' }, h('div', { class: 'label-row' }, h('label', {}, preemptible, ' Preemptible'), tip('It uses idle GPUs and is stopped (SIGTERM, a grace period, SIGKILL) when a deployment or a higher-priority job needs them; it queues again and resumes from its checkpoints.')), h('div', { class: 'err' })),
    h('p', { class: 'form-err', role: 'alert' }),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Submit')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors(form);
    const resources = { cpu_millis: num(cpu.value), memory_mib: num(mem.value) };
    if (gpus.value !== '' && Number(gpus.value) > 0) resources.gpu = { count: num(gpus.value) };
    const body = { id: id.value.trim(), runtime: { command: argv(cmd.value) }, workers: num(workers.value), resources,
      nodepools: poolsBox.value(), priority: num(prio.value), max_restarts: num(restarts.value), preemptible: preemptible.checked };
    if (keep.value !== '') body.checkpoint = { keep: num(keep.value) };
    try {
      const j = await api('POST', '/v1/jobs', body);
      ctx.go('#/jobs/' + enc(j.id));
    } catch (e) {
      showError(form, e);
    }
  });
  return form;
}

export async function jobsPage(ctx) {
  const list = h('div', { id: 'jobs' });
  let form = null;
  const toggle = ctx && ctx.canWrite ? h('button', { type: 'button', class: 'primary', id: 'new-job-btn', onclick: async () => {
    if (form) { form.remove(); form = null; return; }
    form = newJobForm(ctx, await listAll('/v1/nodepools'));
    list.before(form);
    form.querySelector('input').focus();
  } }, 'New job') : null;
  const el = h('section', {},
    h('div', { class: 'head' }, h('h1', {}, 'Jobs'), toggle),
    h('p', { class: 'muted' }, 'Training jobs: gangs of workers started together. Submit one here, with ',
      h('code', {}, 'drover apply -f job.yaml'), ' or ', h('code', {}, 'POST /v1/jobs'), '.'),
    list);
  async function refresh() {
    const items = await listAll('/v1/jobs');
    replace(list, table([
      { label: 'Job', value: (j) => link('#/jobs/' + enc(j.id), j.id) },
      { label: 'State', value: (j) => badge(st(j).state || 'queued') },
      { label: 'Workers ready / total', value: (j) => `${st(j).workers_ready ?? 0} / ${st(j).workers_total ?? j.workers ?? 0}` },
      { label: 'Attempt', value: (j) => String(st(j).attempt ?? '—') },
      { label: 'Queue position', value: (j) => (st(j).queue_position === undefined ? '—' : String(st(j).queue_position)) },
      { label: 'Priority', value: (j) => String(j.priority ?? 0) },
      { label: 'Age', value: (j) => fmt.age(j.created_at) },
    ], items, { empty: 'No jobs yet.' }));
  }
  return { el, refresh };
}

export async function jobPage(ctx) {
  const [jid] = ctx.params;
  const base = '/v1/jobs/' + enc(jid);
  const facts = h('div', { class: 'summary' });
  const placement = h('div', { id: 'job-placement' });
  const workers = h('div', { id: 'job-workers' });
  const events = h('div', { id: 'job-events' });
  const msg = h('p', { class: 'form-err', role: 'alert', id: 'job-msg' });
  let ended = false;
  const cancel = ctx.canWrite ? h('button', { type: 'button', class: 'danger', id: 'cancel-job', onclick: async () => {
    const wasEnded = ended;
    if (!(await confirmJob(jid, wasEnded))) return;
    try {
      await api('DELETE', base);
      msg.textContent = '';
      if (wasEnded) ctx.go('#/jobs'); else await refresh();
    } catch (e) {
      msg.textContent = e.message;
    }
  } }, 'Cancel job') : null;
  const el = h('section', {},
    h('p', { class: 'crumbs' }, link('#/jobs', 'Jobs'), ' / ', jid),
    h('div', { class: 'head' }, h('h1', {}, 'Job ' + jid), h('div', { class: 'btns' }, cancel)), msg,
    facts,
    h('h2', {}, 'Placement'), placement,
    h('h2', {}, 'Workers'), workers,
    h('h2', {}, 'Events'), events);
  async function refresh() {
    const [j, ev] = await Promise.all([api('GET', base),
      api('GET', `/v1/events?kind=job&object=${enc(jid)}&limit=20`).catch(() => ({ items: [] }))]);
    const s = st(j);
    ended = ENDED.includes(s.state);
    if (cancel) cancel.textContent = ended ? 'Remove job' : 'Cancel job';
    const res = j.resources || {}, gpu = res.gpu || {};
    replace(facts, h('dl', { class: 'facts' },
      h('dt', {}, 'State'), h('dd', { id: 'job-state' }, badge(s.state || 'queued')),
      s.reason ? [h('dt', {}, 'Reason'), h('dd', { id: 'job-reason' }, s.reason)] : null,
      s.waiting ? [h('dt', {}, 'Waiting'), h('dd', { id: 'job-waiting' }, s.waiting)] : null,
      s.queue_position !== undefined ? [h('dt', {}, 'Queue position'), h('dd', { id: 'job-queue-position' }, String(s.queue_position))] : null,
      h('dt', {}, 'Workers ready / total'), h('dd', { id: 'job-workers-ready' }, `${s.workers_ready ?? 0} / ${s.workers_total ?? j.workers ?? 0}`),
      h('dt', {}, 'Attempt'), h('dd', { id: 'job-attempt' }, `${s.attempt ?? '—'} (restarts ${s.restarts ?? 0} of ${j.max_restarts ?? 0}, preemptions ${s.preemptions ?? 0})`),
      h('dt', {}, 'Command'), h('dd', {}, h('code', {}, ((j.runtime || {}).command || []).join(' '))),
      h('dt', {}, 'Per worker'), h('dd', {}, `${gpu.count ? gpu.count + ' GPU, ' : ''}${res.cpu_millis ?? 1000} mCPU, ${fmt.mib(res.memory_mib ?? 1024)}`),
      h('dt', {}, 'Nodepools'), h('dd', {}, (j.nodepools || []).map((p) => `${p.cluster}/${p.nodepool} (priority ${p.priority ?? 0})`).join(', ')),
      h('dt', {}, 'Priority / queue'), h('dd', {}, `${j.priority ?? 0} / ${j.queue || '—'}`),
      s.master ? [h('dt', {}, 'Master'), h('dd', {}, h('code', {}, s.master))] : null,
      s.gpu_hours !== undefined ? [h('dt', {}, 'GPU-hours / cost'), h('dd', { id: 'job-usage' }, `${s.gpu_hours} GPU-h / $${(s.cost_usd ?? 0).toFixed(2)}`)] : null,
      h('dt', {}, 'Created'), h('dd', {}, fmt.age(j.created_at) + ' ago'),
      s.started_at ? [h('dt', {}, 'Started'), h('dd', {}, fmt.age(s.started_at) + ' ago')] : null,
      s.finished_at ? [h('dt', {}, 'Finished'), h('dd', {}, fmt.age(s.finished_at) + ' ago')] : null));
    const byRank = (a, b) => (a.rank ?? 0) - (b.rank ?? 0);
    replace(placement, table([
      { label: 'Rank', value: (p) => String(p.rank) },
      { label: 'Node', value: (p) => p.node || '—' },
      { label: 'GPUs', value: (p) => (p.gpus || []).map((g) => `GPU ${g.index}: ${fmt.mib(g.memory_mib)}, ${g.compute_percent}%`).join('; ') || 'CPU' },
      { label: 'Whole', value: (p) => (p.whole ? 'yes' : 'no') },
    ], (s.placement || []).slice().sort(byRank), { empty: ended ? 'Ended: no placement.' : 'Not placed (yet).' }));
    replace(workers, table([
      { label: 'Worker', value: (w) => w.id || '—' },
      { label: 'Node', value: (w) => w.node || '—' },
      { label: 'State', value: (w) => badge(w.state || 'starting') },
      { label: 'Last exit', value: (w) => (w.last_exit === undefined || w.last_exit === null ? '' : String(w.last_exit)) },
      { label: 'Reason', value: (w) => w.reason || '' },
    ], workersOf(s), { empty: 'No worker reported.' }));
    replace(events, table([
      { label: 'When', value: (e) => fmt.age(e.time) + ' ago' },
      { label: 'Type', value: (e) => e.type },
      { label: 'Reason', value: (e) => e.reason },
    ], (ev.items || []).slice(-20).reverse(), { empty: 'No events yet.' }));
  }
  return { el, refresh };
}
