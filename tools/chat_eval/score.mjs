// Automatic checks for one chat answer (tools/chat_eval): the expected facts, the language, the
// repetition, and whether it ended by itself. Deliberately simple and transparent: the point is
// to rank candidate defaults on a tiny model, where the failures are gross (another language,
// a loop, a wrong fact), not to grade prose.

// Function words of the languages the small models drift into (French first: SmolLM2 does,
// with its template's default system prompt). English shares none of them.
const FOREIGN = new Set(
  (
    'le la les des une est sont du au aux et ou dans avec pour pas qui que nous vous ils elle ' +
    'cette ces mais très être avoir fait leur sur par ' +
    'el los las del una por con para es está son muy pero ' +
    'der die das und ist nicht ein eine mit für auf den dem sich'
  ).split(' '),
);
// Words that are also ordinary English (kept out of the foreign count).
const SHARED = new Set(['a', 'an', 'die', 'son', 'pour', 'par', 'sur', 'con', 'pas', 'ces', 'elle', 'es', 'est']);

const words = (text) => (text.toLowerCase().match(/[\p{L}\p{N}']+/gu) || []).map((w) => w.replace(/^'+|'+$/g, ''));

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** Whole-word (or whole-phrase), case-insensitive. */
const mentions = (text, term) => new RegExp(`(?<![\\p{L}\\p{N}])${escape(term)}(?![\\p{L}\\p{N}])`, 'iu').test(text);

/** Share of the expected fact groups the answer meets (1 when nothing is expected). */
export function factScore(text, expect) {
  if (!expect.length) return 1;
  let met = 0;
  for (const g of expect) {
    if (Array.isArray(g)) met += g.some((t) => mentions(text, t)) ? 1 : 0;
    else met += g.any.filter((t) => mentions(text, t)).length >= g.min ? 1 : 0;
  }
  return met / expect.length;
}

const foreignShare = (text) => {
  const w = words(text);
  const foreign = w.filter((x) => FOREIGN.has(x) && !SHARED.has(x)).length;
  return { n: w.length, foreign, share: w.length ? foreign / w.length : 0 };
};

/**
 * English: under 8% of the words are function words of French, Spanish or German, and the
 * first sentence is not foreign (an answer that opens "Le Grand Jardin, la Ciampière." and then
 * switches to English is not an English answer).
 */
export function isEnglish(text) {
  const all = foreignShare(text);
  if (!all.n) return false;
  const first = foreignShare(text.split(/[.!?\n]/)[0]);
  const accented = (text.match(/[àâçéèêëîïôûùüÿñæœäöß¿¡]/giu) || []).length;
  return all.share < 0.08 && !(first.foreign >= 2 && first.share >= 0.15) && accented / Math.max(1, text.length) < 0.02;
}

/**
 * Repetition: the share of word 4-grams that occurred before in the same answer, and the most
 * times one non-empty line recurs. A loop ("Explain the storage structure." ×20) scores near 1.
 */
export function repetition(text) {
  const w = words(text);
  const seen = new Set();
  let grams = 0;
  let repeats = 0;
  for (let i = 0; i + 4 <= w.length; i++) {
    const g = w.slice(i, i + 4).join(' ');
    grams++;
    if (seen.has(g)) repeats++;
    else seen.add(g);
  }
  const lines = new Map();
  for (const l of text.split('\n').map((s) => s.trim().toLowerCase()).filter((s) => s.length > 3)) lines.set(l, (lines.get(l) || 0) + 1);
  return { ngram: grams ? repeats / grams : 0, maxLine: Math.max(0, ...lines.values()) };
}

export const REPETITIVE_NGRAM = 0.2;
export const REPETITIVE_LINES = 3;

/** All checks for one answer; `ok` = non-empty, all facts, English, not repetitive. */
export function scoreAnswer(text, expect, finishReason) {
  const facts = factScore(text, expect);
  const english = isEnglish(text);
  const rep = repetition(text);
  const repetitive = rep.ngram > REPETITIVE_NGRAM || rep.maxLine >= REPETITIVE_LINES;
  const nonEmpty = text.trim().length > 0;
  return { facts, english, repetitive, nonEmpty, stopped: finishReason === 'stop', ok: nonEmpty && facts === 1 && english && !repetitive };
}

/** Totals over many scored answers (fractions in 0..1). */
export function summarize(scores) {
  const n = scores.length || 1;
  const mean = (f) => scores.reduce((s, x) => s + f(x), 0) / n;
  return {
    answers: scores.length,
    ok: mean((s) => (s.ok ? 1 : 0)),
    facts: mean((s) => s.facts),
    english: mean((s) => (s.english ? 1 : 0)),
    no_repetition: mean((s) => (s.repetitive ? 0 : 1)),
    stopped: mean((s) => (s.stopped ? 1 : 0)),
  };
}
