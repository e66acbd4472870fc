// node --test: curve alignment and downsampling.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { alignLines } from './align.js';

test('lines with different steps share one axis, gaps are null', () => {
  const data = alignLines([{ xs: [0, 10, 20], ys: [3, 2, 1] }, { xs: [10, 30], ys: [5, 4] }]);
  assert.deepEqual(data, [[0, 10, 20, 30], [3, 2, 1, null], [null, 5, null, 4]]);
});

test('null and non-finite values are skipped', () => {
  const data = alignLines([{ xs: [0, 1, 2], ys: [1, null, NaN] }]);
  assert.deepEqual(data, [[0], [1]]);
});

test('no points gives empty series', () => {
  assert.deepEqual(alignLines([{ xs: [], ys: [] }, { xs: [], ys: [] }]), [[], [], []]);
});

test('long curves are bucketed to at most maxPoints steps, keeping bucket means', () => {
  const xs = Array.from({ length: 10000 }, (_, i) => i);
  const data = alignLines([{ xs, ys: xs.map((x) => x) }, { xs, ys: xs.map(() => 7) }], 100);
  assert.ok(data[0].length <= 100, `axis has ${data[0].length} steps`);
  assert.equal(data[0][0], 0);
  assert.equal(data[1][0], 49.5);  // mean of steps 0..99 (bucket width 100)
  assert.ok(data[2].every((y) => y === 7));
});
