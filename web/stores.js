// stores.js — Stores: the operators' S3-compatible stores (every user reads
// them, only admins write). The list (endpoint, bucket, region, addressing,
// access key id) and one store's page: its facts, the artifacts that name it
// and, for admins, Delete with the typed confirmation (409 while an artifact
// uses it, shown in the API's words). New Store is an admins' form; its
// secret goes in a password field and is sent once. The secret access key is
// never shown: the API answers "(hidden)" and this page prints a fixed
// placeholder instead of any value it reads.
import { api, listAll, enc } from './api.js';
import { h, replace, field, table, link, deleteButton, showError, clearErrors, fmt } from './dom.js';

const HIDDEN = 'hidden (stored by droverd, never shown)';
const addressing = (s) => (s.path_style ? 'path-style (HOST/BUCKET)' : 'virtual-hosted (BUCKET.HOST)');
const isAdmin = (ctx) => ctx.canWrite && ctx.me && ctx.me.role === 'admin';

function newStoreForm(ctx) {
  const inputs = {
    id: h('input', { name: 'id', autocomplete: 'off', placeholder: 'e.g. weights' }),
    endpoint: h('input', { name: 'endpoint', autocomplete: 'off', placeholder: 'e.g. minio.internal:9000, with its scheme' }),
    region: h('input', { name: 'region', autocomplete: 'off', placeholder: 'us-east-1' }),
    bucket: h('input', { name: 'bucket', autocomplete: 'off' }),
    access_key_id: h('input', { name: 'access_key_id', autocomplete: 'off', spellcheck: 'false' }),
    secret_access_key: h('input', { type: 'password', name: 'secret_access_key', autocomplete: 'new-password', spellcheck: 'false' }),
    description: h('input', { name: 'description', autocomplete: 'off' }),
  };
  const pathStyle = h('input', { type: 'checkbox', name: 'path_style' });
  const form = h('form', { class: 'card', id: 'new-store', novalidate: true },
    h('h2', {}, 'New store'),
    h('div', { class: 'row' },
      field('Store id', inputs.id, { name: 'id' }),
      field('Endpoint', inputs.endpoint, { name: 'endpoint', tip: 'http(s)://HOST[:PORT], no path.' }),
      field('Region', inputs.region, { name: 'region', tip: 'Empty: us-east-1 ("auto" on R2).' }),
      field('Bucket', inputs.bucket, { name: 'bucket' })),
    h('div', { class: 'row' },
      field('Access key id', inputs.access_key_id, { name: 'access_key_id' }),
      field('Secret access key', inputs.secret_access_key, { name: 'secret_access_key', tip: 'Stored by droverd and never shown again, here or in the API.' }),
      field('Description', inputs.description, { name: 'description' })),
    h('div', { class: 'field check', 'data-field': 'path_style' },
      h('div', { class: 'label-row' }, h('label', {}, pathStyle, ' Path-style addressing (MinIO, Ceph RGW)')), h('div', { class: 'err' })),
    h('p', { class: 'form-err', role: 'alert' }),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create store')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors(form);
    const body = { path_style: pathStyle.checked };
    for (const [k, input] of Object.entries(inputs)) if (input.value.trim() !== '') body[k] = input.value.trim();
    try {
      const s = await api('POST', '/v1/stores', body);
      inputs.secret_access_key.value = '';
      ctx.go('#/stores/' + enc(s.id));
    } catch (e) {
      showError(form, e);
    }
  });
  return form;
}

export async function storesPage(ctx) {
  const list = h('div', { id: 'stores' });
  let form = null;
  const toggle = isAdmin(ctx) ? h('button', { type: 'button', class: 'primary', id: 'new-store-btn', onclick: () => {
    if (form) { form.remove(); form = null; return; }
    form = newStoreForm(ctx);
    list.before(form);
    form.querySelector('input').focus();
  } }, 'New store') : null;
  const el = h('section', {},
    h('div', { class: 'head' }, h('h1', {}, 'Stores'), toggle),
    h('p', { class: 'muted' }, 'S3-compatible buckets that artifacts live in (', h('code', {}, 's3://BUCKET/PREFIX'),
      '). Every user reads them; admins add and remove them.'),
    list);
  async function refresh() {
    const items = await listAll('/v1/stores');
    replace(list, table([
      { label: 'Store', value: (s) => link('#/stores/' + enc(s.id), s.id) },
      { label: 'Endpoint', value: (s) => h('code', {}, s.endpoint) },
      { label: 'Bucket', value: (s) => h('code', {}, s.bucket) },
      { label: 'Region', value: (s) => s.region || '—' },
      { label: 'Addressing', value: (s) => (s.path_style ? 'path-style' : 'virtual-hosted') },
      { label: 'Access key id', value: (s) => h('code', {}, s.access_key_id || '—') },
      { label: 'Age', value: (s) => fmt.age(s.created_at) },
    ], items, { empty: 'No stores yet.' }));
  }
  return { el, refresh };
}

export async function storePage(ctx) {
  const [sid] = ctx.params;
  const base = '/v1/stores/' + enc(sid);
  const facts = h('div', { class: 'summary' });
  const users = h('div', { id: 'store-artifacts' });
  const msg = h('p', { class: 'form-err', role: 'alert', id: 'store-msg' });
  const del = isAdmin(ctx) ? deleteButton(ctx, { id: 'delete-store', what: 'store', word: sid, path: base, next: '#/stores', msg }) : null;
  const el = h('section', {},
    h('p', { class: 'crumbs' }, link('#/stores', 'Stores'), ' / ', sid),
    h('div', { class: 'head' }, h('h1', {}, 'Store ' + sid), h('div', { class: 'btns' }, del)), msg,
    facts,
    h('h2', {}, 'Your artifacts on it'), users);
  async function refresh() {
    const [s, arts] = await Promise.all([api('GET', base), listAll('/v1/artifacts')]);
    replace(facts, h('dl', { class: 'facts' },
      h('dt', {}, 'Endpoint'), h('dd', { id: 'store-endpoint' }, h('code', {}, s.endpoint)),
      h('dt', {}, 'Bucket'), h('dd', { id: 'store-bucket' }, h('code', {}, s.bucket)),
      h('dt', {}, 'Region'), h('dd', {}, s.region || '—'),
      h('dt', {}, 'Addressing'), h('dd', {}, addressing(s)),
      h('dt', {}, 'Access key id'), h('dd', { id: 'store-key-id' }, h('code', {}, s.access_key_id || '—')),
      h('dt', {}, 'Secret access key'), h('dd', { id: 'store-secret', class: 'muted' }, HIDDEN),
      s.description ? [h('dt', {}, 'Description'), h('dd', {}, s.description)] : null,
      h('dt', {}, 'Created'), h('dd', {}, fmt.age(s.created_at) + ' ago')));
    replace(users, table([
      { label: 'Artifact', value: (a) => link('#/artifacts/' + enc(a.id), a.id) },
      { label: 'Source', value: (a) => h('code', {}, a.source) },
      { label: 'Size', value: (a) => fmt.bytes((a.status || {}).total_size) },
    ], arts.filter((a) => a.store === s.id), { empty: 'None of your artifacts names it.' }));
  }
  return { el, refresh };
}
