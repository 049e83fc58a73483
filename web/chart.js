// chart.js — a small SVG line chart (no library): series of {t, v} points
// over a shared time axis, one polyline per series, with a legend and the
// clock time at both ends. A point with v === null (no request finished in
// that step) breaks its line instead of drawing a false zero. Used for
// desired vs ready replicas and request rate / latency on a deployment page;
// sparkline() draws the Nodes page's per-GPU utilization and memory used.
const NS = 'http://www.w3.org/2000/svg';

function svg(tag, attrs) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

const clock = (ms) => new Date(ms).toTimeString().slice(0, 8);

// The runs of consecutive non-null points of a series.
function runs(points) {
  const out = [];
  let cur = [];
  for (const p of points) {
    if (p.v === null || p.v === undefined || Number.isNaN(p.v)) { if (cur.length) out.push(cur); cur = []; } else cur.push(p);
  }
  if (cur.length) out.push(cur);
  return out;
}

// series: [{name, cls, points: [{t (ms), v}]}]; returns an <svg>.
export function lineChart(title, series, { height = 140, width = 600, unit = '' } = {}) {
  const all = series.flatMap((s) => s.points).filter((p) => p.v !== null && p.v !== undefined && !Number.isNaN(p.v));
  const empty = all.length < 1;   // nothing to draw: one line of text, not a blank box
  const root = svg('svg', { viewBox: `0 0 ${width} ${empty ? 24 : height + 24}`, class: 'chart', role: 'img', 'aria-label': title });
  const t = svg('title', {});
  t.textContent = title;
  root.append(t);
  if (empty) {
    const note = svg('text', { x: 0, y: 16, class: 'tick' });
    note.textContent = title + ': nothing to show yet';
    root.append(note);
    return root;
  }
  const t0 = Math.min(...all.map((p) => p.t)), t1 = Math.max(...all.map((p) => p.t), t0 + 1000);
  const vmax = Math.max(1, ...all.map((p) => p.v));
  const pad = 40;
  const x = (tt) => pad + ((tt - t0) / (t1 - t0)) * (width - pad - 8);
  const y = (v) => 8 + (1 - v / vmax) * (height - 16);
  root.append(svg('line', { x1: pad, y1: y(0), x2: width - 8, y2: y(0), class: 'axis' }));
  const text = (attrs, s) => { const el = svg('text', { class: 'tick', ...attrs }); el.textContent = s; root.append(el); };
  for (const v of [0, vmax]) text({ x: pad - 4, y: y(v) + 4, 'text-anchor': 'end' }, (Number.isInteger(v) ? v : v.toFixed(1)) + unit);
  let lx = pad;
  for (const s of series) {
    for (const run of runs(s.points)) {
      const pts = run.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(' ');
      root.append(svg('polyline', { points: run.length === 1 ? `${pts} ${pts}` : pts, class: 'line ' + s.cls }));
    }
    root.append(svg('rect', { x: lx, y: height + 10, width: 12, height: 4, class: 'key ' + s.cls }));
    text({ x: lx + 16, y: height + 16 }, s.name);
    lx += 24 + s.name.length * 7;
  }
  text({ x: width - 8, y: height + 16, 'text-anchor': 'end' }, `${clock(t0)} – ${clock(t1)}`);
  return root;
}

// A sparkline: one small polyline of values (oldest first, null = not
// reported then) on 0..max, no axes; the label says what and the newest value.
export function sparkline(kind, values, max, label) {
  const w = 120, hgt = 24;
  const root = svg('svg', { viewBox: `0 0 ${w} ${hgt}`, class: 'spark ' + kind, role: 'img', 'aria-label': label,
    'data-kind': kind, 'data-samples': String(values.length) });
  const t = svg('title', {});
  t.textContent = label;
  root.append(t);
  const top = Math.max(1, max);
  const step = values.length > 1 ? w / (values.length - 1) : 0;
  const pts = values.map((v, i) => ({ t: i, v }));
  for (const run of runs(pts)) {
    const xy = run.map((p) => `${(p.t * step).toFixed(1)},${(hgt - 2 - (Math.min(p.v, top) / top) * (hgt - 4)).toFixed(1)}`).join(' ');
    root.append(svg('polyline', { points: run.length === 1 ? `${xy} ${xy}` : xy, class: 'line' }));
  }
  return root;
}
