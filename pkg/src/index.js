// edgellm — browser entry (ESM). Runs the engine in a Web Worker (started by worker-url.js).
//
//   import { createEngine } from 'edgellm';
//   const engine = await createEngine();
//   await engine.load('https://…/model.gguf', { onProgress: (p) => console.log(p.loaded, p.total) });
//   const r = await engine.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }] });

import { Engine, CompletionStream } from './client.js';
import { EdgeLLMError, ErrorCode } from './errors.js';
import { defaultMemoryBudget } from './memory.js';
import { createOpenAIFetch } from './openai-fetch.js';
import { sourceUrl } from './strict.js';
import { spawnBrowserWorker, resolveWasmUrl } from './worker-url.js';

export { Engine, CompletionStream, EdgeLLMError, ErrorCode, defaultMemoryBudget, createOpenAIFetch };

function normalizeSource(source) {
  if (typeof Blob !== 'undefined' && source instanceof Blob) return { kind: 'blob', blob: source, name: source.name };
  const base = globalThis.location ? globalThis.location.href : undefined;
  if (source instanceof URL) return { kind: 'url', url: source.href };
  if (typeof source === 'string' && source) return { kind: 'url', url: sourceUrl(source, base).href };
  if (source && typeof source === 'object' && typeof source.url === 'string') {
    return { kind: 'url', url: sourceUrl(source.url, base).href, headers: source.headers };
  }
  throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'load(source): source must be a URL (string or URL), a Blob/File, or {url, headers}');
}

/**
 * Starts an engine (worker + wasm) and resolves when it is ready.
 * @param {import('../index.d.ts').EngineOptions} [options]
 */
export async function createEngine(options = {}) {
  // The worker cannot locate the wasm itself (worker-url.js): it gets absolute URLs in `init`.
  const opts = { ...options, wasmUrl: resolveWasmUrl(options.wasmUrl) };
  const engine = new Engine((handlers) => spawnBrowserWorker(handlers, opts), normalizeSource, opts);
  await engine.start();
  return engine;
}
