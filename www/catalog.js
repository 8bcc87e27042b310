// The demo's model catalog: the models `./build.sh model` fetches (served by www/serve.js under
// /models/), what each is for, and its chat defaults. The defaults were chosen by measurement
// (tools/chat_eval/run.mjs; the table is in the README, "Chat defaults"): the app's choice of
// system prompt and sampling, shown and editable in the page's settings. The model's own chat
// template renders the messages.
//
// Plain data, no DOM: tools/chat_eval imports it under Node too.

/** The system prompt the measurement picked for SmolLM2 (its template's own default drifts into French). */
export const HELPFUL = 'You are a helpful assistant.';

export const CATALOG = Object.freeze([
  Object.freeze({
    id: 'smollm2-135m-instruct',
    name: 'SmolLM2 135M Instruct',
    file: 'SmolLM2-135M-Instruct.Q4_1.gguf',
    bytes: 98362432,
    sha256: 'b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53',
    kind: 'chat',
    context: 8192,
    quantization: 'Q4_1',
    about: 'Instruction-tuned: answers questions. Small and quick.',
    defaults: Object.freeze({ raw: false, system: HELPFUL, temperature: 0.3, top_p: 0.9, min_p: 0.1, repetition_penalty: 1.1, max_tokens: 256 }),
  }),
  Object.freeze({
    id: 'gemma-3-270m',
    name: 'Gemma 3 270M',
    file: 'gemma-3-270m-q4_k_m.gguf',
    bytes: 253113024,
    sha256: 'a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818',
    kind: 'base',
    context: 32768,
    quantization: 'Q4_K_M',
    about: 'Base model: continues text (raw completion), no chat tuning.',
    defaults: Object.freeze({ raw: true, system: '', temperature: 0.7, top_p: 0.95, min_p: 0.05, repetition_penalty: 1.1, max_tokens: 128 }),
  }),
]);

/** The entry the page starts with: the chat model. */
export const DEFAULT_ENTRY = CATALOG[0];

/** A catalog entry's URL as the page fetches it (models/ next to www/). */
export const entryUrl = (entry) => new URL(`../models/${entry.file}`, import.meta.url).pathname;

/** The catalog entry for a model URL (absolute or relative to the page), or null. */
export function entryForUrl(url, base = typeof location !== 'undefined' ? location.href : 'http://localhost/') {
  let path;
  try {
    path = new URL(url, base).pathname;
  } catch {
    return null;
  }
  return CATALOG.find((e) => path === entryUrl(e)) || null;
}
