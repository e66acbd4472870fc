// Dashboard speed: how long the experiment page takes until its runs table and
// first chart are drawn, in headless Chromium on loopback. Usage:
//   node bench.mjs URL EXPERIMENT_ID [REPEATS]
// Prints one line per load and the median; each load is a fresh navigation (no cache of
// API answers: the dashboard refetches everything).
import { launch } from './browser.mjs';

const [url, experiment, repeatsText] = process.argv.slice(2);
if (!url || !experiment) {
  console.error('usage: node bench.mjs URL EXPERIMENT_ID [REPEATS]');
  process.exit(2);
}
const repeats = Number(repeatsText || 5);
const { page, close } = await launch();
const drawn = (sel) => Number(document.querySelector(sel)?.dataset.points || 0) > 0;
const table = [];
const first = [];
const arms = [];
const full = [];
for (let i = 0; i < repeats; i++) {
  await page.goto('about:blank');
  const t0 = Date.now();
  await page.goto(`${url}/#/experiments/${experiment}`, { waitUntil: 'domcontentloaded' });
  await page.waitForFunction(() => document.querySelector('#runs-table .vt-row'), null,
    { timeout: 60000, polling: 'raf' });
  const tTable = Date.now() - t0;
  await page.waitForFunction(drawn, '#runs-chart', { timeout: 60000, polling: 'raf' });
  const tFirst = Date.now() - t0;
  await page.waitForFunction(drawn, '#arm-chart', { timeout: 60000, polling: 'raf' });
  const tArms = Date.now() - t0;
  await page.waitForFunction(() => {
    const foot = document.querySelector('#runs-table .vt-foot')?.textContent || '';
    return foot && !foot.includes('loading');
  }, null, { timeout: 60000, polling: 'raf' });
  const tFull = Date.now() - t0;
  const rows = await page.getAttribute('#runs-table .vt-body', 'data-total');
  const points = await page.getAttribute('#arm-chart', 'data-points');
  console.log(`load ${i + 1}: table ${tTable} ms, first chart ${tFirst} ms, ` +
    `arm mean±sd chart (${points} points) ${tArms} ms, full list (${rows} runs) ${tFull} ms`);
  table.push(tTable);
  first.push(tFirst);
  arms.push(tArms);
  full.push(tFull);
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(`median of ${repeats}: table ${median(table)} ms, table + first chart ${median(first)} ms, ` +
  `arm chart ${median(arms)} ms, full runs list ${median(full)} ms`);
await close();
