// Strict checks of the caller's values shared by the client, the router and the hosts' entry
// points: a flag that guards privacy or parsing accepts only a real boolean, so
// `private: "true"`, `1` or `"yes"` is an INVALID_REQUEST, never silently read as "not
// private"; a model source's URL is parsed into a typed error, not a TypeError.

import { EdgeLLMError, ErrorCode } from './errors.js';

/** `p[name]` when it is a boolean, `undefined` when absent (or null); anything else throws. */
export function strictBoolean(p, name) {
  const v = p[name];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') {
    throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, `${name} must be true or false, got ${JSON.stringify(v)}`);
  }
  return v;
}

/**
 * The request's AbortSignal (`params.signal`, else `options.signal`), or undefined. Anything
 * else given as a signal is an INVALID_REQUEST (it used to fail deep inside with a TypeError).
 */
export function requestSignal(params, options = {}) {
  const s = params.signal ?? options?.signal;
  if (s === undefined || s === null) return undefined;
  const ok = typeof s === 'object' && typeof s.aborted === 'boolean' && typeof s.addEventListener === 'function' && typeof s.removeEventListener === 'function';
  if (!ok) throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, 'signal must be an AbortSignal');
  return s;
}

/** `s` resolved against `base` as a URL, or INVALID_REQUEST naming it (not the URL parser's
 * TypeError): a model source given by the caller. */
export function sourceUrl(s, base) {
  try {
    return new URL(s, base);
  } catch {
    throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, `load(source): ${JSON.stringify(s)} is not a valid URL`);
  }
}

/** A UTF-16 unit with no partner: it has no UTF-8 form (TextEncoder writes U+FFFD for it). */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** Whether `s` has no lone surrogate (`String.prototype.isWellFormed` where it exists). */
export function isWellFormed(s) {
  if (typeof s.isWellFormed === 'function') return s.isWellFormed();
  LONE_SURROGATE.lastIndex = 0;
  return !LONE_SURROGATE.test(s);
}

/** `s` with each lone surrogate replaced by U+FFFD, as every UTF-8 encoder writes it. */
export function toWellFormed(s) {
  if (typeof s.toWellFormed === 'function') return s.toWellFormed();
  return s.replace(LONE_SURROGATE, '\uFFFD');
}
