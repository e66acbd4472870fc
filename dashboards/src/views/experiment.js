// One experiment: progress and ETA, live curves of selected runs and of each arm broken
// down by the axes it is not paired on (mean and spread), a config value against a summary
// metric, the runs table (sorted, filtered and paged by the coordinator), paired
// comparisons with 95% CIs and the window-bucket heatmap per arm (AAH Fig. 4). Each block
// is a component of views/experiment/; this module lays them out, wires the choices that
// several blocks follow (the selection, the metric, the axes arms are broken down by) and
// schedules their reads.
//
// Speed (10^5 runs, 5 * 10^6 points: every panel usable in < 1 s, no main-thread block
// over 200 ms, an idle tab < 1% of a coordinator core; docs/BENCHMARKS.md "Dashboard at
// scale"): the table holds only the pages in view (GET .../runs?limit=&offset=); the
// overlay reads only the selected runs' points of one key; the overlay's first runs, the
// arm chart and the scatter are the coordinator's panel reads (GET .../panels/NAME,
// coordinator/experiment_panels.h: bounded reads over a sample of at most kArmSampleRuns
// runs per arm or kScatterPoints dots, answered from memory for a finished experiment,
// with no SQL child process to start); the breakdown is the
// coordinator's arms per stratum (kept in its memory) unless the user breaks arms down by
// other axes; comparisons come without their per-pair lists, fetched when opened. The
// comparisons and the scatter start once the table is drawn and the arm chart once the
// overlay's metric is known, all side by side.
// A finished experiment is read once: afterwards only its counts are polled, and the
// panels are read again only when those change (a retry, a cancel).
import { h, replace, poll } from '../dom.js';
import { get, sqlInt } from '../api.js';
import { chartControls } from '../charts.js';
import { loadTiming } from '../timing.js';
import { experimentState, takeExperiment, stale } from './experiment/state.js';
import { RunGroups, bySelect } from './experiment/run_groups.js';
import { experimentHeader } from './experiment/header.js';
import { runsTable } from './experiment/runs_table.js';
import { overlaySelection } from './experiment/selection.js';
import { metricSelect, curveAxes } from './experiment/metric_select.js';
import { overlayChart } from './experiment/overlay.js';
import { armChart } from './experiment/arm_chart.js';
import { scatterPanel } from './experiment/scatter_panel.js';
import { resultsReader } from './experiment/results.js';
import { comparisonsPanel } from './experiment/comparisons.js';
import { windowBucketsPanel } from './experiment/window_buckets.js';

// Live points of the overlaid runs arrive over server-sent events (live.js); this read
// over GET is the safety net for a stream that is down or lagging.
const kLivePollMs = 5000;

