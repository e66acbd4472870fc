// Tiny DOM helpers. Every value from the API reaches the page as text (never innerHTML),
// so a run name or an error message cannot inject markup.

// Returns a new element: h('a', {href: '#/', class: 'x', onclick: fn}, 'text', child, ...).
// Props starting with "on" become listeners; `dataset`/`style` objects are merged; null and
// false children are skipped; arrays are flattened.
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset' || k === 'style') Object.assign(el[k], v);
    else if (k === 'class') el.className = v;
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

// Replaces every child of `el` with `children`.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

const kHiddenPollMs = 5000;
// Rows built in one task by appendInChunks.
export const kChunkRows = 50;

// Resolves in a later task (after the browser has had its turn: input, layout, paint).
const nextTask = () => new Promise((resolve) => setTimeout(resolve, 0));

// Appends build(item) for each of `items` to `parent`, `chunk` at a time, the first chunk
// at once and each next one in a later task (`yieldTo`), so that no single task builds and
// lays out hundreds of rows (200 rows of the Runs search blocked the main thread 290 ms on
// a loaded machine). Stops when `signal` aborts; resolves once every item is appended.
export async function appendInChunks(parent, items, build, signal, chunk = kChunkRows, yieldTo = nextTask) {
  for (let i = 0; i < items.length; i += chunk) {
    if (i > 0) await yieldTo();
    if (signal && signal.aborted) return;
    parent.append(...items.slice(i, i + chunk).map(build));
  }
}

// Calls `fn` now (or `first` ms from now: a view that has just read what fn reads) and then
// `ms` after each call settles, until `signal` aborts. Calls never overlap, so a slow
// coordinator slows the polling down instead of piling requests up. `ms` may be a function
// (re-read after each call).
export function poll(fn, ms, signal, { first = 0 } = {}) {
  let timer = null;
  const tick = async () => {
    if (signal.aborted) return;
    try {
      await fn();
    } catch (e) {
      if (!signal.aborted) console.warn('poll:', e);
    }
    const wait = typeof ms === 'function' ? ms() : ms;
    // A hidden tab polls at most every kHiddenPollMs: many idle dashboards cost little.
    const hidden = typeof document !== 'undefined' && document.hidden;
    if (!signal.aborted) timer = setTimeout(tick, hidden ? Math.max(wait, kHiddenPollMs) : wait);
  };
  signal.addEventListener('abort', () => clearTimeout(timer));
  if (first > 0) timer = setTimeout(tick, first);
  else tick();
}
