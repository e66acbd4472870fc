// Live metric points pushed by the coordinator as server-sent events
// (GET /api/v1/stream?runs=1,2,3; schema/http_api.md). Each "points" event carries rows
// [run, attempt, seq, step, key, value, time_s] as soon as they are durable in the
// database. After a reconnect or a "lag" event some points may have been missed: `onGap`
// is called so the caller re-reads over GET.

const kStreamPath = '/api/v1/stream';

export class LiveFeed {
  // onPoints(rows): new rows; onGap(): re-read what may have been missed.
  constructor(onPoints, onGap, signal) {
    this.onPoints = onPoints;
    this.onGap = onGap;
    this.key = '';
    this.source = null;
    signal.addEventListener('abort', () => this.close());
  }

  // Follows exactly `runIds` (an iterable); reopens the stream only when the set changes.
  follow(runIds) {
    const ids = [...new Set(runIds)].sort((a, b) => a - b);
    const key = ids.join(',');
    if (key === this.key) return;
    this.close();
    this.key = key;
    if (!ids.length || typeof EventSource === 'undefined') return;
    const source = new EventSource(`${kStreamPath}?runs=${key}`);
    let opened = false;
    source.addEventListener('hello', () => {
      // The stream is subscribed: a re-read now covers everything before it.
      if (opened) this.onGap();
      opened = true;
    });
    source.addEventListener('points', (e) => {
      const rows = JSON.parse(e.data).points || [];
      // A page-wide count of streamed points (the browser test reads it).
      const root = document.documentElement.dataset;
      root.livePoints = String(Number(root.livePoints || 0) + rows.length);
      this.onPoints(rows);
    });
    source.addEventListener('lag', () => this.onGap());
    // EventSource reconnects by itself; the next hello triggers the re-read.
    this.source = source;
  }

  close() {
    if (this.source) this.source.close();
    this.source = null;
    this.key = '';
  }

  get live() {
    return this.source !== null && this.source.readyState === 1;
  }
}
