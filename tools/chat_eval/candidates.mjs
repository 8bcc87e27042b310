// Candidate chat defaults, measured by tools/chat_eval/run.mjs. `system`: null = no system
// message (the chat template adds its own default, if it has one: SmolLM2's names itself
// "SmolLM, trained by Hugging Face"); '' = an empty system message; otherwise that text.
// Sampling fields are the OpenAI-style request fields the engine takes; unset ones take the
// engine's defaults (llama.cpp's: top_k 40, top_p 0.95, min_p 0.05, no penalties). max_tokens
// bounds the measurement (the answers to these questions need fewer); listed most telling first,
// so a run stopped early (results are written after each candidate) has the main comparison.
export const HELPFUL = 'You are a helpful assistant.';

export const CANDIDATES = [
  { id: 'greedy-helpful', system: HELPFUL, temperature: 0, max_tokens: 48 },
  { id: 'old-demo-template', system: null, temperature: 0.7, top_p: 0.95, max_tokens: 48 },
  { id: 't0.3-minp0.1-rep1.1-helpful', system: HELPFUL, temperature: 0.3, top_p: 0.9, min_p: 0.1, repetition_penalty: 1.1, max_tokens: 48 },
  { id: 'greedy-template', system: null, temperature: 0, max_tokens: 48 },
  { id: 't0.3-minp0.1-helpful', system: HELPFUL, temperature: 0.3, top_p: 0.9, min_p: 0.1, max_tokens: 48 },
  { id: 'greedy-empty', system: '', temperature: 0, max_tokens: 48 },
  { id: 'greedy-helpful-rep1.1', system: HELPFUL, temperature: 0, repetition_penalty: 1.1, max_tokens: 48 },
  { id: 't0.7-helpful', system: HELPFUL, temperature: 0.7, top_p: 0.95, max_tokens: 48 },
];

/** The request fields of a candidate (everything but its id and system prompt). */
export function samplingOf(c) {
  const { id, system, ...rest } = c;
  return rest;
}
