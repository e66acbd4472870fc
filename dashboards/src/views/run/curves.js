// The run page's Curves block: one live chart per metric group (train.loss and eval.loss
// share "loss"), the first kFirstCharts of them until "show all" is pressed. Points are
// read over GET (RunMetrics) and pushed by the live stream while the run trains.
import { h, replace, poll } from '../../dom.js';
import { isBytesKey, xAxisLabel, yAxisLabel } from '../../format.js';
import { CurveChart, colorFor, chartControls } from '../../charts.js';
import { RunMetrics } from '../../metrics.js';
import { LiveFeed } from '../../live.js';
import { loading } from '../common.js';

// Live points arrive over server-sent events (live.js); this read over GET is the safety
// net for a stream that is down or lagging.
const kLivePollMs = 5000;
// Charts drawn at first; a button shows the rest (a SAF run logs a few dozen metrics).
export const kFirstCharts = 12;

// One chart per metric group: train.loss and eval.loss share the "loss" chart.
export function metricGroup(key) {
  return key.endsWith('.loss') ? 'loss' : key;
}
// The loss first, then the system series the worker samples (beside it), then the rest.
const rank = (g) => (g === 'loss' ? 0 : g.startsWith('sys.') ? 1 : 2);

// The charts for metric `keys`: groups (name -> its keys, in the order logged), every
// group name in display order, and the names drawn (all, or the first `max`).
export function chartPlan(keys, showAll, max = kFirstCharts) {
  const groups = new Map();
  for (const k of keys) {
    const g = metricGroup(k);
    if (!groups.has(g)) groups.set(g, []);
    groups.get(g).push(k);
  }
  const all = [...groups.keys()].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
  return { groups, all, names: showAll ? all : all.slice(0, max) };
}

// isActive() -> whether the run still trains; guard(fn) -> fn reporting its errors.
export function runCurves(id, signal, isActive, guard) {
  const chartNote = h('span', { class: 'muted', id: 'charts-note' });
  const moreCharts = h('button', { id: 'charts-more', hidden: true }, 'show all');
  const charts = h('div', { class: 'charts run-charts', id: 'run-charts' }, loading('metrics'));
  const chartMap = new Map();  // group name -> CurveChart
  const controls = chartControls(() => chartMap.values(), 'run-chart-controls');
  const card = h('section', { class: 'card' },
    h('div', { class: 'row' }, h('h2', {}, 'Curves'), chartNote, moreCharts, controls), charts);
  const stream = new RunMetrics(id, null);
  signal.addEventListener('abort', () => { for (const c of chartMap.values()) c.destroy(); });

  let showAllCharts = false;
  moreCharts.addEventListener('click', () => {
    showAllCharts = true;
    draw();
  });

  async function pollMetrics() {
    // A finished run is read once more (its last points) and then left alone.
    const finished = !isActive();
    if (finished && stream.finalRead) return;
    const added = await stream.update(signal);
    stream.finalRead = finished;
    if (!added && chartMap.size) return;
    draw();
  }

  function draw() {
    const { groups, all, names } = chartPlan(stream.keys(), showAllCharts);
    chartNote.textContent = all.length > names.length
      ? `showing ${names.length} of ${all.length} metrics` : all.length ? `${all.length} metrics` : '';
    moreCharts.hidden = all.length <= names.length;
    moreCharts.textContent = `show all ${all.length}`;
    if (!names.length) {
      if (!chartMap.size) {
        replace(charts, !stream.loaded ? loading('metrics')
          : h('p', { class: 'muted' }, isActive() ? 'No metrics yet.' : 'This run logged no metrics.'));
      }
      return;
    }
    for (const name of names) {
      if (!chartMap.has(name)) {
        if (!chartMap.size) charts.replaceChildren();
        const box = h('div', { class: 'chart', dataset: { group: name } });
        charts.append(h('div', {}, h('h3', {}, name), box));
        const chart = new CurveChart(box, { height: 200, xLabel: xAxisLabel(name),
          yLabel: name === 'loss' ? 'loss (nats/token)' : yAxisLabel(name), bytes: isBytesKey(name) });
        chart.setView(controls.view());
        chartMap.set(name, chart);
      }
      chartMap.get(name).set(groups.get(name).map((k, i) => ({
        label: k, color: colorFor(i), ...stream.get(k) })));
    }
  }

  const live = new LiveFeed((rows) => { if (stream.ingest(rows)) draw(); },
    guard(pollMetrics), signal);
  let started = false;
  return {
    card,
    // The run as just read: its attempt count, and whether the stream follows it. The
    // curves are read as soon as the run is known (not on the next metrics tick).
    show(attemptCount) {
      if (!started) {
        started = true;
        poll(guard(pollMetrics), kLivePollMs, signal);
      }
      stream.expectAttempt(attemptCount);
    },
    follow: () => live.follow(isActive() ? [id] : []),
  };
}
