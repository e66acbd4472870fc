// The experiment page's head: the title and description, the progress bar and counts,
// the ETA, cancel (offered only while something can be cancelled), tags and note.
import { h, replace } from '../../dom.js';
import { etaText } from '../../timing.js';
import { progressBar, countsLine } from '../experiments.js';
import { actionButton, tagEditor, noteEditor } from '../common.js';

// onCancelled(): re-read the experiment after a cancel.
export function experimentHeader(id, s, onCancelled) {
  const title = h('h1', { class: 'title' }, `Experiment #${id}`);
  const desc = h('p', { class: 'muted' });
  const progress = h('div', { class: 'progress-wide' });
  const counts = h('div', {});
  const etaEl = h('span', { id: 'eta' });
  const msg = h('span', { class: 'msg', id: 'exp-msg' });
  const tagsEl = h('span', { id: 'exp-tags' });
  const noteEl = h('div', { id: 'exp-note' });
  const cancelButton = actionButton('cancel experiment', `/experiments/${id}/cancel`, msg,
    onCancelled, () => {
      const c = (s.exp && s.exp.counts) || {};
      return `Cancel experiment #${id} (${s.exp ? s.exp.name : ''})? ` +
        `${c.queued || 0} queued and ${c.running || 0} running runs stop; finished runs keep their results.`;
    });
  cancelButton.hidden = true;
  const card = h('section', { class: 'card' }, progress, h('div', { class: 'row' }, counts,
    h('span', {}, 'ETA ', etaEl), h('span', { class: 'spacer' }), cancelButton, msg),
  h('div', { class: 'row' }, h('span', { class: 'muted' }, 'tags'), tagsEl), noteEl);

  // The ETA from the counts and the timing last read (s.timing).
  const showEta = () => {
    if (s.exp) etaEl.textContent = etaText(s.exp.counts || {}, s.timing);
  };

  // Shows s.exp (takeExperiment has read it into the state) with its grid's description.
  function show(grid) {
    const exp = s.exp;
    title.textContent = `Experiment #${id} · ${exp.name}`;
    title.title = exp.name;
    if (!tagsEl.firstChild) {
      replace(tagsEl, tagEditor(`/experiments/${id}`, exp.tags || [], msg));
      replace(noteEl, noteEditor(`/experiments/${id}`, exp.note || '', msg));
    }
    desc.textContent = grid.description || '';
    const c = exp.counts || {};
    replace(progress, progressBar(c, exp.total));
    replace(counts, countsLine(c), h('span', { class: 'muted' }, ` of ${exp.total}`));
    cancelButton.hidden = !s.active;
    showEta();
  }
  return { title, desc, card, show, showEta };
}
