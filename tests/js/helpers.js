// Shared helpers for the JS tests: paths, the real model, the native CLI, Chromium.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFileSync } from 'node:child_process';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const MODEL = path.join(ROOT, 'models/gemma-3-270m-q4_k_m.gguf');
export const MODEL_SIZE = 253113024;
export const MODEL_SHA256 = 'a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818';
export const WASM = path.join(ROOT, 'pkg/wasm/edgellm_bg.wasm');
/** The relaxed-SIMD tier (same JS glue, built by ./build.sh build next to WASM). */
export const RELAXED_WASM = path.join(ROOT, 'pkg/wasm/edgellm_relaxed_bg.wasm');

/** Under ./build.sh test (EDGELLM_REQUIRE_MODEL=1) a missing model or wasm fails instead of skipping. */
export const REQUIRED = process.env.EDGELLM_REQUIRE_MODEL === '1';

export function modelMissing() {
  if (fs.existsSync(MODEL)) return false;
  if (REQUIRED) throw new Error(`real model missing at ${MODEL} (run ./build.sh model)`);
  return `real model not present at ${MODEL}`;
}

export function wasmMissing() {
  if (fs.existsSync(WASM)) return false;
  if (REQUIRED) throw new Error(`${WASM} missing (run ./build.sh build)`);
  return `wasm not built at ${WASM}`;
}

export function relaxedWasmMissing() {
  if (fs.existsSync(RELAXED_WASM)) return false;
  if (REQUIRED) throw new Error(`${RELAXED_WASM} missing (run ./build.sh build)`);
  return `relaxed-SIMD wasm not built at ${RELAXED_WASM}`;
}

/** The native CLI, if built: $CARGO_TARGET_DIR/release/edgellm or target/release/edgellm. */
export function cliPath() {
  const dirs = [process.env.CARGO_TARGET_DIR, path.join(ROOT, 'target')].filter(Boolean);
  for (const d of dirs) {
    const p = path.join(d, 'release/edgellm');
    if (fs.existsSync(p)) return p;
  }
  return null;
}

/** Whether the CLI has the `generate` command (the forward pass has landed). */
export function cliCanGenerate(cli = cliPath()) {
  if (!cli) return false;
  try {
    return /^\s+generate\b/m.test(execFileSync(cli, ['help'], { encoding: 'utf8' }));
  } catch {
    return false;
  }
}

export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';

export const CHROMIUM_ARGS = [
  '--no-sandbox',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--disable-quic',
  '--no-first-run',
  '--disable-gpu',
  '--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1',
  '--proxy-server=http://127.0.0.1:9',
  '--proxy-bypass-list=127.0.0.1',
  // Background services the flags above leave on (seen by the cross-engine suite's recording
  // proxy): form-autofill queries for a page's inputs, optimization-guide hints.
  '--disable-features=AutofillServerCommunication,OptimizationHints,OptimizationGuideModelDownloading,OptimizationHintsFetching,OptimizationTargetPrediction',
];

/** Waits for `cond()` to be truthy, polling; bounded. */
export async function waitFor(cond, { timeoutMs = 10000, stepMs = 20, what = 'condition' } = {}) {
  const t0 = Date.now();
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, stepMs));
  }
}
