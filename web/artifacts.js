// artifacts.js — Artifacts: the list (id, source, size, files, digest, age)
// and one artifact's page: its facts, every file of its manifest (path,
// size, sha256), the models that name it (artifact: {id}) and Delete with
// typed confirmation (the API refuses it with 409 while a model uses it;
// that reason is shown as the API words it). Artifacts are made with
// `drover artifact push`, so there is no create form here.
import { api, listAll, enc } from './api.js';
import { h, replace, table, link, deleteButton, fmt } from './dom.js';

const short = (hex, n = 12) => h('code', { title: hex || '' }, hex ? hex.slice(0, n) : '—');

export async function artifactsPage() {
  const list = h('div', { id: 'artifacts' });
  const el = h('section', {},
    h('div', { class: 'head' }, h('h1', {}, 'Artifacts')),
    h('p', { class: 'muted' }, 'Model weights in the head\'s store. Add one with ',
      h('code', {}, 'drover artifact push PATH --id ID'), '; a model uses it with ', h('code', {}, 'artifact: {id: ID}'), '.'),
    list);
  async function refresh() {
    const items = await listAll('/v1/artifacts');
    replace(list, table([
      { label: 'Artifact', value: (a) => link('#/artifacts/' + enc(a.id), a.id) },
      { label: 'Source', value: (a) => h('code', {}, a.source) },
      { label: 'Size', value: (a) => fmt.bytes((a.status || {}).total_size) },
      { label: 'Files', value: (a) => String((a.status || {}).file_count ?? '—') },
      { label: 'Digest', value: (a) => short((a.status || {}).digest) },
      { label: 'Age', value: (a) => fmt.age(a.created_at) },
    ], items, { empty: 'No artifacts yet.' }));
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
    replace(facts, h('dl', { class: 'facts' },
      h('dt', {}, 'Source'), h('dd', { id: 'artifact-source' }, h('code', {}, a.source)),
      a.description ? [h('dt', {}, 'Description'), h('dd', {}, a.description)] : null,
      h('dt', {}, 'Size'), h('dd', { id: 'artifact-size' }, `${fmt.bytes(st.total_size)} (${st.total_size ?? 0} bytes)`),
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
