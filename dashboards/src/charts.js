// Line charts over training steps, drawn by uPlot (canvas; handles 10^5+ points). Curves
// are aligned on a shared step axis and downsampled (align.js) so a run logged every step
// for 10^6 steps still draws in milliseconds.
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import { alignLines } from './align.js';
import { tickLabels } from './format.js';

// A line with at most this many points also draws them as dots: a metric logged once
// (eval.ppl at the end of a SAF run) is a single point, which a line alone never shows.
const kDotsUpTo = 20;
const kPalette = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b',
  '#e377c2', '#17becf', '#7f7f7f', '#bcbd22'];

// Returns the i-th palette colour (cycling).
export function colorFor(i) {
  return kPalette[((i % kPalette.length) + kPalette.length) % kPalette.length];
}

// Returns `hex` (#rrggbb) with the given alpha as an rgba() string.
export function withAlpha(hex, alpha) {
  const n = parseInt(hex.slice(1), 16);
  return `rgba(${(n >> 16) & 255},${(n >> 8) & 255},${n & 255},${alpha})`;
}

// One chart. set(lines, bands) draws lines [{label, color, xs, ys, width?, dash?, legend?}]
// (legend: false keeps a line, e.g. a band edge, out of the legend) and bands
// [[upperIdx, lowerIdx, fill]] (indices into lines) shading the spread between two lines.
// The element's data-points attribute counts the points drawn (tests read it).
export class CurveChart {
  constructor(el, { height = 260, xLabel = 'step', yLabel = '' } = {}) {
    this.el = el;
    this.height = height;
    this.xLabel = xLabel;
    this.yLabel = yLabel;
    this.plot = null;
    this.shape = '';
    this.resize = new ResizeObserver(() => {
      if (this.plot) this.plot.setSize({ width: this.width(), height: this.height });
    });
    this.resize.observe(el);
  }

  width() {
    return Math.max(240, this.el.clientWidth || 480);
  }

  set(lines, bands = []) {
    const data = alignLines(lines);
    let drawn = 0;
    const perLine = [];
    for (let i = 1; i < data.length; i++) {
      let n = 0;
      for (const y of data[i]) if (y !== null) n++;
      perLine.push(n);
      drawn += n;
    }
    this.el.dataset.points = String(drawn);
    this.el.dataset.colors = JSON.stringify(lines.filter((l) => l.legend !== false).map((l) => l.color));
    const dots = perLine.map((n) => n > 0 && n <= kDotsUpTo);
    const shape = JSON.stringify([lines.map((l) => [l.label, l.color, l.dash]), bands, dots]);
    if (this.plot && shape === this.shape) {
      this.plot.setData(data);
      return;
    }
    this.shape = shape;
    if (this.plot) this.plot.destroy();
    const opts = {
      width: this.width(),
      height: this.height,
      legend: { live: true },
      cursor: { drag: { x: true, y: false } },
      scales: { x: { time: false } },
      // Tick labels keep every digit that tells two ticks apart (format.tickLabels).
      axes: [{ label: this.xLabel, values: (u, splits) => tickLabels(splits) },
        { label: this.yLabel, size: 70, values: (u, splits) => {
          const labels = tickLabels(splits);
          this.el.dataset.yticks = JSON.stringify(labels);  // what the axis shows (tests read it)
          return labels;
        } }],
      series: [{ label: this.xLabel }, ...lines.map((l, i) => ({
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
    this.resize.disconnect();
    if (this.plot) this.plot.destroy();
    this.plot = null;
  }
}
