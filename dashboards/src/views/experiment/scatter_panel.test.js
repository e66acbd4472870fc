// node --test: the scatter's choices and the breakdown's mean ± SE.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { scatterChoices, groupMeanSe } from './scatter_panel.js';

test('groupMeanSe: sample standard deviation over √n', () => {
  // 1 and 3: sample sd √2, SE 1.
  assert.deepEqual(groupMeanSe({ n: 2, mean: 2, sq: 5 }), { mean: 2, se: 1 });
  // 1, 2, 3, 4: sample variance 5/3, SE √(5/12).
  const g = groupMeanSe({ n: 4, mean: 2.5, sq: 7.5 });
  assert.ok(Math.abs(g.se - Math.sqrt(5 / 12)) < 1e-12, `${g.se}`);
  assert.equal(groupMeanSe({ n: 1, mean: 7, sq: 49 }).se, null);
});

test('scatterChoices: the first unpaired axis against the preferred metric, unless chosen', () => {
  const s = { varying: ['seed', 'train.lr'], pairBy: ['seed'], gridArms: {}, summaryKeys: ['z.acc', 'eval.ppl'] };
  assert.deepEqual(scatterChoices(s, '', ''),
    { xs: ['seed', 'train.lr'], ys: ['z.acc', 'eval.ppl'], x: 'train.lr', y: 'eval.ppl' });
  assert.equal(scatterChoices(s, 'seed', 'z.acc').x, 'seed');
  assert.equal(scatterChoices({ ...s, pairBy: ['seed', 'train.lr'] }, '', '').x, 'seed');
  assert.deepEqual(scatterChoices({ varying: [], pairBy: [], gridArms: {}, summaryKeys: null }, '', ''),
    { xs: [], ys: [], x: undefined, y: undefined });
});
