// progress.js — a replica's artifact fetch progress: from status.fetch
// ({bytes, total, rate_bytes_per_s, eta_seconds}, reported while the state
// is "fetching") a bar with "bytes of total (percent)", the rate and the
// ETA. Drawn whenever the fields are there; without them, nothing (null).
// The bar's width goes through the CSSOM (allowed by the console's CSP).
import { h, fmt } from './dom.js';

const isNum = (v) => typeof v === 'number' && Number.isFinite(v);

export function fetchProgress(status) {
  const f = status && status.fetch;
  if (!f || typeof f !== 'object' || !isNum(f.bytes)) return null;
  const hasTotal = isNum(f.total) && f.total > 0;
  const pct = hasTotal ? Math.max(0, Math.min(100, (100 * f.bytes) / f.total)) : null;
  const words = [hasTotal ? `${fmt.bytes(f.bytes)} of ${fmt.bytes(f.total)} (${Math.floor(pct)}%)` : `${fmt.bytes(f.bytes)} fetched`];
  if (isNum(f.rate_bytes_per_s)) words.push(fmt.bytes(f.rate_bytes_per_s) + '/s');
  if (isNum(f.eta_seconds)) words.push('ETA ' + fmt.secs(f.eta_seconds));
  const text = words.join(' · ');
  let bar = null;
  if (hasTotal) {
    const fill = h('span', { class: 'fill' });
    fill.style.width = pct.toFixed(1) + '%';
    bar = h('div', { class: 'progress', role: 'progressbar', 'aria-label': 'artifact fetch', 'aria-valuemin': '0',
      'aria-valuemax': '100', 'aria-valuenow': String(Math.floor(pct)), 'aria-valuetext': text }, fill);
  }
  return h('div', { class: 'fetch' }, bar, h('span', { class: 'fetch-text small' }, text));
}
