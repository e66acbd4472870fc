// node --test: number, duration and ETA formatting.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { num, bytes, isBytesKey, metricValue, tickLabels, duration, eta, parseJson, shortHash, meanSe,
  byteTickLabels, xAxisLabel, yAxisLabel, paramText } from './format.js';

test('num', () => {
  assert.equal(num(null), '—');
  assert.equal(num(0), '0');
  assert.equal(num(42), '42');
  assert.equal(num(3.14159), '3.142');
  assert.equal(num(2.5e-5), '2.50e-5');
  assert.equal(num(123456.7), '123457');
  assert.equal(num('x'), 'x');
});

// Whole numbers once kept their digits only by accident; 9110.08 showed as "911".
test('num keeps every digit of the magnitude', () => {
  assert.equal(num(9110.08), '9110');
  assert.equal(num(5599.95), '5600');
  assert.equal(num(6920), '6920');
  assert.equal(num(6920.4), '6920');
  assert.equal(num(12000.5), '12001');
  assert.equal(num(99999.4), '99999');
  assert.equal(num(250.0001), '250');
  assert.equal(num(100.5), '100.5');
  assert.equal(num(0.5), '0.5');
  assert.equal(num(-0.201), '-0.201');
  assert.equal(num(1.2e7), '1.20e+7');
  assert.equal(num(0.00123), '0.00123');
  // Every shown number parses back to within 0.05% of its value, for 10^-3..10^7.
  for (let e = -2.9; e < 6.9; e += 0.01) {
    const x = 1.2345678 * 10 ** e;
    const back = Number(num(x));
    assert.ok(Math.abs(back - x) / x < 5e-4, `num(${x}) = ${num(x)}`);
  }
});

test('bytes and metricValue', () => {
  assert.equal(bytes(null), '—');
  assert.equal(bytes(512), '512 B');
  assert.equal(bytes(240652000), '229.5 MiB');
  assert.equal(bytes(1024 ** 3), '1.00 GiB');
  assert.equal(bytes(1536), '1.50 KiB');
  assert.ok(isBytesKey('mem.peak_bytes'));
  assert.ok(isBytesKey('aoh.bench.kv_bytes'));
  assert.ok(isBytesKey('bytes'));
  assert.ok(!isBytesKey('eval.ppl'));
  assert.equal(metricValue('mem.peak_bytes', 240652000), '229.5 MiB');
  assert.equal(metricValue('eval.ppl', 9110.08), '9110');
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

// Axis labels once collapsed ("0 0 0") on small-valued metrics.
test('tickLabels keep every tick distinct with the fewest digits', () => {
  assert.deepEqual(tickLabels([0.001, 0.002, 0.003]), ['0.001', '0.002', '0.003']);
  assert.deepEqual(tickLabels([0, 0.5, 1, 1.5]), ['0', '0.5', '1.0', '1.5']);
  assert.deepEqual(tickLabels([0, 100, 200]), ['0', '100', '200']);
  assert.deepEqual(tickLabels([2.40e8, 2.45e8, 2.50e8]), ['2.40e+8', '2.45e+8', '2.50e+8']);
  assert.deepEqual(tickLabels([1e-5, 2e-5, 3e-5]), ['1e-5', '2e-5', '3e-5']);
  assert.deepEqual(tickLabels([3.1, 3.1000001]), ['3.1000000', '3.1000001']);
  assert.deepEqual(tickLabels([null, 1, 2]), ['', '1', '2']);
  assert.deepEqual(tickLabels([0, 2.5, 5, 7.5]), ['0', '2.5', '5.0', '7.5']);  // never "3"
  for (const ticks of [[0.0001, 0.0002], [5599.95, 5600.05], [12, 12.5, 13], [0, 2.5, 5, 7.5, 10]]) {
    const l = tickLabels(ticks);
    assert.equal(new Set(l).size, l.length, JSON.stringify(l));
    l.forEach((x, i) => assert.ok(Math.abs(Number(x) - ticks[i]) <= 1e-3 * (ticks[1] - ticks[0]), `${x} for ${ticks[i]}`));
  }
});

// Mean and SE at one precision, set by the SE (the arms table mixed "11148.2 ± 171" with
// "0.0953984 ± 0.00026", and showed "189.0 MiB ± —" at n = 1 and "0 ± 0" tokens/s).
test('meanSe rounds mean and SE to the same decimal place', () => {
  assert.equal(meanSe('train.tokens_per_s', 11148.2, 171, 4), '11148 ± 171');
  assert.equal(meanSe('eval.loss', 0.0953984, 0.00026, 4), '0.09540 ± 0.00026');
  assert.equal(meanSe('eval.ppl', 3.14159, 0.0123, 3), '3.142 ± 0.012');
  assert.equal(meanSe('eval.ppl', 25.3, 1.04, 3), '25.3 ± 1.0');
  assert.equal(meanSe('mem.peak_bytes', 189 * 2 ** 20, null, 1), '189.0 MiB');
  assert.equal(meanSe('mem.peak_bytes', 189 * 2 ** 20, 5, 1), '189.0 MiB');
  assert.equal(meanSe('mem.peak_bytes', 1.5 * 2 ** 30, 12.3 * 2 ** 20, 3), '1.500 ± 0.012 GiB');
  assert.equal(meanSe('train.tokens_per_s', 0, 0, 2), '—');
  assert.equal(meanSe('train.mfu', 0, null, 1), '—');
  assert.equal(metricValue('train.mfu', 0), '—');
  assert.equal(meanSe('eval.ppl', 7, 0, 3), '7 ± 0');
  assert.equal(meanSe('eval.ppl', null, 1, 3), '—');
});

test('byte ticks share one unit; axes say what x and y are', () => {
  assert.deepEqual(byteTickLabels([0, 2 ** 20, 2 * 2 ** 20]), ['0 MiB', '1 MiB', '2 MiB']);
  assert.deepEqual(byteTickLabels([0, 512 * 1024, 1024 * 1024, 1536 * 1024]),
    ['0 MiB', '0.5 MiB', '1.0 MiB', '1.5 MiB']);
  assert.deepEqual(byteTickLabels([100, 200]), ['100 B', '200 B']);
  assert.equal(xAxisLabel('aoh.bench.decode_ms_per_token'), 'context length (tokens)');
  assert.equal(xAxisLabel('aoh.rope_spearman'), 'layer');
  assert.equal(xAxisLabel('train.loss'), 'step');
  assert.equal(yAxisLabel('train.loss'), 'train.loss (nats/token)');
  assert.equal(yAxisLabel('aoh.bench.kv_bytes'), 'aoh.bench.kv_bytes (bytes)');
  assert.equal(yAxisLabel('aoh.bench.decode_ms_per_token'), 'aoh.bench.decode_ms_per_token (ms)');
  assert.equal(yAxisLabel('train.tokens_per_s'), 'train.tokens_per_s');
  assert.equal(yAxisLabel('train.step_s'), 'train.step_s (s)');
});

test('paramText: numbers by num, text as it is, a dash when absent', () => {
  assert.equal(paramText(0.00123456), '0.001235');
  assert.equal(paramText('gelu'), 'gelu');
  assert.equal(paramText(true), 'true');
  assert.equal(paramText(null), '—');
  assert.equal(paramText(undefined), '—');
});
