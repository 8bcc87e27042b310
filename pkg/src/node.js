// edgellm — Node entry (ESM, Node >= 20). The same API as the browser entry, with the engine in a
// worker_threads Worker. Sources may also be file paths; URLs are cached in `cacheDir`
// (default: $XDG_CACHE_HOME/edgellm or ~/.cache/edgellm) unless `cache: false`.

import { Worker } from 'node:worker_threads';
import path from 'node:path';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { Engine, CompletionStream } from './client.js';
import { EdgeLLMError, ErrorCode } from './errors.js';
import { defaultMemoryBudget } from './memory.js';
import { createOpenAIFetch } from './openai-fetch.js';
import { wasmUrlOption } from './tier.js';
import { sourceUrl } from './strict.js';

export { Engine, CompletionStream, EdgeLLMError, ErrorCode, defaultMemoryBudget, createOpenAIFetch };

/** `s` as an absolute http(s) or file URL, or INVALID_REQUEST. */
function nodeUrl(s) {
  const u = sourceUrl(s);
  if (!['http:', 'https:', 'file:'].includes(u.protocol)) throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, `load(source): ${u.protocol} URLs are not supported (http, https, file or a path)`);
  return u.href;
}

function normalizeSource(source) {
  if (typeof Blob !== 'undefined' && source instanceof Blob) return { kind: 'blob', blob: source, name: source.name };
  if (source instanceof URL) {
    return source.protocol === 'file:' ? { kind: 'path', path: fileURLToPath(source) } : { kind: 'url', url: nodeUrl(source.href) };
  }
  if (typeof source === 'string' && source) {
    if (/^https?:\/\//i.test(source)) return { kind: 'url', url: nodeUrl(source) };
    if (/^file:/i.test(source)) return { kind: 'path', path: fileURLToPath(nodeUrl(source)) };
    // Another scheme is refused (nodeUrl throws), not read as a relative path named "ftp:".
    if (/^[a-z][a-z0-9+.-]*:\/\//i.test(source)) nodeUrl(source);
    return { kind: 'path', path: path.resolve(source) };
  }
  if (source && typeof source === 'object' && typeof source.url === 'string') {
    return { kind: 'url', url: nodeUrl(source.url), headers: source.headers };
  }
  throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'load(source): source must be a URL, a file path, a Blob, or {url, headers}');
}

function defaultCacheDir() {
  const base = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'edgellm');
}

function spawn({ onMessage, onFatal }, options) {
  const worker = new Worker(options.workerUrl || new URL('./worker-node.js', import.meta.url), { name: 'edgellm' });
  let terminated = false;
  worker.on('message', (m) => onMessage(m));
  worker.on('error', (e) => onFatal(new EdgeLLMError(ErrorCode.ENGINE_CRASHED, `the engine worker failed: ${e && e.message ? e.message : e}`)));
  worker.on('exit', (code) => {
    if (!terminated) onFatal(new EdgeLLMError(ErrorCode.ENGINE_CRASHED, `the engine worker exited (code ${code})`));
  });
  // An idle engine does not keep the process alive; one with work in flight does.
  worker.unref();
  return {
    post: (m) => worker.postMessage(m),
    terminate: () => {
      terminated = true;
      worker.terminate();
    },
    setBusy: (busy) => (busy ? worker.ref() : worker.unref()),
  };
}

/**
 * Starts an engine (worker_threads + wasm) and resolves when it is ready.
 * @param {import('../index.d.ts').EngineOptions} [options]
 */
export async function createEngine(options = {}) {
  // wasmUrl: a path or file: URL (or one per tier); the worker reads it from disk.
  const opts = { ...options, wasmUrl: wasmUrlOption(options.wasmUrl, (loc) => (loc instanceof URL ? loc.href : loc)) };
  if (opts.cache !== false && !opts.cacheDir) opts.cacheDir = defaultCacheDir();
  const engine = new Engine((handlers) => spawn(handlers, opts), normalizeSource, opts);
  await engine.start();
  return engine;
}
