// node --test: the head grid's rows and size.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { latestAttemptRows, gridShape } from './head_panel.js';

test('latestAttemptRows keeps the last attempt\'s head map', () => {
  const rows = [{ attempt: 1, layer: 0, head: 0 }, { attempt: 2, layer: 0, head: 1 }, { attempt: 2, layer: 1, head: 0 }];
  assert.deepEqual(latestAttemptRows(rows).map((r) => [r.layer, r.head]), [[0, 1], [1, 0]]);
  assert.deepEqual(latestAttemptRows([]), []);
});

test('gridShape is the config\'s model, grown to fit the rows', () => {
  assert.deepEqual(gridShape({ model: { layers: 2, heads: 4 } }, [{ layer: 1, head: 3 }]), { layers: 2, heads: 4 });
  assert.deepEqual(gridShape({}, [{ layer: 3, head: 5 }]), { layers: 4, heads: 6 });
});
