// Which wasm build the worker loads: the relaxed-SIMD tier (edgellm_relaxed_bg.wasm: SIMD128 +
// relaxed SIMD, e.g. i32x4.relaxed_dot_i8x16_i7x16_add_s in the quantized dot products) where the
// engine validates relaxed SIMD, else the SIMD128 build (edgellm_bg.wasm). Both run the same
// JS glue (build.sh checks that wasm-bindgen generated it byte-identical for both).
//
// The `simd` engine option: 'auto' (default) picks the best tier; 'simd128' forces the fallback;
// 'relaxed' requires the relaxed tier and fails with ENGINE_INIT_FAILED / RELAXED_SIMD_UNSUPPORTED
// where it cannot run. An explicit `wasmUrl` wins over all of this.

import { EdgeLLMError, ErrorCode } from './errors.js';

/** The values of the `simd` option. */
export const SIMD_OPTIONS = Object.freeze(['auto', 'relaxed', 'simd128']);

/**
 * The smallest module that uses relaxed SIMD, made with `wat2wasm --enable-relaxed-simd` (wabt
 * 1.0.32, which spells the instruction by its pre-rename name i32x4.dot_i8x16_i7x16_add_s):
 *
 *   (module
 *     (func (param v128 v128 v128) (result v128)
 *       local.get 0  local.get 1  local.get 2
 *       i32x4.relaxed_dot_i8x16_i7x16_add_s))      ;; 0xfd 0x93 0x02 (opcode 0x113)
 *
 * WebAssembly.validate accepts it exactly where the engine implements relaxed SIMD.
 */
const RELAXED_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
  0x01, 0x08, 0x01, 0x60, 0x03, 0x7b, 0x7b, 0x7b, 0x01, 0x7b, // type: (v128 v128 v128) -> v128
  0x03, 0x02, 0x01, 0x00, // function 0 has type 0
  0x0a, 0x0d, 0x01, 0x0b, 0x00, // code: one body of 11 bytes, no locals
  0x20, 0x00, 0x20, 0x01, 0x20, 0x02, // local.get 0, 1, 2
  0xfd, 0x93, 0x02, // i32x4.relaxed_dot_i8x16_i7x16_add_s
  0x0b, // end
]);

let relaxedMemo = null;

/** Whether this engine (browser / Node) runs relaxed SIMD. Decided once per worker. */
export function relaxedSimdSupported() {
  if (relaxedMemo === null) {
    try {
      relaxedMemo = typeof WebAssembly === 'object' && WebAssembly.validate(RELAXED_PROBE);
    } catch {
      relaxedMemo = false;
    }
  }
  return relaxedMemo;
}

/**
 * The tier to load for the `simd` option: 'relaxed' or 'simd128'.
 * @param {'auto'|'relaxed'|'simd128'|undefined} simd
 */
export function chooseTier(simd = 'auto') {
  if (!SIMD_OPTIONS.includes(simd)) {
    throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, `simd must be one of ${SIMD_OPTIONS.map((s) => `'${s}'`).join(', ')}; got ${JSON.stringify(simd)}`);
  }
  if (simd === 'simd128') return 'simd128';
  if (relaxedSimdSupported()) return 'relaxed';
  if (simd === 'relaxed') {
    throw new EdgeLLMError(
      ErrorCode.ENGINE_INIT_FAILED,
      "simd: 'relaxed' was asked for, but this JavaScript engine does not run WebAssembly relaxed SIMD (Chromium-based browsers do since version 114; Node 20 needs --experimental-wasm-relaxed-simd). Use simd: 'auto' to fall back to the SIMD128 build.",
      { detail: 'RELAXED_SIMD_UNSUPPORTED' },
    );
  }
  return 'simd128';
}

/**
 * Loads the chosen tier through `load(tier)`; under 'auto', a relaxed build that fails to load
 * (missing file, a validator that said yes too eagerly) falls back to SIMD128 with a warning.
 * @param {'auto'|'relaxed'|'simd128'|undefined} simd
 * @param {(tier: 'relaxed'|'simd128') => Promise<any>} load
 * @param {(message: string) => void} [warn]
 */
export async function loadTier(simd, load, warn = () => {}) {
  const tier = chooseTier(simd);
  if (tier === 'relaxed' && (simd || 'auto') === 'auto') {
    try {
      return await load('relaxed');
    } catch (e) {
      warn(`the relaxed-SIMD build did not load (${e && e.message ? e.message : e}); using the SIMD128 build`);
      return load('simd128');
    }
  }
  return load(tier);
}
