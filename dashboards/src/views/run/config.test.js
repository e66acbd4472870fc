// node --test: the config keys the run page lists.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { notableConfig } from './config.js';

test('notableConfig lists the coordinator\'s notable keys, else every flattened key', () => {
  const text = '{"kind":"train","train":{"lr":0.001,"steps":40},"axes":[1,2]}';
  const all = notableConfig({ config: text });
  assert.deepEqual(all.keys, ['axes', 'kind', 'train.lr', 'train.steps']);
  assert.equal(all.cfg.train.steps, 40);
  const some = notableConfig({ config: text, config_notable: { 'train.lr': 0.001, kind: 'train' } });
  assert.deepEqual(some.keys, ['kind', 'train.lr']);
  assert.equal(Object.keys(some.flat).length, 4);
  assert.deepEqual(notableConfig({ config: null }).keys, []);
});
