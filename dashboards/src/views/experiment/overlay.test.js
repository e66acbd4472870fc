// node --test: what the overlay keeps of a run.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { overlayFacts } from './overlay.js';

test('overlayFacts reads the varied keys from the config, keeping params already known', () => {
  const row = { id: 3, arm: 'a', status: 'running', attempts: 2, reused_from: null,
    config_json: '{"train":{"lr":0.01},"seed":2}' };
  assert.deepEqual(overlayFacts(row, ['train.lr', 'seed', 'model.width'], undefined), {
    id: 3, arm: 'a', status: 'running', attempts: 2, reused_from: null,
    params: { 'train.lr': 0.01, seed: 2, 'model.width': null } });
  const known = { id: 3, worker: 'w1', status: 'queued', params: { 'train.lr': 0.5 } };
  const f = overlayFacts({ ...row, config_json: undefined, config: { seed: 9 } }, ['seed'], known);
  assert.equal(f.worker, 'w1');
  assert.equal(f.status, 'running');  // the row is newer
  assert.deepEqual(f.params, { 'train.lr': 0.5 });
});
