// One experiment: progress and ETA, live curves of selected runs and of each arm (mean and
// spread), the runs table (sort, filter, virtualised), paired comparisons with 95% CIs and
// the window-bucket heatmap per arm (AAH Fig. 4).
//
// Speed (issue 9: 10^4 runs, 10^6 points, usable in < 1 s): the table renders only the rows
// in view; the first chart reads only the few selected runs' points of one key; the
// arm chart is one grouped SQL aggregate that arrives after the table and first chart.
import { h, replace, poll } from '../dom.js';
import { get, query, sqlInt, sqlString } from '../api.js';
import { num, metricValue, bytes, isBytesKey, parseJson, kStatuses } from '../format.js';
import { CurveChart, colorFor, withAlpha } from '../charts.js';
import { RunMetrics } from '../metrics.js';
import { LiveFeed } from '../live.js';
import { VirtualTable } from '../table.js';
import { progressBar, countsLine } from './experiments.js';
import { loadTiming, etaText } from '../timing.js';
import { statusBadge, actionButton, ci95, keyMetrics, pairText, deviceLabel, resultColumns,
  loading, tagEditor, noteEditor } from './common.js';
import { windowBuckets } from './heads.js';

// Live points of the overlaid runs arrive over server-sent events (live.js); this read
// over GET is the safety net for a stream that is down or lagging.
const kLivePollMs = 5000;
const kMaxOverlay = 12;
const kArmSampleRuns = 1000;
const kFirstPage = 50;
const kAutoOverlay = 8;
// Which runs overlay first when the user has ticked none: running, then finished ones.
const kOverlayOrder = { running: 0, succeeded: 1, failed: 2, lost: 3, cancelled: 4, queued: 5 };

