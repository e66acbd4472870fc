// node --test: which artifacts the page offers for download.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { notDownloadable } from './artifacts.js';

test('an artifact up to 256 MiB downloads; a bigger or deleted one says why not', () => {
  assert.equal(notDownloadable({ bytes: 268435456 }), null);
  assert.equal(notDownloadable({ bytes: '268435457' }), 'too big for the API; on its worker');
  assert.equal(notDownloadable({ bytes: 10, deleted_at: '2026-01-02' }),
    'deleted by checkpoint retention 2026-01-02');
});
