// node --test: the runs sample is distinct, bounded and shared evenly by the grid's periods.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { sampledIdx, sampledIdxSql, kSamplePrime } from './sample.js';

test('sampled positions are distinct grid positions, at most n of them', () => {
  for (const [N, n] of [[100000, 600], [100000, 5000], [7, 600], [1, 5], [12345, 300]]) {
    const s = sampledIdx(N, n);
    assert.equal(s.length, Math.min(N, n));
    assert.equal(new Set(s).size, s.length, `N=${N} n=${n}: repeated positions`);
    assert.ok(s.every((i) => Number.isInteger(i) && i >= 0 && i < N));
  }
  // Fewer runs than the sample: every run, each once.
  assert.deepEqual([...sampledIdx(7, 600)].sort((a, b) => a - b), [0, 1, 2, 3, 4, 5, 6]);
  assert.deepEqual(sampledIdx(0, 10), []);
});

// The bench's grid: run i is arm i % 2 and learning rate (i / 2) % 2, so (arm, rate) has
// period 4. Each of the four groups must get a quarter of the sample; a stride of 20
// through the grid in order (the grid's period divides it) would give one group all of it.
test('every period of the grid that divides N gets an equal share', () => {
  const count = (s, d) => {
    const c = new Array(d).fill(0);
    for (const i of s) c[i % d]++;
    return c;
  };
  assert.deepEqual(count(sampledIdx(100000, 600), 4), [150, 150, 150, 150]);
  assert.deepEqual(count(sampledIdx(100000, 600), 2), [300, 300]);
  assert.deepEqual(count(sampledIdx(9000, 900), 3), [300, 300, 300]);
  const strided = Array.from({ length: 600 }, (_, k) => k * 20);
  assert.deepEqual(count(strided, 4), [600, 0, 0, 0]);
});

test('the SQL names the same prime, bound and experiment', () => {
  const sql = sampledIdxSql(42, 600);
  assert.match(sql, /experiment_id = 42\)/);
  assert.match(sql, /min\(600, sample_n\.n\)/);
  assert.ok(sql.includes(`(k * ${kSamplePrime}) % sample_n.n`));
  assert.match(sql, /sample_idx\(idx\) AS/);
});
