// One experiment: progress and ETA, live curves of selected runs and of each arm broken
// down by the axes it is not paired on (mean and spread), a config value against a summary
// metric, the runs table (sorted, filtered and paged by the coordinator), paired
// comparisons with 95% CIs and the window-bucket heatmap per arm (AAH Fig. 4).
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
import { get, query, sqlInt, sqlString } from '../api.js';
import { metricValue, meanSe, num, isBytesKey, parseJson, kStatuses, xAxisLabel, yAxisLabel, paramText } from '../format.js';
import { CurveChart, colorFor, withAlpha, chartControls } from '../charts.js';
import { drawScatter } from '../scatter.js';
import { RunMetrics } from '../metrics.js';
import { LiveFeed } from '../live.js';
import { VirtualTable } from '../table.js';
import { configValue, unpairedAxes, groupLabel, jsonPathSql, groupsFromResults } from '../groups.js';
import { progressBar, countsLine } from './experiments.js';
import { loadTiming, etaText } from '../timing.js';
import { statusBadge, actionButton, preferredKeys, pairText, deviceLabel, resultColumns,
  loading, tagEditor, noteEditor } from './common.js';
import { windowBuckets } from './heads.js';
import { tickedDiffLink } from './diff.js';

// Live points of the overlaid runs arrive over server-sent events (live.js); this read
// over GET is the safety net for a stream that is down or lagging.
const kLivePollMs = 5000;
const kMaxOverlay = 20;
const kArmSampleRuns = 300;
const kMaxPanelSample = 5000;
// Dots of the scatter: config values take few levels, so 2,000 dots show their spread
// (5,000 made the largest answer of the page, 208 KB, and its slowest query).
const kScatterPoints = 2000;
const kAutoOverlay = 8;
const kShownPairs = 200;
const kFilterDelayMs = 250;