export function experimentView(el, [idText], signal) {
  const id = sqlInt(idText);
  const s = {
    exp: null, runs: [], arms: [], devices: new Map(), timing: null,
    gridArms: [],
    varying: [],  // the config keys the grid varies (experiment.varying): the table's columns
    pairBy: ['seed'],  // the grid's pair_by: names of the values in each pair_key
    info: new Map(),  // run id -> {id, arm, status, attempts}: from the table or the first query
    selected: new Set(), userSelected: false, key: null, streams: new Map(),
  };

  const err = h('p', { class: 'error' });
  const title = h('h1', {}, `Experiment #${id}`);
  const desc = h('p', { class: 'muted' });
  const progress = h('div', { class: 'progress-wide' });
  const counts = h('div', {});
  const etaEl = h('span', { id: 'eta' });
  const msg = h('span', { class: 'msg', id: 'exp-msg' });
  const tagsEl = h('span', { id: 'exp-tags' });
  const noteEl = h('div', { id: 'exp-note' });
  const keySelect = h('select', { id: 'metric-key' });
  const runsChartEl = h('div', { class: 'chart', id: 'runs-chart' });
  const armChartEl = h('div', { class: 'chart', id: 'arm-chart' });
  const armNote = h('span', { class: 'muted' });
  const filterInput = h('input', { type: 'search', placeholder: 'filter: arm, worker, id, tag, train.lr=…',
    id: 'runs-filter' });
  const statusSelect = h('select', { id: 'status-filter' }, h('option', { value: '' }, 'all statuses'),
    kStatuses.map((st) => h('option', { value: st }, st)));
  const tableEl = h('div', { id: 'runs-table' }, loading('runs'));
  const results = h('div', { id: 'results', class: 'scroll-x' }, loading('results'));
  const buckets = h('div', { id: 'window-buckets', class: 'scroll-x' }, loading());
  const runsChartBox = h('div', {}, h('h3', {}, 'Selected runs (live)'), loading('curves'), runsChartEl);

  replace(el, title, desc, err,
    h('section', { class: 'card' }, progress, h('div', { class: 'row' }, counts,
      h('span', {}, 'ETA ', etaEl), h('span', { class: 'spacer' }),
      actionButton('cancel experiment', `/experiments/${id}/cancel`, msg, () => refreshRuns()), msg),
      h('div', { class: 'row' }, h('span', { class: 'muted' }, 'tags'), tagsEl), noteEl),
    h('section', { class: 'card' },
      h('div', { class: 'row' }, h('h2', {}, 'Curves'), h('label', {}, 'metric ', keySelect),
        h('span', { class: 'muted' }, 'tick runs in the table to overlay them')),
      h('div', { class: 'charts' },
        runsChartBox,
        h('div', {}, h('h3', {}, 'By arm: mean ± sd ', armNote), armChartEl))),
    h('section', { class: 'card' },
      h('div', { class: 'row' }, h('h2', {}, 'Runs'), filterInput, statusSelect), tableEl),
    h('section', { class: 'card' }, h('h2', {}, 'Comparisons'), results),
    h('section', { class: 'card' }, h('h2', {}, 'Selected windows by arm'), buckets));

  const runsChart = new CurveChart(runsChartEl, { yLabel: '' });
  const armChart = new CurveChart(armChartEl, { yLabel: '' });
  signal.addEventListener('abort', () => { runsChart.destroy(); armChart.destroy(); });

  let table = null;
  let tableShape = '';

  const isActive = () => s.runs.some((r) => r.status === 'queued' || r.status === 'running');

  // --- runs table --------------------------------------------------------------------
  function buildTable(metricKeys, paramKeys) {
    const armIndex = (arm) => Math.max(0, s.arms.indexOf(arm));
    const cols = [
      { label: '', width: '28px', cell: (r) => h('input', {
        type: 'checkbox', checked: s.selected.has(r.id), title: 'overlay this run',
        onchange: (e) => toggleRun(r.id, e.target.checked) }) },
      { label: 'run', width: '70px', get: (r) => r.id,
        cell: (r) => h('a', { href: `#/runs/${r.id}` }, `#${r.id}`) },
      { label: 'arm', width: 'minmax(90px,1fr)', get: (r) => r.arm,
        cell: (r) => h('span', {}, h('span', { class: 'swatch',
          style: { background: colorFor(armIndex(r.arm)) } }), r.arm) },
      { label: 'status', width: '100px', get: (r) => r.status, cell: (r) => statusBadge(r.status) },
      { label: 'attempt', width: '70px', get: (r) => r.attempts, cell: (r) => r.attempts, cls: 'num' },
      { label: 'worker', width: 'minmax(80px,1fr)', get: (r) => r.worker_name || r.worker || '',
        cell: (r) => h('span', { title: r.worker || '' }, r.worker_name || r.worker || '—') },
      { label: 'device', width: '90px', get: (r) => s.devices.get(r.id) || '',
        cell: (r) => s.devices.get(r.id) || '—' },
      { label: 'pair', width: 'minmax(80px,1fr)', get: (r) => r.pair_key || '',
        cell: (r) => pairText(r.pair_key, s.pairBy) },
      // The values the grid varies tell the runs apart (not the config hash).
      ...paramKeys.map((k) => ({
        label: k, width: 'minmax(70px,110px)', cls: 'param',
        get: (r) => (r.params ? r.params[k] : null),
        cell: (r) => paramText(r.params ? r.params[k] : undefined),
      })),
      ...metricKeys.map((k) => ({
        label: k, width: '100px', cls: 'num',
        get: (r) => (r.summary && r.summary[k] !== undefined ? r.summary[k] : null),
        cell: (r) => metricValue(k, r.summary ? r.summary[k] : null),
      })),
      { label: 'tags', width: 'minmax(60px,1fr)', get: (r) => (r.tags || []).join(' '),
        cell: (r) => h('span', { class: 'tags-cell', title: r.note || '' }, (r.tags || []).join(' ') || (r.note ? '✎' : '')) },
    ];
    table = new VirtualTable(tableEl, cols, {
      rowAttrs: (r) => ({ dataset: { runId: r.id, status: r.status },
        class: `vt-row ${s.selected.has(r.id) ? 'selected' : ''}` }),
    });
    table.setFilter(rowFilter);
  }

  function rowFilter(r) {
    const st = statusSelect.value;
    if (st && r.status !== st) return false;
    const q = filterInput.value.trim().toLowerCase();
    if (!q) return true;
    return [`#${r.id}`, r.arm, r.status, r.worker, r.worker_name, r.pair_key, s.devices.get(r.id),
      r.config_hash, ...(r.tags || []), r.note,
      ...Object.entries(r.params || {}).map(([k, v]) => `${k}=${v}`)]
      .some((v) => v && String(v).toLowerCase().includes(q));
  }
  filterInput.addEventListener('input', () => table && table.setFilter(rowFilter));
  statusSelect.addEventListener('change', () => table && table.setFilter(rowFilter));

  function toggleRun(runId, on) {
    s.userSelected = true;
    if (on && s.selected.size >= kMaxOverlay) {
      err.textContent = `at most ${kMaxOverlay} runs overlay at once`;
      table.render();
      return;
    }
    if (on) s.selected.add(runId); else s.selected.delete(runId);
    table.render();
    drawRuns();
    updateStreams();
  }

  // Until the user ticks runs, overlay the running ones first, then the finished ones
  // (kOverlayOrder; firstSelection does the same in SQL).
  function autoSelect() {
    if (s.userSelected) return;
    const pick = [...s.runs].sort((a, b) =>
      (kOverlayOrder[a.status] ?? 9) - (kOverlayOrder[b.status] ?? 9) || a.id - b.id)
      .slice(0, kAutoOverlay).map((r) => r.id);
    s.selected = new Set(pick);
  }

  // The first chart does not wait for the full runs list (10^4 rows): one small query
  // picks the runs to overlay and the arms (for colours), another the metric keys.
  async function firstSelection() {
    const order = Object.entries(kOverlayOrder).map(([st, i]) => `WHEN ${sqlString(st)} THEN ${i}`).join(' ');
    const [picked, arms] = await Promise.all([
      query(`SELECT id, arm, status, attempts FROM runs WHERE experiment_id = ${id}
ORDER BY CASE status ${order} ELSE 9 END, id LIMIT ${kAutoOverlay}`, signal),
      query(`SELECT DISTINCT arm FROM runs WHERE experiment_id = ${id} ORDER BY arm`, signal),
    ]);
    if (!s.runs.length) {
      for (const r of picked) s.info.set(r.id, r);
      s.arms = arms.map((a) => a.arm);
      if (!s.userSelected) s.selected = new Set(picked.map((r) => r.id));
    }
  }

  function showExperiment(exp) {
    s.exp = exp;
    const grid = parseJson(exp.grid, {}) || {};
    if (Array.isArray(grid.pair_by)) s.pairBy = grid.pair_by;
    s.gridArms = Object.keys(grid.arms || {});
    title.textContent = `Experiment #${id} · ${exp.name}`;
    if (Array.isArray(exp.varying)) s.varying = exp.varying;
    if (!tagsEl.firstChild) {
      replace(tagsEl, tagEditor(`/experiments/${id}`, exp.tags || [], msg));
      replace(noteEl, noteEditor(`/experiments/${id}`, exp.note || '', msg));
    }
    desc.textContent = grid.description || '';
    replace(progress, progressBar(exp.counts || {}, exp.total));
    replace(counts, countsLine(exp.counts || {}), h('span', { class: 'muted' }, ` of ${exp.total}`));
    etaEl.textContent = etaText(exp.counts || {}, s.timing);
  }

  // Shows `runs` in the table; `note` says when they are only the first page.
  function showRuns(runs, note = '') {
    s.arms = [...new Set([...(s.gridArms || []), ...s.arms, ...runs.map((r) => r.arm)])].sort();
    const metricKeys = keyMetrics(runs);
    const paramKeys = varyingParams(runs, s.varying);
    const shape = JSON.stringify([metricKeys, paramKeys, s.arms]);
    if (!table || shape !== tableShape) {
      tableShape = shape;
      buildTable(metricKeys, paramKeys);
    }
    table.setRows(runs, note);
  }

  // The full runs list (10^4 runs are a few MB of JSON) feeds sort and filter; the header
  // shows as soon as the experiment's own small answer is in.
  let experimentReady;
  const experimentShown = new Promise((resolve) => { experimentReady = resolve; });
  async function refreshRuns() {
    const runsAnswer = get(`/experiments/${id}/runs`, signal);
    // Awaited below; when the experiment's own answer fails first (e.g. aborted by leaving
    // the page), this one's rejection must not be left unhandled (a page error).
    runsAnswer.catch(() => {});
    const exp = await get(`/experiments/${id}`, signal);
    showExperiment(exp);
    experimentReady(exp);
    s.runs = (await runsAnswer) || [];
    s.info = new Map(s.runs.map((r) => [r.id, r]));
    autoSelect();
    showRuns(s.runs);
    updateStreams();
  }

  // The first kFirstPage runs in grid order (what the table shows first) straight from the
  // database, so the table is drawn before the full list has arrived.
  async function firstPage() {
    const exp = await experimentShown;
    const keys = (exp && Array.isArray(exp.varying)) ? exp.varying : [];
    const params = keys.length ? `, json_array(${keys.map((k) =>
      `json_extract(r.config_json, ${sqlString(`$.${k.split('.').map((c) => `"${c}"`).join('.')}`)})`).join(', ')}) AS params` : '';
    const rows = await query(`SELECT r.id, r.arm, r.status, r.attempts, r.config_hash, r.pair_key,
  r.worker_id AS worker, w.name AS worker_name, r.reused_from${params}
FROM runs r LEFT JOIN workers w ON w.id = r.worker_id
WHERE r.experiment_id = ${id} ORDER BY r.idx LIMIT ${kFirstPage}`, signal);
    for (const r of rows) {
      const values = parseJson(r.params, []) || [];
      r.params = Object.fromEntries(keys.map((k, i) => [k, values[i]]));
    }
    if (s.runs.length || !rows.length) return;
    const sums = await query(`SELECT run_id, key, value FROM summaries
WHERE run_id IN (${rows.map((r) => sqlInt(r.id)).join(',')})`, signal);
    if (s.runs.length) return;  // the full list won the race
    const byRun = new Map(rows.map((r) => [r.id, { ...r, summary: {} }]));
    for (const x of sums) byRun.get(x.run_id).summary[x.key] = x.value;
    const total = s.exp ? s.exp.total : '…';
    showRuns([...byRun.values()], rows.length < kFirstPage ? ''
      : ` · the first ${rows.length} of ${total} runs; the rest are loading`);
  }

  // Device column (attempts.devices_json through the workers' device lists) and ETA
  // timing: the runs endpoint has neither.
  async function refreshAttempts() {
    const [rows, workerList, timing] = await Promise.all([
      query(`SELECT a.run_id AS run, a.devices_json AS devices, a.worker_id AS worker
FROM attempts a JOIN runs r ON r.id = a.run_id AND a.attempt = r.attempts
WHERE r.experiment_id = ${id}`, signal),
      get('/workers', signal),
      loadTiming(id, signal),
    ]);
    const workers = new Map((workerList || []).map((w) => [w.id, w]));
    s.devices = new Map(rows.map((r) =>
      [r.run, deviceLabel(parseJson(r.devices, []), workers.get(r.worker))]));
    s.timing = timing.get(id) || null;
    if (s.exp) etaEl.textContent = etaText(s.exp.counts || {}, s.timing);
    if (table) table.render();
  }

  // --- curves ------------------------------------------------------------------------
  // The metric keys the overlaid runs have logged (a primary-key range per run).
  async function loadKeys() {
    const ids = [...s.selected].map(sqlInt);
    if (!ids.length) return false;
    const rows = await query(
      `SELECT DISTINCT key FROM metrics WHERE run_id IN (${ids.join(',')}) ORDER BY key`, signal);
    const keys = rows.map((r) => r.key);
    if (!keys.length) return false;
    const preferred = ['train.loss', 'eval.loss', 'eval.ppl'].find((k) => keys.includes(k)) || keys[0];
    replace(keySelect, keys.map((k) => h('option', { value: k, selected: k === preferred }, k)));
    s.key = preferred;
    return true;
  }
  keySelect.addEventListener('change', () => {
    s.key = keySelect.value;
    s.streams.clear();
    updateStreams();
    refreshArms().catch((e) => { armNote.textContent = e.message; });
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
      if (l) l.textContent = 'No points yet: the selected runs have not logged a metric.';
      return;
    }
    updateStreams();
    const byId = s.info;
    let changed = false;
    await Promise.all([...s.streams.entries()].map(async ([runId, st]) => {
      const run = byId.get(runId);
      if (!run || st.done) return;
      const finished = run.status !== 'running' && run.status !== 'queued';
      st.m.expectAttempt(run.attempts);
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
    const byId = s.info;
    const lines = [];
    for (const [runId, st] of s.streams) {
      const run = byId.get(runId);
      if (!run) continue;
      const d = st.m.get(s.key);
      lines.push({ label: `#${runId} ${run.arm}`, color: colorFor(Math.max(0, s.arms.indexOf(run.arm))),
        xs: d.xs, ys: d.ys });
    }
    lines.sort((a, b) => a.label.localeCompare(b.label, undefined, { numeric: true }));
    runsChartBox.querySelector('.loading')?.remove();
    runsChart.set(lines);
  }

  // Mean and standard deviation across runs of each arm at each step, one query. Past
  // kArmSampleRuns runs it reads every k-th run of each arm (a scan of 10^6 points takes
  // seconds, of 10^5 a fraction of one).
  async function refreshArms() {
    if (!s.key) return;
    const stride = Math.max(1, Math.ceil(s.runs.length / kArmSampleRuns));
    const rows = await query(`
WITH picked AS (
  SELECT id, arm, reused_from FROM (
    SELECT id, arm, reused_from, row_number() OVER (PARTITION BY arm ORDER BY idx) - 1 AS k
    FROM runs WHERE experiment_id = ${id})
  WHERE k % ${stride} = 0)
SELECT p.arm AS arm, m.step AS step, avg(m.value) AS mean, avg(m.value * m.value) AS sq, count(*) AS n
FROM picked p JOIN runs src ON src.id = coalesce(p.reused_from, p.id)
JOIN metrics m ON m.run_id = src.id AND m.attempt = src.attempts
WHERE m.key = ${sqlString(s.key)} AND m.value IS NOT NULL
GROUP BY p.arm, m.step ORDER BY p.arm, m.step`, signal);
    const byArm = new Map();
    for (const r of rows) {
      if (!byArm.has(r.arm)) byArm.set(r.arm, { xs: [], mean: [], lo: [], hi: [], n: 0 });
      const a = byArm.get(r.arm);
      const sd = Math.sqrt(Math.max(0, r.sq - r.mean * r.mean));
      a.xs.push(r.step);
      a.mean.push(r.mean);
      a.lo.push(r.mean - sd);
      a.hi.push(r.mean + sd);
      a.n = Math.max(a.n, r.n);
    }
    const lines = [];
    const bands = [];
    for (const [arm, a] of byArm) {
      const c = colorFor(Math.max(0, s.arms.indexOf(arm)));
      const base = lines.length;
      lines.push({ label: `${arm} (n=${a.n})`, color: c, xs: a.xs, ys: a.mean, width: 2 });
      lines.push({ label: `${arm} +sd`, color: withAlpha(c, 0.35), xs: a.xs, ys: a.hi, width: 0.5, legend: false });
      lines.push({ label: `${arm} -sd`, color: withAlpha(c, 0.35), xs: a.xs, ys: a.lo, width: 0.5, legend: false });
      bands.push([base + 1, base + 2, withAlpha(c, 0.15)]);
    }
    armNote.textContent = !byArm.size ? '(no points yet)'
      : `(${s.key}${stride > 1 ? `; every ${stride}th run of ${s.runs.length}` : ''})`;
    armChart.set(lines, bands);
  }

  // --- comparisons and window buckets -------------------------------------------------
  async function refreshResults() {
    const r = await get(`/experiments/${id}/results`, signal);
    replace(results, resultsTables(r || {}, s.pairBy));
    const rows = await query(`
SELECT r.arm AS arm, hm.window AS window, count(*) AS n
FROM head_maps hm JOIN runs r ON r.id = hm.run_id
WHERE r.experiment_id = ${id} AND hm.window IS NOT NULL
  AND hm.attempt = (SELECT max(attempt) FROM head_maps h2 WHERE h2.run_id = hm.run_id)
GROUP BY r.arm, hm.window`, signal);
    replace(buckets, rows.length ? windowBuckets(rows)
      : h('p', { class: 'muted' }, 'No head windows recorded for this experiment (AAH runs record them).'));
  }

  // --- schedule ------------------------------------------------------------------------
  const guard = (fn, out = err) => async () => {
    try {
      await fn();
    } catch (e) {
      if (e.name !== 'AbortError') out.textContent = e.message;
    }
  };
  // The table and the first chart load side by side; the heavier panels (the arm chart
  // scans every point of the experiment) start only once both are drawn, so they never
  // hold either up, even on a coordinator that answers one request at a time.
  const slow = () => (s.runs.length > 2000 ? 10000 : 2000);
  let tableReady;
  const tableShown = new Promise((resolve) => { tableReady = resolve; });
  guard(firstPage)();
  poll(guard(async () => {
    await refreshRuns();
    err.textContent = '';
    tableReady();
  }), () => (isActive() ? slow() : 10000), signal);
  const chartShown = guard(async () => {
    await firstSelection();
    await pollStreams();
  })();
  Promise.all([tableShown, chartShown]).then(() => {
    if (signal.aborted) return;
    poll(guard(pollStreams), kLivePollMs, signal);
    poll(guard(refreshAttempts), () => (isActive() ? 3000 : 30000), signal);
    poll(guard(refreshArms, armNote), () => (isActive() ? 5000 : 60000), signal);
    poll(guard(refreshResults, results), () => (isActive() ? 10000 : 60000), signal);
  });
}

// Arms (mean ± SE per metric, a metric per row so that 40 SAF metrics do not make the page
// wide) and comparisons (paired statistic with its unit, n, mean ± SE, 95% CI, which side
// is better and what the interval says).
function resultsTables(r, pairBy) {
  const arms = r.arms || [];
  const comps = r.comparisons || [];
  const columns = resultColumns(arms.flatMap((a) => Object.keys(a.metrics || {})));
  const cell = (key, m) => {
    if (!m) return '—';
    if (isBytesKey(key)) return `${bytes(m.mean)} ± ${bytes(m.se)}`;
    return m.se === null || m.se === undefined ? num(m.mean) : `${num(m.mean)} ± ${num(m.se)}`;
  };
  const armTable = h('table', { class: 'grid-table', id: 'arms-table' },
    h('thead', {}, h('tr', {}, h('th', {}, 'metric'),
      arms.map((a) => h('th', { class: 'num', dataset: { arm: a.arm } }, a.arm,
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
      const ci = c.ci95 ? [c.ci95.lo, c.ci95.hi] : ci95(c.mean, c.se, c.n);
      const pairs = c.per_pair || [];
      const neutralValue = c.neutral ?? neutral(c.stat);
      const signif = ci && (ci[0] > neutralValue || ci[1] < neutralValue);
      return h('tr', { dataset: { comparison: c.name } },
        h('td', {}, c.name), h('td', {}, `${c.treatment} vs ${c.baseline}`), h('td', {}, c.metric),
        h('td', {}, c.stat + (c.unit ? ` (${c.unit})` : '')), h('td', { class: 'num' }, c.n),
        h('td', { class: 'num' }, c.n ? `${num(c.mean)}${unit(c)} ± ${num(c.se)}` : '—'),
        h('td', { class: `num ci ${signif ? 'signif' : ''}` }, ci ? `[${num(ci[0])}, ${num(ci[1])}]${unit(c)}` : '—'),
        h('td', {}, c.better ? `${c.better}` : '—'),
        h('td', { class: 'verdict' }, c.verdict || c.note || (c.n < 2 ? 'too few pairs' : '—')),
        h('td', {}, pairs.length ? h('details', {}, h('summary', {}, `${pairs.length} pairs`),
          h('ul', { class: 'pairs' }, pairs.map((p) => h('li', {},
            h('a', { href: `#/runs/${p.treatment_run}` }, `#${p.treatment_run}`), ' vs ',
            h('a', { href: `#/runs/${p.baseline_run}` }, `#${p.baseline_run}`),
            `: ${num(p.value)}${unit(c)} `, h('span', { class: 'muted' }, pairText(p.pair_key, pairBy))))))
          : '—'));
    }))) : h('p', { class: 'muted' }, 'No comparisons in this grid.');
  return [arms.length ? armTable : h('p', { class: 'muted' }, 'No results yet.'), compTable];
}

// The grid's varying keys that take more than one value among `runs`, in grid order.
function varyingParams(runs, keys) {
  return (keys || []).filter((k) => new Set(runs.map((r) => JSON.stringify(r.params ? r.params[k] : null))).size > 1);
}

// A config value in a table cell.
function paramText(v) {
  if (v === undefined || v === null) return '—';
  return typeof v === 'number' ? num(v) : String(v);
}

// The value of a statistic meaning "no difference".
function neutral(stat) {
  return stat === 'ratio' || stat === 'speedup' ? 1 : 0;
}
