// api.js — the console's only door to droverd: fetch() against the same
// REST API the CLI uses, with the personal access token kept in
// sessionStorage (this tab only; sign-out removes it). Errors come back as
// ApiError carrying the API's own words: {status, code, message, field}.
//
// Several heads (PostgreSQL): calls go to this page's head until it stands
// by or dies, then to the leader. A standby's 503 not_leader names the
// leader (nothing ran there: the call is sent again, to it); a head that
// does not answer is passed over for the next of the heads GET /v1/status
// lists, and only a read is sent again (a write may have run: its error
// is shown). The roster is read again every ROSTER_MS while the page is
// shown and after every move, so a head added later is known. The other
// heads' origins are allowed by the page's CSP (as of its load) and by
// their CORS answers (api/cors.c); the token stays in this tab and goes in
// Authorization to whichever head answers. A head the page's CSP does not
// list (it joined after the load) is never fetched: when it is the one to
// move to (named leader, or the only one left), the page is loaded again —
// from its own head when that answers (same tab: the token stays; the new
// CSP lists it), else from that head (sign in there).
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
// heads' origins, this page's first, from GET /v1/status; those this page's
// CSP lets it call (the roster when it loaded: null until first read).
const ROSTER_MS = 5000;
let base = '';
let heads = [location.origin];
let allowed = null;
let learned = false;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const originOf = (url) => { try { return new URL(url).origin; } catch { return ''; } };
const reachable = (o) => !allowed || allowed.has(o);
const timeout = (ms) => (AbortSignal.timeout ? AbortSignal.timeout(ms) : undefined);

// Read the roster from the head calls go to, else any other this page may
// call. The heads found are in <html data-heads> too (for a look in devtools).
let learning = null;
function learnHeads(token) {
  if (!learning) learning = learnFrom(token).finally(() => { learning = null; });
  return learning;
}
async function learnFrom(token) {
  for (const h of [...new Set([base || location.origin, ...heads])].filter(reachable)) {
    try {
      const res = await fetch((h === location.origin ? '' : h) + '/v1/status',
                              { headers: { Authorization: 'Bearer ' + token }, signal: timeout(3000) });
      if (!res.ok) continue;
      const listed = ((await res.json()).heads || []).filter((x) => x.url);
      // as the CSP was made (api/cors.c): every head of the roster, gone ones too
      if (!allowed) allowed = new Set([location.origin, ...listed.map((x) => originOf(x.url))]);
      const live = listed.filter((x) => x.role !== 'gone').map((x) => originOf(x.url));
      heads = [...new Set([location.origin, ...live.filter(Boolean)])];
      document.documentElement.dataset.heads = heads.join(' ');
      return true;
    } catch { /* the next head */ }
  }
  return false;
}
setInterval(() => {
  if (session.token && document.visibilityState === 'visible') learnHeads(session.token);
}, ROSTER_MS);

// Load the console again for head o, which this page's CSP does not list:
// from this page's own head when it answers (its new CSP lists o; the
// token stays in the tab), else from o (sign in there).
let leaving = false;
async function reloadFor(o) {
  if (!leaving) {
    leaving = true;
    const home = await fetch('/healthz', { signal: timeout(2000) }).then((r) => r.ok, () => false);
    if (home) location.reload();
    else location.assign(o + '/' + location.hash);
  }
  await new Promise(() => {});   // the page goes
}

// Move on: to the leader a standby named, else to the next head. Returns
// the head that this page cannot call, when that is where to go.
function moveOn(leader, failedRound) {
  const cur = base || location.origin;
  let next = leader ? originOf(leader) : '';
  if (next && !reachable(next)) return next;
  if (!next || next === cur) {
    const callable = heads.filter(reachable);
    const beyond = heads.filter((h) => !reachable(h));
    if (failedRound && beyond.length) return beyond[0];   // every callable head failed
    next = callable[(callable.indexOf(cur) + 1) % callable.length];
  }
  base = next === location.origin ? '' : next;
  learned = false;   // ask the heads again once one answers
  return '';
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
  const token = headers.Authorization.slice(7);
  for (let tries = 0, down = 0; ; tries++) {
    try {
      res = await fetch(base + path, init);
    } catch (e) {
      down++;
      if (down === 1 || down % heads.length === 0) await learnHeads(token);
      const again = heads.length > 1 && tries < 4 * heads.length;
      const away = again ? moveOn('', down >= heads.filter(reachable).length) : '';
      if (away && method === 'GET') await reloadFor(away);   // a write's error is shown first
      if (again && method === 'GET') { await sleep(500); continue; }
      throw new ApiError(0, 'unreachable', 'droverd did not answer (' + e.message + ')' +
                         (again ? '; the next call goes to another head' : ''), '');
    }
    if (res.status === 503 && tries < 30) {
      const doc = await res.clone().json().catch(() => null);
      if (doc && doc.error && doc.error.code === 'not_leader') {
        if (!learned) { learned = true; await learnHeads(token); }
        const away = moveOn(doc.leader || '', false);
        if (away) await reloadFor(away);
        if (!doc.leader) await sleep(500);   // a takeover under way
        continue;
      }
    }
    break;
  }
  if (!learned && res.ok) { learned = true; learnHeads(token); }
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
