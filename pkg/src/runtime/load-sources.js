// `engine.load(source)` in the worker: the three sources a model comes from — a Blob/File, a
// file path (Node), a URL (from the model cache when it holds a valid entry, else the network,
// written to the cache on the way) — each read as chunks and streamed into the engine by
// stream-load.js. Which cache errors are the entry's fault (drop it, download again) and which
// are final is decided here.

import { EdgeLLMError, ErrorCode } from '../errors.js';
import { readUrl, readBlob, readPath, pathSize } from '../loader.js';
import { Fatal } from './wasm-call.js';
import { streamModel } from './stream-load.js';

const now = () => performance.now();

export async function loadOp(rt, msg, signal) {
  try {
    return await loadModel(rt, msg, signal);
  } catch (e) {
    // Refused before it replaced anything (stream-load.js frees the loaded model only once
    // the new header is admitted): the model that was loaded still is, and the client says so.
    if (rt.model && e instanceof EdgeLLMError) e.kept_model = rt.model;
    throw e;
  } finally {
    // The ledger after the load (or the refusal): estimate and measurements per term.
    rt.memory.post('load');
  }
}

async function loadModel(rt, msg, signal) {
  rt.requireEngine();
  // Bad KV options are refused before anything is unloaded: the current model stays.
  if (rt.engine.check_kv_options) rt.call(() => rt.engine.check_kv_options(JSON.stringify(msg.kv ?? null)));
  const t0 = now();
  const src = msg.source || {};
  const interval = msg.progressIntervalMs ?? 50;
  // `kv`: the session's KV cache (budget, f16/q8, policy, sinks); null: the plain context. The
  // loaded model keeps its own until stream-load.js replaces it.
  const ctx = { id: msg.id, signal, interval, budget: msg.budget, kv: msg.kv ?? null };
  let info;
  if (src.kind === 'blob') {
    info = await streamModel(rt, { ...ctx, phase: 'file', total: src.blob.size, chunks: readBlob(src.blob, { signal }), sha256: msg.sha256 });
    info.source = 'file';
  } else if (src.kind === 'path') {
    if (!rt.env.fs) throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'file paths can only be loaded under Node');
    const total = await pathSize(rt.env.fs, src.path);
    info = await streamModel(rt, { ...ctx, phase: 'file', total, chunks: readPath(rt.env.fs, src.path, { signal }), sha256: msg.sha256 });
    info.source = 'file';
  } else if (src.kind === 'url') {
    info = await loadUrl(rt, src, msg, ctx);
  } else {
    throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'load: source must be a URL, a Blob/File, or (Node) a file path');
  }
  info.load_ms = Math.round(now() - t0);
  rt.model = info;
  return info;
}

/** The cached copy when it is valid and matches the requested sha256; null: go to the network. */
async function loadFromCache(rt, src, msg, ctx) {
  let hit = null;
  try {
    hit = await rt.cache.lookup(src.url);
  } catch (e) {
    rt.log('warn', `cache lookup failed: ${e.message}`);
  }
  if (hit && hit.stale) rt.log('warn', `cache entry for ${src.url} dropped: ${hit.reason}`);
  if (!hit || hit.stale) return null;
  if (msg.sha256 && msg.sha256 !== hit.record.sha256) {
    rt.log('warn', `cache entry for ${src.url} has another sha256 than requested; fetching again`);
    await rt.cache.evict(src.url);
    return null;
  }
  try {
    await hit.begin?.(); // crash marker (cache.js): a crash here evicts at the next lookup
    const info = await streamModel(rt, { ...ctx, phase: 'cache', total: hit.size, chunks: hit.read({ signal: ctx.signal }), sha256: hit.record.sha256, fromCache: true });
    await hit.done?.();
    info.source = 'cache';
    return info;
  } catch (e) {
    // A corrupt or unreadable entry (digest mismatch, bad bytes, read error): drop it and
    // download again. Errors that are not about the bytes are final — and an engine crash
    // evicts the entry before it is rethrown, so the next load does not crash again.
    if (e instanceof Fatal || !(e instanceof EdgeLLMError)) {
      await rt.cache.evict(src.url).catch(() => {});
      throw e;
    }
    if ([ErrorCode.ABORTED, ErrorCode.OVER_MEMORY_BUDGET, ErrorCode.UNSUPPORTED_MODEL].includes(e.code)) {
      await hit.done?.(); // the entry is not at fault: keep it
      throw e;
    }
    rt.log('warn', `cache entry for ${src.url} rejected (${e.message}); downloading again`);
    await rt.cache.evict(src.url).catch(() => {});
    return null;
  }
}

async function loadUrl(rt, src, msg, ctx) {
  const useCache = msg.cache !== false && rt.cache.kind !== 'none';
  if (useCache) {
    const cached = await loadFromCache(rt, src, msg, ctx);
    if (cached) return cached;
  }
  let total = null;
  let etag = null;
  const chunks = readUrl(src.url, {
    headers: src.headers,
    signal: ctx.signal,
    onStart: (i) => {
      total = i.total;
      etag = i.etag;
    },
    onResume: (r) => rt.log('info', `connection lost at byte ${r.offset}; resuming (attempt ${r.attempt}): ${r.reason}`),
  });
  let writer = null;
  const openWriter = async () => {
    if (!useCache) return;
    try {
      writer = await rt.cache.writer(src.url);
    } catch (e) {
      rt.log('warn', `not caching ${src.url}: ${e.message}`);
    }
  };
  const info = await streamModel(rt, { ...ctx, phase: 'download', total: () => total, chunks, sha256: msg.sha256, beforeFirst: openWriter, writer: () => writer, dropWriter: () => (writer = null) });
  info.source = 'network';
  if (writer) {
    try {
      await writer.commit({ size: info.file_size, sha256: info.sha256, etag });
    } catch (e) {
      rt.log('warn', `could not record the cache entry: ${e.message}`);
      await writer.abort().catch(() => {});
    }
  }
  return info;
}
