// The dashboard at scale, in headless Chromium (docs/BENCHMARKS.md "Dashboard at scale"):
// how long each page takes to be usable, the longest main-thread block (Long Tasks API)
// while loading and while sorting, filtering, scrolling and opening a comparison's pairs,
// and what an idle experiment tab costs the coordinator. Usage:
//   node scale_bench.mjs URL EXPERIMENT_ID COORDINATOR_PID [REPEATS] [IDLE_SECONDS]
// Prints one line per measurement and a JSON summary line ("summary: {...}"); SCREENS=DIR
// also saves screenshots of the experiment page at 1400 and 400 px.
import fs from 'node:fs';
import { launch } from './browser.mjs';

const [url, experiment, pidText, repeatsText, idleText] = process.argv.slice(2);
if (!url || !experiment || !pidText) {
  console.error('usage: node scale_bench.mjs URL EXPERIMENT_ID COORDINATOR_PID [REPEATS] [IDLE_SECONDS]');
  process.exit(2);
}
const repeats = Number(repeatsText || 3);
const idleSeconds = Number(idleText || 60);
const kTimeout = 60000;
const { page, context, close } = await launch();
await context.addInitScript(() => {
  window.__longTasks = [];
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) window.__longTasks.push(e.duration);
  }).observe({ type: 'longtask', buffered: true });
});
let requests = [];
page.on('response', (r) => {
  if (!r.url().includes('/api/')) return;
  requests.push({ url: r.url().replace(url, ''), bytes: Number(r.headers()['content-length'] || 0) });
});
// Where a page's time goes: each API request's start and duration (the browser's own
// timing: request sent to last byte), printed per experiment-page load.
let timed = [];
page.on('requestfinished', (r) => {
  if (!r.url().includes('/api/')) return;
  const t = r.timing();
  timed.push({ at: t.startTime, ms: Math.round(t.responseEnd), req: `${r.method()} ${r.url().replace(url, '')} ${
    (r.postData() || '').replace(/\s+/g, ' ').slice(8, 70)}`.slice(0, 120) });
});

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const longest = () => page.evaluate(() => Math.max(0, ...window.__longTasks));
const resetLong = () => page.evaluate(() => { window.__longTasks = []; });
const waitFor = (fn, arg) => page.waitForFunction(fn, arg, { timeout: kTimeout, polling: 'raf' });
const points = (sel) => Number(document.querySelector(sel)?.dataset.points || 0) > 0;

