// Drives the dashboard in headless Chromium (Debian's /usr/bin/chromium, via playwright-core)
// and checks what a researcher would look at. Usage: node check.mjs SPEC.json, where SPEC is
// {url, screens, finished: {experiment, runs: [ids]}, live: {experiment, run},
//  heads: {run, layers, heads}, provenance: {run, commit}, cancel_run}
// (written by tests/dashboard_test.sh from the real coordinator's database).
// Prints one "ok: ..." line per check; exits 1 on the first failure (with a screenshot).
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
// Sorting by run id descending puts the highest id first.
await page.click('#runs-table .vt-h:nth-child(2)');
await page.click('#runs-table .vt-h:nth-child(2)');
const firstRow = await page.getAttribute('#runs-table .vt-row', 'data-run-id');
if (Number(firstRow) !== want[want.length - 1]) await fail(`sort by run descending put #${firstRow} first`);
await page.fill('#runs-filter', `#${want[0]}`);
const filtered = await page.getAttribute('#runs-table .vt-body', 'data-total');
if (Number(filtered) < 1 || Number(filtered) > want.length) await fail(`filter left ${filtered} rows`);
ok(`sort and filter work (filter "#${want[0]}" leaves ${filtered})`);
await page.fill('#runs-filter', '');
await shot('2-experiment-finished');

// 3. A live curve gains points while its run trains (run page, pushed over server-sent events).
await goto(`#/runs/${spec.live.run}`);
const liveSel = '#run-charts .chart[data-group="loss"]';
const first = await waitFor('first live points', (sel) =>
  Number(document.querySelector(sel)?.dataset.points || 0), liveSel, 120000);
const grown = await waitFor('the live curve to gain points', ([sel, n]) => {
  const p = Number(document.querySelector(sel)?.dataset.points || 0);
  return p > n ? p : 0;
}, [liveSel, first], 120000);
ok(`live curve of run #${spec.live.run} grew from ${first} to ${grown} points while training`);
const streamed = await page.evaluate(() => Number(document.documentElement.dataset.livePoints || 0));
if (!(streamed > 0)) await fail('no metric points arrived over the live stream (GET /api/v1/stream)');
ok(`${streamed} metric points arrived over the live stream (server-sent events)`);
await shot('3-run-live');

// 3b. The live experiment page's overlay also grows.
await goto(`#/experiments/${spec.live.experiment}`);
const e0 = await waitFor('live experiment chart points', () =>
  Number(document.querySelector('#runs-chart')?.dataset.points || 0), null, 60000);
const e1 = await waitFor('the live experiment chart to grow', (n) => {
  const p = Number(document.querySelector('#runs-chart')?.dataset.points || 0);
  return p > n ? p : 0;
}, e0, 60000);
ok(`live experiment overlay grew from ${e0} to ${e1} points`);
const etaLive = await waitFor('an ETA projected from the live run\'s progress', () => {
  const t = document.querySelector('#eta')?.textContent || '';
  return t.startsWith('≈') ? t : '';
});
ok(`live experiment ETA ${etaLive}`);
await shot('4-experiment-live');

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
await runCurves();
await shot('7-run-provenance');

// 6. Workers.
await goto('#/workers');
await waitFor('a worker row', () => document.querySelector('#workers tbody tr[data-worker]'));
ok(`workers page lists ${await page.$$eval('#workers tbody tr[data-worker]', (r) => r.length)} worker(s)`);
await shot('8-workers');

if (consoleErrors.length) await fail(`browser console errors: ${consoleErrors.join(' | ')}`);
await close();
log('all dashboard checks passed');
