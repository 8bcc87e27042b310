// The llama.cpp peer of the side-by-side benchmarks (node-llama-cpp 3.21.1, prebuilt CPU
// build, installed under tools/): loading a GGUF, the prompt's ids as llama.cpp feeds them, and
// one timed greedy generation. Used by bench_native.mjs and bench_server_decode.mjs.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Loads `modelPath` on the CPU: `{ llama, model }`. */
export async function loadPeer(modelPath) {
  const { getLlama } = await import(path.join(root, 'tools/node_modules/node-llama-cpp/dist/index.js'));
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: 'error' });
  return { llama, model: await llama.loadModel({ modelPath, gpuLayers: 0 }) };
}

/** The ids llama.cpp evaluates for `prompt`: its tokens, after BOS where the model asks for it. */
export function promptIds(model, prompt) {
  const body = model.tokenize(prompt);
  const bos = model.tokens.bos;
  return model.tokens.shouldPrependBosToken && bos != null ? [bos, ...body] : body;
}

/** A context of the benchmarks' shape on `threads` threads (llama.cpp's own thread pool). */
export const benchContext = (model, threads = 1) => model.createContext({ contextSize: 512, batchSize: 512, threads, sequences: 1 });

/**
 * Greedy generation of up to `n` tokens after `ids` on a fresh sequence of `context`; the
 * times (performance.now()) of its start, first and last token, and how many came.
 */
export async function timedGreedy(context, ids, n) {
  const seq = context.getSequence();
  const start = performance.now();
  let first = null;
  let last = null;
  let count = 0;
  for await (const _ of seq.evaluate(ids, { temperature: 0, yieldEogToken: true })) {
    last = performance.now();
    if (first === null) first = last;
    if (++count >= n) break;
  }
  seq.dispose();
  return { start, first, last, count };
}
