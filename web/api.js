// api.js — the console's only door to droverd: fetch() against the same
// REST API the CLI uses, with the personal access token kept in
// sessionStorage (this tab only; sign-out removes it). Errors come back as
// ApiError carrying the API's own words: {status, code, message, field}.
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
  try {
    res = await fetch(path, init);
  } catch (e) {
    throw new ApiError(0, 'unreachable', 'droverd did not answer (' + e.message + ')', '');
  }
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