export function experimentView(el, [idText], signal) {
  const id = sqlInt(idText);
  const s = experimentState();
  const err = h('p', { class: 'error' });
  const guard = (fn, out = err) => async () => {
    try {
      await fn();
    } catch (e) {
      if (e.name !== 'AbortError') out.textContent = e.message;
    }
  };
  const showError = (e) => { if (e.name !== 'AbortError') err.textContent = e.message; };
  // What every block reads: the experiment, the page's signal and state, guard(fn, out)
  // (fn with its error shown in `out`, the page's error line by default) and stale(panel).
  const ctx = { id, signal, s, guard, showError, stale: (panel, extra) => stale(s, panel, extra) };

  const groups = new RunGroups(s);
  const header = experimentHeader(id, s, () => refreshExperiment());
  const selection = overlaySelection(s, err, () => {
    table.render();
    overlay.updateStreams();
    overlay.draw();
    guard(overlay.poll)();
  }, () => table.render());
  const metric = metricSelect(s, (key) => {
    overlay.chart.setAxes(curveAxes(key));
    arms.chart.setAxes(curveAxes(key));
  }, () => {
    s.streams.clear();
    s.done = {};
    overlay.updateStreams();
    guard(overlay.poll)();
    guard(arms.refresh, arms.note)();
  });
  const by = bySelect(s, () => {
    groups.reset();
    s.done = {};
    table.render();
    overlay.draw();
    guard(arms.refresh, arms.note)();
    guard(scatter.refresh)();
  });
  const overlay = overlayChart(ctx, groups, metric.offer);
  const arms = armChart(ctx, groups, () => overlay.draw());  // the overlay's colours follow the groups
  const controls = chartControls(() => [overlay.chart, arms.chart], 'curve-controls');
  const results = resultsReader(ctx);
  const scatter = scatterPanel(ctx, groups, results);
  const table = runsTable(ctx, groups, selection.tick);
  const comparisons = comparisonsPanel(ctx, results);
  const buckets = windowBucketsPanel(ctx);

  replace(el, header.title, header.desc, err, header.card,
    h('section', { class: 'card' },
      h('div', { class: 'row' }, h('h2', {}, 'Curves'), h('label', {}, 'metric ', metric.el),
        h('label', {}, 'arms by ', by.el), controls),
      selection.row,
      h('div', { class: 'charts' }, overlay.box, arms.box)),
    scatter.card, table.card, comparisons.card, buckets.card);

  async function refreshExperiment() {
    const exp = await get(`/experiments/${id}`, signal);
    header.show(takeExperiment(s, exp));
    by.fill();
  }

  // Workers (device names) and ETA timing: only while the experiment runs.
  async function refreshTiming() {
    if (!ctx.stale('timing')) return;
    const [workerList, timing] = await Promise.all([get('/workers', signal),
      s.active ? loadTiming(id, signal) : Promise.resolve(new Map())]);
    s.workers = new Map((workerList || []).map((w) => [w.id, w]));
    s.timing = timing.get(id) || null;
    header.showEta();
    table.render();
  }

  // The comparisons and, at the foot of the page, the window buckets, read once the charts
  // above them are drawn (first time) so as not to hold those up. Both awaited at once, so
  // that neither rejects unheard when the page is left (an aborted read).
  async function refreshResults() {
    if (!ctx.stale('results')) return;
    await Promise.all([comparisons.refresh(), chartsDrawn.then(buckets.refresh)]);
  }

  // --- schedule ------------------------------------------------------------------------
  // The table and the first chart load side by side. The comparisons and the scatter start
  // once the table is drawn, the arm chart once the overlay's metric is known: each is a
  // few indexed reads (or the coordinator's answer from memory), so they no longer wait
  // for both. The window buckets wait for the charts (refreshResults).
  const slow = (activeMs, idleMs) => () => (s.active ? activeMs : idleMs);
  const started = refreshExperiment().catch(showError);
  const tableShown = started.then(guard(table.refresh));
  const keyKnown = started.then(guard(overlay.firstSelection));
  const chartShown = keyKnown.then(guard(overlay.poll));
  // A panel's poll tick, and a promise resolved once it has run (or failed) the first time.
  const ticked = (fn, out) => {
    let resolve = null;
    const once = new Promise((r) => { resolve = r; });
    return [async () => { await guard(fn, out)(); resolve(); }, once];
  };
  const [scatterTick, scatterRead] = ticked(scatter.refresh, err);
  const [armsTick, armsRead] = ticked(arms.refresh, arms.note);
  const chartsDrawn = Promise.all([scatterRead, armsRead]);
  tableShown.then(() => {
    if (signal.aborted) return;
    poll(guard(refreshResults, comparisons.body), slow(10000, 10000), signal);
    poll(scatterTick, slow(10000, 10000), signal);
  });
  keyKnown.then(() => {
    if (!signal.aborted) poll(armsTick, slow(5000, 10000), signal);
  });
  Promise.all([tableShown, chartShown]).then(() => {
    if (signal.aborted) return;
    // A finished experiment's counts change only by a retry or a resubmit: every 30 s. The
    // experiment, its table and the overlay were read just now: their next reads wait.
    const after = (f) => ({ first: f() });
    poll(guard(refreshExperiment), slow(3000, 30000), signal, after(slow(3000, 30000)));
    poll(guard(table.refresh), slow(3000, 10000), signal, after(slow(3000, 10000)));
    poll(guard(overlay.poll), kLivePollMs, signal, { first: kLivePollMs });
    poll(guard(refreshTiming), slow(3000, 10000), signal);
  });
}
