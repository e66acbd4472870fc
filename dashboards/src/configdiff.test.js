// node --test: the config diff of two runs.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { flatten, diffObjects } from './configdiff.js';

test('flatten names every leaf by its dotted path; lists stay whole', () => {
  assert.deepEqual(flatten({ seed: 1, train: { lr: 0.001, opt: { beta: [0.9, 0.95] } }, x: null }),
    { seed: 1, 'train.lr': 0.001, 'train.opt.beta': [0.9, 0.95], x: null });
  assert.deepEqual(flatten(null), {});
});

test('diffObjects lists the differing keys in order, missing ones as undefined', () => {
  const a = { seed: 1, train: { lr: 0.001, steps: 40 }, aah: { regime: 'off' }, model: { heads: 4 } };
  const b = { seed: 2, train: { lr: 0.001, steps: 40 }, aah: { regime: 'full_adaptive', control_every: 2 },
    model: { heads: 4 } };
  assert.deepEqual(diffObjects(a, b), [
    { key: 'aah.control_every', a: undefined, b: 2 },
    { key: 'aah.regime', a: 'off', b: 'full_adaptive' },
    { key: 'seed', a: 1, b: 2 },
  ]);
  assert.deepEqual(diffObjects(a, a), []);
  // Equal lists are equal; a number and its string are not.
  assert.deepEqual(diffObjects({ l: [1, 2] }, { l: [1, 2] }), []);
  assert.deepEqual(diffObjects({ v: 1 }, { v: '1' }), [{ key: 'v', a: 1, b: '1' }]);
});
