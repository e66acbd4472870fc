// node --test: statistics and labels shared by the views.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { keyMetrics, pairText, deviceLabel, resultColumns } from './common.js';

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
