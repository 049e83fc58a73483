// jobs.js — Jobs: the list (state, workers ready / total, attempt, queue
// position, age) and one job's page: its facts (state, reason, why it waits,
// attempt, restarts, master), the placement by rank, the workers the agents
// report, events and Cancel. Cancel is DELETE /v1/jobs/{j} after a
// confirmation: a job that has not ended becomes cancelled (202) and stays;
// an ended one is removed (200) and the page goes back to the list. Jobs
// are submitted with `drover job submit` or POST /v1/jobs: no create form.
import { api, listAll, enc } from './api.js';
import { h, replace, table, link, badge, fmt } from './dom.js';

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

export async function jobsPage() {
  const list = h('div', { id: 'jobs' });
  const el = h('section', {},
    h('div', { class: 'head' }, h('h1', {}, 'Jobs')),
    h('p', { class: 'muted' }, 'Training jobs: gangs of workers started together. Submit one with ',
      h('code', {}, 'drover job submit'), ' or ', h('code', {}, 'POST /v1/jobs'), '.'),
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
