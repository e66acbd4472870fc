// node --test: the arm chart's bands, sample and note.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { armBands, armSample, armNoteText } from './arm_chart.js';

test('armBands: mean ∓ the standard deviation from the mean of squares, per group', () => {
  // Runs logging 1 and 3 at step 0 (sd 1), 2 and 6 at step 10 (mean 4, sd 2).
  const rows = [
    { arm: 'a', g0: 0.1, step: 0, n: 2, mean: 2, sq: 5 },
    { arm: 'a', g0: 0.1, step: 10, n: 2, mean: 4, sq: 20 },
    { arm: 'a', g0: 0.2, step: 0, n: 3, mean: 1, sq: 1 },
  ];
  const bands = armBands(rows, ['train.lr']);
  assert.deepEqual([...bands.keys()], ['a · train.lr=0.1', 'a · train.lr=0.2']);
  assert.deepEqual(bands.get('a · train.lr=0.1'),
    { arm: 'a', xs: [0, 10], mean: [2, 4], lo: [1, 2], hi: [3, 6], n: 2 });
  assert.deepEqual(bands.get('a · train.lr=0.2').lo, [1]);  // no spread
  assert.deepEqual([...armBands(rows, []).keys()], ['a']);
});

test('armSample: 300 runs an arm, at most 5000', () => {
  assert.equal(armSample(0), 300);
  assert.equal(armSample(3), 900);
  assert.equal(armSample(100), 5000);
});

test('armNoteText names the metric, the axes and a sample', () => {
  assert.equal(armNoteText('train.loss', [], 0, 10, 300), '(no points yet)');
  assert.equal(armNoteText('train.loss', [], 2, 10, 600), '(train.loss)');
  assert.equal(armNoteText('eval.ppl', ['train.lr', 'seed'], 2, 1000, 600),
    '(eval.ppl by arm × train.lr × seed; a sample of 600 of 1000 runs)');
});