export function experimentView(el, [idText], signal) {
  const id = sqlInt(idText);
  const s = {
    exp: null, arms: [], workers: new Map(), timing: null,
    varying: [],  // the config keys the grid varies (experiment.varying): the table's columns
    pairBy: ['seed'],  // the grid's pair_by: names of the values in each pair_key
    gridArms: {},
    info: new Map(),  // run id -> {id, arm, status, attempts, reused_from, params}
    selected: new Set(), userSelected: false, key: null, streams: new Map(),
    fresh: new Set(),  // overlaid runs whose status was read by firstSelection just now
    summaryKeys: null, by: 'auto', countsSig: '', active: true, done: {},
  };

  const err = h('p', { class: 'error' });
  const title = h('h1', { class: 'title' }, `Experiment #${id}`);
  const desc = h('p', { class: 'muted' });
  const progress = h('div', { class: 'progress-wide' });
  const counts = h('div', {});
  const etaEl = h('span', { id: 'eta' });
  const msg = h('span', { class: 'msg', id: 'exp-msg' });
  const tagsEl = h('span', { id: 'exp-tags' });
  const noteEl = h('div', { id: 'exp-note' });
  const keySelect = h('select', { id: 'metric-key' });
  const bySelect = h('select', { id: 'arm-by', title: 'runs that differ in these axes are never pooled' });
  const runsChartEl = h('div', { class: 'chart', id: 'runs-chart' });
  const armChartEl = h('div', { class: 'chart', id: 'arm-chart' });
  const armNote = h('span', { class: 'muted' });
  const clearButton = h('button', { id: 'clear-selection', title: 'untick every run' }, 'clear selection');
  const selNote = h('span', { class: 'muted', id: 'selection-note' }, 'tick runs in the table to overlay them');
  const selDiff = h('span', { id: 'selection-diff' });  // two ticked runs: their config diff
  const filterInput = h('input', { type: 'search', placeholder: 'filter: arm, worker, #id, tag, train.lr<=1e-3; seed=1',
    id: 'runs-filter' });
  const statusSelect = h('select', { id: 'status-filter' }, h('option', { value: '' }, 'all statuses'),
    kStatuses.map((st) => h('option', { value: st }, st)));
  const tableEl = h('div', { id: 'runs-table' }, loading('runs'));
  const scatterX = h('select', { id: 'scatter-x' });
  const scatterY = h('select', { id: 'scatter-y' });
  const scatterEl = h('div', { class: 'chart', id: 'scatter' });
  const breakdown = h('div', { id: 'breakdown', class: 'scroll-x' });
  const results = h('div', { id: 'results', class: 'scroll-x' }, loading('results'));
  const buckets = h('div', { id: 'window-buckets', class: 'scroll-x' }, loading());
  const runsChartBox = h('div', {}, h('h3', {}, 'Selected runs (live)'), loading('curves'), runsChartEl);
  const cancelButton = actionButton('cancel experiment', `/experiments/${id}/cancel`, msg,
    () => refreshExperiment(), () => {
      const c = (s.exp && s.exp.counts) || {};
      return `Cancel experiment #${id} (${s.exp ? s.exp.name : ''})? ` +
        `${c.queued || 0} queued and ${c.running || 0} running runs stop; finished runs keep their results.`;
    });
  cancelButton.hidden = true;

  const runsChart = new CurveChart(runsChartEl);
  const armChart = new CurveChart(armChartEl);
  const controls = chartControls(() => [runsChart, armChart], 'curve-controls');
  signal.addEventListener('abort', () => { runsChart.destroy(); armChart.destroy(); });

  replace(el, title, desc, err,
    h('section', { class: 'card' }, progress, h('div', { class: 'row' }, counts,
      h('span', {}, 'ETA ', etaEl), h('span', { class: 'spacer' }), cancelButton, msg),
      h('div', { class: 'row' }, h('span', { class: 'muted' }, 'tags'), tagsEl), noteEl),
    h('section', { class: 'card' },
      h('div', { class: 'row' }, h('h2', {}, 'Curves'), h('label', {}, 'metric ', keySelect),
        h('label', {}, 'arms by ', bySelect), controls),
      h('div', { class: 'row' }, selNote, clearButton, selDiff),
      h('div', { class: 'charts' },
        runsChartBox,
        h('div', {}, h('h3', {}, 'By arm: mean ± sd ', armNote), armChartEl))),
    h('section', { class: 'card' },
      h('div', { class: 'row' }, h('h2', {}, 'Config value vs metric'), h('label', {}, 'x ', scatterX),
        h('label', {}, 'y ', scatterY)),
      h('div', { class: 'charts' }, scatterEl, breakdown)),
    h('section', { class: 'card' },
      h('div', { class: 'row' }, h('h2', {}, 'Runs'), filterInput, statusSelect), tableEl),
    h('section', { class: 'card' }, h('h2', {}, 'Comparisons'), results),
    h('section', { class: 'card' }, h('h2', {}, 'Selected windows by arm'), buckets));

  // The axes arms are broken down by (bySelect): "auto" = every unpaired axis.
  const byKeys = () => {
    if (s.by === 'arm') return [];
    if (s.by === 'auto') return unpairedAxes(s.varying, s.pairBy, s.gridArms);
    return [s.by];
  };
  const groupOf = (run) => {
    const keys = byKeys();
    return groupLabel(run.arm, keys, keys.map((k) => (run.params ? run.params[k] : null)));
  };
  // Colours: one per group, in a stable order (arm order, then values as they come).
  const groupColors = new Map();
  const colorOf = (label, arm) => {
    if (!byKeys().length) return colorFor(Math.max(0, s.arms.indexOf(arm)));
    if (!groupColors.has(label)) groupColors.set(label, colorFor(groupColors.size));
    return groupColors.get(label);
  };

  let table = null;

  // --- runs table (server pages) -------------------------------------------------------
  async function loadPage({ offset, limit, sort, desc }) {
    const q = new URLSearchParams({ offset: String(offset), limit: String(limit), sort, desc: desc ? '1' : '0' });
    if (statusSelect.value) q.set('status', statusSelect.value);
    const f = filterInput.value.trim();
    if (f) q.set('q', f);
    if (!s.summaryKeys) q.set('keys', '1');
    const r = await get(`/experiments/${id}/runs?${q}`, signal);
    if (r.summary_keys) s.summaryKeys = r.summary_keys;
    if (Array.isArray(r.varying)) s.varying = r.varying;
    for (const row of r.runs) s.info.set(row.id, row);
    return { rows: r.runs, matched: r.matched, total: r.total };
  }

  function buildTable() {
    const metricKeys = preferredKeys(s.summaryKeys || [], 4);
    const cols = [
      { label: '', width: '28px', cell: (r) => h('input', {
        type: 'checkbox', checked: s.selected.has(r.id), title: 'overlay this run',
        onchange: (e) => toggleRun(r.id, e.target.checked) }) },
      { label: 'run', width: '70px', sort: 'id',
        cell: (r) => h('a', { href: `#/runs/${r.id}` }, `#${r.id}`) },
      { label: 'arm', width: `minmax(${armColumnWidth(s.arms, tableEl)}px,2fr)`, sort: 'arm',
        // The colour of the run's group (arm x the axes it is broken down by), as in the charts.
        cell: (r) => h('span', { title: groupOf(r) }, h('span', { class: 'swatch',
          style: { background: colorOf(groupOf(r), r.arm) } }), r.arm) },
      { label: 'status', width: '100px', sort: 'status', cell: (r) => statusBadge(r.status) },
      { label: 'attempt', width: '70px', sort: 'attempts', cell: (r) => r.attempts, cls: 'num' },
      { label: 'worker', width: 'minmax(80px,1fr)', sort: 'worker',
        cell: (r) => h('span', { title: r.worker || '' }, r.worker_name || r.worker || '—') },
      { label: 'device', width: '90px', sort: 'device',
        cell: (r) => (r.attempts ? deviceLabel(r.devices, s.workers.get(r.worker)) : '—') },
      { label: 'pair', width: 'minmax(80px,1fr)', sort: 'pair',
        cell: (r) => pairText(r.pair_key, s.pairBy) },
      // The values the grid varies tell the runs apart (not the config hash).
      ...s.varying.map((k) => ({
        label: k, width: 'minmax(70px,110px)', cls: 'param', sort: `param:${k}`, title: `sort by ${k}`,
        cell: (r) => paramText(r.params ? r.params[k] : undefined),
      })),
      ...metricKeys.map((k) => ({
        label: k, width: '100px', cls: 'num', sort: `summary:${k}`, title: `sort by ${k}`,
        cell: (r) => metricValue(k, r.summary ? r.summary[k] : null),
      })),
      { label: 'tags', width: 'minmax(60px,1fr)', sort: 'tags',
        cell: (r) => h('span', { class: 'tags-cell', title: r.note || '' }, (r.tags || []).join(' ') || (r.note ? '✎' : '')) },
    ];
    table = new VirtualTable(tableEl, cols, {
      load: loadPage,
      rowAttrs: (r) => ({ dataset: { runId: r.id, status: r.status },
        class: `vt-row ${s.selected.has(r.id) ? 'selected' : ''}` }),
    });
  }

  // Filtering is the coordinator's: a keystroke waits kFilterDelayMs for the next one.
  let filterTimer = 0;
  const refilter = () => {
    clearTimeout(filterTimer);
    filterTimer = setTimeout(() => table && table.reload().catch(showError), kFilterDelayMs);
  };
  filterInput.addEventListener('input', refilter);
  statusSelect.addEventListener('change', () => table && table.reload().catch(showError));

  function toggleRun(runId, on) {
    if (!s.userSelected) {
      // The first tick replaces the automatic choice, so that every ticked run overlays
      // (an untick keeps the rest of it).
      s.userSelected = true;
      if (on) s.selected.clear();
    }
    if (on && s.selected.size >= kMaxOverlay) {
      err.textContent = `at most ${kMaxOverlay} runs overlay at once (clear selection to start again)`;
      table.render();
      return;
    }
    err.textContent = '';
    if (on) s.selected.add(runId); else s.selected.delete(runId);
    afterSelection();
  }
  clearButton.addEventListener('click', () => {
    s.userSelected = true;
    s.selected.clear();
    err.textContent = '';
    afterSelection();
  });
  function afterSelection() {
    selNote.textContent = s.userSelected
      ? `${s.selected.size} of at most ${kMaxOverlay} runs overlaid` : 'tick runs in the table to overlay them';
    replace(selDiff, s.userSelected ? tickedDiffLink([...s.selected]) : null);
    if (table) table.render();
    updateStreams();
    drawRuns();
    guard(pollStreams)();
  }

  // The first chart does not wait for the table: the coordinator's overlay panel picks the
  // runs to overlay (running, then succeeded, failed, lost, cancelled, queued), with the
  // metric keys they logged (the arms, for colours, are the experiment's).
  async function firstSelection() {
    const picked = (await get(`/experiments/${id}/panels/overlay?n=${kAutoOverlay}`, signal)).rows;
    for (const r of picked) rememberRun(r);
    if (s.userSelected) return;
    s.selected = new Set(picked.map((r) => r.id));
    s.fresh = new Set(s.selected);
    if (!s.key) showKeys([...new Set(picked.flatMap((r) => parseJson(r.keys, []) || []))].sort());
  }

  // Keeps a run's overlay facts from a row carrying its config (parsed, or config_json).
  function rememberRun(r) {
    const cfg = parseJson(r.config ?? r.config_json, {}) || {};
    const params = Object.fromEntries(s.varying.map((k) => [k, configValue(cfg, k)]));
    const known = s.info.get(r.id);
    s.info.set(r.id, { ...(known || {}), id: r.id, arm: r.arm, status: r.status, attempts: r.attempts,
      reused_from: r.reused_from, params: known && known.params ? known.params : params });
  }

  function showExperiment(exp) {
    s.exp = exp;
    const grid = parseJson(exp.grid, {}) || {};
    if (Array.isArray(grid.pair_by)) s.pairBy = grid.pair_by;
    s.gridArms = grid.arms || {};
    s.arms = [...new Set([...s.arms, ...Object.keys(s.gridArms),
      ...(Array.isArray(exp.arms) ? exp.arms : [])])].sort();
    title.textContent = `Experiment #${id} · ${exp.name}`;
    title.title = exp.name;
    if (Array.isArray(exp.varying)) s.varying = exp.varying;
    if (!tagsEl.firstChild) {
      replace(tagsEl, tagEditor(`/experiments/${id}`, exp.tags || [], msg));
      replace(noteEl, noteEditor(`/experiments/${id}`, exp.note || '', msg));
    }
    desc.textContent = grid.description || '';
    const c = exp.counts || {};
    replace(progress, progressBar(c, exp.total));
    replace(counts, countsLine(c), h('span', { class: 'muted' }, ` of ${exp.total}`));
    s.active = (c.queued || 0) + (c.running || 0) > 0;
    // Cancel is offered only while something can be cancelled.
    cancelButton.hidden = !s.active;
    etaEl.textContent = etaText(c, s.timing);
    s.countsSig = JSON.stringify([c, exp.total]);
    fillBySelect();
  }

  function fillBySelect() {
    const auto = unpairedAxes(s.varying, s.pairBy, s.gridArms);
    const opts = [['auto', auto.length ? `arm × ${auto.join(' × ')}` : 'arm (no unpaired axis)'],
      ['arm', 'arm only'], ...s.varying.filter((k) => !auto.includes(k) || auto.length > 1).map((k) => [k, `arm × ${k}`])];
    const sig = JSON.stringify(opts);
    if (bySelect.dataset.sig === sig) return;
    bySelect.dataset.sig = sig;
    replace(bySelect, opts.map(([v, label]) => h('option', { value: v, selected: v === s.by }, label)));
  }
  bySelect.addEventListener('change', () => {
    s.by = bySelect.value;
    groupColors.clear();
    s.done = {};
    if (table) table.render();
    drawRuns();
    guard(refreshArms, armNote)();
    guard(refreshScatter)();
  });

  // A panel is read again only while the experiment is active or when its counts changed
  // since that panel's last read (a finished experiment's idle tab asks for nothing else).
  const stale = (panel, extra = '') => {
    const sig = s.countsSig + extra;
    if (!s.active && s.done[panel] === sig) return false;
    s.done[panel] = sig;
    return true;
  };
  const showError = (e) => { if (e.name !== 'AbortError') err.textContent = e.message; };

  async function refreshExperiment() {
    const exp = await get(`/experiments/${id}`, signal);
    showExperiment(exp);
  }

  // The first page is asked for at once, beside the experiment's own answer.
  const firstPage = loadPage({ offset: 0, limit: 100, sort: 'idx', desc: false });
  firstPage.catch(() => {});  // awaited below; a page left early must not log a rejection
  async function refreshTable() {
    if (!table) {
      // The first page tells which summary keys the columns show.
      const first = await firstPage;
      s.arms = [...new Set([...s.arms, ...first.rows.map((r) => r.arm)])].sort();
      buildTable();
      table.seed(first);
      s.done.table = s.countsSig;
      return;
    }
    if (!stale('table')) return;
    await table.refreshVisible();
  }

  // Workers (device names) and ETA timing: only while the experiment runs.
  async function refreshTiming() {
    if (!stale('timing')) return;
    const [workerList, timing] = await Promise.all([get('/workers', signal),
      s.active ? loadTiming(id, signal) : Promise.resolve(new Map())]);
    s.workers = new Map((workerList || []).map((w) => [w.id, w]));
    s.timing = timing.get(id) || null;
    if (s.exp) etaEl.textContent = etaText(s.exp.counts || {}, s.timing);
    if (table) table.render();
  }

  // --- curves ------------------------------------------------------------------------
  // The metric keys the overlaid runs have logged (a reused run's are its source's).
  async function loadKeys() {
    const ids = [...s.selected].map(sqlInt);
    if (!ids.length) return false;
    const rows = await query(`SELECT DISTINCT key FROM metrics WHERE run_id IN (
SELECT coalesce(reused_from, id) FROM runs WHERE id IN (${ids.join(',')})) ORDER BY key`, signal);
    return showKeys(rows.map((r) => r.key));
  }
  // Offers `keys` (sorted) in the metric select and picks the first curve to draw.
  function showKeys(keys) {
    if (!keys.length) return false;
    const preferred = ['train.loss', 'eval.loss', 'eval.ppl'].find((k) => keys.includes(k)) || keys[0];
    replace(keySelect, keys.map((k) => h('option', { value: k, selected: k === preferred }, k)));
    setKey(preferred);
    return true;
  }
  function setKey(key) {
    s.key = key;
    const axes = { xLabel: xAxisLabel(key), yLabel: yAxisLabel(key), bytes: isBytesKey(key) };
    runsChart.setAxes(axes);
    armChart.setAxes(axes);
  }
  keySelect.addEventListener('change', () => {
    setKey(keySelect.value);
    s.streams.clear();
    s.done = {};
    updateStreams();
    guard(pollStreams)();
    guard(refreshArms, armNote)();
  });

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
      const l = runsChartBox.querySelector('.loading');
      if (l) l.textContent = s.selected.size ? 'No points yet: the selected runs have not logged a metric.'
        : 'No run selected: tick runs in the table.';
      if (!s.selected.size) drawRuns();
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
      for (const r of rows) rememberRun(r);
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
    if (changed || !runsChart.plot) drawRuns();
    // Follow the overlaid runs that still train.
    live.follow([...s.streams.entries()].filter(([, st]) => !st.done).map(([runId]) => runId));
  }

  const live = new LiveFeed((rows) => {
    let changed = false;
    for (const row of rows) {
      const st = s.streams.get(row[0]);
      if (st && !st.done && st.m.ingest([row])) changed = true;
    }
    if (changed) drawRuns();
  }, () => guard(pollStreams)(), signal);  // guard is defined further down

  function drawRuns() {
    const lines = [];
    for (const [runId, st] of s.streams) {
      const run = s.info.get(runId);
      if (!run) continue;
      const d = st.m.get(s.key);
      const label = groupOf(run);
      lines.push({ label: `#${runId} ${label}`, color: colorOf(label, run.arm), xs: d.xs, ys: d.ys });
    }
    lines.sort((a, b) => a.label.localeCompare(b.label, undefined, { numeric: true }));
    runsChartBox.querySelector('.loading')?.remove();
    runsChart.set(lines);
  }

  // Mean and standard deviation across runs of each group (arm x unpaired axes) at each
  // step, the coordinator's arms panel. Past kArmSampleRuns runs per arm it reads a sample
  // of the grid (experiment_panels.h: each arm's share is equal; 300 runs' mean ± sd draws
  // as the whole arm's, and a scan of 10^6 points takes seconds).
  async function refreshArms() {
    if (!s.key || !stale('arms', s.key + s.by)) return;
    const keys = byKeys();
    const total = s.exp ? s.exp.total : 0;
    // At most kMaxPanelSample runs (experiment_panels.h) however many arms.
    const sample = Math.min(kMaxPanelSample, kArmSampleRuns * Math.max(1, s.arms.length));
    const q = new URLSearchParams({ key: s.key, runs: String(sample) });
    if (keys.length) q.set('by', keys.join(','));
    const { rows } = await get(`/experiments/${id}/panels/arms?${q}`, signal);
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
    const lines = [];
    const bands = [];
    for (const [label, a] of byGroup) {
      const c = colorOf(label, a.arm);
      const base = lines.length;
      lines.push({ label: `${label} (n=${a.n})`, color: c, xs: a.xs, ys: a.mean, width: 2 });
      lines.push({ label: `${label} +sd`, color: withAlpha(c, 0.35), xs: a.xs, ys: a.hi, width: 0.5, legend: false });
      lines.push({ label: `${label} -sd`, color: withAlpha(c, 0.35), xs: a.xs, ys: a.lo, width: 0.5, legend: false });
      bands.push([base + 1, base + 2, withAlpha(c, 0.15)]);
    }
    armNote.textContent = !byGroup.size ? '(no points yet)'
      : `(${s.key}${keys.length ? ` by arm × ${keys.join(' × ')}` : ''}${total > sample ? `; a sample of ${sample} of ${total} runs` : ''})`;
    armChart.set(lines, bands);
    drawRuns();  // the overlay's colours follow the groups
  }

  // --- a config value against a summary metric ---------------------------------------------
  function fillScatterSelects() {
    const xs = s.varying.length ? s.varying : [];
    const ys = s.summaryKeys || [];
    const sig = JSON.stringify([xs, ys]);
    if (scatterX.dataset.sig === sig) return;
    scatterX.dataset.sig = sig;
    const unpaired = unpairedAxes(s.varying, s.pairBy, s.gridArms);
    const x0 = scatterX.value || unpaired[0] || xs[0];
    const y0 = scatterY.value || preferredKeys(ys, 1)[0];
    replace(scatterX, xs.map((k) => h('option', { value: k, selected: k === x0 }, k)));
    replace(scatterY, ys.map((k) => h('option', { value: k, selected: k === y0 }, k)));
  }
  for (const sel of [scatterX, scatterY]) {
    sel.addEventListener('change', () => { s.done.scatter = ''; guard(refreshScatter)(); });
  }

  // One dot per run (a sample past kScatterPoints, sample.js) and, beside it, the metric's
  // mean ± SE per group: the arms broken down by the chosen axes, as the stored results
  // give them when they break them down by the same axes, else computed from the runs'
  // configs (a grouped scan of every run).
  async function refreshScatter() {
    fillScatterSelects();
    const x = scatterX.value;
    const y = scatterY.value;
    if (!x || !y) {
      replace(scatterEl, h('p', { class: 'muted' }, !y ? 'No summary metric yet.' : 'The grid varies no config value.'));
      replace(breakdown);
      return;
    }
    if (!stale('scatter', x + y + s.by)) return;
    const keys = byKeys();
    const gcols = keys.map((k, i) => `, json_extract(r.config_json, ${jsonPathSql(k)}) AS g${i}`).join('');
    const ggrp = keys.map((_, i) => `, g${i}`).join('');
    const byQuery = async () => (await query(`SELECT r.arm AS arm${gcols}, count(s.value) AS n,
  avg(s.value) AS mean, avg(s.value * s.value) AS sq
FROM runs r JOIN summaries s ON s.run_id = r.id AND s.key = ${sqlString(y)}
WHERE r.experiment_id = ${id} AND r.status = 'succeeded' AND s.value IS NOT NULL
GROUP BY r.arm${ggrp} ORDER BY r.arm${ggrp}`, signal)).map((g) => ({
      arm: g.arm, values: keys.map((_, i) => g[`g${i}`]), n: g.n, mean: g.mean,
      se: g.n > 1 ? Math.sqrt(Math.max(0, (g.sq - g.mean * g.mean) * g.n / (g.n - 1)) / g.n) : null }));
    const dotsQuery = new URLSearchParams({ x, y, n: String(kScatterPoints) });
    if (keys.length) dotsQuery.set('by', keys.join(','));
    const [dots, groups] = await Promise.all([
      get(`/experiments/${id}/panels/scatter?${dotsQuery}`, signal).then((a) => a.rows),
      // A finished experiment's results are stored (and kept in the coordinator's memory);
      // an unfinished one's are computed per request, seconds at 10^5 runs.
      s.active ? byQuery()
        : readResults().then((r) => groupsFromResults(r, keys, y), () => null).then((g) => g || byQuery()),
    ]);
    const labelOf = (r) => groupLabel(r.arm, keys, keys.map((_, i) => r[`g${i}`]));
    drawScatter(scatterEl, dots.map((r) => {
      const label = labelOf(r);
      return { x: r.x, y: r.y, label, color: colorOf(label, r.arm) };
    }), { xLabel: x, yLabel: yAxisLabel(y) });
    replace(breakdown, h('table', { class: 'grid-table', id: 'breakdown-table' },
      h('thead', {}, h('tr', {}, h('th', {}, 'arm'), keys.map((k) => h('th', {}, k)),
        h('th', { class: 'num' }, 'n'), h('th', { class: 'num' }, `${y} mean ± se`))),
      h('tbody', {}, groups.map((g) => {
        const label = groupLabel(g.arm, keys, g.values);
        return h('tr', { dataset: { group: label } },
          h('td', {}, h('span', { class: 'swatch', style: { background: colorOf(label, g.arm) } }), g.arm),
          g.values.map((v) => h('td', {}, paramText(v))),
          h('td', { class: 'num' }, g.n),
          h('td', { class: 'num' }, meanSe(y, g.mean, g.se, g.n)));
      }))));
  }

  // --- comparisons and window buckets -------------------------------------------------
  let pairsAnswer = null;  // GET results?per_pair=1, read when a comparison's pairs open
  const loadPairs = () => {
    if (!pairsAnswer) pairsAnswer = get(`/experiments/${id}/results?per_pair=1`, signal);
    return pairsAnswer;
  };
  // GET .../results without per-pair lists: a finished experiment's read once per state of
  // its counts for the comparisons and the breakdown both; an unfinished one's on each call.
  let resultsRead = null;  // {sig, answer: Promise}
  function readResults() {
    if (!resultsRead || resultsRead.sig !== s.countsSig || s.active) {
      const answer = get(`/experiments/${id}/results`, signal);
      answer.catch(() => { if (resultsRead && resultsRead.answer === answer) resultsRead = null; });
      resultsRead = { sig: s.countsSig, answer };
    }
    return resultsRead.answer;
  }
  async function refreshResults() {
    if (!stale('results')) return;
    pairsAnswer = null;
    // The window buckets, at the foot of the page, are read once the charts above them
    // are drawn (first time) so as not to hold those up. Both awaited at once, so that
    // neither rejects unheard when the page is left (an aborted read).
    await Promise.all([
      readResults().then((r) => replace(results, resultsTables(r || {}, s.pairBy, loadPairs))),
      chartsDrawn.then(() => query(`
SELECT r.arm AS arm, hm.window AS window, count(*) AS n
FROM head_maps hm JOIN runs r ON r.id = hm.run_id
WHERE r.experiment_id = ${id} AND hm.window IS NOT NULL
  AND hm.attempt = (SELECT max(attempt) FROM head_maps h2 WHERE h2.run_id = hm.run_id)
GROUP BY r.arm, hm.window`, signal)).then((rows) => replace(buckets, rows.length ? windowBuckets(rows)
        : h('p', { class: 'muted' }, 'No head windows recorded for this experiment (AAH runs record them).'))),
    ]);
  }

  // --- schedule ------------------------------------------------------------------------
  const guard = (fn, out = err) => async () => {
    try {
      await fn();
    } catch (e) {
      if (e.name !== 'AbortError') out.textContent = e.message;
    }
  };
  // The table and the first chart load side by side. The comparisons and the scatter start
  // once the table is drawn, the arm chart once the overlay's metric is known: each is a
  // few indexed reads (or the coordinator's answer from memory), so they no longer wait
  // for both. The window buckets wait for the charts (refreshResults).
  const slow = (activeMs, idleMs) => () => (s.active ? activeMs : idleMs);
  const started = refreshExperiment().catch(showError);
  const tableShown = started.then(guard(refreshTable));
  const keyKnown = started.then(guard(firstSelection));
  const chartShown = keyKnown.then(guard(pollStreams));
  // A panel's poll tick, and a promise resolved once it has run (or failed) the first time.
  const ticked = (fn, out) => {
    let resolve = null;
    const once = new Promise((r) => { resolve = r; });
    return [async () => { await guard(fn, out)(); resolve(); }, once];
  };
  const [scatterTick, scatterRead] = ticked(refreshScatter, err);
  const [armsTick, armsRead] = ticked(refreshArms, armNote);
  const chartsDrawn = Promise.all([scatterRead, armsRead]);
  tableShown.then(() => {
    if (signal.aborted) return;
    poll(guard(refreshResults, results), slow(10000, 10000), signal);
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
    poll(guard(refreshTable), slow(3000, 10000), signal, after(slow(3000, 10000)));
    poll(guard(pollStreams), kLivePollMs, signal, { first: kLivePollMs });
    poll(guard(refreshTiming), slow(3000, 10000), signal);
  });
}

