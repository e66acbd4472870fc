// node --test: what a comparison's row says.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { stratumText, neutral, comparisonFacts } from './comparisons.js';

test('stratumText names the stratum\'s values', () => {
  assert.equal(stratumText({ 'train.lr': 0.001, seed: 1 }), 'train.lr=0.001 · seed=1');
  assert.equal(stratumText(null), '');
});

test('a ratio means "no difference" at 1, a difference at 0', () => {
  assert.equal(neutral('ratio'), 1);
  assert.equal(neutral('speedup'), 1);
  assert.equal(neutral('delta_pct'), 0);
});

test('comparisonFacts: the interval is significant when it excludes "no difference"', () => {
  assert.deepEqual(comparisonFacts({ stat: 'ratio', unit: 'x', ci95: { lo: 1.1, hi: 1.3 }, per_pair: [{}, {}] }),
    { unit: '×', ci: [1.1, 1.3], nPairs: 2, signif: true });
  assert.equal(comparisonFacts({ stat: 'ratio', ci95: { lo: 0.9, hi: 1.3 } }).signif, false);
  assert.equal(comparisonFacts({ stat: 'delta_pct', unit: '%', ci95: { lo: -3, hi: -1 } }).signif, true);
  assert.equal(comparisonFacts({ stat: 'delta_pct', unit: '%', ci95: { lo: -1, hi: 2 } }).unit, ' %');
  // The coordinator's own neutral value wins.
  assert.equal(comparisonFacts({ stat: 'diff', neutral: 5, ci95: { lo: 1, hi: 4 } }).signif, true);
  assert.deepEqual(comparisonFacts({ stat: 'median', n_pairs: 7 }), { unit: '', ci: null, nPairs: 7, signif: false });
});
