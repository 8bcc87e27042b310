// The memory ledger on the JS side: the default budget, and reading a model's header for an
// estimate (Range requests / Blob.slice / a file path) without downloading the weights.
//
// The ledger itself (estimate per term, measurement, pressure level, admission) lives in the
// wasm core (src/memory, src/host/memory.rs); the worker (runtime.js) drives it.

import { EdgeLLMError, ErrorCode, abortedError } from './errors.js';
import { parseContentRange } from './loader.js';

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

/** wasm32 linear memory cannot exceed 4 GiB. */
export const WASM32_MAX_BYTES = 4 * GiB;
/** Share of the device's memory the engine may take by default. */
export const DEVICE_SHARE = 0.25;
/** Kept free below the wasm32 ceiling (the JS heap, the page, growth granularity). */
export const CEILING_MARGIN = 0.1;
/** Device memory assumed when the browser does not say (Firefox, Safari, Node): a 4 GB phone. */
export const ASSUMED_DEVICE_GIB = 4;
/** Pressure thresholds (fractions of the budget). */
export const DEFAULT_THRESHOLDS = Object.freeze({ elevated: 0.75, critical: 0.9 });

/**
 * The default memory budget:
 *   min(4 GiB × (1 − 0.1), deviceMemory GiB × 0.25)
 * with `navigator.deviceMemory` (Chrome: RAM in GiB rounded to a power of two; older versions
 * capped it at 8, Chromium 156 reports 16), 4 GiB assumed where it is not exposed. So: 512 MiB on
 * a 2 GB device, 1 GiB on a 4 GB phone (mobile tabs are killed near 1–1.5 GB), 2 GiB on an 8 GB
 * desktop, the 3.6 GiB ceiling from 16 GB.
 * @param {{deviceMemory?: number}} [env]
 */
export function defaultMemoryBudget(env = {}) {
  let gib = env.deviceMemory;
  if (gib === undefined) gib = globalThis.navigator && globalThis.navigator.deviceMemory;
  if (typeof gib !== 'number' || !Number.isFinite(gib) || gib <= 0) gib = ASSUMED_DEVICE_GIB;
  return Math.floor(Math.min(WASM32_MAX_BYTES * (1 - CEILING_MARGIN), gib * GiB * DEVICE_SHARE));
}

/** The `memory` option of createEngine → the core's MemoryOptions (validated). */
export function memoryOptions(memory, legacyBudget) {
  const m = memory ?? {};
  if (typeof m !== 'object') throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'memory must be an object like {budget_bytes: 1073741824}');
  const unknown = Object.keys(m).filter((k) => !['budget_bytes', 'elevated', 'critical'].includes(k));
  if (unknown.length) throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, `memory: unknown option ${unknown.join(', ')}`);
  let budget = m.budget_bytes ?? legacyBudget ?? defaultMemoryBudget();
  if (typeof budget !== 'number' || !Number.isFinite(budget) || budget <= 0) {
    throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, `memory.budget_bytes must be a positive number of bytes, got ${JSON.stringify(budget)}`);
  }
  const elevated = m.elevated ?? DEFAULT_THRESHOLDS.elevated;
  const critical = m.critical ?? DEFAULT_THRESHOLDS.critical;
  if (!(elevated > 0 && critical >= elevated)) {
    throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, `memory thresholds must satisfy 0 < elevated <= critical, got ${elevated} and ${critical}`);
  }
  return { budget_bytes: Math.floor(budget), elevated, critical };
}

/** Slices of at most `n` bytes: the core skims the header in small pieces (no memory growth). */
export function* slices(chunk, n = 64 << 10) {
  for (let off = 0; off < chunk.byteLength; off += n) yield chunk.subarray(off, Math.min(chunk.byteLength, off + n));
}

/**
 * The first bytes of a URL, with `Range` requests of growing size (1, 2, 4, 8 MiB, ...), as
 * chunks; `onTotal` gets the file's size (Content-Range / Content-Length). A server that ignores
 * Range sends the whole body: it is read only as far as the consumer asks, then cancelled.
 */
export async function* readUrlHead(url, { headers = {}, signal, onTotal, fetchImpl = globalThis.fetch.bind(globalThis) } = {}) {
  let offset = 0;
  let want = 1 * MiB;
  for (;;) {
    if (signal && signal.aborted) throw abortedError('estimate');
    const end = offset + want - 1;
    let res;
    try {
      res = await fetchImpl(url, { headers: { ...headers, Range: `bytes=${offset}-${end}` }, signal, cache: 'no-store', credentials: 'same-origin' });
    } catch (e) {
      if (signal && signal.aborted) throw abortedError('estimate');
      throw new EdgeLLMError(ErrorCode.NETWORK, `could not fetch ${url}: ${e && e.message ? e.message : e}`, { cause: e, detail: 'FETCH_FAILED' });
    }
    if (res.status !== 206 && res.status !== 200) {
      if (res.body) res.body.cancel().catch(() => {});
      throw new EdgeLLMError(ErrorCode.NETWORK, `HTTP ${res.status} for ${url}`, { status: res.status, detail: 'HTTP_STATUS' });
    }
    let total = null;
    if (res.status === 206) {
      const cr = parseContentRange(res.headers.get('content-range'));
      if (!cr || cr.start !== offset) {
        if (res.body) res.body.cancel().catch(() => {});
        throw new EdgeLLMError(ErrorCode.NETWORK, `${url}: unexpected Content-Range ${res.headers.get('content-range')}`, { detail: 'RANGE_MISMATCH' });
      }
      total = cr.total;
    } else {
      const n = Number(res.headers.get('content-length'));
      total = res.headers.get('content-length') !== null && Number.isFinite(n) ? n : null;
      if (offset > 0) {
        if (res.body) res.body.cancel().catch(() => {});
        throw new EdgeLLMError(ErrorCode.NETWORK, `${url}: the server ignored a Range request after honouring one`, { detail: 'RANGE_MISMATCH' });
      }
    }
    if (onTotal && total !== null) onTotal(total);
    const reader = res.body.getReader();
    let got = 0;
    try {
      for (;;) {
        const r = await reader.read();
        if (r.done) break;
        got += r.value.byteLength;
        yield r.value;
      }
    } finally {
      reader.cancel().catch(() => {});
    }
    if (res.status === 200) return; // whole body read: nothing more to fetch
    offset += got;
    if (got === 0 || (total !== null && offset >= total)) return;
    want *= 2;
  }
}
