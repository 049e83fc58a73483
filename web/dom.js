// dom.js — small DOM helpers shared by the pages: element builder, labelled
// form fields with an error slot each, the API's errors shown next to the
// field they name, tooltips, tables, a typed-confirmation dialog, the delete
// button built on it, the Edit form (a conditional PATCH), and number, byte and duration formats. No innerHTML anywhere: text always
// goes in as text.
import { api } from './api.js';

// h('div', {class: 'x', onclick: fn, 'data-field': 'id'}, child, 'text', ...)
export function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k === 'value') el.value = v;
    else if (k === 'checked') el.checked = true;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

export function replace(el, ...kids) {
  el.replaceChildren(...kids.flat().filter((k) => k !== null && k !== undefined && k !== false));
}

let uid = 0;
// A labelled field: name is the API's field name (errors land here), tip an
// explanation shown on hover and keyboard focus.
export function field(label, input, { name, help, tip: tipText } = {}) {
  if (!input.id) input.id = 'f' + ++uid;
  const err = h('div', { class: 'err', role: 'alert', 'aria-live': 'polite' });
  input.setAttribute('aria-describedby', input.id + '-err');
  err.id = input.id + '-err';
  return h('div', { class: 'field', 'data-field': name || '' },
    h('div', { class: 'label-row' }, h('label', { for: input.id }, label), tipText ? tip(tipText) : null),
    input,
    help ? h('small', { class: 'help' }, help) : null,
    err);
}

// A "?" that shows text on hover and on keyboard focus (CSS ::after); screen
// readers read the hidden copy. Kept outside <label>s, so a field's name is
// its label alone.
export function tip(text) {
  return h('span', { class: 'tip', tabindex: '0', 'data-tip': text }, h('span', { class: 'sr' }, text), '?');
}

export function clearErrors(form) {
  for (const e of form.querySelectorAll('.err')) e.textContent = '';
  for (const f of form.querySelectorAll('.field.bad')) f.classList.remove('bad');
}

// Put the API's message next to the field it names ("autoscale.max_replicas",
// "nodepools[1]", "runtime.command[0]"): the most specific field present in
// the form, else the form's own error line.
export function showError(form, err) {
  clearErrors(form);
  let name = err.field || '';
  for (;;) {
    const f = name && form.querySelector(`.field[data-field="${CSS.escape(name)}"]`);
    if (f) {
      f.classList.add('bad');
      f.querySelector('.err').textContent = err.message;
      const input = f.querySelector('input,select,textarea');
      if (input) input.focus();
      return;
    }
    if (!name) break;
    const cut = Math.max(name.lastIndexOf('.'), name.lastIndexOf('['));
    name = cut > 0 ? name.slice(0, cut) : '';
  }
  const line = form.querySelector('.form-err');
  if (line) line.textContent = err.message;
}

// A table: cols [{label, value(row) -> text|Node, sort(row) -> key}].
export function table(cols, rows, { empty = 'none', cls = '' } = {}) {
  if (!rows.length) return h('p', { class: 'empty' }, empty);
  return h('div', { class: 'scroll' }, h('table', { class: cls },
    h('thead', {}, h('tr', {}, cols.map((c) => h('th', { scope: 'col' }, c.label)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, cols.map((c) => h('td', { 'data-label': c.label }, c.value(r))))))));
}

export function link(href, text) { return h('a', { href }, text); }

export function badge(state) { return h('span', { class: 'badge s-' + String(state).replace(/[^a-z_]/g, '') }, state); }

// Ask the user to type word to confirm (a <dialog>); resolves true/false.
export function confirmTyped(what, word) {
  return new Promise((resolve) => {
    const input = h('input', { type: 'text', autocomplete: 'off', spellcheck: 'false' });
    const ok = h('button', { type: 'submit', value: 'delete', class: 'danger', disabled: true }, 'Delete');
    input.addEventListener('input', () => { ok.disabled = input.value !== word; });
    const dlg = h('dialog', { class: 'confirm' },
      h('form', { method: 'dialog' },
        h('p', {}, `This deletes ${what} `, h('b', {}, word), ' and everything in it.'),
        field(`Type ${word} to confirm`, input),
        h('div', { class: 'actions' },
          h('button', { type: 'button', onclick: () => dlg.close('cancel') }, 'Cancel'), ok)));
    dlg.addEventListener('close', () => { dlg.remove(); resolve(dlg.returnValue === 'delete' && input.value === word); }); // Escape leaves '' : no
    document.body.append(dlg);
    dlg.showModal();
    input.focus();
  });
}

// The Delete button of a page (null for tokens that cannot write): asks for
// the typed name, sends DELETE path, then goes to next; a refusal is shown
// in the API's words in msg (a .form-err element on the page).
export function deleteButton(ctx, { id, what, word, path, next, msg }) {
  if (!ctx.canWrite) return null;
  return h('button', { type: 'button', class: 'danger', id, onclick: async () => {
    if (!(await confirmTyped(what, word))) return;
    try {
      await api('DELETE', path);
      ctx.go(next);
    } catch (e) {
      msg.textContent = e.message;
    }
  } }, 'Delete ' + what);
}

export const fmt = {
  money: (x) => (x === null || x === undefined ? '—' : '$' + Number(x).toFixed(x < 10 ? 3 : 2)),
  // bytes in binary units: 512 B, 9.8 KiB, 2.0 GiB
  bytes(b) {
    if (b === null || b === undefined || !Number.isFinite(Number(b))) return '—';
    let v = Number(b), i = 0;
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return i === 0 ? v + ' B' : v.toFixed(v < 10 ? 1 : 0) + ' ' + units[i];
  },
  // a duration in seconds, coarse: 45s, 3m 20s, 2h 5m
  secs(s) {
    if (s === null || s === undefined || !Number.isFinite(Number(s))) return '—';
    s = Math.max(0, Math.round(Number(s)));
    return s < 60 ? s + 's' : s < 3600 ? `${Math.floor(s / 60)}m ${s % 60}s` : `${Math.floor(s / 3600)}h ${Math.floor(s % 3600 / 60)}m`;
  },
  mib: (m) => (m === null || m === undefined ? '—' : m >= 1024 ? (m / 1024).toFixed(m % 1024 ? 1 : 0) + ' GiB' : m + ' MiB'),
  age(t) {
    if (!t) return '—';
    const s = Math.max(0, (Date.now() - Date.parse(t)) / 1000);
    return s < 90 ? Math.round(s) + 's' : s < 5400 ? Math.round(s / 60) + 'm' : s < 129600 ? Math.round(s / 3600) + 'h' : Math.round(s / 86400) + 'd';
  },
};

// An Edit form (id, title, its parts): Save sends body() to path as a JSON
// merge patch conditional on version (If-Match: a change made meanwhile is
// a 409, nothing overwritten) and then calls done(true); the API's refusal
// lands next to the field it names; Cancel calls done(false).
export function editForm({ id, title, parts, path, version, body, done }) {
  const form = h('form', { class: 'card', id, novalidate: true },
    h('h2', {}, title), parts,
    h('p', { class: 'form-err', role: 'alert' }),
    h('div', { class: 'actions' },
      h('button', { type: 'button', onclick: () => done(false) }, 'Cancel'),
      h('button', { type: 'submit', class: 'primary' }, 'Save')));
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    clearErrors(form);
    try {
      await api('PATCH', path, body(), { headers: { 'If-Match': String(version) } });
      done(true);
    } catch (e) {
      showError(form, e);
    }
  });
  return form;
}

// Read a form's named inputs as strings / numbers / booleans.
export function num(v) { return v === '' ? undefined : Number(v); }
