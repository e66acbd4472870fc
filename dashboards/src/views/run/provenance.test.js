// node --test: which attempt's provenance the page shows, and its extra fields.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { latestProvenance, extraFields } from './provenance.js';

test('latestProvenance picks the highest attempt', () => {
  assert.equal(latestProvenance([{ attempt: 2, host: 'b' }, { attempt: 1, host: 'a' }]).host, 'b');
  assert.equal(latestProvenance([]), null);
  assert.deepEqual(latestProvenance({ host: 'c' }), { host: 'c' });
});

test('extraFields lists the fields without a column of their own', () => {
  const p = { host: 'x', fields_json: '{"command_sha256":"ab","host":"x","limits":{"cpu":2}}' };
  assert.deepEqual(extraFields(p), [['command_sha256', 'ab'], ['limits', '{"cpu":2}']]);
  assert.deepEqual(extraFields({ host: 'x', git_commit: 'c', precision: 'bf16' }), [['precision', 'bf16']]);
});
