// The caller's options checked in the client, before anything is sent to the worker: a typo or
// a value out of range is an INVALID_REQUEST that names the option, at the call that made it.

import { EdgeLLMError, ErrorCode } from '../errors.js';

export const invalid = (msg) => new EdgeLLMError(ErrorCode.INVALID_REQUEST, msg);

/** `p[name]` when it is a finite number in [lo, hi] (an integer with `int`); undefined when absent. */
export function optNumber(p, name, lo, hi, { int = false } = {}) {
  const v = p[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'number' || !Number.isFinite(v) || v < lo || v > hi || (int && !Number.isInteger(v))) {
    throw invalid(`${name} must be ${int ? 'an integer' : 'a number'} in [${lo}, ${hi}], got ${JSON.stringify(v)}`);
  }
  return v;
}

/** Energy options (createEngine({energy})) as sent to the core, which validates the numbers. */
export function energyOptions(e) {
  if (e === undefined || e === null) return null;
  if (typeof e !== 'object') throw invalid('energy must be an object like {watts_per_busy_core: 1.33}');
  return { ...e };
}

/** The `sha256` load option, lowercased: 64 hex digits (a typo is refused before the download,
 * not found wrong after it); undefined when absent. */
export function sha256Option(v) {
  if (v === undefined || v === null || v === '') return undefined;
  if (typeof v !== 'string' || !/^[0-9a-fA-F]{64}$/.test(v)) throw invalid(`sha256 must be 64 hexadecimal digits, got ${JSON.stringify(String(v).slice(0, 80))}`);
  return v.toLowerCase();
}

/** The `kv` option (createEngine / load) → the worker's KvOptions (validated), or null. */
export function kvOptions(kv) {
  if (kv === undefined || kv === null) return null;
  if (typeof kv !== 'object' || Array.isArray(kv)) throw invalid('kv must be an object like {tokens: 1024, dtype: "q8", policy: "window-sinks", sinks: 4}');
  const out = {};
  for (const name of ['tokens', 'bytes', 'sinks']) {
    const v = optNumber(kv, name, name === 'sinks' ? 0 : 1, Number.MAX_SAFE_INTEGER, { int: true });
    if (v !== undefined) out[name] = v;
  }
  if (out.tokens !== undefined && out.bytes !== undefined) throw invalid('kv: give tokens or bytes, not both');
  if (kv.dtype !== undefined && kv.dtype !== null) {
    if (!['f16', 'q8', 'int8'].includes(kv.dtype)) throw invalid(`kv.dtype must be 'f16' or 'q8', got ${JSON.stringify(kv.dtype)}`);
    out.dtype = kv.dtype === 'int8' ? 'q8' : kv.dtype;
  }
  if (kv.policy !== undefined && kv.policy !== null) {
    if (!['window-sinks', 'error'].includes(kv.policy)) throw invalid(`kv.policy must be 'window-sinks' or 'error', got ${JSON.stringify(kv.policy)}`);
    out.policy = kv.policy;
  }
  const unknown = Object.keys(kv).filter((k) => !['tokens', 'bytes', 'sinks', 'dtype', 'policy'].includes(k));
  if (unknown.length) throw invalid(`kv: unknown option ${unknown.join(', ')}`);
  return out;
}

/**
 * `engine.estimate(source, options)`'s options → the core's EstimateRequest; `defaults`: the
 * engine's `kv` option and memory budget, used where the call gives none.
 */
export function estimateOptions(o, defaults) {
  const kv = kvOptions(o.kv !== undefined ? o.kv : defaults.kv);
  const req = {};
  if (kv) req.kv = kv;
  if (o.ctx !== undefined) req.ctx = optNumber(o, 'ctx', 1, 1 << 24, { int: true });
  if (o.batch !== undefined) req.batch = optNumber(o, 'batch', 1, 1 << 16, { int: true });
  if (o.sampling !== undefined) req.sampling = !!o.sampling;
  req.budget_bytes = o.budget_bytes !== undefined ? optNumber(o, 'budget_bytes', 1, Number.MAX_SAFE_INTEGER, { int: true }) : defaults.budget_bytes;
  return req;
}
