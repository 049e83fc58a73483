// chart.js — a small SVG line chart (no library): series of {t, v} points
// over a shared time axis, one polyline per series, with a legend. Used for
// desired vs ready replicas and request rate / latency on a deployment page.
const NS = 'http://www.w3.org/2000/svg';

function svg(tag, attrs) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  return el;
}

// series: [{name, cls, points: [{t (ms), v}]}]; returns an <svg>.
export function lineChart(title, series, { height = 140, width = 600, unit = '' } = {}) {
  const all = series.flatMap((s) => s.points);
  const root = svg('svg', { viewBox: `0 0 ${width} ${height + 24}`, class: 'chart', role: 'img', 'aria-label': title });
  const t = svg('title', {});
  t.textContent = title;
  root.append(t);
  if (all.length < 1) return root;
  const t0 = Math.min(...all.map((p) => p.t)), t1 = Math.max(...all.map((p) => p.t), t0 + 1000);
  const vmax = Math.max(1, ...all.map((p) => p.v));
  const pad = 32;
  const x = (tt) => pad + ((tt - t0) / (t1 - t0)) * (width - pad - 8);
  const y = (v) => 8 + (1 - v / vmax) * (height - 16);
  root.append(svg('line', { x1: pad, y1: y(0), x2: width - 8, y2: y(0), class: 'axis' }));
  for (const v of [0, vmax]) {
    const lab = svg('text', { x: pad - 4, y: y(v) + 4, 'text-anchor': 'end', class: 'tick' });
    lab.textContent = (Number.isInteger(v) ? v : v.toFixed(1)) + unit;
    root.append(lab);
  }
  let lx = pad;
  for (const s of series) {
    if (s.points.length) {
      const pts = s.points.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`).join(' ');
      root.append(svg('polyline', { points: s.points.length === 1 ? `${pts} ${pts}` : pts, class: 'line ' + s.cls }));
    }
    root.append(svg('rect', { x: lx, y: height + 10, width: 12, height: 4, class: 'key ' + s.cls }));
    const name = svg('text', { x: lx + 16, y: height + 16, class: 'tick' });
    name.textContent = s.name;
    root.append(name);
    lx += 24 + s.name.length * 7;
  }
  return root;
}
