// app.js — the console's shell: sign-in with a personal access token, the
// hash router (#/clusters, #/clusters/C/nodepools/NP, …), the header with who
// is signed in and the token's scopes, and live refresh: the current page's
// refresh() runs every 2 s while the tab is visible (never two at once).
import { api, session, setOnUnauthenticated } from './api.js';
import { h, replace, field } from './dom.js';
import { clustersPage, clusterPage } from './clusters.js';
import { nodepoolsPage, nodepoolPage } from './nodepools.js';
import { nodesPage } from './nodes.js';
import { modelsPage } from './models.js';
import { artifactsPage, artifactPage } from './artifacts.js';
import { deploymentsPage } from './deployments.js';
import { deploymentPage } from './deployment.js';
import { jobsPage, jobPage } from './jobs.js';
import { storesPage, storePage } from './stores.js';

const POLL_MS = 2000;
const view = document.getElementById('view');
const nav = document.getElementById('nav');
const who = document.getElementById('who');
const status = document.getElementById('status');

// The live line under the header: the last refresh's failure, if any.
function setStatus(text) { status.textContent = text; status.hidden = !text; }

const routes = [
  [/^\/clusters$/, clustersPage, 'Clusters'],
  [/^\/clusters\/([a-z0-9-]+)$/, clusterPage, 'Cluster'],
  [/^\/clusters\/([a-z0-9-]+)\/nodepools\/([a-z0-9-]+)$/, nodepoolPage, 'Nodepool'],
  [/^\/nodepools$/, nodepoolsPage, 'Nodepools'],
  [/^\/nodes$/, nodesPage, 'Nodes'],
  [/^\/models$/, modelsPage, 'Models'],
  [/^\/artifacts$/, artifactsPage, 'Artifacts'],
  [/^\/artifacts\/([a-z0-9-]+)$/, artifactPage, 'Artifact'],
  [/^\/deployments$/, deploymentsPage, 'Deployments'],
  [/^\/deployments\/([a-z0-9-]+)$/, deploymentPage, 'Deployment'],
  [/^\/jobs$/, jobsPage, 'Jobs'],
  [/^\/jobs\/([a-z0-9-]+)$/, jobPage, 'Job'],
  [/^\/stores$/, storesPage, 'Stores'],
  [/^\/stores\/([a-z0-9-]+)$/, storePage, 'Store'],
];

let me = null;          // GET /v1/users/me of the signed-in token
let page = null;        // {el, refresh?, stop?} of the page shown
let generation = 0;     // bumped at each navigation: stale renders are dropped
let busy = false;

function signOut(message) {
  session.clear();
  me = null;
  location.hash = '#/signin';
  showSignIn(message);
}
setOnUnauthenticated((err) => { if (me) signOut('Signed out: ' + err.message); });

function showSignIn(message) {
  if (page && page.stop) page.stop();
  page = null;
  nav.hidden = true;
  who.hidden = true;
  const input = h('input', { type: 'password', name: 'token', autocomplete: 'off', required: true, spellcheck: 'false' });
  const form = h('form', { class: 'card signin', novalidate: true },
    h('h1', {}, 'Sign in'),
    h('p', {}, 'Paste a personal access token (', h('code', {}, 'drover token create'),
      '). It stays in this browser tab only and is forgotten when you sign out or close the tab.'),
    h('p', { class: 'muted', id: 'signin-hint' }, 'Started with ', h('code', {}, 'make up'),
      '? The admin token is in ', h('code', {}, '.drover/admin.token'),
      ' in the checkout where it runs (', h('code', {}, 'cat .drover/admin.token'), ').'),
    field('Personal access token', input, { name: 'token' }),
    h('p', { class: 'form-err', role: 'alert' }, message || ''),
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Sign in')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const tok = input.value.trim();
    const line = form.querySelector('.form-err');
    if (!tok) { line.textContent = 'A token is needed.'; return; }
    try {
      me = await api('GET', '/v1/users/me', undefined, { token: tok });
    } catch (e) {
      line.textContent = e.message;
      return;
    }
    session.token = tok;
    location.hash = '#/clusters';
    route();
  });
  replace(view, form);
  input.focus();
}

function showWho() {
  const scopes = (me.token && me.token.scopes) || [];
  replace(who,
    h('span', { class: 'user', id: 'who-user' }, me.id),
    h('span', { class: 'role' }, me.role),
    h('span', { class: 'scopes', id: 'who-scopes', title: 'scopes of this token' }, scopes.join(', ')),
    h('button', { type: 'button', id: 'signout', onclick: () => signOut('Signed out.') }, 'Sign out'));
  who.hidden = false;
  nav.hidden = false;
}

async function route() {
  const path = location.hash.replace(/^#/, '') || '/clusters';
  if (!session.token) { showSignIn(); return; }
  if (!me) {
    try {
      me = await api('GET', '/v1/users/me');
    } catch (e) {
      showSignIn(e.message);
      return;
    }
  }
  showWho();
  if (page && page.stop) page.stop();
  page = null;
  const gen = ++generation;
  for (const a of nav.querySelectorAll('a'))
    a.classList.toggle('on', path.startsWith(a.getAttribute('href').slice(1)));
  const hit = routes.map(([re, fn, title]) => [path.match(re), fn, title]).find(([m]) => m);
  if (!hit) { replace(view, h('p', { class: 'empty' }, 'No such page: ' + path)); return; }
  const [m, fn, title] = hit;
  const scopes = (me.token && me.token.scopes) || [];
  const ctx = {
    me,
    params: m.slice(1),
    canWrite: scopes.includes('all'),
    canPredict: scopes.includes('all') || scopes.includes('predict'),
    go: (hash) => { location.hash = hash; },
  };
  document.title = title + ' — drover';
  replace(view, h('p', { class: 'empty' }, 'Loading…'));
  try {
    const p = await fn(ctx);
    if (gen !== generation) { if (p.stop) p.stop(); return; }
    page = p;
    replace(view, p.el);
    if (p.refresh) await p.refresh();
  } catch (e) {
    if (gen === generation) replace(view, h('p', { class: 'form-err', role: 'alert' }, e.message));
  }
}

async function tick() {
  if (busy || !page || !page.refresh || document.hidden) return;
  busy = true;
  const p = page;
  try {
    await p.refresh();
    setStatus('');
  } catch (e) {
    setStatus('Refresh failed: ' + e.message);
  } finally {
    busy = false;
  }
}

window.addEventListener('hashchange', route);
document.addEventListener('visibilitychange', tick);
setInterval(tick, POLL_MS);
route();
