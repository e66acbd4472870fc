// Drives the dashboard in headless Chromium (Debian's /usr/bin/chromium, via playwright-core)
// and checks what a researcher would look at. Usage: node check.mjs SPEC.json, where SPEC is
// {url, screens, token, worker_name, finished: {experiment, runs: [ids], seeds: [per run]},
//  command: {experiment, ok_run, fail_run}, artifact: {run, attempt, seq, sha256},
//  live: {experiment, run}, heads: {run, layers, heads}, provenance: {run, commit}, cancel_run,
//  reused: {experiment, run} (the finished grid submitted again: every run reused),
//  strata: {experiment} (axes params.rep x params.lrate paired by params.rep),
//  diff: {a, b, keys} (two finished runs and the config keys `headlab diff` names),
//  cancelled: {run, reason} (a run its user cancelled, and the reason stored)}
// (written by tests/dashboard_test.sh from the real coordinator's database).
// Prints one "ok: ..." line per check; exits 1 on the first failure (with a screenshot).
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { launch } from './browser.mjs';

const spec = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const kTimeoutMs = 30000;
fs.mkdirSync(spec.screens, { recursive: true });

const t0 = Date.now();
const log = (msg) => console.log(`[dashboard +${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);
const ok = (msg) => log(`  ok: ${msg}`);

const { page, close } = await launch();
const consoleErrors = [];
// The refused cancel's 401 is expected; Chromium logs every failed request as an error.
page.on('console', (m) => {
  if (m.type() === 'error' && !/status of 401/.test(m.text())) consoleErrors.push(m.text());
});
page.on('pageerror', (e) => consoleErrors.push(`page error: ${e.message}`));

async function shot(name) {
  const file = path.join(spec.screens, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  log(`screenshot ${file}`);
}

async function fail(msg) {
  console.error(`[dashboard] FAIL: ${msg}`);
  if (consoleErrors.length) console.error(`browser console errors:\n  ${consoleErrors.join('\n  ')}`);
  try { await shot('failure'); } catch { /* the page may be gone */ }
  await close();
  process.exit(1);
}

async function goto(hash) {
  await page.goto(`${spec.url}/${hash}`, { waitUntil: 'domcontentloaded' });
}

// Waits until fn(arg) is truthy in the page; fails with `what` after the timeout.
async function waitFor(what, fn, arg, timeout = kTimeoutMs) {
  try {
    return await (await page.waitForFunction(fn, arg, { timeout, polling: 100 })).jsonValue();
  } catch {
    return fail(`timed out after ${timeout / 1000}s waiting for ${what}`);
  }
}

// Points drawn by the chart in `selector` (its data-points attribute), and whether its
// canvas holds any painted (non-transparent) pixel inside the plot area.
const chartState = (selector) => page.evaluate((sel) => {
  const el = document.querySelector(sel);
  const canvas = el && el.querySelector('canvas');
  let painted = 0;
  if (canvas && canvas.width && canvas.height) {
    const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
    for (let i = 3; i < data.length; i += 4 * 7) if (data[i]) painted++;
  }
  return { points: Number(el?.dataset.points || 0), painted };
}, selector);

// Scrolls the virtualised runs table from top to bottom and returns every run id it shows.
const tableRunIds = () => page.evaluate(async () => {
  const body = document.querySelector('#runs-table .vt-body');
  const seen = new Set();
  for (let top = 0; ; top += body.clientHeight / 2) {
    body.scrollTop = top;
    body.dispatchEvent(new Event('scroll'));
    await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
    for (const row of body.querySelectorAll('.vt-row')) seen.add(Number(row.dataset.runId));
    if (top >= body.scrollHeight) break;
  }
  body.scrollTop = 0;
  return [...seen].sort((a, b) => a - b);
});

// Fails unless the page is no wider than the window (once 2,600 px in 1,400).
async function checkNoOverflow(where) {
  const w = await page.evaluate(() => ({ doc: document.documentElement.scrollWidth, win: window.innerWidth }));
  if (w.doc > w.win + 1) await fail(`${where} is ${w.doc} px wide in a ${w.win} px window`);
  ok(`${where} fits the window (${w.doc} of ${w.win} px)`);
}

// Pixels of the chart's own series colours (not axes or grid lines) in its canvas.
const seriesPixels = (selector) => page.evaluate((sel) => {
  const el = document.querySelector(sel);
  const canvas = el && el.querySelector('canvas');
  const colors = JSON.parse(el?.dataset.colors || '[]').map((c) => {
    const n = parseInt(c.slice(1), 16);
    return [(n >> 16) & 255, (n >> 8) & 255, n & 255];
  });
  if (!canvas || !colors.length) return 0;
  const d = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
  let hits = 0;
  for (let i = 0; i < d.length; i += 4) {
    if (d[i + 3] < 200) continue;
    if (colors.some(([r, g, b]) => Math.abs(d[i] - r) < 24 && Math.abs(d[i + 1] - g) < 24 && Math.abs(d[i + 2] - b) < 24)) hits++;
  }
  return hits;
}, selector);

// The text of a summary-table row on the run page.
const summaryCell = (key) => page.evaluate((k) => {
  for (const tr of document.querySelectorAll('#summary-table tr')) {
    if (tr.querySelector('th')?.textContent === k) return tr.querySelector('td').textContent;
  }
  return null;
}, key);

// Opens `hash` with the API answers matching `pattern` held back for `ms`, and returns
// whether `selector` showed a loading state meanwhile (once none was shown).
async function seesLoading(hash, pattern, selector, ms = 2500) {
  // A held request may be gone by the time it is released (the page moved on).
  const hold = async (route) => {
    await new Promise((r) => setTimeout(r, ms));
    await route.continue().catch(() => {});
  };
  await page.route(pattern, hold);
  await goto('#/workers');  // leave the page, so that `hash` mounts its view afresh
  await goto(hash);
  let seen = false;
  try {
    await page.waitForSelector(`${selector} .loading`, { timeout: ms });
    seen = await page.isVisible(`${selector} .loading`);
  } catch { seen = false; }
  await page.unroute(pattern, hold);
  return seen;
}

// 1. Experiments list.
await goto('#/');
const expIds = [spec.finished.experiment, spec.live.experiment];
await waitFor('both experiments in the list', (ids) =>
  ids.every((id) => document.querySelector(`#experiments tr[data-experiment="${id}"]`)), expIds);
const finishedCounts = await page.innerText(
  `#experiments tr[data-experiment="${spec.finished.experiment}"] .counts`);
if (!finishedCounts.includes(`${spec.finished.runs.length} succeeded`)) {
  await fail(`finished experiment counts read "${finishedCounts}", expected ${spec.finished.runs.length} succeeded`);
}
ok(`experiments list shows #${expIds.join(' and #')} (finished: ${finishedCounts.replace(/\s+/g, ' ').trim()})`);
// A first visit compiles the frame and the page it opens, not every view and the chart
// library (one 118 KB bundle blocked a loaded machine's main thread 0.5 s).
const scriptKb = await page.evaluate(() => performance.getEntriesByType('resource')
  .filter((e) => /\.js(\?|$)/.test(e.name)).reduce((a, e) => a + e.decodedBodySize, 0) / 1024);
if (!(scriptKb > 0 && scriptKb < 40)) await fail(`the experiments list loaded ${scriptKb.toFixed(1)} KB of scripts, expected < 40 KB`);
ok(`the experiments list loads ${scriptKb.toFixed(1)} KB of scripts (each view and the charts are chunks of their own)`);
await shot('1-experiments');

// 2. The finished experiment: every run in the table, curves drawn.
const tExp = Date.now();
await goto(`#/experiments/${spec.finished.experiment}`);
await waitFor('the runs table', (n) =>
  Number(document.querySelector('#runs-table .vt-body')?.dataset.total || 0) >= n, spec.finished.runs.length);
await waitFor('points in the selected-runs chart', () =>
  Number(document.querySelector('#runs-chart')?.dataset.points || 0) > 0);
const usableMs = Date.now() - tExp;
const ids = await tableRunIds();
const want = [...spec.finished.runs].sort((a, b) => a - b);
if (JSON.stringify(ids) !== JSON.stringify(want)) {
  await fail(`runs table lists ${JSON.stringify(ids)}, expected ${JSON.stringify(want)}`);
}
ok(`runs table lists all ${ids.length} runs of experiment #${spec.finished.experiment}`);
const runs = await chartState('#runs-chart');
if (!(runs.points > 0 && runs.painted > 0)) await fail(`selected-runs chart drew nothing: ${JSON.stringify(runs)}`);
ok(`selected-runs chart drew ${runs.points} points (${runs.painted} painted pixel samples); ` +
  `table + first chart in ${usableMs} ms`);
await waitFor('points in the by-arm chart', () =>
  Number(document.querySelector('#arm-chart')?.dataset.points || 0) > 0);
ok(`by-arm chart drew ${(await chartState('#arm-chart')).points} points (mean ± sd)`);
await waitFor('the arms results table', () => document.querySelector('#arms-table tbody tr'));
ok('results table lists the arms');
// Sorting by run id descending puts the highest id first (sorted by the coordinator).
await page.click('#runs-table .vt-h:nth-child(2)');
await page.click('#runs-table .vt-h:nth-child(2)');
const firstRow = await waitFor('the table sorted by run, descending', (top) =>
  (document.querySelector('#runs-table .vt-row[data-run-id]')?.dataset.runId === String(top)
    ? top : 0), want[want.length - 1]);
if (Number(firstRow) !== want[want.length - 1]) await fail(`sort by run descending put #${firstRow} first`);
await page.fill('#runs-filter', `#${want[0]}`);
const filtered = await waitFor('the filtered table', (n) => {
  const t = Number(document.querySelector('#runs-table .vt-body')?.dataset.total || 0);
  return t >= 1 && t < n ? t : 0;
}, want.length);
ok(`sort and filter work (filter "#${want[0]}" leaves ${filtered})`);
await page.fill('#runs-filter', '');
await waitFor('the unfiltered table', (n) =>
  Number(document.querySelector('#runs-table .vt-body')?.dataset.total || 0) === n, want.length);
// The table shows the values the grid varies and the worker's name, not a hash.
const heads = await page.$$eval('#runs-table .vt-h', (hs) => hs.map((x) => x.textContent.replace(/[▲▼]/g, '').trim()));
for (const col of ['seed', 'aah.regime']) if (!heads.includes(col)) await fail(`runs table has no "${col}" column: ${heads.join(' | ')}`);
if (heads.includes('config')) await fail('runs table still shows the config hash column');
await page.click('#runs-table .vt-h:nth-child(2)');  // run id ascending again
const rowsShown = await page.$$eval('#runs-table .vt-row', (rs, cols) => rs.map((r) => {
  const cells = [...r.querySelectorAll('.vt-cell')].map((c) => c.textContent.trim());
  return { id: Number(r.dataset.runId), seed: cells[cols.indexOf('seed')], worker: cells[cols.indexOf('worker')] };
}), heads);
rowsShown.sort((a, b) => a.id - b.id);
const seedsShown = rowsShown.map((r) => Number(r.seed));
if (JSON.stringify(seedsShown) !== JSON.stringify(spec.finished.seeds)) {
  await fail(`runs table seeds ${JSON.stringify(seedsShown)}, database ${JSON.stringify(spec.finished.seeds)}`);
}
if (!rowsShown.every((r) => r.worker === spec.worker_name)) {
  await fail(`worker column shows ${JSON.stringify(rowsShown.map((r) => r.worker))}, the worker is named ${spec.worker_name}`);
}
ok(`runs table shows the grid's seed and aah.regime columns (seeds ${seedsShown.join(', ')}) and worker "${spec.worker_name}"`);
// Issue 19.5: the comparison's 95% CI is the t interval of the per-pair values.
const results = await page.evaluate(async (e) => (await fetch(`/api/v1/experiments/${e}/results?per_pair=1`)).json(),
  spec.finished.experiment);
const comp = results.comparisons[0];
const vals = comp.per_pair.map((p) => p.value);
const mean = vals.reduce((a, b) => a + b, 0) / vals.length;
const sd = Math.sqrt(vals.reduce((a, b) => a + (b - mean) ** 2, 0) / (vals.length - 1));
const t975 = { 2: 12.706, 3: 4.303, 4: 3.182 }[vals.length];
const wantCi = [mean - t975 * sd / Math.sqrt(vals.length), mean + t975 * sd / Math.sqrt(vals.length)];
const ciText = await waitFor('the comparison CI', () => document.querySelector('#comparisons td.ci')?.textContent || '');
const shown = (ciText.match(/-?[\d.]+(e[+-]?\d+)?/g) || []).map(Number);
if (shown.length !== 2 || shown.some((v, i) => Math.abs(v - wantCi[i]) > 5e-4 * Math.max(1, Math.abs(wantCi[i])))) {
  await fail(`comparison CI reads "${ciText}", the t interval of ${JSON.stringify(vals)} is [${wantCi.join(', ')}]`);
}
const verdict = await page.textContent('#comparisons td.verdict');
if (!/no clear difference|treatment (better|worse|higher|lower)/.test(verdict)) await fail(`comparison reading "${verdict}"`);
ok(`comparison "${comp.name}": 95% CI ${ciText} (t with ${vals.length - 1} df), "${verdict}"`);
await checkNoOverflow(`experiment #${spec.finished.experiment} (AAH-v3 arm)`);
await shot('2-experiment-finished');

// 2a. At scale (the scale bench measures 10^5 runs; here the rules that make it hold): the
// runs table moves pages of at most 1000 rows, comparisons come without their pairs until
// a comparison is opened, and an idle tab on a finished experiment asks only for its
// counts. The panels' numbers, axes and overlay.
{
  const fin = spec.finished.experiment;
  const seen = [];
  const onRequest = (r) => { if (r.url().includes('/api/')) seen.push(r.url().replace(spec.url, '')); };
  page.on('request', onRequest);
  await goto('#/workers');
  const loadFrom = seen.length;
  await goto(`#/experiments/${fin}`);
  await waitFor('every panel of the finished experiment', () =>
    document.querySelector('#runs-table .vt-row[data-run-id]') && document.querySelector('#comparisons tbody tr') &&
    Number(document.querySelector('#arm-chart')?.dataset.points || 0) > 0 &&
    Number(document.querySelector('#scatter')?.dataset.points || 0) > 0);
  // The overlay's first runs, the arm chart and the scatter are the coordinator's panel
  // reads (no SQL child process each): of POST /query only the window buckets' remains.
  const loaded = seen.slice(loadFrom);
  for (const panel of ['overlay', 'arms', 'scatter']) {
    if (!loaded.some((u) => u.startsWith(`/api/v1/experiments/${fin}/panels/${panel}`))) {
      await fail(`the experiment page did not read its ${panel} panel from /panels/${panel}: ${JSON.stringify(loaded)}`);
    }
  }
  const sqlReads = loaded.filter((u) => u.startsWith('/api/v1/query')).length;
  if (sqlReads > 1) await fail(`the experiment page ran ${sqlReads} SQL queries to draw its panels (at most 1 expected)`);
  // From node, not the page: a 400 in the page is a console error, which fails the run.
  const badPanel = await (async () => {
    const r = await fetch(`${spec.url}/api/v1/experiments/${fin}/panels/arms?key=train.loss&runs=0`);
    return [r.status, (await r.json()).error];
  })();
  if (badPanel[0] !== 400 || !/^runs: expected 1\.\.5000/.test(badPanel[1])) {
    await fail(`a bad panel request answered ${JSON.stringify(badPanel)}, expected 400 naming runs`);
  }
  ok(`panels from /panels/overlay, arms and scatter (${sqlReads} SQL read while loading); a bad one is 400 "${badPanel[1]}"`);
  const runsReqs = seen.filter((u) => u.includes(`/experiments/${fin}/runs`));
  for (const u of runsReqs) {
    const limit = Number(new URL(u, spec.url).searchParams.get('limit'));
    if (!(limit >= 1 && limit <= 1000)) await fail(`the runs table asked for ${u}: not a page of at most 1000 rows`);
  }
  const resultsReqs = seen.filter((u) => u.includes(`/experiments/${fin}/results`));
  if (!resultsReqs.length || resultsReqs.some((u) => u.includes('per_pair=1'))) {
    await fail(`the comparisons panel asked for ${JSON.stringify(resultsReqs)} (per-pair lists before any was opened)`);
  }
  const plain = await page.evaluate(async (e) => (await fetch(`/api/v1/experiments/${e}/results`)).json(), fin);
  if (plain.comparisons[0].per_pair !== undefined || plain.comparisons[0].n_pairs !== 2) {
    await fail(`GET results without per_pair=1 carries ${JSON.stringify(plain.comparisons[0]).slice(0, 200)}`);
  }
  ok(`runs table pages (${runsReqs.length} request(s), limit <= 1000); results without per-pair lists (n_pairs 2)`);
  const idleFrom = seen.length;
  await page.waitForTimeout(12000);
  const idle = seen.slice(idleFrom).map((u) => u.replace(/\?.*/, ''));
  const allowed = new Set([`/api/v1/experiments/${fin}`, '/api/v1/status']);
  const extra = idle.filter((u) => !allowed.has(u));
  if (extra.length) await fail(`an idle tab on finished experiment #${fin} still asked for ${JSON.stringify(extra)}`);
  ok(`an idle tab on the finished experiment asks only for its counts (${idle.length} requests in 12 s: ${[...new Set(idle)].join(', ')})`);
  page.off('request', onRequest);

  await page.click('#comparisons details.pairs-details summary');
  const pairsShown = await waitFor('the opened pairs', () => document.querySelectorAll('#comparisons ul.pairs li').length);
  if (pairsShown !== 2) await fail(`the comparison lists ${pairsShown} pairs, expected 2`);
  ok('a comparison\'s 2 pairs are built when it is opened');

  if (await page.isVisible('button[data-action="cancel experiment"]')) {
    await fail('a finished experiment offers "cancel experiment"');
  }
  ok('a finished experiment offers no cancel');

  // Mean ± SE to one decimal place, set by the SE; no "± —" (n = 1 shows the mean alone).
  const cells = await page.$$eval('#arms-table td.num', (tds) => tds.map((t) => t.textContent));
  for (const c of cells) {
    const m = c.match(/^(-?[\d.]+)( [KMG]?i?B)? ± ([\d.]+)/);
    // An SE of exactly 0 (every run equal) is "± 0" beside the mean as num() gives it.
    if (c.includes('± —') || (m && m[3] !== '0' && (m[1].split('.')[1] || '').length !== (m[3].split('.')[1] || '').length)) {
      await fail(`arms table cell "${c}": mean and SE at different precision`);
    }
  }
  ok(`arms table: ${cells.length} cells, mean and SE at one precision (${cells.slice(0, 2).join(' | ')})`);

  const axes = await page.evaluate(() => ['#runs-chart', '#arm-chart'].map((sel) => {
    const d = document.querySelector(sel).dataset;
    return [d.xlabel, d.ylabel];
  }));
  if (!axes.every(([x, y]) => x === 'step' && y === 'train.loss (nats/token)')) {
    await fail(`experiment charts' axes read ${JSON.stringify(axes)}`);
  }
  await page.check('#curve-controls .chart-log');
  await waitFor('log-scale curves', () => document.querySelector('#runs-chart').dataset.log === 'true' &&
    Number(document.querySelector('#runs-chart').dataset.points) > 0);
  await page.uncheck('#curve-controls .chart-log');
  ok('experiment charts say "step" and "train.loss (nats/token)"; log scale redraws them');

  // The scatter: a dot per run of eval.ppl against the grid's axis; the breakdown beside it.
  const dots = Number(await page.getAttribute('#scatter', 'data-points'));
  if (dots !== want.length) await fail(`scatter drew ${dots} dots, expected ${want.length}`);
  const groups = await page.$$eval('#breakdown-table tbody tr', (rs) => rs.map((r) => r.textContent));
  if (groups.length !== 2) await fail(`breakdown lists ${JSON.stringify(groups)}, expected one row per arm`);
  ok(`scatter of ${await page.inputValue('#scatter-x')} vs ${await page.inputValue('#scatter-y')}: ${dots} dots; breakdown ${groups.length} groups`);

  // Overlay: unticking an automatically chosen run leaves the others; "clear selection"
  // empties it; then every ticked run overlays (the cap is 20).
  const lines = () => page.evaluate(() => JSON.parse(document.querySelector('#runs-chart').dataset.colors || '[]').length);
  const auto = await lines();
  await page.click('#runs-table .vt-row input[type=checkbox] >> nth=0');
  await waitFor('one run fewer overlaid', (n) => JSON.parse(document.querySelector('#runs-chart').dataset.colors || '[]').length === n - 1, auto);
  await page.click('#clear-selection');
  await waitFor('no overlaid run', () => JSON.parse(document.querySelector('#runs-chart').dataset.colors || '[]').length === 0);
  await page.click('#runs-table .vt-row input[type=checkbox] >> nth=0');
  await page.click('#runs-table .vt-row input[type=checkbox] >> nth=1');
  await waitFor('two overlaid runs', () => JSON.parse(document.querySelector('#runs-chart').dataset.colors || '[]').length === 2 &&
    Number(document.querySelector('#runs-chart').dataset.points) > 0);
  ok(`overlay: ${auto} runs chosen automatically, one unticked leaves ${auto - 1}; clear selection empties it; 2 ticked overlay 2`);
}

// 2a'. Runs reused from an earlier experiment have curves (their source's points).
{
  await goto(`#/experiments/${spec.reused.experiment}`);
  await waitFor('the reused runs\' overlay', () => Number(document.querySelector('#runs-chart')?.dataset.points || 0) > 0);
  await waitFor('the reused experiment\'s arm chart', () => Number(document.querySelector('#arm-chart')?.dataset.points || 0) > 0);
  ok(`experiment #${spec.reused.experiment} (every run reused) draws its overlay and arm chart`);
  const t0 = Date.now();
  await goto(`#/runs/${spec.reused.run}`);
  await waitFor('the reused run\'s curves', () =>
    [...document.querySelectorAll('#run-charts .chart')].some((c) => Number(c.dataset.points) > 0));
  const ms = Date.now() - t0;
  // The first metrics read follows the run's own answer (it waited for the next 5 s tick).
  if (ms > 4000) await fail(`the run page drew its curves after ${ms} ms`);
  ok(`run #${spec.reused.run} (reused) draws its curves, ${ms} ms after navigation`);
}

// 2a''. 400 px: nothing overflows; a 64-character experiment name keeps its row one line.
{
  await page.setViewportSize({ width: 400, height: 900 });
  await goto('#/');
  await waitFor('the experiments list', () => document.querySelectorAll('#experiments tr[data-experiment]').length >= 3);
  const heights = await page.$$eval('#experiments tbody tr[data-experiment]', (rs) => rs.map((r) => r.getBoundingClientRect().height));
  if (Math.max(...heights) > 1.6 * Math.min(...heights)) await fail(`experiments list rows are ${JSON.stringify(heights)} px tall`);
  await checkNoOverflow('experiments list at 400 px');
  await shot('2a-experiments-400');
  await goto(`#/experiments/${spec.finished.experiment}`);
  await waitFor('the finished experiment at 400 px', () => Number(document.querySelector('#arm-chart')?.dataset.points || 0) > 0 &&
    document.querySelector('#comparisons tbody tr'));
  await checkNoOverflow('experiment page at 400 px');
  await shot('2a-experiment-400');
  await goto(`#/runs/${spec.provenance.run}`);
  await waitFor('the run page at 400 px', () => [...document.querySelectorAll('#run-charts .chart')].some((c) => Number(c.dataset.points) > 0));
  await checkNoOverflow('run page at 400 px');
  await shot('2a-run-400');
  await page.setViewportSize({ width: 1400, height: 1000 });
  ok(`at 400 px every page fits and list rows stay one line (${Math.round(Math.min(...heights))}-${Math.round(Math.max(...heights))} px)`);
}

// 2b. Panels say they are loading while their data are on the way (issue 19.6).
if (!(await seesLoading(`#/experiments/${spec.finished.experiment}`, '**/api/v1/experiments/*/results', '#results'))) {
  await fail('the comparisons panel showed no loading state while its data were held back');
}
if (!(await seesLoading(`#/runs/${spec.provenance.run}`, `**/api/v1/runs/${spec.provenance.run}`, '#summary'))) {
  await fail('the run page showed no loading state while the run was held back');
}
ok('the experiment and run pages say "loading…" while their data are on the way');

// 2c. The command run's known values, as a researcher reads them.
await goto(`#/runs/${spec.command.ok_run}`);
await waitFor('the command run summary', () => document.querySelectorAll('#summary-table tr').length >= 3);
for (const [key, text] of [['test.value', '9110'], ['test.big', '12001'], ['mem.peak_bytes', '229.5 MiB']]) {
  const got = await summaryCell(key);
  if (got !== text) await fail(`run #${spec.command.ok_run} shows ${key} as "${got}", expected "${text}"`);
}
ok('numbers keep their digits: 9110.08 reads "9110", 12000.5 "12001", 240652000 bytes "229.5 MiB"');
const note = await waitFor('the charts note', () => document.querySelector('#charts-note')?.textContent || '');
const m = note.match(/showing (\d+) of (\d+) metrics/);
if (!m || Number(m[2]) !== 16) await fail(`charts note reads "${note}", expected "showing 12 of 16 metrics"`);
await page.click('#charts-more');
const nCharts = await waitFor('every chart', (n) => {
  const c = document.querySelectorAll('#run-charts .chart').length;
  return c === n ? c : 0;
}, Number(m[2]));
for (const group of ['once.value', 'm.k01', 'tiny.lr']) {
  const sel = `#run-charts .chart[data-group="${group}"]`;
  await waitFor(`points of ${group}`, (x) => Number(document.querySelector(x)?.dataset.points || 0) > 0, sel);
  const px = await seriesPixels(sel);
  if (!(px > 0)) await fail(`chart ${group} drew no pixel of its series colour (an invisible one-point line)`);
}
ok(`"${note}" with a button; all ${nCharts} charts shown, one-point metrics drawn as visible dots`);
const ticks = JSON.parse(await page.getAttribute('#run-charts .chart[data-group="tiny.lr"]', 'data-yticks') || '[]');
const shownTicks = ticks.filter((t) => t !== '');
if (shownTicks.length < 2 || new Set(shownTicks).size !== shownTicks.length) {
  await fail(`tiny.lr axis labels collapse: ${JSON.stringify(ticks)}`);
}
ok(`axis labels of a 0.001..0.003 metric stay distinct: ${shownTicks.join(' ')}`);
await checkNoOverflow(`run #${spec.command.ok_run} (16 metrics)`);
await shot('2c-command-run');

await goto(`#/runs/${spec.command.fail_run}`);
const cause = await waitFor('the failure cause', () => document.querySelector('#run-cause')?.textContent || '');
if (!cause.includes('train.bin: cannot open')) await fail(`run #${spec.command.fail_run} shows cause "${cause}"`);
ok(`failed run #${spec.command.fail_run} says why: "${cause.replace(/\s+/g, ' ').slice(0, 120)}"`);
await shot('2d-command-failed');

// 3. A live curve gains points while its run trains (run page, pushed over server-sent events).
await goto(`#/runs/${spec.live.run}`);
const liveSel = '#run-charts .chart[data-group="loss"]';
const first = await waitFor('first live points', (sel) =>
  Number(document.querySelector(sel)?.dataset.points || 0), liveSel, 120000);
// Growth shows in the last step drawn (a long curve is bucketed to a bounded point count).
const lastStep = (sel) => Number(document.querySelector(sel)?.dataset.lastStep ?? -1);
const firstStep = await page.evaluate(lastStep, liveSel);
const grown = await waitFor('the live curve to gain steps', ([sel, n]) => {
  const x = Number(document.querySelector(sel)?.dataset.lastStep ?? -1);
  return x > n ? x : 0;
}, [liveSel, firstStep], 120000);
ok(`live curve of run #${spec.live.run} (${first} points) grew from step ${firstStep} to ${grown} while training`);
const streamed = await page.evaluate(() => Number(document.documentElement.dataset.livePoints || 0));
if (!(streamed > 0)) await fail('no metric points arrived over the live stream (GET /api/v1/stream)');
ok(`${streamed} metric points arrived over the live stream (server-sent events)`);
await shot('3-run-live');

// 3b. The live experiment page's overlay also grows.
await goto(`#/experiments/${spec.live.experiment}`);
const e0 = await waitFor('live experiment chart points', () =>
  Number(document.querySelector('#runs-chart')?.dataset.points || 0), null, 60000);
const eStep = await page.evaluate(lastStep, '#runs-chart');
const e1 = await waitFor('the live experiment chart to grow', (n) => {
  const x = Number(document.querySelector('#runs-chart')?.dataset.lastStep ?? -1);
  return x > n ? x : 0;
}, eStep, 60000);
ok(`live experiment overlay (${e0} points) grew from step ${eStep} to ${e1}`);
const etaLive = await waitFor('an ETA projected from the live run\'s progress', () => {
  const t = document.querySelector('#eta')?.textContent || '';
  return t.startsWith('≈') ? t : '';
});
ok(`live experiment ETA ${etaLive}`);
await shot('4-experiment-live');

// 3c. System series sampled by the worker, beside the loss: the live run's process RSS.
{
  await goto(`#/runs/${spec.live.run}`);
  const sel = '#run-charts .chart[data-group="sys.host_rss_bytes"]';
  await waitFor('the sys.host_rss_bytes chart', (x) => Number(document.querySelector(x)?.dataset.points || 0) > 0, sel, 90000);
  const ticks = JSON.parse(await page.getAttribute(sel, 'data-yticks') || '[]').filter((t) => t);
  if (!ticks.length || !ticks.every((t) => / (B|KiB|MiB|GiB)$/.test(t))) await fail(`RSS axis ticks ${JSON.stringify(ticks)}`);
  const order = await page.$$eval('#run-charts .chart', (cs) => cs.map((c) => c.dataset.group));
  if (order[0] !== 'loss' || !order[1].startsWith('sys.')) await fail(`run charts in order ${order.join(', ')}`);
  ok(`live run's host RSS plotted beside the loss (ticks ${ticks.join(' ')})`);
  await shot('3c-run-system');
}

// 3d. Cancelling an experiment asks first; dismissed, nothing is sent.
{
  await goto(`#/experiments/${spec.live.experiment}`);
  await page.waitForSelector('button[data-action="cancel experiment"]:visible');
  const asked = new Promise((resolve) => page.once('dialog', async (d) => { resolve(d.message()); await d.dismiss(); }));
  await page.click('button[data-action="cancel experiment"]');
  const question = await asked;
  if (!question.includes(`#${spec.live.experiment}`)) await fail(`cancel asked "${question}"`);
  const said = await waitFor('the dismissed cancel', () => document.querySelector('#exp-msg')?.textContent || '');
  if (!said.includes('not sent')) await fail(`after a dismissed cancel the page says "${said}"`);
  ok(`cancel experiment asks "${question.slice(0, 70)}…"; dismissed, nothing is sent`);
}

// 4. Cancel without a token is refused (and says so).
await page.evaluate(() => localStorage.removeItem('headlab.token'));
await goto(`#/runs/${spec.cancel_run}`);
await page.waitForSelector('button[data-action="cancel"]');
await page.click('button[data-action="cancel"]');
const refused = await waitFor('the cancel refusal', () => {
  const t = document.querySelector('#run-msg')?.textContent || '';
  return t.includes('refused') ? t : '';
});
if (!refused.includes('refused: write token required')) await fail(`cancel said "${refused}"`);
ok(`cancel without a token: "${refused}"`);
await shot('5-cancel-refused');

// Waits until the run page has drawn its curves (so each screenshot shows them).
const runCurves = () => waitFor('the run page curves', () =>
  [...document.querySelectorAll('#run-charts .chart')].some((c) => Number(c.dataset.points) > 0));

// 5. Head grid and provenance.
await goto(`#/runs/${spec.heads.run}`);
await runCurves();
const cells = spec.heads.layers * spec.heads.heads;
const nCells = await waitFor(`${cells} head-grid cells`, (n) => {
  const c = document.querySelectorAll('#head-grid .hg-cell').length;
  return c === n ? c : 0;
}, cells);
const filled = await page.$$eval('#head-grid .hg-cell:not(.empty)', (els) => els.length);
if (filled !== cells) await fail(`head grid has ${filled} filled cells of ${cells}`);
ok(`head grid has ${nCells} = ${spec.heads.layers} x ${spec.heads.heads} cells, all filled`);
await page.selectOption('#head-mode', 'window');
await shot('6-heads-window');
await page.selectOption('#head-mode', 'role');

await goto(`#/runs/${spec.provenance.run}`);
const commit = await waitFor('the commit in the provenance panel', () =>
  document.querySelector('#provenance code.commit')?.textContent || '');
if (commit !== spec.provenance.commit) await fail(`provenance shows commit "${commit}", expected "${spec.provenance.commit}"`);
ok(`provenance of run #${spec.provenance.run} shows commit ${commit}`);
const cuda = await page.evaluate(() => [...document.querySelectorAll('#provenance tr')]
  .find((tr) => tr.querySelector('th')?.textContent === 'CUDA')?.querySelector('td')?.textContent);
if (cuda !== 'none (CPU run)') await fail(`provenance of a CPU run shows CUDA "${cuda}"`);
ok('a CPU run\'s provenance says CUDA "none (CPU run)"');
const cfgNote = await page.textContent('#config-note');
const [shownKeys, allKeys] = (cfgNote.match(/(\d+) of (\d+) keys/) || []).slice(1).map(Number);
if (!(shownKeys > 0 && shownKeys * 2 < allKeys)) await fail(`config shows "${cfgNote}"`);
if (await page.$('#config-table th:text-is("saf.rate")')) await fail('config of a run without SAF shows saf.rate');
ok(`config shows ${shownKeys} of ${allKeys} keys (no defaults of unused methods)`);
// Artifacts download through the API with the hash recorded for them (reads rule).
const art = spec.artifact;
const link = await page.getAttribute(`#artifacts-table a[href$="/artifacts/${art.attempt}/${art.seq}"]`, 'href');
if (!link) await fail(`no download link for artifact ${art.attempt}/${art.seq} of run #${art.run}`);
const gotSha = await page.evaluate(async (url) => {
  const buf = await (await fetch(url)).arrayBuffer();
  return [...new Uint8Array(await crypto.subtle.digest('SHA-256', buf))].map((b) => b.toString(16).padStart(2, '0')).join('');
}, link);
if (gotSha !== art.sha256) await fail(`artifact ${link} has SHA-256 ${gotSha}, recorded ${art.sha256}`);
// A click saves the file, as a user gets it.
const [saved] = await Promise.all([page.waitForEvent('download', { timeout: kTimeoutMs }),
  page.click(`#artifacts-table a[href$="/artifacts/${art.attempt}/${art.seq}"]`)]);
const savedSha = crypto.createHash('sha256').update(fs.readFileSync(await saved.path())).digest('hex');
if (savedSha !== art.sha256) await fail(`the saved ${saved.suggestedFilename()} has SHA-256 ${savedSha}`);
ok(`checkpoint ${art.attempt}/${art.seq} downloads from the run page (a click saves ${saved.suggestedFilename()}) with its recorded SHA-256`);
await runCurves();
await checkNoOverflow(`run #${spec.provenance.run}`);
await shot('7-run-provenance');

// 6. Workers.
await goto('#/workers');
await waitFor('a worker row', () => document.querySelector('#workers tbody tr[data-worker]'));
ok(`workers page lists ${await page.$$eval('#workers tbody tr[data-worker]', (r) => r.length)} worker(s)`);
await shot('8-workers');

// 7. Tags and notes with the write token; the search page finds the tagged run.
await page.evaluate((t) => localStorage.setItem('headlab.token', t), spec.token);
await goto(`#/runs/${spec.provenance.run}`);
await page.waitForSelector('#run-tags .tag-input');
await page.fill('#run-tags .tag-input', 'good');
await page.click('#run-tags .tag-add');
await waitFor('the tag on the run', () => document.querySelector('#run-tags .tags')?.dataset.tags === 'good');
ok(`run #${spec.provenance.run} tagged "good" from its page`);
await goto(`#/experiments/${spec.finished.experiment}`);
await page.waitForSelector('#exp-note details');
await page.click('#exp-note details summary');
await page.fill('#exp-note textarea', 'seed 2 looks off');
await page.click('#exp-note .note-save');
await waitFor('the saved note', () => document.querySelector('#exp-note .note-text')?.textContent === 'seed 2 looks off');
ok(`experiment #${spec.finished.experiment} has the note "seed 2 looks off"`);
await goto('#/search?tag=good');
const found = await waitFor('the tagged run in the search', () =>
  [...document.querySelectorAll('#search-table tr[data-run-id]')].map((r) => Number(r.dataset.runId)).join(','));
if (found !== String(spec.provenance.run)) await fail(`search for tag good lists runs ${found}`);
ok(`search across experiments for tag "good" lists run #${found}`);
await shot('9-search');

// 8. Overlay across experiments from the runs search.
{
  await goto('#/search?status=succeeded');
  await waitFor('the succeeded runs', () => document.querySelector('#search-table tr[data-run-id]'));
  const pick = await page.$$eval('#search-table tr[data-run-id]', (rows, exps) => {
    const out = [];
    for (const e of exps) {
      const r = rows.find((x) => x.querySelector('td:nth-child(3) a')?.getAttribute('href') === `#/experiments/${e}`);
      if (r) out.push(r.dataset.runId);
    }
    return out;
  }, [spec.finished.experiment, spec.reused.experiment]);
  if (pick.length !== 2) await fail(`search lists no run of experiments #${spec.finished.experiment} and #${spec.reused.experiment}`);
  for (const r of pick) await page.check(`#search-table tr[data-run-id="${r}"] input.overlay-tick`);
  await waitFor('two runs of two experiments overlaid', () => {
    const c = document.querySelector('#overlay-chart');
    return Number(c?.dataset.points || 0) > 0 && new Set(JSON.parse(c.dataset.colors || '[]')).size === 2;
  });
  ok(`runs #${pick.join(' and #')} of two experiments overlay in one chart, a colour per experiment`);
  // Two ticked runs offer their config diff.
  const [lo, hi] = pick.map(Number).sort((x, y) => x - y);
  const href = await waitFor('the ticked runs\' diff link', () => document.querySelector('#overlay-diff a')?.getAttribute('href'));
  if (href !== `#/diff/${lo}/${hi}`) await fail(`the two ticked runs' diff link is "${href}", expected #/diff/${lo}/${hi}`);
  ok(`two ticked runs link to their diff (${href})`);
  await shot('10-search-overlay');
}

// 9. The config diff of two runs, from the run page's form: the keys `headlab diff` names.
{
  await goto(`#/runs/${spec.diff.a}`);
  await page.fill('#diff-b', String(spec.diff.b));
  await page.click('#diff-go');
  await waitFor('the config diff', () => document.querySelector('#diff-config tbody tr'));
  const keys = await page.$$eval('#diff-config tbody tr', (rs) => rs.map((r) => r.dataset.key));
  if (JSON.stringify(keys) !== JSON.stringify(spec.diff.keys)) {
    await fail(`diff of runs #${spec.diff.a} and #${spec.diff.b} lists ${JSON.stringify(keys)}; headlab diff: ${JSON.stringify(spec.diff.keys)}`);
  }
  const seedRow = await page.$$eval('#diff-config tr[data-key="seed"] td', (tds) => tds.map((t) => t.textContent));
  const seeds = await page.evaluate(async (ids) => Promise.all(ids.map(async (i) => {
    const c = (await (await fetch(`/api/v1/runs/${i}`)).json()).config;
    return String((typeof c === 'string' ? JSON.parse(c) : c).seed);
  })), [spec.diff.a, spec.diff.b]);
  if (JSON.stringify(seedRow) !== JSON.stringify(seeds)) await fail(`diff's seed row ${JSON.stringify(seedRow)}, the runs' seeds ${JSON.stringify(seeds)}`);
  await checkNoOverflow('the diff page');
  ok(`diff of runs #${spec.diff.a} and #${spec.diff.b}: ${keys.join(', ')} (as headlab diff); seeds ${seeds.join(' vs ')}`);
  await shot('11-diff');
}

// 10. An axis the grid does not pair on is never pooled: arms and comparisons per level.
// b - a = params.rep * params.lrate: mean 1.5 over 2 pairs at lrate 1, 3 at lrate 2 (pooled:
// 2.25 over 4).
{
  await goto(`#/experiments/${spec.strata.experiment}`);
  await waitFor('the strata comparisons', () => document.querySelectorAll('#comparisons tbody tr').length >= 2);
  const heads = await page.$$eval('#arms-table thead th[data-arm]', (ths) => ths.map((t) => `${t.dataset.arm} ${t.dataset.stratum}`));
  const b = 'prune_gate_taylor_r25_tokens';  // arm b: as long a name as the grids in experiments/ use
  const wantHeads = ['a params.lrate=1', 'a params.lrate=2', `${b} params.lrate=1`, `${b} params.lrate=2`];
  if (JSON.stringify([...heads].sort()) !== JSON.stringify(wantHeads)) await fail(`arms table columns ${JSON.stringify(heads)}, expected ${JSON.stringify(wantHeads)}`);
  const rows = await page.$$eval('#comparisons tbody tr', (rs) => rs.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent)));
  const got = rows.map((r) => [r[0], Number(r[4]), parseFloat(r[5])]).sort((x, y) => x[2] - y[2]);
  const want = [[1, 2, 1.5], [2, 2, 3]];
  for (let i = 0; i < 2; ++i) {
    if (!got[i] || !got[i][0].includes(`params.lrate=${want[i][0]}`) || got[i][1] !== want[i][1] || Math.abs(got[i][2] - want[i][2]) > 1e-9) {
      await fail(`strata comparisons ${JSON.stringify(got)}, expected params.lrate 1: n 2, mean 1.5; params.lrate 2: n 2, mean 3`);
    }
  }
  ok(`arms ${heads.join(', ')}; comparisons ${got.map((g) => `"${g[0]}" n ${g[1]} mean ${g[2]}`).join(', ')}`);
  // The breakdown beside the scatter groups by arm x params.lrate too: a 100, 100;
  // b 101.5 (lrate 1: 101, 102), 103 (lrate 2: 102, 104).
  await waitFor('the breakdown by arm x params.lrate', () => document.querySelectorAll('#breakdown-table tbody tr').length === 4);
  const groups = await page.$$eval('#breakdown-table tbody tr', (rs) => rs.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent)));
  const means = groups.map((g) => parseFloat(g[g.length - 1])).sort((x, y) => x - y);
  if (JSON.stringify(means) !== JSON.stringify([100, 100, 101.5, 103]) || groups.some((g) => g[g.length - 2] !== '2')) {
    await fail(`breakdown groups ${JSON.stringify(groups)}, expected means 100, 100, 101.5, 103 over 2 runs each`);
  }
  ok(`breakdown by arm x params.lrate: ${groups.map((g) => g.join(' ')).join(' | ')}`);
  // A run's colour in the runs table is its group's, as in the breakdown and the charts
  // (not one colour per arm across learning rates).
  const colours = await page.evaluate(() => {
    const byGroup = Object.fromEntries([...document.querySelectorAll('#breakdown-table tbody tr')]
      .map((r) => [r.dataset.group, r.querySelector('.swatch').style.background]));
    return [...document.querySelectorAll('#runs-table .vt-row[data-run-id] .swatch')]
      .map((sw) => [sw.parentElement.title, sw.style.background, byGroup[sw.parentElement.title]]);
  });
  const mismatched = colours.filter(([, mine, group]) => !group || mine !== group);
  if (colours.length !== 8 || mismatched.length || new Set(colours.map((c) => c[1])).size !== 4) {
    await fail(`runs table colours ${JSON.stringify(colours)}: not one per arm x params.lrate group as in the breakdown`);
  }
  ok(`runs table: 8 runs in their groups' 4 colours (${[...new Set(colours.map((c) => c[0]))].join(', ')})`);
  // At 1400 px the arm names are whole, not cut to an ellipsis.
  const cut = await page.$$eval('#runs-table .vt-row[data-run-id]', (rows) => rows
    .map((r) => [...r.children].find((c) => c.querySelector('.swatch')))
    .filter((c) => c && c.scrollWidth > c.clientWidth).map((c) => `${c.textContent} (${c.scrollWidth} > ${c.clientWidth} px)`));
  if (cut.length) await fail(`arm names cut at 1400 px: ${cut.join(', ')}`);
  ok('arm names in the runs table are whole at 1400 px');
  await shot('12-strata');
}

// 11. A finished comparison whose treatment failed says so (not "no complete pair yet").
{
  await goto(`#/experiments/${spec.command.experiment}`);
  const reading = await waitFor('the failed comparison\'s reading', () => document.querySelector('#comparisons td.verdict')?.textContent);
  if (!/no run of arm "fail" succeeded \(1 failed\)/.test(reading)) await fail(`the failed arm's comparison reads "${reading}"`);
  ok(`a comparison whose treatment failed reads "${reading}"`);
}

// 12. A cancelled run says why it stopped (a user, or an early stop's rule), not "failed".
{
  await goto(`#/runs/${spec.cancelled.run}`);
  const cause = await waitFor('the cancelled run\'s reason', () => document.querySelector('#run-cause')?.textContent);
  if (!cause.startsWith(`stopped: ${spec.cancelled.reason}`)) await fail(`cancelled run #${spec.cancelled.run} says "${cause}"`);
  ok(`cancelled run #${spec.cancelled.run} says "${cause.slice(0, 80)}"`);
}

if (consoleErrors.length) await fail(`browser console errors: ${consoleErrors.join(' | ')}`);
await close();
log('all dashboard checks passed');