// Arms (mean ± SE per metric, a metric per row so that 40 SAF metrics do not make the page
// wide) and comparisons (paired statistic with its unit, n, mean ± SE, 95% CI, which side
// is better and what the interval says).
// loadPairs() -> Promise of the results with per_pair lists (asked for when a comparison's
// pairs are opened: at 10^5 runs they are most of the answer).
function resultsTables(r, pairBy, loadPairs) {
  const arms = r.arms || [];
  const comps = r.comparisons || [];
  const columns = resultColumns(arms.flatMap((a) => Object.keys(a.metrics || {})));
  const cell = (key, m) => (m ? meanSe(key, m.mean, m.se, m.n) : '—');
  const armTable = h('table', { class: 'grid-table', id: 'arms-table' },
    h('thead', {}, h('tr', {}, h('th', {}, 'metric'),
      arms.map((a) => h('th', { class: 'num', dataset: { arm: a.arm, stratum: stratumText(a.by) } }, a.arm,
        stratumText(a.by) ? h('div', { class: 'stratum' }, stratumText(a.by)) : null,
        h('div', { class: 'muted' }, `n ${a.n}, ${a.succeeded} ok`))))),
    h('tbody', {}, columns.map((c) => h('tr', { dataset: { metric: c.key } }, h('th', {}, c.key),
      arms.map((a) => (c.unmeasured
        ? h('td', { class: 'muted', title: 'no FLOPs counter was read' }, 'unmeasured')
        : h('td', { class: 'num' }, cell(c.key, (a.metrics || {})[c.key]))))))));
  const unit = (c) => (c.unit === '%' ? ' %' : c.unit === 'x' ? '×' : '');
  const compTable = comps.length ? h('table', { class: 'grid-table', id: 'comparisons' },
    h('thead', {}, h('tr', {}, ['comparison', 'treatment vs baseline', 'metric', 'stat', 'pairs',
      'mean ± se', '95% CI', 'better', 'reading', 'per pair'].map((c) => h('th', {}, c)))),
    h('tbody', {}, comps.map((c) => {
      // The coordinator's interval (exact t quantile; none for a median or under 2 pairs).
      const ci = c.ci95 ? [c.ci95.lo, c.ci95.hi] : null;
      const nPairs = c.n_pairs ?? (c.per_pair || []).length;
      const neutralValue = c.neutral ?? neutral(c.stat);
      const signif = ci && (ci[0] > neutralValue || ci[1] < neutralValue);
      return h('tr', { dataset: { comparison: c.name } },
        h('td', {}, c.name), h('td', {}, `${c.treatment} vs ${c.baseline}`), h('td', {}, c.metric),
        h('td', {}, c.stat + (c.unit ? ` (${c.unit})` : '')), h('td', { class: 'num' }, c.n),
        h('td', { class: 'num' }, c.n ? `${meanSe('', c.mean, c.se, c.n)}${unit(c)}` : '—'),
        h('td', { class: `num ci ${signif ? 'signif' : ''}` }, ci ? `[${num(ci[0])}, ${num(ci[1])}]${unit(c)}` : '—'),
        h('td', {}, c.better ? `${c.better}` : '—'),
        h('td', { class: 'verdict' }, c.verdict || c.note || (c.n < 2 ? 'too few pairs' : '—')),
        h('td', {}, nPairs ? pairsDetails(c, nPairs, unit(c), pairBy, loadPairs, r.experiment) : '—'));
    }))) : h('p', { class: 'muted' }, 'No comparisons in this grid.');
  return [arms.length ? armTable : h('p', { class: 'muted' }, 'No results yet.'), compTable];
}

