// A create() request's OpenAI parameters checked by the core's rules (src/protocol, the same as
// edgellm serve's), in the worker: the client only turns them into the JSON text the core reads.

import { EdgeLLMError } from '../errors.js';
import { Req } from '../protocol.js';
import { ROUTER_PARAMS } from '../router.js';
import { strictBoolean, toWellFormed } from '../strict.js';
import { invalid } from './options.js';

/**
 * The OpenAI parameters as the JSON text the core checks: the JS-only ones (AbortSignal, the
 * router's) left out; undefined fields are absent, as in the openai SDK; a non-finite number is
 * refused here (JSON would turn it into null, i.e. absent).
 */
function paramsJson(params) {
  const body = {};
  for (const [k, v] of Object.entries(params)) if (!ROUTER_PARAMS.includes(k)) body[k] = v;
  // `param`: the key at fault (a top-level parameter's name, else the nested field's key).
  const bad = (k, msg) => Object.assign(invalid(msg), { detail: 'invalid_value', ...(k ? { param: k } : {}) });
  try {
    return JSON.stringify(body, (k, v) => {
      if (typeof v === 'number' && !Number.isFinite(v)) throw bad(k, `${k || 'a parameter'} must be a finite number, got ${v}`);
      if (typeof v === 'bigint') throw bad(k, `${k} must be a number, got a BigInt`);
      // JSON would drop them (the parameter then absent, silently ignored): refused instead.
      if (typeof v === 'function' || typeof v === 'symbol') throw bad(k, `${k || 'a parameter'} must be JSON data, got a ${typeof v}`);
      // A lone surrogate has no UTF-8 form: U+FFFD, as every UTF-8 encoder (TextEncoder) writes it.
      if (typeof v === 'string') return toWellFormed(v);
      return v;
    });
  } catch (e) {
    if (e instanceof EdgeLLMError) throw e;
    throw invalid(`the parameters are not JSON: ${e && e.message ? e.message : e}`);
  }
}

/** Refuses a request whose JSON text is over `limit` UTF-8 bytes, before it is copied to the
 * worker and into wasm memory (which never shrinks). */
function checkSize(text, limit) {
  // Characters ≤ UTF-8 bytes ≤ 3 × characters: count exactly only where it decides.
  if (text.length * 3 <= limit) return;
  const bytes = text.length > limit ? text.length : new TextEncoder().encode(text).length;
  if (bytes > limit) {
    throw Object.assign(invalid(`the request is over ${limit} bytes of JSON (the engine's maxRequestBytes)`), { detail: 'request_too_large' });
  }
}

/**
 * Resolves with {request, stream, include_usage}, or rejects INVALID_REQUEST with `detail` (the
 * rule's code) and `param` (the parameter at fault). `link`: the worker (worker-link.js).
 */
export async function checkRequest(link, kind, params, maxBytes) {
  if (!params || typeof params !== 'object') throw invalid('create() needs a parameters object');
  strictBoolean(params, 'private'); // no router here: nothing leaves the device, but "true" is still refused
  const text = paramsJson(params);
  const info = await link.start();
  checkSize(text, maxBytes ?? info.max_request_bytes);
  const parsed = await link.request({ type: Req.PARSE, kind, params: text });
  // OpenAI semantics: without a seed, sampling differs from run to run.
  const r = parsed.request;
  if ((r.seed === null || r.seed === undefined) && r.temperature !== 0) r.seed = globalThis.crypto.getRandomValues(new Uint32Array(1))[0];
  return parsed;
}

