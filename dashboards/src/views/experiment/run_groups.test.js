// node --test: the groups runs are drawn in, their colours and the "arms by" choices.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { byKeys, byOptions, RunGroups } from './run_groups.js';
import { colorFor } from '../../charts.js';

const grid = { varying: ['seed', 'train.lr', 'aah.regime'], pairBy: ['seed'],
  gridArms: { aah: { aah: { regime: 'full' } }, ordinary: {} } };

test('byKeys: every unpaired axis not set by an arm, none, or one key', () => {
  assert.deepEqual(byKeys({ ...grid, by: 'auto' }), ['train.lr']);
  assert.deepEqual(byKeys({ ...grid, by: 'arm' }), []);
  assert.deepEqual(byKeys({ ...grid, by: 'seed' }), ['seed']);
});

test('a run\'s group and colour: by arm order, or by group as groups come', () => {
  const s = { ...grid, by: 'auto', arms: ['aah', 'ordinary'] };
  const g = new RunGroups(s);
  assert.equal(g.of({ arm: 'aah', params: { 'train.lr': 0.001, seed: 1 } }), 'aah · train.lr=0.001');
  assert.equal(g.of({ arm: 'aah' }), 'aah · train.lr=—');
  assert.equal(g.color('ordinary · train.lr=1', 'ordinary'), colorFor(0));
  assert.equal(g.color('aah · train.lr=1', 'aah'), colorFor(1));
  assert.equal(g.color('ordinary · train.lr=1', 'ordinary'), colorFor(0));
  g.reset();
  assert.equal(g.color('aah · train.lr=1', 'aah'), colorFor(0));
  s.by = 'arm';
  assert.equal(g.of({ arm: 'ordinary', params: { 'train.lr': 1 } }), 'ordinary');
  assert.equal(g.color('ordinary', 'ordinary'), colorFor(1));  // the arm's index
  assert.equal(g.color('unknown', 'unknown'), colorFor(0));
});

test('byOptions offers the unpaired axes, arm only, then each other varied key', () => {
  assert.deepEqual(byOptions(grid.varying, grid.pairBy, grid.gridArms),
    [['auto', 'arm × train.lr'], ['arm', 'arm only'], ['seed', 'arm × seed'], ['aah.regime', 'arm × aah.regime']]);
  assert.deepEqual(byOptions(['seed'], ['seed'], {}), [['auto', 'arm (no unpaired axis)'], ['arm', 'arm only'],
    ['seed', 'arm × seed']]);
  assert.deepEqual(byOptions(['a', 'b'], [], {}).map(([v]) => v), ['auto', 'arm', 'a', 'b']);
});
