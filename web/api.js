// api.js — the console's only door to droverd: fetch() against the same
// REST API the CLI uses, with the personal access token kept in
// sessionStorage (this tab only; sign-out removes it). Errors come back as
// ApiError carrying the API's own words: {status, code, message, field}.
//
// Several heads (PostgreSQL): calls go to this page's head until it stands
// by or dies, then to the leader. A standby's 503 not_leader names the
// leader (nothing ran there: the call is sent again, to it); a head that
// does not answer is passed over for the next of the heads GET /v1/status
// listed, and only a read is sent again (a write may have run: its error
// is shown). The other heads' origins are allowed by the page's CSP and by
// their CORS answers (api/cors.c); the token stays in this tab and goes in
// Authorization to whichever head answers.
const KEY = 'drover.token';

export const session = {
  get token() { return sessionStorage.getItem(KEY) || ''; },
  set token(t) { sessionStorage.setItem(KEY, t); },
  clear() { sessionStorage.removeItem(KEY); },
};

export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field || '';
  }
}

// Called with the ApiError of any 401, so the app can return to sign-in.
let onUnauthenticated = () => {};
export function setOnUnauthenticated(fn) { onUnauthenticated = fn; }

// Where calls go: '' (this page's origin) or another head's origin; the
// heads' origins, this page's first, from GET /v1/status.
let base = '';
let heads = [location.origin];
let learned = false;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const originOf = (url) => { try { return new URL(url).origin; } catch { return ''; } };

async function learnHeads(token) {
  try {
    const res = await fetch(base + '/v1/status', { headers: { Authorization: 'Bearer ' + token } });
    const doc = res.ok ? await res.json() : null;
    const seen = (doc && doc.heads || []).filter((h) => h.role !== 'gone').map((h) => originOf(h.url));
    heads = [...new Set([location.origin, ...seen.filter(Boolean)])];
  } catch { /* keep what is known */ }
}

// Move on: to the leader a standby named, else to the next head.
function moveOn(leader) {
  const cur = base || location.origin;
  let next = leader ? originOf(leader) : '';
  if (!next || next === cur) next = heads[(heads.indexOf(cur) + 1) % heads.length];
  base = next === location.origin ? '' : next;
  learned = false;   // ask the heads again once one answers
}

// api(METHOD, PATH, BODY?, {text: true} for a text answer, token: override,
// headers: extra request headers such as If-Match})
export async function api(method, path, body, opts = {}) {
  const headers = { ...(opts.headers || {}), Authorization: 'Bearer ' + (opts.token ?? session.token) };
  const init = { method, headers };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = typeof body === 'string' ? body : JSON.stringify(body);
  }
  let res;
  for (let tries = 0; ; tries++) {
    try {
      res = await fetch(base + path, init);
    } catch (e) {
      const again = heads.length > 1 && tries < 4 * heads.length;
      if (again) moveOn('');
      if (again && method === 'GET') { await sleep(500); continue; }
      throw new ApiError(0, 'unreachable', 'droverd did not answer (' + e.message + ')' +
                         (again ? '; the next call goes to another head' : ''), '');
    }
    if (res.status === 503 && tries < 30) {
      const doc = await res.clone().json().catch(() => null);
      if (doc && doc.error && doc.error.code === 'not_leader') {
        if (!learned && heads.length < 2) { learned = true; await learnHeads(headers.Authorization.slice(7)); }
        moveOn(doc.leader || '');
        if (!doc.leader) await sleep(500);   // a takeover under way
        continue;
      }
    }
    break;
  }
  if (!learned && res.ok) { learned = true; learnHeads(headers.Authorization.slice(7)); }
  const type = res.headers.get('Content-Type') || '';
  if (!res.ok) {
    let err = new ApiError(res.status, 'http_' + res.status, res.status + ' ' + res.statusText, '');
    if (type.startsWith('application/json')) {
      const doc = await res.json().catch(() => null);
      if (doc && doc.error)
        err = new ApiError(res.status, doc.error.code, doc.error.message, doc.error.field);
    }
    if (res.status === 401 && !opts.token) onUnauthenticated(err);
    throw err;
  }
  if (opts.raw) return res;
  if (opts.text || !type.startsWith('application/json')) return res.text();
  return res.json();
}

// Every item of a paginated list.
export async function listAll(path) {
  const sep = path.includes('?') ? '&' : '?';
  let items = [], tok = '';
  for (;;) {
    const page = await api('GET', path + sep + 'limit=1000' +
                           (tok ? '&page_token=' + encodeURIComponent(tok) : ''));
    items = items.concat(page.items || []);
    if (!page.next_page_token) return items;
    tok = page.next_page_token;
  }
}

// The catalog does not change while droverd runs: read it once per page load.
let catalog = null;
export async function instanceTypes() {
  if (!catalog) catalog = listAll('/v1/instance-types').catch((e) => { catalog = null; throw e; });
  return catalog;
}

export const enc = encodeURIComponent;
