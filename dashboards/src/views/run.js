// One run: status with cancel/retry, live curves of every metric, the layer x head grid,
// provenance with links to parent and child runs, attempts, summary, artifacts, config.
import { h, replace, poll } from '../dom.js';
import { get, getToken, query, sqlInt, sqlString } from '../api.js';
import { num, bytes, metricValue, shortHash, parseJson, duration, unmeasured, isBytesKey, xAxisLabel,
  yAxisLabel } from '../format.js';
import { CurveChart, colorFor, chartControls } from '../charts.js';
import { RunMetrics } from '../metrics.js';
import { LiveFeed } from '../live.js';
import { statusBadge, actionButton, loading, tagEditor, noteEditor, lastLines } from './common.js';
import { headGrid } from './heads.js';
import { diffForm } from './diff.js';
import { flatten } from '../configdiff.js';

// Live points arrive over server-sent events (live.js); this read over GET is the safety
// net for a stream that is down or lagging.
const kLivePollMs = 5000;
// Charts drawn at first; a button shows the rest (a SAF run logs a few dozen metrics).
const kFirstCharts = 12;
// The artifacts the API sends (coordinator/artifact_files.h); bigger ones are listed only.
const kMaxDownloadBytes = 256 * 2 ** 20;

// What the run page shows as performance, when the run reports it (the lead's throughput
// metrics, common/metric_names.h): [key, label, format].
const kPerformance = [
  ['train.tokens_per_s', 'tokens/s', (v) => num(v)],
  ['train.mfu', 'MFU', (v) => `${num(100 * v)} %`],
  ['train.step_s', 'step time', (v) => `${num(1000 * v)} ms`],
  ['mem.peak_bytes', 'peak memory (process)', bytes],
  ['mem.gpu_peak_bytes', 'peak memory (GPU)', bytes],
];

// Provenance columns in display order (schema/001_init.sql, table provenance).
const kProvenance = [
  ['git_commit', 'commit'], ['git_dirty', 'dirty'], ['git_diff_sha256', 'diff sha256'],
  ['binary_sha256', 'binary sha256'], ['host', 'host'], ['devices', 'devices'],
  ['driver_version', 'driver'], ['cuda_version', 'CUDA'], ['libtorch_version', 'LibTorch'],
  ['dataset_path', 'dataset'], ['dataset_sha256', 'dataset sha256'],
  ['parent_run', 'parent run'], ['parent_checkpoint_sha256', 'parent checkpoint'],
];

