// Line charts over training steps, drawn by uPlot (canvas; handles 10^5+ points). Curves
// are aligned on a shared step axis and downsampled (align.js) so a run logged every step
// for 10^6 steps still draws in milliseconds.
import { alignLines } from './align.js';
import { tickLabels, byteTickLabels } from './format.js';

// A line with at most this many points also draws them as dots: a metric logged once
// (eval.ppl at the end of a SAF run) is a single point, which a line alone never shows.
const kDotsUpTo = 20;
const kPalette = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b',
  '#e377c2', '#17becf', '#7f7f7f', '#bcbd22'];

// uPlot and its stylesheet, a chunk of their own fetched when a page makes its first chart:
// the page's first reads go out while the library is fetched and compiled, instead of
// after (on a loaded machine that was 0.1-0.2 s before a page asked for anything).
let uPlot = null;
let uPlotLoading = null;
function loadUPlot() {
  if (!uPlotLoading) {
    uPlotLoading = Promise.all([import('uplot'), import('uplot/dist/uPlot.min.css')])
      .then(([m]) => { uPlot = m.default; });
    uPlotLoading.catch(() => { uPlotLoading = null; });  // a later chart asks again
  }
  return uPlotLoading;
}

// Returns the i-th palette colour (cycling).
export function colorFor(i) {
  return kPalette[((i % kPalette.length) + kPalette.length) % kPalette.length];
}

