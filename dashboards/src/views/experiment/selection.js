// Which runs the Curves block overlays: the coordinator's automatic choice until the user
// ticks a run, then the ticked runs (at most kMaxOverlay); a note of how many, "clear
// selection", and a link to the diff of two ticked runs.
import { h, replace } from '../../dom.js';
import { tickedDiffLink } from '../diff.js';

export const kMaxOverlay = 20;
const kAutoNote = 'tick runs in the table to overlay them';

// Ticks (`on`) or unticks run `runId` in s.selected. The first tick replaces the automatic
// choice, so that every ticked run overlays (an untick keeps the rest of it). Returns ''
// or why the tick was refused (the selection is then unchanged).
export function tickRun(s, runId, on, max = kMaxOverlay) {
  if (!s.userSelected) {
    s.userSelected = true;
    if (on) s.selected.clear();
  }
  if (on && s.selected.size >= max) {
    return `at most ${max} runs overlay at once (clear selection to start again)`;
  }
  if (on) s.selected.add(runId); else s.selected.delete(runId);
  return '';
}

// The note above the overlay: what is overlaid and how many may be.
export function selectionNote(s, max = kMaxOverlay) {
  return s.userSelected ? `${s.selected.size} of at most ${max} runs overlaid` : kAutoNote;
}

// err: the page's error line; onChange(): the selection changed; onRefused(): a tick was
// refused (the table redraws its boxes).
export function overlaySelection(s, err, onChange, onRefused) {
  const clearButton = h('button', { id: 'clear-selection', title: 'untick every run' }, 'clear selection');
  const note = h('span', { class: 'muted', id: 'selection-note' }, kAutoNote);
  const diff = h('span', { id: 'selection-diff' });  // two ticked runs: their config diff
  const row = h('div', { class: 'row' }, note, clearButton, diff);

  function changed() {
    note.textContent = selectionNote(s);
    replace(diff, s.userSelected ? tickedDiffLink([...s.selected]) : null);
    onChange();
  }
  clearButton.addEventListener('click', () => {
    s.userSelected = true;
    s.selected.clear();
    err.textContent = '';
    changed();
  });
  function tick(runId, on) {
    const refused = tickRun(s, runId, on);
    err.textContent = refused;
    if (refused) onRefused(); else changed();
  }
  return { row, tick };
}
