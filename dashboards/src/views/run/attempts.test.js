// node --test: the Attempts block's devices, durations and attempt counts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deviceList, secondsBetween, runAttempts } from './attempts.js';

test('deviceList names a CPU slot or the CUDA indices', () => {
  assert.equal(deviceList([]), 'cpu');
  assert.equal(deviceList(null), 'cpu');
  assert.equal(deviceList([0, 2]), 'cuda 0,2');
});

test('secondsBetween reads ISO times, null when one is unreadable', () => {
  assert.equal(secondsBetween('2026-01-01T00:00:00Z', '2026-01-01T00:01:30.5Z'), 90.5);
  assert.equal(secondsBetween('not a time', '2026-01-01T00:00:00Z'), null);
  const now = secondsBetween(new Date(Date.now() - 10000).toISOString(), null);
  assert.ok(now >= 10 && now < 70, `${now}`);
});

test('runAttempts takes the list, or a count from an older answer', () => {
  assert.deepEqual(runAttempts({ attempts: [{ attempt: 1 }, { attempt: 2 }] }).count, 2);
  assert.deepEqual(runAttempts({ attempts: 3 }), { list: [], count: 3 });
  assert.deepEqual(runAttempts({}), { list: [], count: 0 });
});
