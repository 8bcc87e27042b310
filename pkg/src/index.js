// edgellm — browser entry (ESM). Runs the engine in a module Web Worker.
//
//   import { createEngine } from 'edgellm';
//   const engine = await createEngine();
//   await engine.load('https://…/model.gguf', { onProgress: (p) => console.log(p.loaded, p.total) });
//   const r = await engine.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }] });

import { Engine, CompletionStream } from './client.js';
import { EdgeLLMError, ErrorCode } from './errors.js';
import { defaultMemoryBudget } from './memory.js';

export { Engine, CompletionStream, EdgeLLMError, ErrorCode, defaultMemoryBudget };

function normalizeSource(source) {
  if (typeof Blob !== 'undefined' && source instanceof Blob) return { kind: 'blob', blob: source, name: source.name };
  const base = globalThis.location ? globalThis.location.href : undefined;
  if (source instanceof URL) return { kind: 'url', url: source.href };
  if (typeof source === 'string' && source) return { kind: 'url', url: new URL(source, base).href };
  if (source && typeof source === 'object' && typeof source.url === 'string') {
    return { kind: 'url', url: new URL(source.url, base).href, headers: source.headers };
  }
  throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'load(source): source must be a URL (string or URL), a Blob/File, or {url, headers}');
}

function spawn({ onMessage, onFatal }, options) {
  // Keep this expression literal: bundlers find the worker (and, inside it, the wasm) through it.
  const worker = options.workerUrl
    ? new Worker(options.workerUrl, { type: 'module', name: 'edgellm' })
    : new Worker(new URL('./worker.js', import.meta.url), { type: 'module', name: 'edgellm' });
  worker.onmessage = (e) => onMessage(e.data);
  worker.onerror = (e) => {
    if (e && e.preventDefault) e.preventDefault();
    onFatal(new EdgeLLMError(ErrorCode.ENGINE_CRASHED, `the engine worker failed: ${(e && e.message) || 'could not load or run the worker script'}`));
  };
  worker.onmessageerror = () => onFatal(new EdgeLLMError(ErrorCode.ENGINE_CRASHED, 'a message from the engine worker could not be deserialized'));
  return { post: (m) => worker.postMessage(m), terminate: () => worker.terminate() };
}

/**
 * Starts an engine (worker + wasm) and resolves when it is ready.
 * @param {import('../index.d.ts').EngineOptions} [options]
 */
export async function createEngine(options = {}) {
  const engine = new Engine((handlers) => spawn(handlers, options), normalizeSource, options);
  await engine.start();
  return engine;
}