export function runView(el, [idText], signal) {
  const id = sqlInt(idText);
  const err = h('p', { class: 'error' });
  const title = h('h1', {}, `Run #${id}`);
  const sub = h('div', { class: 'row' });
  const cause = h('div', { class: 'cause', id: 'run-cause' });
  const perf = h('div', { class: 'row perf', id: 'run-perf' });
  const msg = h('span', { class: 'msg', id: 'run-msg' });
  const tagsEl = h('span', { id: 'run-tags' });
  const noteEl = h('div', { id: 'run-note' });
  const chartNote = h('span', { class: 'muted', id: 'charts-note' });
  const moreCharts = h('button', { id: 'charts-more', hidden: true }, 'show all');
  const charts = h('div', { class: 'charts run-charts', id: 'run-charts' }, loading('metrics'));
  const chartMap = new Map();  // group name -> CurveChart
  const controls = chartControls(() => chartMap.values(), 'run-chart-controls');
  const modeSelect = h('select', { id: 'head-mode' },
    ['role', 'score', 'window'].map((m) => h('option', { value: m }, m)));
  const grid = h('div', { id: 'head-grid' }, loading('head map'));
  const prov = h('div', { id: 'provenance' }, loading('provenance'));
  const attempts = h('div', { id: 'attempts' }, loading());
  const summary = h('div', { id: 'summary' }, loading());
  const artifacts = h('div', { id: 'artifacts' }, loading());
  const config = h('div', { id: 'config' }, loading());

  const cancelButton = actionButton('cancel', `/runs/${id}/cancel`, msg, () => refresh());
  const retryButton = actionButton('retry', `/runs/${id}/retry`, msg, () => refresh());
  replace(el, title, err,
    h('section', { class: 'card' }, sub, cause, perf,
      h('div', { class: 'row' }, cancelButton, retryButton, h('span', { class: 'muted' }, 'tags'), tagsEl, msg),
      noteEl, h('div', { class: 'row' }, diffForm(String(id), ''))),
    h('section', { class: 'card' }, h('div', { class: 'row' }, h('h2', {}, 'Curves'), chartNote, moreCharts, controls), charts),
    h('div', { class: 'two' },
      h('section', { class: 'card' }, h('div', { class: 'row' }, h('h2', {}, 'Heads'),
        h('label', {}, 'colour by ', modeSelect)), grid),
      h('section', { class: 'card' }, h('h2', {}, 'Provenance'), prov)),
    h('section', { class: 'card' }, h('h2', {}, 'Attempts'), attempts),
    h('div', { class: 'two' },
      h('section', { class: 'card' }, h('h2', {}, 'Summary'), summary),
      h('section', { class: 'card' }, h('h2', {}, 'Artifacts'), artifacts)),
    h('section', { class: 'card' }, h('h2', {}, 'Config'), config));

  let run = null;
  let heads = [];
  const stream = new RunMetrics(id, null);
  signal.addEventListener('abort', () => { for (const c of chartMap.values()) c.destroy(); });
  const active = () => run && (run.status === 'running' || run.status === 'queued');

  let metricsStarted = false;
  async function refresh() {
    run = await get(`/runs/${id}`, signal);
    // The curves are read as soon as the run is known (not on the next metrics tick).
    if (!metricsStarted) {
      metricsStarted = true;
      poll(guard(pollMetrics), kLivePollMs, signal);
    }
    const attemptList = Array.isArray(run.attempts) ? run.attempts : [];
    const attemptCount = attemptList.length || Number(run.attempts) || 0;
    title.textContent = `Run #${id} · ${run.arm || ''}`;
    replace(sub, statusBadge(run.status),
      run.experiment_id !== undefined
        ? h('a', { href: `#/experiments/${run.experiment_id}` }, `experiment #${run.experiment_id}`) : null,
      h('span', {}, `attempt ${attemptCount}${run.max_attempts ? ` of ${run.max_attempts}` : ''}`),
      run.worker ? h('span', { title: `worker id ${run.worker}` }, `worker ${run.worker_name || run.worker}`) : null,
      h('code', { title: run.config_hash || '' }, `config ${shortHash(run.config_hash)}`),
      run.reused_from ? h('span', {}, 'reuses result of ',
        h('a', { href: `#/runs/${run.reused_from}` }, `#${run.reused_from}`)) : null);
    // Offer only what the coordinator would accept in this state (it checks again: 409).
    cancelButton.title = active() ? 'cancel this run' : `nothing to cancel: ${run.status}`;
    cancelButton.classList.toggle('inapplicable', !active());
    const retryable = ['failed', 'cancelled', 'lost'].includes(run.status);
    retryButton.title = retryable ? 'requeue as a new attempt' : `retry applies to failed, cancelled or lost runs`;
    retryButton.classList.toggle('inapplicable', !retryable);
    stream.expectAttempt(attemptCount);
    replace(cause, causeLine(run, attemptList));
    replace(perf, perfLine(run));
    if (!tagsEl.firstChild) {  // editors are built once (a poll must not eat what is typed)
      replace(tagsEl, tagEditor(`/runs/${id}`, run.tags || [], msg));
      replace(noteEl, noteEditor(`/runs/${id}`, run.note || '', msg));
    }
    replace(attempts, attemptsTable(attemptList));
    replace(summary, kvTable(run.summary || {}, 'summary-table'));
    replace(artifacts, artifactsTable(id, run.artifacts || []));
    replace(config, configView(run));
    await refreshProvenance();
  }

  async function refreshProvenance() {
    let p = run.provenance;
    if (Array.isArray(p)) p = p.reduce((a, b) => ((b.attempt || 0) >= (a?.attempt || 0) ? b : a), null);
    // Children: runs naming this one as parent, or resumed/initialised from one of its
    // checkpoints (matched by SHA-256). The parent checkpoint resolves to its run the same way.
    const parentSha = p && p.parent_checkpoint_sha256;
    const [children, reusers, parentCkpt] = await Promise.all([
      query(`SELECT DISTINCT run_id AS id FROM provenance WHERE parent_run = ${id} AND run_id != ${id}
UNION SELECT DISTINCT p.run_id FROM provenance p JOIN artifacts a ON a.sha256 = p.parent_checkpoint_sha256
WHERE a.run_id = ${id} AND p.run_id != ${id} ORDER BY 1`, signal),
      query(`SELECT id FROM runs WHERE reused_from = ${id} ORDER BY id`, signal),
      parentSha ? query(`SELECT run_id, attempt, step FROM artifacts WHERE sha256 = ${sqlString(parentSha)}
ORDER BY run_id LIMIT 1`, signal) : Promise.resolve([]),
    ]);
    const rows = [];
    if (p) {
      for (const [k, label] of kProvenance) {
        const v = p[k];
        if (k === 'parent_run' && v !== null && v !== undefined) {
          rows.push([label, h('a', { href: `#/runs/${v}`, class: 'parent-link' }, `#${v}`)]);
        } else if (k === 'parent_checkpoint_sha256' && v && parentCkpt.length) {
          const c = parentCkpt[0];
          rows.push([label, h('span', {}, h('code', { title: v }, shortHash(v)), ' = checkpoint of ',
            h('a', { href: `#/runs/${c.run_id}`, class: 'parent-link' }, `#${c.run_id}`),
            ` (attempt ${c.attempt}, step ${c.step})`)]);
        } else if (k === 'git_dirty') {
          rows.push([label, v === null || v === undefined ? '—'
            : h('span', { class: Number(v) ? 'warn' : '' }, Number(v) ? 'yes (uncommitted changes)' : 'no')]);
        } else if (k.endsWith('sha256') || k === 'git_commit') {
          rows.push([label, v ? h('code', { title: v, class: k === 'git_commit' ? 'commit' : '' },
            k === 'git_commit' ? v : shortHash(v)) : '—']);
        } else if (v === null || v === undefined || v === '') {
          rows.push([label, '—']);
        } else {
          rows.push([label, typeof v === 'object' ? JSON.stringify(v) : String(v)]);
        }
      }
      // GET /runs/ID gives the attempt's provenance fields themselves (command_sha256, ...).
      const extra = (p.fields_json ? parseJson(p.fields_json, {}) : p.fields || p) || {};
      const named = new Set(kProvenance.map(([k]) => k));
      for (const [k, v] of Object.entries(extra)) {
        if (!named.has(k)) rows.push([k, typeof v === 'object' ? JSON.stringify(v) : String(v)]);
      }
    }
    if (children.length) {
      rows.push(['child runs', h('span', {}, children.map((c) =>
        h('a', { href: `#/runs/${c.id}`, class: 'child-link' }, `#${c.id} `)))]);
    }
    if (reusers.length) {
      rows.push(['reused by', h('span', {}, reusers.map((c) =>
        h('a', { href: `#/runs/${c.id}` }, `#${c.id} `)))]);
    }
    replace(prov, rows.length ? h('table', { class: 'kv' }, h('tbody', {},
      rows.map(([k, v]) => h('tr', {}, h('th', {}, k), h('td', {}, v)))))
      : h('p', { class: 'muted' }, 'No provenance recorded yet (it arrives when an attempt starts).'));
  }

  async function refreshHeads() {
    const rows = await query(`SELECT attempt, layer, head, role, score, window FROM head_maps
WHERE run_id = ${id} ORDER BY attempt, layer, head`, signal);
    const last = rows.reduce((m, r) => Math.max(m, r.attempt), 0);
    heads = rows.filter((r) => r.attempt === last);
    drawHeads();
  }

  function drawHeads() {
    const cfg = run ? parseJson(run.config, run.config) || {} : {};
    const layers = Math.max(cfg.model?.layers || 0, ...heads.map((r) => r.layer + 1));
    const nheads = Math.max(cfg.model?.heads || 0, ...heads.map((r) => r.head + 1));
    if (!heads.length) {
      replace(grid, h('p', { class: 'muted' },
        'No head map recorded for this run (calibrate, AoH and AAH runs record one).'));
      return;
    }
    headGrid(grid, heads, layers, nheads, modeSelect.value);
  }
  modeSelect.addEventListener('change', drawHeads);

  let showAllCharts = false;
  moreCharts.addEventListener('click', () => {
    showAllCharts = true;
    drawCurves();
  });

  // One chart per metric group: train.loss and eval.loss share the "loss" chart.
  function group(key) {
    return key.endsWith('.loss') ? 'loss' : key;
  }
  // The loss first, then the system series the worker samples (beside it), then the rest.
  const rank = (g) => (g === 'loss' ? 0 : g.startsWith('sys.') ? 1 : 2);

  async function pollMetrics() {
    if (!run) return;
    // A finished run is read once more (its last points) and then left alone.
    const finished = !active();
    if (finished && stream.finalRead) return;
    const added = await stream.update(signal);
    stream.finalRead = finished;
    if (!added && chartMap.size) return;
    drawCurves();
  }

  function drawCurves() {
    const groups = new Map();
    for (const k of stream.keys()) {
      const g = group(k);
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g).push(k);
    }
    const all = [...groups.keys()].sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
    const names = showAllCharts ? all : all.slice(0, kFirstCharts);
    chartNote.textContent = all.length > names.length
      ? `showing ${names.length} of ${all.length} metrics` : all.length ? `${all.length} metrics` : '';
    moreCharts.hidden = all.length <= names.length;
    moreCharts.textContent = `show all ${all.length}`;
    if (!names.length) {
      if (!chartMap.size) {
        replace(charts, !stream.loaded ? loading('metrics')
          : h('p', { class: 'muted' }, active() ? 'No metrics yet.' : 'This run logged no metrics.'));
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

  const guard = (fn) => async () => {
    try {
      await fn();
      err.textContent = '';
    } catch (e) {
      if (e.name !== 'AbortError') err.textContent = e.message;
    }
  };
  const live = new LiveFeed((rows) => { if (stream.ingest(rows)) drawCurves(); },
    guard(pollMetrics), signal);
  poll(guard(async () => {
    await refresh();
    live.follow(active() ? [id] : []);
    if (!heads.length) await refreshHeads();
  }), () => (active() ? 2000 : 15000), signal);
}

function kvTable(obj, id) {
  const entries = Object.entries(obj || {});
  if (!entries.length) return h('p', { class: 'muted' }, 'None yet.');
  return h('table', { class: 'kv', id }, h('tbody', {}, entries.sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => h('tr', {}, h('th', {}, k), h('td', { class: 'num' }, metricValue(k, v))))));
}

// "cpu" for an attempt on a CPU slot, else its device indices on the worker.
function deviceList(indices) {
  return Array.isArray(indices) && indices.length ? `cuda ${indices.join(',')}` : 'cpu';
}

function secondsBetween(a, b) {
  const t0 = Date.parse(a);
  const t1 = b ? Date.parse(b) : Date.now();
  return Number.isFinite(t0) && Number.isFinite(t1) ? (t1 - t0) / 1000 : null;
}

function attemptsTable(list) {
  if (!list.length) return h('p', { class: 'muted' }, 'Not started yet.');
  return h('table', { class: 'grid-table' },
    h('thead', {}, h('tr', {}, ['attempt', 'status', 'worker', 'devices', 'assigned', 'ran for',
      'exit', 'resumed from', 'error'].map((c) => h('th', {}, c)))),
    h('tbody', {}, list.map((a) => {
      const resume = parseJson(a.resume_json, a.resume);
      return h('tr', {},
        h('td', { class: 'num' }, a.attempt), h('td', {}, statusBadge(a.status)),
        h('td', { title: a.worker_id || a.worker || '' }, a.worker_name || a.worker_id || a.worker || '—'),
        h('td', {}, deviceList(parseJson(a.devices_json, a.devices) ?? [])),
        h('td', { class: 'muted' }, (a.assigned_at || '').replace('T', ' ').replace(/\..*|Z$/, '')),
        h('td', { class: 'num' }, duration(secondsBetween(a.accepted_at || a.assigned_at, a.finished_at))),
        h('td', { class: 'num' }, a.exit_code ?? '—'),
        h('td', {}, resume ? `step ${resume.step} (${shortHash(resume.sha256)})` : '—'),
        h('td', {}, a.error || a.stderr_tail ? h('details', {}, h('summary', {}, a.error || 'stderr'),
          h('pre', {}, a.stderr_tail || '')) : ''));
    })));
}

function artifactsTable(runId, list) {
  if (!list.length) return h('p', { class: 'muted' }, 'None yet.');
  return h('table', { class: 'grid-table', id: 'artifacts-table' },
    h('thead', {}, h('tr', {}, ['attempt', 'kind', 'step', 'size', 'sha256', 'file'].map((c) => h('th', {}, c)))),
    h('tbody', {}, list.map((a) => {
      const name = String(a.path || '').split('/').pop();
      const url = `/api/v1/runs/${runId}/artifacts/${a.attempt}/${a.seq}`;
      return h('tr', {},
        h('td', { class: 'num' }, a.attempt), h('td', {}, a.kind), h('td', { class: 'num' }, a.step),
        h('td', { class: 'num', title: `${a.bytes} bytes` }, bytes(a.bytes)),
        h('td', {}, h('code', { title: a.sha256 }, shortHash(a.sha256))),
        h('td', { class: 'path', title: `${a.path} on the worker's host` }, artifactFile(a, url, name)));
    })));
}

// The file cell: a download link, or why there is none (deleted by checkpoint retention,
// or too big for the API).
function artifactFile(a, url, name) {
  if (a.deleted_at) return h('span', { class: 'muted' }, `${name} (deleted by checkpoint retention ${a.deleted_at})`);
  if (Number(a.bytes) > kMaxDownloadBytes) return h('span', { class: 'muted' }, `${name} (too big for the API; on its worker)`);
  return h('a', { href: url, download: name, class: 'artifact-download',
    onclick: (e) => { e.preventDefault(); download(url, name, e.target); } }, name);
}

// Downloads `url` with the token (a coordinator beyond loopback answers reads only with
// it, and a plain link sends none) and saves it as `name`; a refusal shows on the link.
async function download(url, name, link) {
  const token = getToken();
  try {
    const res = await fetch(url, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
    if (!res.ok) {
      const text = await res.text();
      let detail = text;
      try { detail = JSON.parse(text).error || text; } catch { /* not JSON */ }
      throw new Error(`${res.status}: ${detail}`);
    }
    const blobUrl = URL.createObjectURL(await res.blob());
    const a = h('a', { href: blobUrl, download: name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(blobUrl), 10000);
    link.title = `downloaded ${name}`;
  } catch (e) {
    link.title = e.message;
    link.classList.add('error');
  }
}

// Why the run failed: the error and the last lines of the latest attempt's stderr.
function causeLine(run, attemptList) {
  if (!run.error) return null;
  const last = [...attemptList].reverse().find((a) => lastLines(a.stderr_tail).length);
  // A cancelled run's error is its reason (a user's cancel, or an early stop's rule).
  return h('div', { class: run.status === 'cancelled' ? 'muted' : 'error' },
    h('strong', {}, run.status === 'cancelled' ? 'stopped: ' : 'failed: '), run.error,
    last ? h('pre', { class: 'stderr-cause' }, lastLines(last.stderr_tail).join('\n')) : null,
    last ? h('span', { class: 'muted' }, `attempt ${last.attempt}'s stderr; the whole tail is in Attempts below`) : null);
}

// Throughput, MFU, step time, peak memory and precision, where the run reports them.
function perfLine(run) {
  const sum = run.summary || {};
  const cfg = parseJson(run.config, run.config) || {};
  const items = kPerformance.filter(([k]) => sum[k] !== undefined && sum[k] !== null && !unmeasured(k, sum[k]))
    .map(([k, label, f]) => h('span', { class: 'perf-item', dataset: { key: k } }, h('span', { class: 'muted' }, `${label} `), f(sum[k])));
  // The precision the run computed in (provenance), else what its config asked for.
  let prov = run.provenance;
  if (Array.isArray(prov)) prov = prov[prov.length - 1];
  const modelKind = cfg.kind !== 'command' && cfg.kind !== 'noop';  // runs that build the LM
  const precision = (prov && prov.precision) || (modelKind && cfg.train && cfg.train.precision);
  if (precision) items.push(h('span', { class: 'perf-item', dataset: { key: 'precision' } },
    h('span', { class: 'muted' }, 'precision '), precision));
  return items.length ? items : null;
}

// The config keys that matter (kind, seed, the run's own sections, non-defaults) as a
// table; every key in a <details>.
function configView(run) {
  const cfg = parseJson(run.config, run.config) ?? {};
  const flat = flatten(cfg);
  const notable = run.config_notable || flat;
  const keys = Object.keys(notable).sort();
  const row = ([k, v]) => h('tr', {}, h('th', {}, k), h('td', {}, typeof v === 'object' ? JSON.stringify(v) : String(v)));
  return h('div', {},
    h('p', { class: 'muted', id: 'config-note' }, `${keys.length} of ${Object.keys(flat).length} keys: the run's kind, seed, its own sections and values changed from the defaults`),
    h('table', { class: 'kv', id: 'config-table' }, h('tbody', {}, keys.map((k) => row([k, notable[k]])))),
    h('details', {}, h('summary', {}, `all ${Object.keys(flat).length} keys`),
      h('pre', { class: 'config' }, JSON.stringify(cfg, null, 2))));
}