// CPU seconds the coordinator has used (utime + stime of /proc/PID/stat, in clock ticks).
function cpuSeconds() {
  const stat = fs.readFileSync(`/proc/${pidText}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;  // fields 14, 15; CLK_TCK = 100 on Linux
}

async function load(hash, marks) {
  await page.goto('about:blank');
  timed = [];
  const t0 = Date.now();
  await page.goto(`${url}/${hash}`, { waitUntil: 'domcontentloaded' });
  const out = {};
  for (const [name, fn, arg] of marks) {
    await waitFor(fn, arg);
    out[name] = Date.now() - t0;
  }
  out.longest_task_ms = Math.round(await longest());
  if (hash.startsWith('#/experiments/')) {
    for (const r of timed.sort((a, b) => a.at - b.at)) {
      console.log(`  request at ${Math.round(r.at - t0)} ms, ${r.ms} ms: ${r.req}`);
    }
  }
  return out;
}

const results = {};
const record = (page, m) => {
  results[page] = results[page] || [];
  results[page].push(m);
  console.log(`${page}: ${JSON.stringify(m)}`);
};
const runsUrl = `${url}/api/v1/experiments/${experiment}/runs?limit=1`;
const total = (await (await fetch(runsUrl)).json()).total;
const runId = (await (await fetch(`${runsUrl}&offset=${Math.floor(total / 2)}`)).json()).runs[0].id;

for (let i = 0; i < repeats; i++) {
  record('experiments list', await load('#/', [
    ['list', (e) => document.querySelector(`#experiments tr[data-experiment="${e}"]`), experiment]]));
  record('experiment', await load(`#/experiments/${experiment}`, [
    ['table', () => document.querySelector('#runs-table .vt-row[data-run-id]')],
    ['first_chart', points, '#runs-chart'],
    ['arm_chart', points, '#arm-chart'],
    ['scatter', points, '#scatter'],
    ['comparisons', () => document.querySelector('#comparisons tbody tr')]]));
  record('run', await load(`#/runs/${runId}`, [
    ['curves', () => [...document.querySelectorAll('#run-charts .chart')].some((c) => Number(c.dataset.points) > 0)]]));
  record('search', await load('#/search?status=failed', [
    ['table', () => document.querySelector('#search-table tr[data-run-id]')]]));
}

// Interactions on the experiment page (already loaded by the last repeat above).
await page.goto(`${url}/#/experiments/${experiment}`);
await waitFor(() => document.querySelector('#runs-table .vt-row[data-run-id]') &&
  document.querySelector('#comparisons tbody tr'));
async function interact(name, act, done, arg) {
  await page.waitForTimeout(300);
  await resetLong();
  const t0 = Date.now();
  await act();
  await waitFor(done, arg);
  const m = { ms: Date.now() - t0, longest_task_ms: Math.round(await longest()) };
  record(`interaction: ${name}`, m);
}
const firstId = () => page.evaluate(() => document.querySelector('#runs-table .vt-row[data-run-id]')?.dataset.runId);
let before = await firstId();
await interact('sort by eval.ppl', () => page.click('#runs-table .vt-h[title="sort by eval.ppl"]'),
  (b) => document.querySelector('#runs-table .vt-row[data-run-id]')?.dataset.runId !== b, before);
before = await firstId();
await interact('sort by eval.ppl descending', () => page.click('#runs-table .vt-h[title="sort by eval.ppl"]'),
  (b) => document.querySelector('#runs-table .vt-row[data-run-id]')?.dataset.runId !== b, before);
await interact('scroll to the middle', () => page.evaluate(() => {
  const b = document.querySelector('#runs-table .vt-body');
  b.scrollTop = b.scrollHeight / 2;
}), () => {
  const b = document.querySelector('#runs-table .vt-body');
  const rows = [...b.querySelectorAll('.vt-row[data-run-id]')];
  return rows.length > 5 && !b.querySelector('.vt-pending');
});
const seed = Math.floor(total / 8);  // one run per arm and learning rate
await interact(`filter "seed=${seed}" (typed)`, () => page.type('#runs-filter', `seed=${seed}`, { delay: 40 }),
  () => document.querySelector('#runs-table .vt-body')?.dataset.total === '4');
await interact('open a comparison\'s pairs', () => page.click('#comparisons details summary'),
  () => document.querySelectorAll('#comparisons details ul.pairs li').length > 0);

// Screenshots for a person (SCREENS=DIR): the experiment page at 1400 and 400 px.
if (process.env.SCREENS) {
  fs.mkdirSync(process.env.SCREENS, { recursive: true });
  for (const width of [1400, 400]) {
    await page.setViewportSize({ width, height: 1000 });
    await page.goto(`${url}/#/experiments/${experiment}`);
    await waitFor(() => document.querySelector('#comparisons tbody tr') &&
      Number(document.querySelector('#scatter')?.dataset.points || 0) > 0);
    await page.waitForTimeout(500);
    await page.screenshot({ path: `${process.env.SCREENS}/experiment-${width}.png`, fullPage: true });
  }
  await page.setViewportSize({ width: 1400, height: 1000 });
}

// An idle tab on the finished experiment: what it asks and what that costs the coordinator.
await page.goto(`${url}/#/experiments/${experiment}`);
await waitFor(() => document.querySelector('#comparisons tbody tr') &&
  Number(document.querySelector('#scatter')?.dataset.points || 0) > 0);
await page.waitForTimeout(2000);
// What the coordinator spends with no tab open (its own timers), over the same time.
const blank = await context.newPage();
await page.goto('about:blank');
const base0 = cpuSeconds();
await blank.waitForTimeout(idleSeconds * 1000);
const baseline = cpuSeconds() - base0;
await blank.close();
await page.goto(`${url}/#/experiments/${experiment}`);
await waitFor(() => document.querySelector('#comparisons tbody tr') &&
  Number(document.querySelector('#scatter')?.dataset.points || 0) > 0);
await page.waitForTimeout(2000);
requests = [];
const cpu0 = cpuSeconds();
const t0 = Date.now();
await page.waitForTimeout(idleSeconds * 1000);
const cpu = cpuSeconds() - cpu0;
const wall = (Date.now() - t0) / 1000;
const idle = { seconds: Math.round(wall), coordinator_cpu_s: Number(cpu.toFixed(2)),
  core_pct: Number((100 * cpu / wall).toFixed(2)),
  no_tab_cpu_s: Number(baseline.toFixed(2)), tab_core_pct: Number((100 * (cpu - baseline) / wall).toFixed(2)),
  requests: requests.length,
  bytes: requests.reduce((a, r) => a + r.bytes, 0),
  paths: [...new Set(requests.map((r) => r.url.replace(/\?.*/, '')))] };
record('idle experiment tab', idle);

const summary = {};
for (const [name, list] of Object.entries(results)) {
  summary[name] = Object.fromEntries(Object.keys(list[0]).filter((k) => typeof list[0][k] === 'number')
    .map((k) => [k, median(list.map((m) => m[k]))]));
}
console.log(`summary: ${JSON.stringify(summary)}`);
await close();
