// A scatter of one config value (x) against one summary metric (y), a dot per run,
// coloured by group, on a canvas. Numeric x values spanning more than 20x (learning
// rates) go on a log axis; text values (an activation, a regime) are categories.
import { tickLabels } from './format.js';

const kPad = { left: 64, right: 12, top: 10, bottom: 40 };

// points: [{x, y, color, label}] (label: the group, listed in the legend). Draws into `el`
// and records the dots drawn in el.dataset.points (tests read it).
export function drawScatter(el, points, { xLabel = '', yLabel = '', height = 260 } = {}) {
  const ok = points.filter((p) => p.x !== null && p.x !== undefined && Number.isFinite(p.y));
  const numeric = ok.every((p) => typeof p.x === 'number');
  const cats = numeric ? [] : [...new Set(ok.map((p) => String(p.x)))].sort();
  const xsRaw = ok.map((p) => (numeric ? p.x : cats.indexOf(String(p.x))));
  const pos = xsRaw.filter((x) => x > 0);
  const logX = numeric && pos.length === xsRaw.length && pos.length > 1 &&
    Math.max(...pos) / Math.min(...pos) > 20;
  const fx = (x) => (logX ? Math.log10(x) : x);
  const xs = xsRaw.map(fx);
  const ys = ok.map((p) => p.y);
  const span = (v) => {
    let lo = Math.min(...v);
    let hi = Math.max(...v);
    if (!(hi > lo)) { lo -= 0.5; hi += 0.5; }
    const m = (hi - lo) * 0.06;
    return [lo - m, hi + m];
  };
  const [x0, x1] = xs.length ? span(xs) : [0, 1];
  const [y0, y1] = ys.length ? span(ys) : [0, 1];

  const width = Math.max(200, el.clientWidth || 480);
  const dpr = window.devicePixelRatio || 1;
  const canvas = document.createElement('canvas');
  canvas.width = width * dpr;
  canvas.height = height * dpr;
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const g = canvas.getContext('2d');
  g.scale(dpr, dpr);
  const W = width - kPad.left - kPad.right;
  const H = height - kPad.top - kPad.bottom;
  const px = (x) => kPad.left + ((x - x0) / (x1 - x0)) * W;
  const py = (y) => kPad.top + (1 - (y - y0) / (y1 - y0)) * H;

  g.font = '11px system-ui, sans-serif';
  g.strokeStyle = '#d0d4db';
  g.fillStyle = '#555';
  g.strokeRect(kPad.left, kPad.top, W, H);
  // y ticks
  const yTicks = Array.from({ length: 5 }, (_, i) => y0 + ((i + 0.5) * (y1 - y0)) / 5);
  const yText = tickLabels(yTicks);
  g.textAlign = 'right';
  yTicks.forEach((t, i) => g.fillText(yText[i], kPad.left - 4, py(t) + 4));
  // x ticks: the categories, or values at whole powers of ten (log) / even steps
  g.textAlign = 'center';
  let xTicks;
  let xText;
  if (!numeric) {
    xTicks = cats.map((_, i) => i);
    xText = cats;
  } else if (logX) {
    xTicks = [];
    for (let e = Math.ceil(x0); e <= Math.floor(x1); e++) xTicks.push(e);
    if (xTicks.length < 2) xTicks = [x0 + (x1 - x0) * 0.25, x0 + (x1 - x0) * 0.75];
    xText = xTicks.map((e) => (10 ** e).toExponential(0));
  } else {
    // A grid's axis takes a few values: tick exactly those.
    const distinct = [...new Set(xs)].sort((a, b) => a - b);
    xTicks = distinct.length <= 8 ? distinct : Array.from({ length: 5 }, (_, i) => x0 + ((i + 0.5) * (x1 - x0)) / 5);
    xText = tickLabels(xTicks);
  }
  xTicks.forEach((t, i) => g.fillText(xText[i], px(t), kPad.top + H + 14));
  g.fillText(xLabel + (logX ? ' (log)' : ''), kPad.left + W / 2, height - 6);
  g.save();
  g.translate(12, kPad.top + H / 2);
  g.rotate(-Math.PI / 2);
  g.fillText(yLabel, 0, 0);
  g.restore();
  // Dots, with a little jitter on categories so that runs of one value do not hide each other.
  ok.forEach((p, i) => {
    const jitter = numeric ? 0 : ((i * 0.618) % 1 - 0.5) * 0.3;
    g.fillStyle = p.color;
    g.globalAlpha = 0.75;
    g.beginPath();
    g.arc(px(xs[i] + jitter), py(ys[i]), 3.5, 0, 2 * Math.PI);
    g.fill();
  });
  g.globalAlpha = 1;

  const legend = document.createElement('div');
  legend.className = 'legend';
  for (const [label, color] of new Map(ok.map((p) => [p.label, p.color]))) {
    const sw = document.createElement('span');
    sw.className = 'swatch';
    sw.style.background = color;
    const item = document.createElement('span');
    item.append(sw, label);
    legend.append(item);
  }
  el.replaceChildren(canvas, legend);
  el.dataset.points = String(ok.length);
  el.dataset.logx = String(logX);
}
