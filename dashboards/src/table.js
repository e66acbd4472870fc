// A virtualised table over rows that live on the server: only the rows in view exist in
// the DOM, and only their pages are fetched (GET /experiments/ID/runs?limit=&offset=, sorted
// and filtered in SQL), so 10^5 runs scroll, sort and filter without moving the list.
import { h, replace } from './dom.js';

// Rows per request; a page is fetched when any of its rows scrolls into view.
export const kPageRows = 100;
// Pages kept; the ones farthest from the view are dropped first.
const kCachedPages = 40;

// columns: [{label, width (CSS grid track), sort (the server's sort key; absent: not
// sortable), cell(row) -> Node|text, cls?, title?}]. options: rowHeight (px), height (most
// px of the scrolling body), rowAttrs(row) -> attributes of a row element, load({offset,
// limit, sort, desc}) -> Promise<{rows, matched, total}> (the filter is the loader's own).
export class VirtualTable {
  constructor(el, columns, { rowHeight = 28, height = 480, rowAttrs = () => ({}), load } = {}) {
    this.columns = columns;
    this.rowHeight = rowHeight;
    this.rowAttrs = rowAttrs;
    this.maxHeight = height;
    this.load = load;
    this.sortKey = 'idx';
    this.sortCol = -1;
    this.desc = false;
    this.pages = new Map();     // page index -> rows
    this.inflight = new Map();  // page index -> promise
    this.generation = 0;        // bumped by reload(): answers of older generations are dropped
    this.matched = null;
    this.total = null;
    this.note = '';
    this.template = columns.map((c) => c.width || '1fr').join(' ');
    this.head = h('div', { class: 'vt-head', style: { gridTemplateColumns: this.template } });
    this.spacer = h('div', { class: 'vt-spacer' });
    this.body = h('div', { class: 'vt-body', style: { height: `${3 * rowHeight + 2}px` } }, this.spacer);
    this.footer = h('div', { class: 'vt-foot' }, 'loading…');
    this.body.addEventListener('scroll', () => this.schedule());
    replace(el, h('div', { class: 'vt' }, h('div', { class: 'vt-inner' }, this.head, this.body)), this.footer);
    this.renderHead();
  }

  // Forgets every page and fetches the ones in view again (new sort or filter); resolves
  // once they are drawn.
  async reload() {
    this.generation++;
    this.pages.clear();
    this.inflight.clear();
    this.body.scrollTop = 0;
    await this.ensureVisible();
  }

  // Shows a first page already fetched ({rows, matched, total}, offset 0, the default sort).
  seed(first) {
    this.pages.set(0, first.rows);
    this.matched = first.matched;
    this.total = first.total;
    this.layout();
  }

  // Re-fetches the pages in view, keeping the others (a live experiment's rows change).
  async refreshVisible() {
    const [first, last] = this.visiblePages();
    const gen = this.generation;
    await Promise.all(this.range(first, last).map((p) => this.fetchPage(p, gen, true)));
  }

  sortBy(i, desc) {
    this.sortCol = i;
    this.sortKey = i >= 0 ? this.columns[i].sort : 'idx';
    this.desc = desc;
    this.renderHead();
    return this.reload();
  }

  // The rows currently cached (for lookups by id).
  *cachedRows() {
    for (const rows of this.pages.values()) yield* rows;
  }

  visiblePages() {
    const top = this.body.scrollTop;
    const view = this.body.clientHeight || this.maxHeight;
    const first = Math.max(0, Math.floor(top / this.rowHeight) - 5);
    const last = Math.ceil((top + view) / this.rowHeight) + 5;
    return [Math.floor(first / kPageRows), Math.floor(last / kPageRows)];
  }

  range(a, b) {
    const out = [];
    const pagesKnown = this.matched === null ? a + 1 : Math.ceil(this.matched / kPageRows);
    for (let p = a; p <= b && p < Math.max(1, pagesKnown); p++) out.push(p);
    return out;
  }

  async ensureVisible() {
    const [first, last] = this.visiblePages();
    const gen = this.generation;
    await Promise.all(this.range(first, last).filter((p) => !this.pages.has(p))
      .map((p) => this.fetchPage(p, gen, false)));
  }

  fetchPage(p, gen, force) {
    if (!force && this.inflight.has(p)) return this.inflight.get(p);
    const promise = this.load({ offset: p * kPageRows, limit: kPageRows, sort: this.sortKey, desc: this.desc })
      .then((r) => {
        if (gen !== this.generation) return;
        this.pages.set(p, r.rows);
        this.matched = r.matched;
        this.total = r.total;
        this.evict(p);
        this.layout();
      }).finally(() => {
        if (this.inflight.get(p) === promise) this.inflight.delete(p);
      });
    this.inflight.set(p, promise);
    return promise;
  }

  evict(around) {
    if (this.pages.size <= kCachedPages) return;
    const far = [...this.pages.keys()].sort((a, b) => Math.abs(b - around) - Math.abs(a - around));
    for (const p of far.slice(0, this.pages.size - kCachedPages)) this.pages.delete(p);
  }

  setNote(note) {
    this.note = note;
    this.layout();
  }

  layout() {
    const n = this.matched || 0;
    this.spacer.style.height = `${n * this.rowHeight}px`;
    // Short tables shrink to their rows; long ones scroll inside maxHeight.
    this.body.style.height = `${Math.min(this.maxHeight, Math.max(3, n) * this.rowHeight + 2)}px`;
    this.footer.textContent = (this.matched === null ? 'loading…'
      : this.matched === this.total ? `${this.total} rows` : `${this.matched} of ${this.total} rows`) + this.note;
    this.body.dataset.total = String(n);
    this.render();
  }

  schedule() {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => {
      this.pending = 0;
      this.render();
      this.ensureVisible().catch(() => {});
    });
  }

  renderHead() {
    replace(this.head, this.columns.map((c, i) => {
      const mark = i === this.sortCol ? (this.desc ? ' ▼' : ' ▲') : '';
      return h('div', {
        class: `vt-cell vt-h ${c.sort ? 'sortable' : ''}`,
        title: c.title || (c.sort ? `sort by ${c.label}` : c.label),
        onclick: c.sort ? () => this.sortBy(i, i === this.sortCol ? !this.desc : false).catch(() => {}) : null,
      }, c.label + mark);
    }));
  }

  render() {
    const top = this.body.scrollTop;
    const view = this.body.clientHeight || 420;
    const n = this.matched || 0;
    const first = Math.max(0, Math.floor(top / this.rowHeight) - 5);
    const last = Math.min(n, Math.ceil((top + view) / this.rowHeight) + 5);
    const els = [];
    for (let i = first; i < last; i++) {
      const page = this.pages.get(Math.floor(i / kPageRows));
      const row = page ? page[i % kPageRows] : undefined;
      const style = { top: `${i * this.rowHeight}px`, height: `${this.rowHeight}px`,
        gridTemplateColumns: this.template };
      if (!row) {
        els.push(h('div', { class: 'vt-row vt-pending', style }, h('div', { class: 'vt-cell muted' }, '…')));
        continue;
      }
      els.push(h('div', { class: 'vt-row', style, ...this.rowAttrs(row) },
        this.columns.map((c) => h('div', { class: `vt-cell ${c.cls || ''}` }, c.cell(row)))));
    }
    replace(this.spacer, els);
  }
}
