// The "Selected windows by arm" block: how many heads of each arm's runs chose each
// attention window (AAH Fig. 4), from the head maps of each run's latest attempt.
import { h, replace } from '../../dom.js';
import { query } from '../../api.js';
import { loading } from '../common.js';
import { windowBuckets } from '../heads.js';

// ctx: {id, signal}.
export function windowBucketsPanel(ctx) {
  const { id, signal } = ctx;
  const body = h('div', { id: 'window-buckets', class: 'scroll-x' }, loading());
  const card = h('section', { class: 'card' }, h('h2', {}, 'Selected windows by arm'), body);
  async function refresh() {
    const rows = await query(`
SELECT r.arm AS arm, hm.window AS window, count(*) AS n
FROM head_maps hm JOIN runs r ON r.id = hm.run_id
WHERE r.experiment_id = ${id} AND hm.window IS NOT NULL
  AND hm.attempt = (SELECT max(attempt) FROM head_maps h2 WHERE h2.run_id = hm.run_id)
GROUP BY r.arm, hm.window`, signal);
    replace(body, rows.length ? windowBuckets(rows)
      : h('p', { class: 'muted' }, 'No head windows recorded for this experiment (AAH runs record them).'));
  }
  return { card, refresh };
}
