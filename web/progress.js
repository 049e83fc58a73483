// progress.js — progress bars: a replica's artifact fetch (fetchProgress:
// from status.fetch {bytes, total, rate_bytes_per_s, eta_seconds},
// reported while the state is "fetching": "bytes of total (percent)", the
// rate and the ETA) and an artifact's import (importProgress: from
// status.progress {files_done, files, bytes} while the state is
// "importing": "F of N files · B hashed", or "listing the source" while
// files is 0). Drawn whenever the fields are there; without them, nothing
// (null). The bar's width goes through the CSSOM (allowed by the console's
// CSP).
import { h, fmt } from './dom.js';

const isNum = (v) => typeof v === 'number' && Number.isFinite(v);

function bar(pct, label, text) {
  const fill = h('span', { class: 'fill' });
  fill.style.width = pct.toFixed(1) + '%';
  return h('div', { class: 'progress', role: 'progressbar', 'aria-label': label, 'aria-valuemin': '0',
    'aria-valuemax': '100', 'aria-valuenow': String(Math.floor(pct)), 'aria-valuetext': text }, fill);
}

export function fetchProgress(status) {
  const f = status && status.fetch;
  if (!f || typeof f !== 'object' || !isNum(f.bytes)) return null;
  const hasTotal = isNum(f.total) && f.total > 0;
  const pct = hasTotal ? Math.max(0, Math.min(100, (100 * f.bytes) / f.total)) : null;
  const words = [hasTotal ? `${fmt.bytes(f.bytes)} of ${fmt.bytes(f.total)} (${Math.floor(pct)}%)` : `${fmt.bytes(f.bytes)} fetched`];
  if (isNum(f.rate_bytes_per_s)) words.push(fmt.bytes(f.rate_bytes_per_s) + '/s');
  if (isNum(f.eta_seconds)) words.push('ETA ' + fmt.secs(f.eta_seconds));
  const text = words.join(' · ');
  return h('div', { class: 'fetch' }, hasTotal ? bar(pct, 'artifact fetch', text) : null,
    h('span', { class: 'fetch-text small' }, text));
}

export function importProgress(status) {
  const p = status && status.state === 'importing' && status.progress;
  if (!p || typeof p !== 'object' || !isNum(p.files_done) || !isNum(p.files)) return null;
  const listed = p.files > 0;
  const pct = listed ? Math.max(0, Math.min(100, (100 * p.files_done) / p.files)) : null;
  const words = [listed ? `${p.files_done} of ${p.files} file${p.files === 1 ? '' : 's'}` : 'listing the source'];
  if (isNum(p.bytes)) words.push(fmt.bytes(p.bytes) + ' hashed');
  const text = words.join(' · ');
  return h('div', { class: 'fetch import' }, listed ? bar(pct, 'artifact import', text) : null,
    h('span', { class: 'fetch-text small' }, text));
}
