// The Curves block's "By arm: mean ± sd" chart: the mean and standard deviation across
// runs of each group (arm x the axes it is broken down by) at each step, from the
// coordinator's arms panel (GET .../panels/arms; experiment_panels.h). Past kArmSampleRuns
// runs per arm it reads a sample of the grid (each arm's share is equal; 300 runs' mean ±
// sd draws as the whole arm's, and a scan of 10^6 points takes seconds).
import { h } from '../../dom.js';
import { get } from '../../api.js';
import { CurveChart, withAlpha } from '../../charts.js';
import { groupLabel } from '../../groups.js';

const kArmSampleRuns = 300;
const kMaxPanelSample = 5000;

// How many runs the panel reads: kArmSampleRuns per arm, at most kMaxPanelSample
// (experiment_panels.h) however many arms.
export function armSample(nArms) {
  return Math.min(kMaxPanelSample, kArmSampleRuns * Math.max(1, nArms));
}

// The panel's rows [{arm, g0.., step, n, mean, sq (mean of squares)}] as one band per
// group: label -> {arm, xs, mean, lo, hi (mean ∓ sd), n (most runs at a step)}.
export function armBands(rows, keys) {
  const byGroup = new Map();
  for (const r of rows) {
    const label = groupLabel(r.arm, keys, keys.map((_, i) => r[`g${i}`]));
    if (!byGroup.has(label)) byGroup.set(label, { arm: r.arm, xs: [], mean: [], lo: [], hi: [], n: 0 });
    const a = byGroup.get(label);
    const sd = Math.sqrt(Math.max(0, r.sq - r.mean * r.mean));
    a.xs.push(r.step);
    a.mean.push(r.mean);
    a.lo.push(r.mean - sd);
    a.hi.push(r.mean + sd);
    a.n = Math.max(a.n, r.n);
  }
  return byGroup;
}

// The note beside the title: the metric, the axes, and the sample when it is one.
export function armNoteText(key, keys, nGroups, total, sample) {
  if (!nGroups) return '(no points yet)';
  return `(${key}${keys.length ? ` by arm × ${keys.join(' × ')}` : ''}${total > sample ? `; a sample of ${sample} of ${total} runs` : ''})`;
}

// ctx: {id, signal, s, stale}; groups: RunGroups; onDrawn(): the groups' colours are known
// (the overlay redraws in them).
export function armChart(ctx, groups, onDrawn) {
  const { id, signal, s } = ctx;
  const chartEl = h('div', { class: 'chart', id: 'arm-chart' });
  const note = h('span', { class: 'muted' });
  const box = h('div', {}, h('h3', {}, 'By arm: mean ± sd ', note), chartEl);
  const chart = new CurveChart(chartEl);
  signal.addEventListener('abort', () => chart.destroy());

  async function refresh() {
    if (!s.key || !ctx.stale('arms', s.key + s.by)) return;
    const keys = groups.keys();
    const total = s.exp ? s.exp.total : 0;
    const sample = armSample(s.arms.length);
    const q = new URLSearchParams({ key: s.key, runs: String(sample) });
    if (keys.length) q.set('by', keys.join(','));
    const { rows } = await get(`/experiments/${id}/panels/arms?${q}`, signal);
    const byGroup = armBands(rows, keys);
    const lines = [];
    const bands = [];
    for (const [label, a] of byGroup) {
      const c = groups.color(label, a.arm);
      const base = lines.length;
      lines.push({ label: `${label} (n=${a.n})`, color: c, xs: a.xs, ys: a.mean, width: 2 });
      lines.push({ label: `${label} +sd`, color: withAlpha(c, 0.35), xs: a.xs, ys: a.hi, width: 0.5, legend: false });
      lines.push({ label: `${label} -sd`, color: withAlpha(c, 0.35), xs: a.xs, ys: a.lo, width: 0.5, legend: false });
      bands.push([base + 1, base + 2, withAlpha(c, 0.15)]);
    }
    note.textContent = armNoteText(s.key, keys, byGroup.size, total, sample);
    chart.set(lines, bands);
    onDrawn();
  }
  return { box, chart, note, refresh };
}
