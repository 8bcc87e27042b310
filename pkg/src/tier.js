// Which wasm build the worker loads: the relaxed-SIMD tier (edgellm_relaxed_bg.wasm: SIMD128 +
// relaxed SIMD, e.g. i32x4.relaxed_dot_i8x16_i7x16_add_s in the quantized dot products) where the
// engine runs standard relaxed SIMD (a probe checks one dot product), else the SIMD128 build (edgellm_bg.wasm). Both run the same
// JS glue (build.sh checks that wasm-bindgen generated it byte-identical for both).
//
// The `simd` engine option: 'auto' (default) picks the best tier; 'simd128' forces the fallback;
// 'relaxed' requires the relaxed tier and fails with ENGINE_INIT_FAILED / RELAXED_SIMD_UNSUPPORTED
// where it cannot run. A `wasmUrl` naming one file wins over all of this (wasmUrlOption below).

import { EdgeLLMError, ErrorCode } from './errors.js';

/** The values of the `simd` option. */
export const SIMD_OPTIONS = Object.freeze(['auto', 'relaxed', 'simd128']);

/**
 * A probe that *runs* the relaxed dot product, made with `wat2wasm --enable-relaxed-simd` (wabt
 * 1.0.32, which spells the instruction by its pre-rename name i32x4.dot_i8x16_i7x16_add_s):
 *
 *   (module
 *     (memory (export "m") 1)
 *     (func (export "f")
 *       (v128.store (i32.const 48)
 *         (i32x4.relaxed_dot_i8x16_i7x16_add_s              ;; 0xfd 0x93 0x02 (opcode 0x113)
 *           (v128.load (i32.const 0)) (v128.load (i32.const 16)) (v128.load (i32.const 32))))))
 *
 * Validating is not enough: Node 20's V8 accepts the opcode behind
 * --experimental-wasm-relaxed-simd but implements a pre-standard draft that drops the
 * accumulator and doubles the sums (measured: [288, -6, 88, 680] where the standard gives
 * [1144, -3, 44, 340]), and our kernels rely on the standard's exact result for 7-bit second
 * operands. So the probe computes one dot product and the tier is used only if it is exact.
 */
export const RELAXED_PROBE = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00, // magic, version 1
  0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type 0: () -> ()
  0x03, 0x02, 0x01, 0x00, // function 0 has type 0
  0x05, 0x03, 0x01, 0x00, 0x01, // one memory, min 1 page
  0x07, 0x09, 0x02, 0x01, 0x6d, 0x02, 0x00, 0x01, 0x66, 0x00, 0x00, // exports "m" (memory 0), "f" (func 0)
  0x0a, 0x1f, 0x01, 0x1d, 0x00, // code: one body of 29 bytes, no locals
  0x41, 0x30, // i32.const 48
  0x41, 0x00, 0xfd, 0x00, 0x04, 0x00, // v128.load (i32.const 0)
  0x41, 0x10, 0xfd, 0x00, 0x04, 0x00, // v128.load (i32.const 16)
  0x41, 0x20, 0xfd, 0x00, 0x04, 0x00, // v128.load (i32.const 32)
  0xfd, 0x93, 0x02, // i32x4.relaxed_dot_i8x16_i7x16_add_s
  0xfd, 0x0b, 0x04, 0x00, // v128.store
  0x0b, // end
]);
// Signed bytes (with -128 and 127), 7-bit bytes, an accumulator: the exact answer is unambiguous.
const PROBE_A = [-1, -128, 127, 5, 100, -100, 3, -3, 0, 1, 2, 3, -50, 60, -70, 80];
const PROBE_B = [1, 2, 3, 4, 127, 127, 0, 1, 5, 6, 7, 8, 9, 10, 11, 12];
const PROBE_ACC = [1000, 0, -7, 1 << 20];

