// artifacts.js — Artifacts: the list (id, source, state, size, files,
// digest, age; an importing one with its progress, a failed one with its
// reason) with the caller's unfinished uploads under it (GET
// /v1/artifacts/uploads, what `drover get uploads` shows: size, files,
// bytes still missing, last touch, expiry), and one artifact's page: its
// facts (state, import progress, failure reason), every file of its
// manifest (path, size, sha256), the models that name it (artifact: {id})
// and Delete with typed confirmation (the API refuses it with 409 while a
// model uses it; that reason is shown as the API words it). Artifacts are
// made with `drover artifact push` or imported from s3/https sources, so
// there is no create form here.
import { api, listAll, enc } from './api.js';
import { h, replace, table, link, deleteButton, badge, fmt } from './dom.js';
import { importProgress } from './progress.js';

const short = (hex, n = 12) => h('code', { title: hex || '' }, hex ? hex.slice(0, n) : '—');

// An artifact's state (ready when the status names none: pushed before
// imports existed), with the import's progress or the failure's reason.
const stateOf = (st) => st.state || 'ready';
function stateCell(st) {
  return h('div', { class: 'art-state' }, badge(stateOf(st)), importProgress(st),
    stateOf(st) === 'failed' && st.reason ? h('div', { class: 'small art-reason' }, st.reason) : null);
}

// Seconds since / until an upload's epoch-seconds times.
const now = () => Date.now() / 1000;
const since = (t) => (typeof t === 'number' ? fmt.secs(now() - t) + ' ago' : '—');
const until = (t) => (typeof t === 'number' ? 'in ' + fmt.secs(t - now()) : '—');

export async function artifactsPage() {
  const list = h('div', { id: 'artifacts' });
  const uploads = h('div', { id: 'uploads' });
  const el = h('section', {},
    h('div', { class: 'head' }, h('h1', {}, 'Artifacts')),
    h('p', { class: 'muted' }, 'Model weights in the head\'s store. Add one with ',
      h('code', {}, 'drover artifact push PATH --id ID'), '; a model uses it with ', h('code', {}, 'artifact: {id: ID}'), '.'),
    list,
    h('h2', {}, 'Unfinished uploads'),
    h('p', { class: 'muted' }, 'Pushes that have not sent every chunk yet (',
      h('code', {}, 'drover get uploads'), '); the same push resumes one, and an untouched one expires.'),
    uploads);
  async function refresh() {
    const [items, ups] = await Promise.all([listAll('/v1/artifacts'), api('GET', '/v1/artifacts/uploads')]);
    replace(list, table([
      { label: 'Artifact', value: (a) => link('#/artifacts/' + enc(a.id), a.id) },
      { label: 'Source', value: (a) => h('code', {}, a.source) },
      { label: 'State', value: (a) => stateCell(a.status || {}) },
      { label: 'Size', value: (a) => fmt.bytes((a.status || {}).total_size) },
      { label: 'Files', value: (a) => String((a.status || {}).file_count ?? '—') },
      { label: 'Digest', value: (a) => short((a.status || {}).digest) },
      { label: 'Age', value: (a) => fmt.age(a.created_at) },
    ], items, { empty: 'No artifacts yet.' }));
    replace(uploads, table([
      { label: 'Upload', value: (u) => short(u.id) },
      { label: 'Size', value: (u) => fmt.bytes(u.total_size) },
      { label: 'Files', value: (u) => String(u.file_count ?? '—') },
      { label: 'Missing', value: (u) => fmt.bytes(u.missing_bytes) },
      { label: 'Last touched', value: (u) => since(u.updated_at) },
      { label: 'Expires', value: (u) => until(u.expires_at) },
    ], (ups && ups.items) || [], { empty: 'No unfinished uploads.' }));
  }
  return { el, refresh };
}

export async function artifactPage(ctx) {
  const [aid] = ctx.params;
  const base = '/v1/artifacts/' + enc(aid);
  const facts = h('div', { class: 'summary' });
  const files = h('div', { id: 'artifact-files' });
  const users = h('div', { id: 'artifact-models' });
  const msg = h('p', { class: 'form-err', role: 'alert', id: 'artifact-msg' });
  const del = deleteButton(ctx, { id: 'delete-artifact', what: 'artifact', word: aid, path: base, next: '#/artifacts', msg });
  const el = h('section', {},
    h('p', { class: 'crumbs' }, link('#/artifacts', 'Artifacts'), ' / ', aid),
    h('div', { class: 'head' }, h('h1', {}, 'Artifact ' + aid), h('div', { class: 'btns' }, del)), msg,
    facts,
    h('h2', {}, 'Models using it'), users,
    h('h2', {}, 'Files'), files);
  let shownDigest = null;   // artifacts are immutable: the file table is drawn once per digest
  async function refresh() {
    const [a, models] = await Promise.all([api('GET', base), listAll('/v1/models')]);
    const st = a.status || {};
    const prog = importProgress(st);
    replace(facts, h('dl', { class: 'facts' },
      h('dt', {}, 'Source'), h('dd', { id: 'artifact-source' }, h('code', {}, a.source)),
      h('dt', {}, 'State'), h('dd', { id: 'artifact-state' }, badge(stateOf(st))),
      prog ? [h('dt', {}, 'Import'), h('dd', { id: 'artifact-progress' }, prog)] : null,
      stateOf(st) === 'failed' ? [h('dt', {}, 'Reason'), h('dd', { id: 'artifact-reason' }, st.reason || '—')] : null,
      a.description ? [h('dt', {}, 'Description'), h('dd', {}, a.description)] : null,
      h('dt', {}, 'Size'), h('dd', { id: 'artifact-size' }, st.total_size === undefined ? '—' : `${fmt.bytes(st.total_size)} (${st.total_size} bytes)`),
      h('dt', {}, 'Files'), h('dd', { id: 'artifact-count' }, String(st.file_count ?? 0)),
      h('dt', {}, 'Chunk size'), h('dd', {}, fmt.bytes((a.manifest || {}).chunk_size)),
      h('dt', {}, 'Digest'), h('dd', { id: 'artifact-digest', class: 'hash' }, h('code', {}, st.digest || '—')),
      h('dt', {}, 'Created'), h('dd', {}, fmt.age(a.created_at) + ' ago')));
    const using = models.filter((m) => m.artifact && m.artifact.id === a.id);
    replace(users, table([
      { label: 'Model', value: (m) => m.id },
      { label: 'Command', value: (m) => h('code', {}, (m.runtime.command || []).join(' ')) },
    ], using, { empty: 'No model uses it.' }));
    if (shownDigest !== st.digest) {
      shownDigest = st.digest;
      const rows = ((a.manifest || {}).files || []);
      replace(files, table([
        { label: 'Path', value: (f) => h('code', {}, f.path) },
        { label: 'Size', value: (f) => fmt.bytes(f.size) },
        { label: 'sha256', value: (f) => short(f.sha256) },
        { label: 'Chunks', value: (f) => String((f.chunks || []).length) },
      ], rows, { empty: 'No files.', cls: 'files' }));
    }
  }
  return { el, refresh };
}
