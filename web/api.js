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
// is shown). The roster is read again, from the head that just answered,
// at most every ROSTER_MS (the shell's refresh calls every 2 s), so a head
// added later is known. The other heads' origins are allowed by the page's
// CSP and by their CORS answers (api/cors.c); the token stays in this tab
// and goes in Authorization to whichever head answers. The CSP is that of
// the page's load (read back from the cached page) and cannot widen: a
// head it lacks is never fetched. When that head is where to go (a standby
// names it leader, or every head the page may call failed a read), the
// page loads itself again: from its own head when that answers (same tab:
// the token stays; the new CSP lists it), else from that head (sign in
// there); once per head and RELOAD_MS, so a head whose roster lags cannot
// loop it.
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
// live heads' origins, this page's first, from GET /v1/status; the origins
// this page's CSP lets it call (null: not known, all are tried).
const ROSTER_MS = 5000, RELOAD_MS = 30000;
let base = '';
let heads = [location.origin];
let allowed = null;
let learnedAt = 0;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const originOf = (url) => { try { return new URL(url).origin; } catch { return ''; } };
const reachable = (o) => !allowed || allowed.has(o);

// The CSP this page got: the page's own answer, from the browser's cache
// (the document's response; from the network, a moment after the load,
// when it is not cached).
fetch('/', { cache: 'force-cache' }).then((res) => {
  const m = /connect-src ([^;]*)/.exec(res.headers.get('Content-Security-Policy') || '');
  if (m) allowed = new Set([location.origin, ...m[1].split(' ').filter((o) => o && o !== "'self'")]);
}, () => {});

// Read the roster from the head calls go to; the heads found are in
// <html data-heads> too (a look in devtools, the tests).
async function learnHeads(token) {
  learnedAt = Date.now();
  try {
    const res = await fetch(base + '/v1/status', { headers: { Authorization: 'Bearer ' + token } });
    const doc = res.ok ? await res.json() : null;
    if (!doc) return;
    const seen = (doc.heads || []).filter((h) => h.role !== 'gone').map((h) => originOf(h.url));
    heads = [...new Set([location.origin, ...seen.filter(Boolean)])];
    document.documentElement.dataset.heads = heads.join(' ');
  } catch { /* keep what is known */ }
}

// Load the console again for head o, which this page's CSP lacks: from
// this page's own head when it answers, else from o. False (and nothing
// done) when the page did so for o in the last RELOAD_MS.
async function reloadFor(o) {
  const mark = 'drover.reloaded:' + o;
  const last = Number(sessionStorage.getItem(mark) || 0);
  if (Date.now() - last < RELOAD_MS) return false;
  sessionStorage.setItem(mark, String(Date.now()));
  const home = await fetch('/healthz').then((r) => r.ok, () => false);
  if (home) location.reload();
  else location.assign(o + '/' + location.hash);
  await new Promise(() => {});   // the page goes
}

// Move on: to the leader a standby named, else to the next head this page
// may call. Returns the head to go to that this page cannot call ('' when
// base was moved): the leader named, or, after a whole round of failures
// (failedAll), a live head beyond the CSP.
function moveOn(leader, failedAll) {
  const cur = base || location.origin;
  let next = leader ? originOf(leader) : '';
  if (next && !reachable(next)) return next;
  if (!next || next === cur) {
    const callable = heads.filter(reachable);
    const beyond = heads.filter((h) => !reachable(h));
    if (failedAll && beyond.length) return beyond[0];
    next = callable[(callable.indexOf(cur) + 1) % callable.length];
  }
  base = next === location.origin ? '' : next;
  learnedAt = 0;   // ask the heads again once one answers
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
      const cur = base || location.origin;
      const again = heads.some((h) => h !== cur) && tries < 4 * heads.length;
      const away = again ? moveOn('', down >= heads.filter(reachable).length) : '';
      if (away && method === 'GET') await reloadFor(away);   // a write's error is shown first
      if (again && !away && method === 'GET') { await sleep(500); continue; }
      throw new ApiError(0, 'unreachable', 'droverd did not answer (' + e.message + ')' +
                         (again ? '; the next call goes to another head' : ''), '');
    }
    if (res.status === 503 && tries < 30) {
      const doc = await res.clone().json().catch(() => null);
      if (doc && doc.error && doc.error.code === 'not_leader') {
        if (!learnedAt) await learnHeads(token);
        const away = moveOn(doc.leader || '', false);
        if (away) await reloadFor(away);
        if (!doc.leader || away) await sleep(500);   // a takeover under way
        continue;
      }
    }
    break;
  }
  if (res.ok && Date.now() - learnedAt > ROSTER_MS) learnHeads(token);
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
