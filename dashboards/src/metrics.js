// Incremental metric stream of one run: GET /runs/ID/metrics?key=K&after=SEQ&attempt=A
// returns the points after the last sequence number seen, so each read moves only the new
// points; points pushed by the live stream (live.js) are merged in with `ingest`.
import { get } from './api.js';

export class RunMetrics {
  // key: one metric key, or null for every key of the run.
  constructor(runId, key = null) {
    this.runId = runId;
    this.key = key;
    this.reading = false;  // a GET is in flight: pushed points wait in `pushed`
    this.pushed = [];
    this.reset(0);
  }

  // Forgets every point and starts again from attempt `attempt`.
  reset(attempt) {
    this.attempt = attempt;
    this.lastSeq = -1;
    this.series = new Map();  // key -> {xs: steps, ys: values}
    this.loaded = false;      // a GET of this attempt has answered
    this.newer = 0;           // a pushed point showed this newer attempt: re-read
  }

  // Adds one point of the current attempt unless it is already there.
  add(seq, step, key, value) {
    if (seq <= this.lastSeq) return 0;
    this.lastSeq = seq;
    let s = this.series.get(key);
    if (!s) {
      s = { xs: [], ys: [] };
      this.series.set(key, s);
    }
    s.xs.push(step);
    s.ys.push(value === null ? null : Number(value));
    return 1;
  }

  // Merges rows pushed by the live stream ([run, attempt, seq, step, key, value, time_s]);
  // returns how many points were added. Points arrive in commit order, so a point newer
  // than the last one seen is new; while a GET is in flight they wait for it.
  ingest(rows) {
    if (this.reading) {
      this.pushed.push(...rows);
      return 0;
    }
    let added = 0;
    for (const [run, attempt, seq, step, key, value] of rows) {
      if (run !== this.runId || (this.key && key !== this.key)) continue;
      if (attempt > this.attempt) this.newer = Math.max(this.newer, attempt);  // a requeue
      if (attempt !== this.attempt || this.newer || !this.loaded) continue;
      added += this.add(seq, step, key, value);
    }
    return added;
  }

  // Called with the run's attempt count from the runs list: a newer attempt restarts the
  // curve (its seq numbers start again from 0, so after=SEQ would skip its first points).
  expectAttempt(attempt) {
    if (attempt > this.attempt) this.reset(attempt);
  }

  // Fetches new points (and then any pushed while reading); returns how many were added.
  async update(signal) {
    if (this.newer) this.reset(this.newer);  // the requeued attempt's curve, from its start
    this.reading = true;
    let added = 0;
    try {
      added = await this.read(signal);
    } finally {
      this.reading = false;
      const pushed = this.pushed;
      this.pushed = [];
      added += this.ingest(pushed);
    }
    return added;
  }

  async read(signal) {
    const params = new URLSearchParams();
    if (this.key) params.set('key', this.key);
    if (this.lastSeq >= 0) params.set('after', String(this.lastSeq));
    // Only the current attempt's points (an earlier attempt's curve is a different run).
    if (this.attempt > 0) params.set('attempt', String(this.attempt));
    const qs = params.toString();
    const complete = this.lastSeq < 0;  // no `after`: every attempt's points come back
    const r = await get(`/runs/${this.runId}/metrics${qs ? `?${qs}` : ''}`, signal);
    this.loaded = true;
    let added = 0;
    for (const p of (r && r.points) || []) {
      const [attempt, seq, step, key, value] = Array.isArray(p)
        ? p : [p.attempt, p.seq, p.step, p.key, p.value];
      if (attempt > this.attempt) {
        // A newer attempt than we knew: drop the old curve. After an incremental read its
        // first points may be missing, so re-read it from the start on the next poll.
        this.reset(attempt);
        if (!complete) return 0;
        added = 0;
      }
      if (attempt < this.attempt) continue;
      added += this.add(seq, step, key, value);
    }
    return added;
  }

  get(key) {
    return this.series.get(key) || { xs: [], ys: [] };
  }

  keys() {
    return [...this.series.keys()].sort();
  }
}
