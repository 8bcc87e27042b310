// Crash detection at the wasm boundary. Every call into the engine goes through `callWasm`: a
// core error (a JS Error carrying the core's precise `code`) becomes an EdgeLLMError under its
// umbrella code; a trap (a Rust panic, or wasm-bindgen's borrow guards tripping after one) becomes
// a `Fatal` ENGINE_CRASHED, after which the instance is never called again (runtime.js).

import { EdgeLLMError, ErrorCode, toEdgeError, umbrellaCode } from '../errors.js';

/** An error after which the wasm instance is unusable: the client restarts the worker. */
export class Fatal extends EdgeLLMError {}

function isTrap(e) {
  return (typeof WebAssembly !== 'undefined' && e instanceof WebAssembly.RuntimeError) || (e && e.name === 'RuntimeError');
}

// wasm-bindgen's own guards: they fire on the next call into an instance a panic left half-way.
const BROKEN_INSTANCE = /recursive use of an object|already mutably borrowed|null pointer passed to rust/i;

/** Runs `fn` (a wasm call); core errors → EdgeLLMError, traps → Fatal (ENGINE_CRASHED). */
export function callWasm(bindings, fn) {
  try {
    return fn();
  } catch (e) {
    if (isTrap(e) || (e && BROKEN_INSTANCE.test(String(e.message)))) {
      let panic = '';
      try {
        panic = bindings && bindings.take_panic_message ? bindings.take_panic_message() : '';
      } catch {
        /* the instance may be too broken even for that */
      }
      throw new Fatal(ErrorCode.ENGINE_CRASHED, `the wasm engine crashed: ${panic || (e && e.message) || e}`, { detail: 'WASM_TRAP' });
    }
    if (e instanceof EdgeLLMError) throw e;
    const detail = e && typeof e === 'object' && typeof e.code === 'string' ? e.code : undefined;
    // `param`: the request parameter the core names as at fault (OpenAI's error.param).
    if (detail) throw new EdgeLLMError(umbrellaCode(detail), String(e.message || detail), { detail, ...(typeof e.param === 'string' ? { param: e.param } : {}) });
    throw toEdgeError(e);
  }
}
