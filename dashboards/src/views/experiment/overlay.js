// The Curves block's "Selected runs (live)" chart: the chosen metric of each overlaid run,
// coloured by its group. The first runs are the coordinator's overlay panel (running,
// then succeeded, failed, lost, cancelled, queued), drawn without waiting for the table;
// points are read incrementally over GET (RunMetrics) and pushed by the live stream while
// a run trains. A finished run is read once more and then frozen.
import { h } from '../../dom.js';
import { get, query, sqlInt } from '../../api.js';
import { parseJson } from '../../format.js';
import { CurveChart } from '../../charts.js';
import { RunMetrics } from '../../metrics.js';
import { LiveFeed } from '../../live.js';
import { configValue } from '../../groups.js';
import { loading } from '../common.js';

const kAutoOverlay = 8;

// A run's overlay facts from a row carrying its config (parsed, or config_json), keeping
// the params already known (`known`: the table's row) for the keys the grid varies.
export function overlayFacts(r, varying, known) {
  const cfg = parseJson(r.config ?? r.config_json, {}) || {};
  const params = Object.fromEntries(varying.map((k) => [k, configValue(cfg, k)]));
  return { ...(known || {}), id: r.id, arm: r.arm, status: r.status, attempts: r.attempts,
    reused_from: r.reused_from, params: known && known.params ? known.params : params };
}

// ctx: {id, signal, s, guard}; groups: RunGroups; offerKeys(keys) -> whether a metric is
// now chosen (metric_select.js).
export function overlayChart(ctx, groups, offerKeys) {
  const { id, signal, s, guard } = ctx;
  const chartEl = h('div', { class: 'chart', id: 'runs-chart' });
  const box = h('div', {}, h('h3', {}, 'Selected runs (live)'), loading('curves'), chartEl);
  const chart = new CurveChart(chartEl);
  signal.addEventListener('abort', () => chart.destroy());

  const remember = (r) => s.info.set(r.id, overlayFacts(r, s.varying, s.info.get(r.id)));

  // The runs to overlay before the user ticks any, with the metric keys they logged.
  async function firstSelection() {
    const picked = (await get(`/experiments/${id}/panels/overlay?n=${kAutoOverlay}`, signal)).rows;
    for (const r of picked) remember(r);
    if (s.userSelected) return;
    s.selected = new Set(picked.map((r) => r.id));
    s.fresh = new Set(s.selected);
    if (!s.key) offerKeys([...new Set(picked.flatMap((r) => parseJson(r.keys, []) || []))].sort());
  }

  // The metric keys the overlaid runs have logged (a reused run's are its source's).
  async function loadKeys() {
    const ids = [...s.selected].map(sqlInt);
    if (!ids.length) return false;
    const rows = await query(`SELECT DISTINCT key FROM metrics WHERE run_id IN (
SELECT coalesce(reused_from, id) FROM runs WHERE id IN (${ids.join(',')})) ORDER BY key`, signal);
    return offerKeys(rows.map((r) => r.key));
  }

  // Keeps one incremental stream per selected run, for the chosen key.
  function updateStreams() {
    if (!s.key) return;
    for (const runId of [...s.streams.keys()]) if (!s.selected.has(runId)) s.streams.delete(runId);
    for (const runId of s.selected) {
      if (!s.streams.has(runId)) s.streams.set(runId, { m: new RunMetrics(runId, s.key), done: false });
    }
  }

  async function pollStreams() {
    if (!s.key && !(await loadKeys())) {
      const l = box.querySelector('.loading');
      if (l) l.textContent = s.selected.size ? 'No points yet: the selected runs have not logged a metric.'
        : 'No run selected: tick runs in the table.';
      if (!s.selected.size) draw();
      return;
    }
    updateStreams();
    const open = [...s.streams.entries()].filter(([, st]) => !st.done);
    if (!open.length) return;  // every overlaid run finished and was read: nothing to ask
    // The overlaid runs' status and attempt (they may be on no page in view), but for those
    // firstSelection has just read.
    const unread = open.filter(([runId]) => !s.fresh.has(runId));
    s.fresh.clear();
    if (unread.length) {
      const rows = await query(`SELECT id, arm, status, attempts, reused_from, config_json FROM runs
WHERE id IN (${unread.map(([runId]) => sqlInt(runId)).join(',')})`, signal);
      for (const r of rows) remember(r);
    }
    let changed = false;
    await Promise.all(open.map(async ([runId, st]) => {
      const run = s.info.get(runId);
      if (!run) return;
      const finished = run.status !== 'running' && run.status !== 'queued';
      // A reused run's points are its source's (the coordinator answers those), whatever
      // attempt count the reusing run has.
      if (!run.reused_from) st.m.expectAttempt(run.attempts);
      if (await st.m.update(signal)) changed = true;
      // One more read after the run finished picks up its last points; then it is frozen.
      if (finished) st.done = true;
    }));
    if (changed || !chart.plot) draw();
    // Follow the overlaid runs that still train.
    live.follow([...s.streams.entries()].filter(([, st]) => !st.done).map(([runId]) => runId));
  }

  const live = new LiveFeed((rows) => {
    let changed = false;
    for (const row of rows) {
      const st = s.streams.get(row[0]);
      if (st && !st.done && st.m.ingest([row])) changed = true;
    }
    if (changed) draw();
  }, () => guard(pollStreams)(), signal);

  function draw() {
    const lines = [];
    for (const [runId, st] of s.streams) {
      const run = s.info.get(runId);
      if (!run) continue;
      const d = st.m.get(s.key);
      const label = groups.of(run);
      lines.push({ label: `#${runId} ${label}`, color: groups.color(label, run.arm), xs: d.xs, ys: d.ys });
    }
    lines.sort((a, b) => a.label.localeCompare(b.label, undefined, { numeric: true }));
    box.querySelector('.loading')?.remove();
    chart.set(lines);
  }

  return { box, chart, firstSelection, updateStreams, poll: pollStreams, draw };
}
