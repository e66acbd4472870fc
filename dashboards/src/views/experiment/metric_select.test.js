// node --test: which curve the Curves block draws first.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { preferredCurve, curveAxes } from './metric_select.js';

test('the training loss first, then the eval loss, the perplexity, else the first key', () => {
  assert.equal(preferredCurve(['eval.loss', 'eval.ppl', 'train.loss']), 'train.loss');
  assert.equal(preferredCurve(['acc', 'eval.loss', 'eval.ppl']), 'eval.loss');
  assert.equal(preferredCurve(['acc', 'eval.ppl']), 'eval.ppl');
  assert.equal(preferredCurve(['acc', 'lr']), 'acc');
});

test('curveAxes: byte ticks for byte counts', () => {
  assert.equal(curveAxes('mem.peak_bytes').bytes, true);
  assert.equal(curveAxes('train.loss').bytes, false);
});
