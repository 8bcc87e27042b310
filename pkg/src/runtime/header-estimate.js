// The memory ledger's estimate of a model from its header alone (the core's header skimmer,
// src/memory): shared by `engine.estimate()` (estimate.js) and by every load, which admits the
// model before anything is allocated (admission.js). The skimmer is fed in 64 KiB pieces
// (memory.js `slices`), so reading a header never grows wasm memory.

import { EdgeLLMError, ErrorCode } from '../errors.js';
import { slices } from '../memory.js';

/** Starts skimming a new header (nothing loaded is touched). */
export function skimBegin(rt) {
  rt.call(() => rt.engine.estimate_begin());
}

/** Feeds one chunk of the file to the skimmer; true once the header is complete. */
export function skimPush(rt, chunk) {
  for (const piece of slices(chunk)) {
    if (rt.json(() => rt.engine.estimate_push(piece)).complete) return true;
  }
  return false;
}

/**
 * Ends the skim: the core's EstimateReport for a file of `total` bytes (null: unknown) and the
 * `request` options, as `engine.estimate()` resolves it; `read`: the bytes read to decide.
 */
export function skimFinish(rt, total, request, read) {
  const report = rt.json(() => rt.engine.estimate_finish(total ?? undefined, JSON.stringify(request)));
  return { ...shapeEstimate(report), bytes_read: read };
}

/** The core's EstimateReport → the shape `engine.estimate()` resolves with. */
function shapeEstimate(r) {
  const e = r.estimate;
  return {
    fits: r.fits,
    budget_bytes: r.budget_bytes ?? null,
    terms: { weights: e.weights, kv: e.kv, activations: e.activations, runtime: e.runtime },
    total: e.total,
    load_peak: e.load_peak,
    peak: e.peak,
    kv: { tokens: e.kv_tokens, dtype: e.kv_dtype, bytes_per_token: e.kv_bytes_per_token },
    batch: e.batch,
    parts: { activations: e.activation_parts, runtime: e.runtime_parts },
    model: { name: r.name ?? null, architecture: r.architecture ?? null, n_vocab: r.n_vocab, n_layer: r.n_layer, context_length: r.context_length, header_bytes: r.header_bytes },
  };
}

/** The error of a stream that ended inside the header, after `read` bytes. */
export function truncatedHeader(read) {
  return new EdgeLLMError(ErrorCode.GGUF_TRUNCATED, `the file ended inside its header (${read} bytes)`, { detail: 'GGUF_TRUNCATED' });
}
