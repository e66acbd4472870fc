// node --test: number, duration and ETA formatting.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { num, duration, eta, parseJson, shortHash } from './format.js';

test('num', () => {
  assert.equal(num(null), '—');
  assert.equal(num(0), '0');
  assert.equal(num(42), '42');
  assert.equal(num(3.14159), '3.142');
  assert.equal(num(2.5e-5), '2.50e-5');
  assert.equal(num(123456.7), '1.23e+5');
  assert.equal(num('x'), 'x');
});

test('duration', () => {
  assert.equal(duration(null), '—');
  assert.equal(duration(12.4), '12s');
  assert.equal(duration(250), '4m 10s');
  assert.equal(duration(7380), '2h 03m');
});

test('eta: done, unknown, and remaining work over running parallelism', () => {
  assert.equal(eta({ succeeded: 4 }, 10, []), 0);
  assert.equal(eta({ queued: 3 }, null, []), null);
  // 4 queued at 60 s each plus 2 running with 30 s of 60 s spent each (no step info), over 2.
  const running = [{ elapsed: 30 }, { elapsed: 30 }];
  assert.equal(eta({ queued: 4, running: 2 }, 60, running), (4 * 60 + 30 + 30) / 2);
});

test('eta: running training projects from its step when nothing has finished', () => {
  // 25% through in 10 s: 30 s left for it; the queued run takes the projected 40 s.
  assert.equal(eta({ queued: 1, running: 1 }, null, [{ elapsed: 10, steps: 400, step: 100 }]), 70);
  // A finished mean does not override a run's own progress.
  assert.equal(eta({ running: 1 }, 1000, [{ elapsed: 10, steps: 400, step: 100 }]), 30);
});

test('parseJson and shortHash', () => {
  assert.deepEqual(parseJson('{"a":1}', null), { a: 1 });
  assert.equal(parseJson('{bad', 'fallback'), 'fallback');
  assert.deepEqual(parseJson({ already: true }, null), { already: true });
  assert.equal(shortHash('0123456789abcdef'), '0123456789ab');
  assert.equal(shortHash(''), '—');
});
