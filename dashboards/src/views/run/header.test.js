// node --test: the run page head's performance line and state.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { perfItems, runActive } from './header.js';

test('runActive: queued and running runs can still change', () => {
  assert.equal(runActive({ status: 'queued' }), true);
  assert.equal(runActive({ status: 'running' }), true);
  assert.equal(runActive({ status: 'failed' }), false);
  assert.equal(runActive(null), false);
});

test('perfItems shows measured throughput in its units and the precision', () => {
  const run = {
    summary: { 'train.tokens_per_s': 0, 'train.mfu': 0.5, 'train.step_s': 0.25, 'mem.peak_bytes': 1536 },
    config: '{"kind":"train","train":{"precision":"bf16"}}',
  };
  // tokens/s of 0 is "not measured" and left out; 1536 B = 1.50 KiB.
  assert.deepEqual(perfItems(run).map((p) => [p.key, p.text]), [
    ['train.mfu', '50 %'], ['train.step_s', '250 ms'], ['mem.peak_bytes', '1.50 KiB'], ['precision', 'bf16']]);
});

test('perfItems takes the precision from the latest provenance, none for a command', () => {
  const run = { config: { kind: 'train', train: { precision: 'bf16' } },
    provenance: [{ precision: 'fp32' }, { precision: 'tf32' }] };
  assert.deepEqual(perfItems(run), [{ key: 'precision', label: 'precision', text: 'tf32' }]);
  assert.deepEqual(perfItems({ config: { kind: 'command', train: { precision: 'bf16' } } }), []);
});