// The arm column's least width in px: the longest arm name whole beside its swatch (cell
// padding 16 px, swatch 15 px), within [120, 360]; at 1400 px a 2fr share alone cut
// 28-character names.
function armColumnWidth(arms, el) {
  const ctx = document.createElement('canvas').getContext('2d');
  ctx.font = getComputedStyle(el).font;
  const text = Math.max(0, ...arms.map((a) => ctx.measureText(a).width));
  return Math.round(Math.min(360, Math.max(120, text + 16 + 15 + 4)));
}

// "train.lr=0.001 · seed=1": the stratum an arm or comparison entry stands for ("" for none).
function stratumText(by) {
  return Object.entries(by || {}).map(([k, v]) => `${k}=${paramText(v)}`).join(' · ');
}

// A comparison's pairs, built when opened: the first kShownPairs of them, each with its
// two runs (10^5 pairs as elements would be most of the page).
function pairsDetails(c, nPairs, unitText, pairBy, loadPairs, experiment) {
  const list = h('div', { class: 'pairs-box' }, loading('pairs'));
  const box = h('details', { class: 'pairs-details' }, h('summary', {}, `${nPairs} pairs`), list);
  box.addEventListener('toggle', async () => {
    if (!box.open || box.dataset.loaded) return;
    box.dataset.loaded = '1';
    try {
      const all = await loadPairs();
      const mine = ((all.comparisons || []).find((x) => x.name === c.name) || {}).per_pair || [];
      const shown = mine.slice(0, kShownPairs);
      replace(list, h('ul', { class: 'pairs' }, shown.map((p) => h('li', {},
        h('a', { href: `#/runs/${p.treatment_run}` }, `#${p.treatment_run}`), ' vs ',
        h('a', { href: `#/runs/${p.baseline_run}` }, `#${p.baseline_run}`),
        `: ${num(p.value)}${unitText} `, h('span', { class: 'muted' }, pairText(p.pair_key, pairBy))))),
      mine.length > shown.length ? h('p', { class: 'muted' },
        `the first ${shown.length} of ${mine.length} pairs; every one: headlab results ${experiment ?? ''} --json`) : null);
    } catch (e) {
      box.dataset.loaded = '';
      replace(list, h('p', { class: 'error' }, e.message));
    }
  });
  return box;
}

// The value of a statistic meaning "no difference".
function neutral(stat) {
  return stat === 'ratio' || stat === 'speedup' ? 1 : 0;
}
