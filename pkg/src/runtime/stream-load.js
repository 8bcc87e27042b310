// Streams a model's bytes into the engine's loader, whatever their source (load-sources.js):
// header first (the core parses it incrementally), then each tensor's bytes straight into its
// final allocation; the sha256 is computed by the core on the way. Progress events are posted
// at most every `interval` ms, and once at the start and the end.

import { EdgeLLMError, ErrorCode, abortedError } from '../errors.js';
import { Ev } from '../protocol.js';
import { Fatal } from './wasm-call.js';
import { admitFirst } from './admission.js';

const now = () => performance.now();

/**
 * `total` may be a function (known once the first response arrived); `writer` (a function) is
 * the model cache's writer the chunks are copied to, if any (dropped on a write failure: the
 * load goes on uncached).
 */
export async function streamModel(rt, { id, signal, interval, phase, total, chunks, sha256, fromCache, beforeFirst, writer, dropWriter, budget, kv }) {
  const getTotal = typeof total === 'function' ? total : () => total;
  const getWriter = typeof writer === 'function' ? writer : () => null;
  let loaded = 0;
  let begun = false;
  let lastPost = -Infinity;
  const progress = (force) => {
    const t = now();
    if (force || t - lastPost >= interval) {
      lastPost = t;
      rt.env.post({ type: Ev.PROGRESS, id, phase, loaded, total: getTotal() });
    }
  };
  // The ledger admits the model from its header before the loader allocates anything (no chunk
  // comes through otherwise); the load then takes that admission over (load_begin_admitted)
  // instead of admitting it again.
  chunks = admitFirst(rt, chunks, getTotal, budget, kv, signal);
  // The loaded model is freed only here, as the loader is about to allocate: holding two
  // models at once would double the peak, and a load refused before (the source unreachable,
  // not a GGUF, over the budget, aborted in the header) keeps it. Then the new session's KV
  // options, which the admission was estimated for (so it holds).
  const replaceLoaded = () => {
    rt.unload();
    if (rt.engine.set_kv_options) rt.call(() => rt.engine.set_kv_options(JSON.stringify(kv ?? null)));
  };
  try {
    const it = chunks[Symbol.asyncIterator]();
    for (;;) {
      const r = await it.next();
      if (signal.aborted) throw abortedError('load');
      if (r.done) break;
      const chunk = r.value;
      if (!begun) {
        const t = getTotal();
        if (t === null || t === undefined) {
          throw new EdgeLLMError(ErrorCode.NETWORK, 'the server did not send a Content-Length: the model size must be known before loading', { detail: 'NO_CONTENT_LENGTH' });
        }
        if (beforeFirst) await beforeFirst();
        replaceLoaded();
        rt.call(() => rt.engine.load_begin_admitted(t, budget ?? undefined));
        begun = true;
        progress(true);
      }
      rt.call(() => rt.engine.load_push(chunk));
      rt.faultPoint('load');
      rt.memory.poll();
      const w = getWriter();
      if (w) {
        try {
          await w.write(chunk);
        } catch (e) {
          rt.log('warn', `cache write failed, not caching this model: ${e.message}`);
          await w.abort().catch(() => {});
          if (dropWriter) dropWriter();
        }
      }
      loaded += chunk.byteLength;
      progress(false);
    }
    const info = rt.json(() => rt.engine.load_finish());
    progress(true);
    if (sha256 && info.sha256 !== sha256.toLowerCase()) {
      rt.unload();
      throw new EdgeLLMError(ErrorCode.CHECKSUM_MISMATCH, `sha256 of the ${fromCache ? 'cached ' : ''}model is ${info.sha256}, expected ${sha256}`, { detail: 'SHA256_MISMATCH' });
    }
    return info;
  } catch (e) {
    if (begun && !rt.dead && !(e instanceof Fatal)) {
      try {
        rt.engine.load_cancel();
      } catch {
        /* already reset */
      }
    }
    const w = getWriter();
    if (w) await w.abort().catch(() => {});
    if (chunks.return) chunks.return().catch?.(() => {});
    throw e;
  }
}
