// node --test: statistics and labels shared by the views.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ci95, keyMetrics, pairText, deviceLabel, resultColumns } from './common.js';

test('ci95 uses t with n-1 degrees of freedom', () => {
  assert.equal(ci95(1, 0.5, 1), null);
  assert.equal(ci95(1, null, 5), null);
  const [lo, hi] = ci95(2, 1, 3);  // t(0.975, 2) = 4.303
  assert.ok(Math.abs(lo - (2 - 4.303)) < 1e-9 && Math.abs(hi - (2 + 4.303)) < 1e-9);
  const [lo2] = ci95(0, 1, 1000);
  assert.equal(lo2, -1.96);
});

test('keyMetrics puts the preferred keys first', () => {
  const runs = [{ summary: { 'z.other': 1, 'eval.loss': 2 } }, { summary: { 'eval.ppl': 3 } }, {}];
  assert.deepEqual(keyMetrics(runs), ['eval.ppl', 'eval.loss', 'z.other']);
});

test('pairText names the pair_by values', () => {
  assert.equal(pairText('[1]', ['seed']), 'seed=1');
  assert.equal(pairText('[1,"a"]', ['seed', 'data.order']), 'seed=1 data.order=a');
  assert.equal(pairText('{"seed":2}'), 'seed=2');
  assert.equal(pairText(''), '—');
});

test('deviceLabel maps indices through the worker devices', () => {
  const gpu = { devices: [{ index: 0, kind: 'cuda' }, { index: 1, kind: 'cuda' }] };
  assert.equal(deviceLabel([], gpu), 'cpu');
  assert.equal(deviceLabel([0], { devices: [{ index: 0, kind: 'cpu' }] }), 'cpu');
  assert.equal(deviceLabel([0, 1], gpu), 'cuda:0,1');
});

test('resultColumns puts ACR beside the FLOPs ratio, or says FLOPs are unmeasured', () => {
  const keys = (cols) => cols.map((c) => (c.unmeasured ? `${c.key}?` : c.key));
  assert.deepEqual(keys(resultColumns(['b', 'eval.ppl', 'a'])), ['eval.ppl', 'a', 'b']);
  assert.deepEqual(keys(resultColumns(['acr.train', 'flops.total_ratio', 'eval.ppl', 'z'])),
    ['eval.ppl', 'flops.total_ratio', 'acr.train', 'z']);
  assert.deepEqual(keys(resultColumns(['acr', 'eval.ppl'])), ['eval.ppl', 'flops ratio?', 'acr']);
});
