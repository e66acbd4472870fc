// A virtualised, sortable table: only the rows in view exist in the DOM, so 10^4 runs
// scroll and re-sort without building 10^4 row elements.
import { h, replace } from './dom.js';

// columns: [{label, width (CSS grid track), get(row) -> sort value, cell(row) -> Node|text,
// cls?}]. options: rowHeight (px), height (most px of the scrolling body), rowAttrs(row) ->
// attributes of a row element.
export class VirtualTable {
  constructor(el, columns, { rowHeight = 28, height = 480, rowAttrs = () => ({}) } = {}) {
    this.columns = columns;
    this.rowHeight = rowHeight;
    this.rowAttrs = rowAttrs;
    this.maxHeight = height;
    this.all = [];
    this.note = '';
    this.rows = [];
    this.filter = () => true;
    this.sortCol = -1;
    this.sortDir = 1;
    this.template = columns.map((c) => c.width || '1fr').join(' ');
    this.head = h('div', { class: 'vt-head', style: { gridTemplateColumns: this.template } });
    this.spacer = h('div', { class: 'vt-spacer' });
    this.body = h('div', { class: 'vt-body', style: { height: `${height}px` } }, this.spacer);
    this.footer = h('div', { class: 'vt-foot' });
    this.body.addEventListener('scroll', () => this.schedule());
    replace(el, h('div', { class: 'vt' }, this.head, this.body), this.footer);
    this.renderHead();
  }

  // Replaces the data, keeping sort, filter and scroll position.
  setRows(rows, note = '') {
    this.all = rows;
    this.note = note;
    this.refresh();
  }

  setFilter(fn) {
    this.filter = fn;
    this.refresh();
  }

  sortBy(i, dir) {
    this.sortCol = i;
    this.sortDir = dir;
    this.renderHead();
    this.refresh();
  }

  refresh() {
    const rows = this.all.filter(this.filter);
    if (this.sortCol >= 0) {
      const get = this.columns[this.sortCol].get;
      const dir = this.sortDir;
      const keyed = rows.map((r) => [get(r), r]);
      keyed.sort((a, b) => {
        const x = a[0];
        const y = b[0];
        const xn = x === null || x === undefined || Number.isNaN(x);
        const yn = y === null || y === undefined || Number.isNaN(y);
        if (xn || yn) return xn === yn ? 0 : xn ? 1 : -1;  // missing values last
        return (x < y ? -1 : x > y ? 1 : 0) * dir;
      });
      this.rows = keyed.map((k) => k[1]);
    } else {
      this.rows = rows;
    }
    this.spacer.style.height = `${this.rows.length * this.rowHeight}px`;
    // Short tables shrink to their rows; long ones scroll inside maxHeight.
    this.body.style.height = `${Math.min(this.maxHeight,
      Math.max(3, this.rows.length) * this.rowHeight + 2)}px`;
    this.footer.textContent = (this.rows.length === this.all.length
      ? `${this.all.length} rows`
      : `${this.rows.length} of ${this.all.length} rows`) + (this.note || '');
    this.body.dataset.total = String(this.rows.length);
    this.render();
  }

  schedule() {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => {
      this.pending = 0;
      this.render();
    });
  }

  renderHead() {
    replace(this.head, this.columns.map((c, i) => {
      const mark = i === this.sortCol ? (this.sortDir > 0 ? ' ▲' : ' ▼') : '';
      return h('div', {
        class: `vt-cell vt-h ${c.get ? 'sortable' : ''}`,
        title: c.get ? 'sort' : '',
        onclick: c.get ? () => this.sortBy(i, i === this.sortCol ? -this.sortDir : 1) : null,
      }, c.label + mark);
    }));
  }

  render() {
    const top = this.body.scrollTop;
    const view = this.body.clientHeight || 420;
    const first = Math.max(0, Math.floor(top / this.rowHeight) - 5);
    const last = Math.min(this.rows.length, Math.ceil((top + view) / this.rowHeight) + 5);
    const els = [];
    for (let i = first; i < last; i++) {
      const row = this.rows[i];
      els.push(h('div', {
        class: 'vt-row',
        style: { top: `${i * this.rowHeight}px`, height: `${this.rowHeight}px`,
          gridTemplateColumns: this.template },
        ...this.rowAttrs(row),
      }, this.columns.map((c) => h('div', { class: `vt-cell ${c.cls || ''}` }, c.cell(row)))));
    }
    replace(this.spacer, els);
  }
}
