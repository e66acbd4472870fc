// node --test: the incremental metric stream against a fake fetch.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RunMetrics } from './metrics.js';

// Serves GET /runs/1/metrics from `points` like the coordinator: seq > after, attempt filter.
function fakeCoordinator(points) {
  const urls = [];
  globalThis.fetch = async (url) => {
    urls.push(url);
    const q = new URL(url, 'http://x').searchParams;
    const after = Number(q.get('after') ?? -1);
    const attempt = Number(q.get('attempt') ?? 0);
    const key = q.get('key') || '';
    const out = points.filter((p) => p[1] > after && (!attempt || p[0] === attempt) && (!key || p[3] === key));
    return { ok: true, status: 200, text: async () => JSON.stringify({ points: out }) };
  };
  return urls;
}

test('reads only new points on each poll', async () => {
  const points = [[1, 0, 0, 'train.loss', 5, 0], [1, 1, 0, 'eval.loss', 6, 0]];
  const urls = fakeCoordinator(points);
  const m = new RunMetrics(1, null);
  m.expectAttempt(1);
  assert.equal(await m.update(), 2);
  points.push([1, 2, 10, 'train.loss', 4, 1]);
  assert.equal(await m.update(), 1);
  assert.equal(await m.update(), 0);
  assert.deepEqual(m.get('train.loss'), { xs: [0, 10], ys: [5, 4] });
  assert.deepEqual(m.keys(), ['eval.loss', 'train.loss']);
  assert.match(urls[1], /after=1&attempt=1/);
});

test('a new attempt restarts the curve from its first point', async () => {
  const points = [[1, 0, 0, 'train.loss', 5, 0], [1, 1, 10, 'train.loss', 4, 0]];
  fakeCoordinator(points);
  const m = new RunMetrics(1, 'train.loss');
  m.expectAttempt(1);
  await m.update();
  points.push([2, 0, 0, 'train.loss', 9, 0]);  // the retry's seq starts again at 0
  m.expectAttempt(2);
  await m.update();
  assert.deepEqual(m.get('train.loss'), { xs: [0], ys: [9] });
});

test('without a known attempt, the newest attempt in the answer wins', async () => {
  fakeCoordinator([[1, 0, 0, 'train.loss', 5, 0], [2, 0, 0, 'train.loss', 8, 0], [2, 1, 5, 'train.loss', 7, 0]]);
  const m = new RunMetrics(1, null);
  await m.update();
  assert.equal(m.attempt, 2);
  assert.deepEqual(m.get('train.loss'), { xs: [0, 5], ys: [8, 7] });
});

test('pushed points are merged after the first read, duplicates and other keys ignored', async () => {
  const points = [[1, 0, 0, 'train.loss', 5, 0]];
  fakeCoordinator(points);
  const m = new RunMetrics(1, 'train.loss');
  m.expectAttempt(1);
  // Before any read answered, a pushed point cannot be placed: the read will bring it.
  assert.equal(m.ingest([[1, 1, 0, 0, 'train.loss', 5, 0]]), 0);
  await m.update();
  assert.equal(m.ingest([[1, 1, 0, 0, 'train.loss', 5, 0]]), 0);  // already read
  assert.equal(m.ingest([[1, 1, 1, 1, 'train.lr', 0.1, 0], [1, 1, 2, 1, 'train.loss', 4, 0],
                         [2, 1, 3, 1, 'train.loss', 9, 0]]), 1);
  assert.deepEqual(m.get('train.loss'), { xs: [0, 1], ys: [5, 4] });
});

test('points pushed while a read is in flight wait for it and are not doubled', async () => {
  const points = [[1, 0, 0, 'train.loss', 5, 0], [1, 1, 1, 'train.loss', 4, 0]];
  let release;
  const gate = new Promise((r) => { release = r; });
  globalThis.fetch = async () => {
    await gate;
    return { ok: true, status: 200, text: async () => JSON.stringify({ points }) };
  };
  const m = new RunMetrics(1, null);
  m.expectAttempt(1);
  const reading = m.update();
  // The stream already delivers seq 1 (also in the read's answer) and seq 2 (not in it).
  assert.equal(m.ingest([[1, 1, 1, 1, 'train.loss', 4, 0], [1, 1, 2, 2, 'train.loss', 3, 0]]), 0);
  release();
  assert.equal(await reading, 3);
  assert.deepEqual(m.get('train.loss'), { xs: [0, 1, 2], ys: [5, 4, 3] });
});

test('a pushed point of a newer attempt makes the next read restart the curve', async () => {
  const points = [[1, 0, 0, 'train.loss', 5, 0]];
  fakeCoordinator(points);
  const m = new RunMetrics(1, 'train.loss');
  m.expectAttempt(1);
  await m.update();
  assert.equal(m.ingest([[1, 2, 0, 0, 'train.loss', 9, 0]]), 0);
  points.push([2, 0, 0, 'train.loss', 9, 0]);
  await m.update();
  assert.equal(m.attempt, 2);
  assert.deepEqual(m.get('train.loss'), { xs: [0], ys: [9] });
});
