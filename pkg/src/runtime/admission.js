// Admission of a model by the memory ledger before its load allocates anything. Until the header
// is complete, the load's chunks are kept here (JS memory, reported as js_buffers_bytes) and only
// skimmed by the core, so a model the budget refuses never grows wasm memory. Once admitted, the
// kept chunks and the rest of the stream pass through to the loader (stream-load.js), which
// takes the admission over (load_begin_admitted) instead of admitting the header again.

import { EdgeLLMError, ErrorCode, abortedError } from '../errors.js';
import { skimBegin, skimPush, skimFinish, truncatedHeader } from './header-estimate.js';

const mib = (b) => `${(b / 1048576).toFixed(1)} MiB`;

/** OVER_MEMORY_BUDGET with the figures per term and the estimate itself. */
function overBudget(est) {
  const t = est.terms;
  return new EdgeLLMError(
    ErrorCode.OVER_MEMORY_BUDGET,
    `the model needs an estimated ${mib(est.peak)} (weights ${mib(t.weights)} + KV ${mib(t.kv)} + activations ${mib(t.activations)} + runtime ${mib(t.runtime)}; load peak ${mib(est.load_peak)}), more than the memory budget of ${mib(est.budget_bytes)}`,
    { detail: 'OVER_MEMORY_BUDGET', terms: t, budget_bytes: est.budget_bytes, estimate: est },
  );
}

/**
 * Passes `chunks` through once the ledger has admitted the model from its header (the core
 * keeps that admission for the load). A stream that ends inside the header is GGUF_TRUNCATED
 * here, before the loaded model is replaced (stream-load.js), as every other refusal of the
 * header. `rt.memory` counts the kept bytes (memory-events.js).
 */
export async function* admitFirst(rt, chunks, getTotal, budget, kv, signal) {
  const it = chunks[Symbol.asyncIterator]();
  const held = rt.memory;
  let innerDone = false;
  const stash = [];
  held.jsBuffersPeak = 0;
  try {
    skimBegin(rt);
    let complete = false;
    let read = 0;
    while (!complete) {
      const r = await it.next();
      if (signal.aborted) throw abortedError('load');
      if (r.done) {
        innerDone = true;
        break;
      }
      const c = r.value.slice(); // readers may reuse their buffer
      read += c.byteLength;
      stash.push(c);
      held.jsBuffers += c.byteLength;
      held.jsBuffersPeak = Math.max(held.jsBuffersPeak, held.jsBuffers);
      complete = skimPush(rt, c);
    }
    if (!complete) throw truncatedHeader(read);
    // Estimated for the KV options the load sets (`kv`; null: the plain context), not those of
    // the model still loaded.
    const request = { as_loaded: true, ...(kv ? { kv } : {}), ...(budget !== undefined && budget !== null ? { budget_bytes: budget } : {}) };
    const est = skimFinish(rt, getTotal(), request, read);
    if (!est.fits) throw overBudget(est);
    while (stash.length) {
      const c = stash.shift();
      held.jsBuffers -= c.byteLength;
      yield c;
    }
    held.jsBuffers = 0;
    while (!innerDone) {
      const r = await it.next();
      if (r.done) {
        innerDone = true;
        break;
      }
      yield r.value;
    }
  } finally {
    held.jsBuffers = 0;
    if (!innerDone && it.return) await Promise.resolve(it.return()).catch(() => {});
  }
}
