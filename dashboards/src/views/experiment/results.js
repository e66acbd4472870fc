// The experiment's results as the Comparisons block and the scatter's breakdown read them
// (GET .../results): without per-pair lists, read once per state of a finished
// experiment's counts and on each call while it runs; the per-pair lists (most of the
// answer at 10^5 runs) only when a comparison's pairs are opened.
import { get } from '../../api.js';

// ctx: {id, signal, s}.
export function resultsReader(ctx) {
  const { id, signal, s } = ctx;
  let pairsAnswer = null;  // GET results?per_pair=1, read when a comparison's pairs open
  let resultsRead = null;  // {sig, answer: Promise}
  return {
    read() {
      if (!resultsRead || resultsRead.sig !== s.countsSig || s.active) {
        const answer = get(`/experiments/${id}/results`, signal);
        answer.catch(() => { if (resultsRead && resultsRead.answer === answer) resultsRead = null; });
        resultsRead = { sig: s.countsSig, answer };
      }
      return resultsRead.answer;
    },
    pairs() {
      if (!pairsAnswer) pairsAnswer = get(`/experiments/${id}/results?per_pair=1`, signal);
      return pairsAnswer;
    },
    // The comparisons were read again: their pairs are read again when opened.
    forgetPairs() {
      pairsAnswer = null;
    },
  };
}
