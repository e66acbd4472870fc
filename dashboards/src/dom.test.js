// node --test: long lists are built a chunk per task.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendInChunks, poll } from './dom.js';

// A parent that records what each task appended (a task ends at each yield).
function recorder() {
  const tasks = [[]];
  return {
    tasks,
    parent: { append: (...xs) => tasks[tasks.length - 1].push(...xs) },
    yieldTo: async () => { tasks.push([]); },
  };
}

test('appendInChunks builds the first chunk at once and each next one in a later task', async () => {
  const r = recorder();
  const items = Array.from({ length: 120 }, (_, i) => i);
  const done = appendInChunks(r.parent, items, (i) => `row ${i}`, null, 50, r.yieldTo);
  assert.equal(r.tasks[0].length, 50);  // before the first yield: drawn with the table
  await done;
  assert.deepEqual(r.tasks.map((t) => t.length), [50, 50, 20]);
  assert.deepEqual(r.tasks.flat(), items.map((i) => `row ${i}`));
});

test('appendInChunks stops when its page is left', async () => {
  const r = recorder();
  const abort = new AbortController();
  const items = Array.from({ length: 200 }, (_, i) => i);
  const done = appendInChunks(r.parent, items, (i) => i, abort.signal, 50, r.yieldTo);
  abort.abort();
  await done;
  assert.equal(r.tasks.flat().length, 50);
  const none = recorder();
  await appendInChunks(none.parent, [], (i) => i, null, 50, none.yieldTo);
  assert.deepEqual(none.tasks, [[]]);
});

test('poll waits `first` ms before its first call when asked', async () => {
  const abort = new AbortController();
  let calls = 0;
  poll(() => { calls++; }, 10000, abort.signal, { first: 30 });
  assert.equal(calls, 0);
  await new Promise((r) => setTimeout(r, 80));
  assert.equal(calls, 1);
  poll(() => { calls++; }, 10000, abort.signal);
  assert.equal(calls, 2);  // at once by default
  abort.abort();
});
