// node --test: the experiment page's state from the experiment's answer, and when a panel
// is read again.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { experimentState, takeExperiment, stale } from './state.js';

test('takeExperiment reads the grid\'s pairing, arms, varied keys and counts', () => {
  const s = experimentState();
  s.arms = ['z'];
  const grid = takeExperiment(s, {
    grid: '{"pair_by":["seed","data.order"],"arms":{"b":{"x":1},"a":{}},"description":"d"}',
    arms: ['c'], counts: { queued: 1, succeeded: 3 }, total: 4, varying: ['seed', 'train.lr'] });
  assert.equal(grid.description, 'd');
  assert.deepEqual(s.pairBy, ['seed', 'data.order']);
  assert.deepEqual(s.arms, ['a', 'b', 'c', 'z']);
  assert.deepEqual(s.varying, ['seed', 'train.lr']);
  assert.equal(s.active, true);
  assert.equal(s.countsSig, '[{"queued":1,"succeeded":3},4]');
  takeExperiment(s, { grid: 'not json', counts: { succeeded: 4 }, total: 4 });
  assert.equal(s.active, false);
  assert.deepEqual(s.pairBy, ['seed', 'data.order']);  // kept when the grid says nothing
  assert.deepEqual(s.gridArms, {});
});

test('stale: an active experiment\'s panels are always read, a finished one\'s once per counts', () => {
  const s = experimentState();
  s.countsSig = 'c1';
  assert.equal(stale(s, 'arms'), true);
  assert.equal(stale(s, 'arms'), true);  // active
  s.active = false;
  assert.equal(stale(s, 'arms', 'k'), true);
  assert.equal(stale(s, 'arms', 'k'), false);
  assert.equal(stale(s, 'scatter', 'k'), true);  // another panel
  assert.equal(stale(s, 'arms', 'k2'), true);  // another metric
  s.countsSig = 'c2';  // a retry changed the counts
  assert.equal(stale(s, 'arms', 'k2'), true);
  assert.equal(stale(s, 'arms', 'k2'), false);
});
