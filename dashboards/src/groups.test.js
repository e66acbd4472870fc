// node --test: grouping runs by arm and the axes they are not paired on.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { configValue, armKeys, unpairedAxes, groupLabel, jsonPathSql } from './groups.js';

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
