// node --test: which charts the run page draws for which metrics.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chartPlan, metricGroup } from './curves.js';

test('losses share one chart, drawn first, then system series, then the rest by name', () => {
  assert.equal(metricGroup('eval.loss'), 'loss');
  assert.equal(metricGroup('eval.ppl'), 'eval.ppl');
  const plan = chartPlan(['acc', 'eval.loss', 'lr', 'sys.rss_bytes', 'train.loss'], false, 2);
  assert.deepEqual(plan.all, ['loss', 'sys.rss_bytes', 'acc', 'lr']);
  assert.deepEqual(plan.groups.get('loss'), ['eval.loss', 'train.loss']);
  assert.deepEqual(plan.names, ['loss', 'sys.rss_bytes']);
  assert.deepEqual(chartPlan(['acc', 'lr'], true, 1).names, ['acc', 'lr']);
  assert.deepEqual(chartPlan([], false).names, []);
});
