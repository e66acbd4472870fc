// node --test: grouping runs by arm and the axes they are not paired on.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { configValue, armKeys, unpairedAxes, groupLabel, jsonPathSql, groupsFromResults } from './groups.js';

test('config values by dotted key', () => {
  const cfg = { train: { lr: 1e-3 }, seed: 2, model: { head_modes: null } };
  assert.equal(configValue(cfg, 'train.lr'), 1e-3);
  assert.equal(configValue(cfg, 'seed'), 2);
  assert.equal(configValue(cfg, 'train.steps'), null);
  assert.equal(configValue(cfg, 'seed.x'), null);
  assert.equal(configValue(cfg, 'model.head_modes'), null);
});

// A grid of seed x train.lr paired by seed: the arms chart must split by train.lr, never
// by seed (the pairing key) or by what the arms set.
test('unpaired axes leave out pairing keys and arm overrides', () => {
  const arms = { base: {}, wide: { model: { heads: 8 }, 'train.lr': 3e-4 } };
  assert.deepEqual([...armKeys(arms)].sort(), ['model.heads', 'train.lr']);
  assert.deepEqual(unpairedAxes(['seed', 'train.lr', 'data.seq_len'], ['seed'], {}), ['train.lr', 'data.seq_len']);
  assert.deepEqual(unpairedAxes(['seed', 'train.lr', 'model.heads'], ['seed'], arms), []);
  assert.deepEqual(unpairedAxes(['seed'], ['seed'], {}), []);
});

test('group labels and SQL paths', () => {
  assert.equal(groupLabel('b', [], []), 'b');
  assert.equal(groupLabel('b', ['train.lr', 'x'], [0.001, null]), 'b · train.lr=0.001 · x=—');
  assert.equal(jsonPathSql('train.lr'), `'$."train"."lr"'`);
  assert.equal(jsonPathSql("a'b"), `'$."a''b"'`);
});

// The breakdown beside the scatter reads the coordinator's arms (exact, over every run)
// when they are broken down by the same keys, instead of aggregating 10^5 runs by SQL.
test('groups from the results when the strata are the chosen keys', () => {
  const results = { by: ['train.lr'], arms: [
    { arm: 'a', by: { 'train.lr': 0.001 }, metrics: { 'eval.ppl': { mean: 5, se: 0.1, n: 4 } } },
    { arm: 'a', by: { 'train.lr': 0.0003 }, metrics: { 'eval.ppl': { mean: 6, se: 0.2, n: 3 } } },
    { arm: 'b', by: { 'train.lr': 0.001 }, metrics: {} },  // nothing succeeded: no row
  ] };
  assert.deepEqual(groupsFromResults(results, ['train.lr'], 'eval.ppl'), [
    { arm: 'a', values: [0.001], n: 4, mean: 5, se: 0.1 },
    { arm: 'a', values: [0.0003], n: 3, mean: 6, se: 0.2 }]);
  assert.equal(groupsFromResults(results, [], 'eval.ppl'), null);  // "arm only": by SQL
  assert.equal(groupsFromResults(results, ['seed'], 'eval.ppl'), null);
  assert.equal(groupsFromResults(results, ['train.lr'], 'eval.loss'), null);
  assert.equal(groupsFromResults(null, ['train.lr'], 'eval.ppl'), null);
  const plain = { by: [], arms: [{ arm: 'a', by: {}, metrics: { x: { mean: 1, se: null, n: 1 } } }] };
  assert.deepEqual(groupsFromResults(plain, [], 'x'), [{ arm: 'a', values: [], n: 1, mean: 1, se: null }]);
});