// Returns `hex` (#rrggbb) with the given alpha as an rgba() string.
export function withAlpha(hex, alpha) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${alpha})`;
}

// Returns ys smoothed by an exponential moving average of weight w (0 = none), debiased
// as TensorBoard does so the curve starts at the first value; nulls stay gaps.
export function smooth(ys, w) {
  if (!(w > 0)) return ys;
  let last = 0;
  let n = 0;
  return ys.map((y) => {
    if (y === null || y === undefined || !Number.isFinite(y)) return null;
    last = last * w + (1 - w) * y;
    n++;
    return last / (1 - w ** n);
  });
}

// One chart. set(lines, bands) draws lines [{label, color, xs, ys, width?, dash?, legend?}]
// (legend: false keeps a line, e.g. a band edge, out of the legend) and bands
// [[upperIdx, lowerIdx, fill]] (indices into lines) shading the spread between two lines.
// setAxes({xLabel, yLabel, bytes}) names the axes (bytes: y ticks in one binary unit);
// setView({log, smooth}) draws y on a log scale and/or smoothed (EMA weight 0..0.99).
// The element's data-points attribute counts the points drawn (tests read it); lines set
// before uPlot has loaded are drawn once it has.
export class CurveChart {
  constructor(el, { height = 260, xLabel = 'step', yLabel = '', bytes = false } = {}) {
    this.el = el;
    this.height = height;
    this.axes = { xLabel, yLabel, bytes };
    this.view = { log: false, smooth: 0 };
    this.lines = [];
    this.bands = [];
    this.plot = null;
    this.shape = '';
    this.resize = new ResizeObserver(() => {
      if (this.plot) this.plot.setSize({ width: this.width(), height: this.height });
    });
    this.resize.observe(el);
    this.waiting = false;  // set() was called before uPlot loaded
    this.gone = false;
    loadUPlot().then(() => {
      if (this.waiting && !this.gone) this.set(this.lines, this.bands);
    }, (e) => { el.dataset.error = e.message; });
  }

  width() {
    return Math.max(200, this.el.clientWidth || 480);
  }

  setAxes(axes) {
    this.axes = { ...this.axes, ...axes };
    if (this.plot) this.set(this.lines, this.bands);
  }

  setView(view) {
    this.view = { ...this.view, ...view };
    if (this.plot || this.lines.length) this.set(this.lines, this.bands);
  }

  set(lines, bands = []) {
    this.lines = lines;
    this.bands = bands;
    this.waiting = !uPlot;
    if (this.waiting) return;
    const { log, smooth: w } = this.view;
    const shown = lines.map((l) => {
      let ys = smooth(l.ys, w);
      if (log) ys = ys.map((y) => (y > 0 ? y : null));  // a log axis has no place for y <= 0
      return { ...l, ys };
    });
    const data = alignLines(shown);
    let drawn = 0;
    const perLine = [];
    for (let i = 1; i < data.length; i++) {
      let n = 0;
      for (const y of data[i]) if (y !== null) n++;
      perLine.push(n);
      drawn += n;
    }
    this.el.dataset.points = String(drawn);
    // The last step drawn: a long curve is bucketed to a bounded number of points, so a live
    // curve's growth shows in its last step, not in its point count.
    this.el.dataset.lastStep = String(data[0].length ? data[0][data[0].length - 1] : -1);
    this.el.dataset.colors = JSON.stringify(lines.filter((l) => l.legend !== false).map((l) => l.color));
    this.el.dataset.xlabel = this.axes.xLabel;
    this.el.dataset.ylabel = this.axes.yLabel;
    this.el.dataset.log = String(Boolean(log));
    const dots = perLine.map((n) => n > 0 && n <= kDotsUpTo);
    const shape = JSON.stringify([lines.map((l) => [l.label, l.color, l.dash]), bands, dots, this.axes, log]);
    if (this.plot && shape === this.shape) {
      this.plot.setData(data);
      return;
    }
    this.shape = shape;
    if (this.plot) this.plot.destroy();
    const yTicks = this.axes.bytes ? byteTickLabels : tickLabels;
    const opts = {
      width: this.width(),
      height: this.height,
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
      scales: { x: { time: false }, y: log ? { distr: 3 } : {} },
      // Tick labels keep every digit that tells two ticks apart (format.tickLabels).
      axes: [{ label: this.axes.xLabel, values: (u, splits) => tickLabels(splits) },
        { label: this.axes.yLabel, size: 70, values: (u, splits) => {
          const labels = yTicks(splits);
          this.el.dataset.yticks = JSON.stringify(labels);  // what the axis shows (tests read it)
          return labels;
        } }],
      series: [{ label: this.axes.xLabel }, ...lines.map((l, i) => ({
        label: l.label,
        stroke: l.color,
        width: l.width ?? 1.5,
        dash: l.dash,
        spanGaps: true,
        points: dots[i] ? { show: true, size: 7, fill: l.color, stroke: l.color } : { show: false },
        show: true,
        class: l.legend === false ? 'no-legend' : undefined,
      }))],
      bands: bands.map(([a, b, fill]) => ({ series: [a + 1, b + 1], fill })),
    };
    this.plot = new uPlot(opts, data, this.el);
  }

  destroy() {
    this.gone = true;
    this.resize.disconnect();
    if (this.plot) this.plot.destroy();
    this.plot = null;
  }
}

// "log y" and "smooth" controls applying to the charts `charts()` returns (now and after
// each redraw: the setting is kept in the returned element's state).
export function chartControls(charts, id = '') {
  const log = document.createElement('input');
  log.type = 'checkbox';
  log.className = 'chart-log';
  const slider = document.createElement('input');
  slider.type = 'range';
  slider.min = '0';
  slider.max = '0.99';
  slider.step = '0.01';
  slider.value = '0';
  slider.className = 'chart-smooth';
  slider.title = 'exponential moving average weight';
  const apply = () => {
    for (const c of charts()) c.setView({ log: log.checked, smooth: Number(slider.value) });
  };
  log.addEventListener('change', apply);
  slider.addEventListener('input', apply);
  const box = document.createElement('span');
  box.className = 'chart-controls';
  if (id) box.id = id;
  const l1 = document.createElement('label');
  l1.append(log, ' log y');
  const l2 = document.createElement('label');
  l2.append('smooth ', slider);
  box.append(l1, l2);
  box.view = () => ({ log: log.checked, smooth: Number(slider.value) });
  return box;
}
