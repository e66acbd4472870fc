// node --test: ticking runs to overlay.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tickRun, selectionNote } from './selection.js';

const auto = () => ({ selected: new Set([1, 2, 3]), userSelected: false });

test('the first tick replaces the automatic choice; the first untick keeps the rest', () => {
  const a = auto();
  assert.equal(selectionNote(a), 'tick runs in the table to overlay them');
  assert.equal(tickRun(a, 5, true), '');
  assert.deepEqual([...a.selected], [5]);
  assert.equal(selectionNote(a), '1 of at most 20 runs overlaid');
  const b = auto();
  assert.equal(tickRun(b, 2, false), '');
  assert.deepEqual([...b.selected], [1, 3]);
  assert.equal(b.userSelected, true);
});

test('a tick past the most runs overlaid is refused and changes nothing', () => {
  const s = { selected: new Set([5, 6]), userSelected: true };
  assert.equal(tickRun(s, 7, true, 2), 'at most 2 runs overlay at once (clear selection to start again)');
  assert.deepEqual([...s.selected], [5, 6]);
  assert.equal(tickRun(s, 6, false, 2), '');
  assert.equal(tickRun(s, 7, true, 2), '');
  assert.deepEqual([...s.selected], [5, 7]);
});