/** Runs the probe; true only if the result is the standard's exact one. */
function probeRelaxedSimd() {
  if (typeof WebAssembly !== 'object' || !WebAssembly.validate(RELAXED_PROBE)) return false;
  // A 67-byte module: synchronous compilation is allowed everywhere.
  const { exports } = new WebAssembly.Instance(new WebAssembly.Module(RELAXED_PROBE));
  const buf = exports.m.buffer;
  new Int8Array(buf, 0, 16).set(PROBE_A);
  new Int8Array(buf, 16, 16).set(PROBE_B);
  new Int32Array(buf, 32, 4).set(PROBE_ACC);
  exports.f();
  const got = new Int32Array(buf, 48, 4);
  for (let i = 0; i < 4; i++) {
    let want = PROBE_ACC[i];
    for (let j = 4 * i; j < 4 * i + 4; j++) want += PROBE_A[j] * PROBE_B[j];
    if (got[i] !== want) return false;
  }
  return true;
}

let relaxedMemo = null;

/** Whether this engine (browser / Node) runs standard relaxed SIMD. Decided once per worker. */
export function relaxedSimdSupported() {
  if (relaxedMemo === null) {
    try {
      relaxedMemo = probeRelaxedSimd();
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
      "simd: 'relaxed' was asked for, but this JavaScript engine does not run standard WebAssembly relaxed SIMD (Chromium-based browsers do since version 114; Node 20's --experimental-wasm-relaxed-simd is a pre-standard draft that computes other results). Use simd: 'auto' to fall back to the SIMD128 build.",
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

/** The two builds by tier name: the keys of the per-tier form of the `wasmUrl` option. */
export const TIERS = Object.freeze(['relaxed', 'simd128']);
/** The threaded builds by tier (wasm/threads/): the keys of the `wasmUrl` object that locate them. */
export const THREADED_KEYS = Object.freeze({ relaxed: 'threadsRelaxed', simd128: 'threads' });
/** The object form's keys: the tiers and the threaded builds. */
export const WASM_KEYS = Object.freeze([...TIERS, THREADED_KEYS.simd128, THREADED_KEYS.relaxed]);

/**
 * The `wasmUrl` option, validated, with every location passed through `resolve` (to an absolute
 * URL in browsers, where the worker has no useful base of its own):
 *   a string or URL — the one build to run (wins over `simd`);
 *   {relaxed?, simd128?, threads?, threadsRelaxed?} — where each build is (the tier is still
 *     chosen by `simd`, threaded or not by the `threads` option);
 *   undefined — the package's own files.
 * @param {string|URL|{relaxed?: string|URL, simd128?: string|URL}|undefined|null} value
 * @param {(loc: string|URL) => string} resolve
 */
export function wasmUrlOption(value, resolve) {
  if (value === undefined || value === null) return undefined;
  const bad = () =>
    new EdgeLLMError(ErrorCode.INVALID_REQUEST, `wasmUrl must be a URL (string or URL) or {${WASM_KEYS.join(', ')}} naming each build; got ${JSON.stringify(value)}`);
  const one = (v) => {
    if (!(typeof v === 'string' && v) && !(v instanceof URL)) throw bad();
    try {
      return resolve(v);
    } catch {
      throw bad();
    }
  };
  if (typeof value === 'string' || value instanceof URL) return one(value);
  if (typeof value !== 'object' || Object.keys(value).some((k) => !WASM_KEYS.includes(k))) throw bad();
  const out = {};
  for (const key of WASM_KEYS) if (value[key] !== undefined) out[key] = one(value[key]);
  return out;
}

/**
 * Loads the build the (normalized) `wasmUrl` option names, through `start(location, tier)`: a
 * string is the one build (tier null); otherwise the tier is chosen by `simd` (loadTier) and
 * located by the option's entry for it, else by `defaults(tier)`.
 */
export function loadWasm(wasmUrl, simd, defaults, start, warn) {
  if (typeof wasmUrl === 'string') return start(wasmUrl, null);
  return loadTier(simd, (tier) => start((wasmUrl && wasmUrl[tier]) || defaults(tier), tier), warn);
}

/**
 * Loads a threaded build through `start(location, tier)`, the tier chosen by `simd` as for one
 * thread (loadTier: under 'auto' a relaxed build that does not start falls back to SIMD128).
 * A tier whose threaded build `wasmUrl` does not locate fails, so that fallback applies.
 */
export function loadThreadedWasm(wasmUrl, simd, start, warn) {
  return loadTier(
    simd,
    (tier) => {
      const url = wasmUrl && typeof wasmUrl === 'object' ? wasmUrl[THREADED_KEYS[tier]] : null;
      if (!url) throw new Error(`no threaded ${tier} build located (wasmUrl.${THREADED_KEYS[tier]})`);
      return start(url, tier);
    },
    warn,
  );
}

/**
 * The browser worker ↔ its parent (worker-url.js): `{type, tier}` asks for the build embedded in
 * the package (embedded-wasm.js), answered by `{type, tier, bytes}` or `{type, tier, error}`.
 * Only for tiers whose location was the package's guess (`wasmUrl.embedded` lists them), when
 * nothing is served there.
 */
export const EMBEDDED_WASM = 'edgellm:embedded-wasm';

// ── threads ─────────────────────────────────────────────────────────────────────────────────
// The threaded builds (wasm/threads/: shared memory, the engine's worker pool on web workers;
// `./build.sh build-threads`; SIMD128 and relaxed, one glue, the tier chosen as for one thread)
// run only where memory can be shared: a cross-origin isolated
// page (COOP + COEP) with SharedArrayBuffer and Atomics. The `threads` engine option: 'auto'
// (default: every core the browser reports there, else 1) or a count (1 = the single-thread
// builds; more where isolation is missing falls back to 1 with a warning).

/** Most threads the `threads` option takes (src/limits.rs MAX_THREADS). */
export const MAX_THREADS = 256;

/** The threads option, validated: 'auto' or an integer in 1..MAX_THREADS. */
export function threadsOption(value) {
  if (value === undefined || value === 'auto') return 'auto';
  if (Number.isInteger(value) && value >= 1 && value <= MAX_THREADS) return value;
  throw new EdgeLLMError(ErrorCode.INVALID_REQUEST, `threads must be 'auto' or an integer from 1 to ${MAX_THREADS}; got ${JSON.stringify(value)}`);
}

/** Whether this global can share wasm memory with workers. */
export function canShareMemory(g = globalThis) {
  return g.crossOriginIsolated === true && typeof g.SharedArrayBuffer === 'function' && typeof g.Atomics === 'object';
}

/**
 * The thread count to run for the (validated) option: 1 where memory cannot be shared or the
 * package has no threaded build (`hasBuild`), else the count asked for ('auto':
 * navigator.hardwareConcurrency). `warn` says why an explicit count was not honoured.
 */
export function chooseThreads(option, hasBuild, warn = () => {}, g = globalThis) {
  const asked = option === 'auto' ? Math.min(MAX_THREADS, Math.max(1, (g.navigator && g.navigator.hardwareConcurrency) || 1)) : option;
  if (asked <= 1) return 1;
  const why = !canShareMemory(g)
    ? 'the page is not cross-origin isolated (serve it with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp)'
    : !hasBuild
      ? 'the threaded build is not available (./build.sh build-threads, or wasmUrl.threads)'
      : null;
  if (why) {
    if (option !== 'auto') warn(`threads: ${option} asked for, running 1 thread: ${why}`);
    return 1;
  }
  return asked;
}

/**
 * The browser worker ↔ the pool workers it starts: `{type, module, memory, index, stack}` makes a
 * worker instantiate the threaded build on the shared `memory` and park as pool worker `index`.
 */
export const THREAD_START = 'edgellm:thread-start';
