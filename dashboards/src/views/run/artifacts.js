// The run page's Artifacts block: each file the run stored (kind, step, size, hash) with a
// download link that carries the token, or why there is none.
import { h } from '../../dom.js';
import { getToken } from '../../api.js';
import { bytes, shortHash } from '../../format.js';

// The artifacts the API sends (coordinator/artifact_files.h); bigger ones are listed only.
export const kMaxDownloadBytes = 256 * 2 ** 20;

// Why an artifact cannot be downloaded (deleted by checkpoint retention, or too big for
// the API), or null when it can.
export function notDownloadable(a) {
  if (a.deleted_at) return `deleted by checkpoint retention ${a.deleted_at}`;
  if (Number(a.bytes) > kMaxDownloadBytes) return 'too big for the API; on its worker';
  return null;
}

export function artifactsTable(runId, list) {
  if (!list.length) return h('p', { class: 'muted' }, 'None yet.');
  return h('table', { class: 'grid-table', id: 'artifacts-table' },
    h('thead', {}, h('tr', {}, ['attempt', 'kind', 'step', 'size', 'sha256', 'file'].map((c) => h('th', {}, c)))),
    h('tbody', {}, list.map((a) => {
      const name = String(a.path || '').split('/').pop();
      const url = `/api/v1/runs/${runId}/artifacts/${a.attempt}/${a.seq}`;
      return h('tr', {},
        h('td', { class: 'num' }, a.attempt), h('td', {}, a.kind), h('td', { class: 'num' }, a.step),
        h('td', { class: 'num', title: `${a.bytes} bytes` }, bytes(a.bytes)),
        h('td', {}, h('code', { title: a.sha256 }, shortHash(a.sha256))),
        h('td', { class: 'path', title: `${a.path} on the worker's host` }, artifactFile(a, url, name)));
    })));
}

// The file cell: a download link, or why there is none.
function artifactFile(a, url, name) {
  const why = notDownloadable(a);
  if (why) return h('span', { class: 'muted' }, `${name} (${why})`);
  return h('a', { href: url, download: name, class: 'artifact-download',
    onclick: (e) => { e.preventDefault(); download(url, name, e.target); } }, name);
}

// Downloads `url` with the token (a coordinator beyond loopback answers reads only with
// it, and a plain link sends none) and saves it as `name`; a refusal shows on the link.
async function download(url, name, link) {
  const token = getToken();
  try {
    const res = await fetch(url, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
    if (!res.ok) {
      const text = await res.text();
      let detail = text;
      try { detail = JSON.parse(text).error || text; } catch { /* not JSON */ }
      throw new Error(`${res.status}: ${detail}`);
    }
    const blobUrl = URL.createObjectURL(await res.blob());
    const a = h('a', { href: blobUrl, download: name });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(blobUrl), 10000);
    link.title = `downloaded ${name}`;
  } catch (e) {
    link.title = e.message;
    link.classList.add('error');
  }
}
