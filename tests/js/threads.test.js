// Threads in Chromium: on a cross-origin isolated page the worker loads the threaded build
// (pkg/wasm/threads/, `./build.sh build-threads`) and runs its pool, and greedy text is the same
// as on one thread; on a page without COOP/COEP, 'auto' runs the single-thread build.
//
// The isolated half needs the threaded build, which `./build.sh build` does not make (build-std
// costs minutes on CI): without it that test is skipped and says so.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { startServer } from './server.js';
import { ROOT, MODEL, CHROMIUM, CHROMIUM_ARGS, modelMissing, wasmMissing } from './helpers.js';

const ISOLATION = { 'Cross-Origin-Opener-Policy': 'same-origin', 'Cross-Origin-Embedder-Policy': 'require-corp' };
const THREADS_WASM = path.join(ROOT, 'pkg/wasm/threads/edgellm_bg.wasm');
const skip = modelMissing() || wasmMissing() || (!fs.existsSync(CHROMIUM) && `no Chromium at ${CHROMIUM}`);
const noThreads = skip || (fs.existsSync(THREADS_WASM) ? false : `no threaded build at ${THREADS_WASM} (./build.sh build-threads)`);
const PROMPT = 'The old lighthouse stood at the edge of the northern cliffs, where';
const TOKENS = 24;

let plain;
let isolated;
let context;
let userDataDir;

before(async () => {
  if (skip) return;
  const { chromium } = await import('playwright-core');
  [plain, isolated] = await Promise.all([startServer({ root: ROOT, modelPath: MODEL }), startServer({ root: ROOT, modelPath: MODEL, headers: ISOLATION })]);
  userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgellm-threads-'));
  context = await chromium.launchPersistentContext(userDataDir, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
});

after(async () => {
  if (context) await context.close();
  await Promise.all([plain, isolated].filter(Boolean).map((s) => s.close()));
  if (userDataDir) fs.rmSync(userDataDir, { recursive: true, force: true });
});

/** In a fresh page of `origin`: an engine with `threads`, the model, one greedy completion. */
async function greedy(origin, threads) {
  const page = await context.newPage();
  try {
    await page.goto(`${origin}/tests/js/pages/memory.html`);
    await page.waitForFunction(() => document.body.dataset.ready === '1', null, { timeout: 60_000 });
    return await page.evaluate(
      async ({ threads, prompt, n }) => {
        const log = [];
        const engine = await window.edgellm.createEngine({ threads, cache: false, onLog: (level, m) => log.push(`${level}: ${m}`) });
        try {
          await engine.load('/models/good.gguf');
          const t0 = performance.now();
          const r = await engine.completions.create({ prompt, max_tokens: n, temperature: 0 });
          return { isolated: self.crossOriginIsolated, info: engine.info, text: r.choices[0].text, tokens: r.usage.completion_tokens, ms: performance.now() - t0, log };
        } finally {
          await engine.terminate();
        }
      },
      { threads, prompt: PROMPT, n: TOKENS },
    );
  } finally {
    await page.close();
  }
}

test('a page without COOP/COEP runs one thread, whatever is asked', { skip, timeout: 300_000 }, async () => {
  const auto = await greedy(plain.origin, 'auto');
  assert.equal(auto.isolated, false);
  assert.equal(auto.info.threads, 1);
  assert.equal(auto.tokens, TOKENS);
  const two = await greedy(plain.origin, 2);
  assert.equal(two.info.threads, 1);
  assert.ok(two.log.some((l) => /threads: 2 asked for, running 1 thread/.test(l)), two.log.join('\n'));
  assert.equal(two.text, auto.text);
});

test('an isolated page runs the threaded build, with the same tokens as one thread', { skip: noThreads, timeout: 300_000 }, async () => {
  const one = await greedy(isolated.origin, 1);
  const two = await greedy(isolated.origin, 2);
  assert.equal(two.isolated, true);
  assert.equal(one.info.threads, 1);
  assert.equal(two.info.threads, 2, two.log.join('\n'));
  // The same SIMD tier on both (Chromium: relaxed), so threads never cost the faster kernels.
  assert.equal(one.info.simd_tier, 'relaxed-simd');
  assert.equal(two.info.simd_tier, one.info.simd_tier, two.log.join('\n'));
  assert.equal(two.tokens, TOKENS);
  assert.equal(two.text, one.text);
  const auto = await greedy(isolated.origin, 'auto');
  assert.ok(auto.info.threads >= 1);
  assert.equal(auto.text, one.text);
  console.log(`threads: 1 thread ${one.ms.toFixed(0)} ms, 2 threads ${two.ms.toFixed(0)} ms for ${TOKENS} tokens (prefill + decode; noisy)`);
});

test('a pool worker that traps mid-generation crashes the engine cleanly (no hang), and the restarted engine gives the same tokens', { skip: noThreads, timeout: 300_000 }, async () => {
  const page = await context.newPage();
  try {
    await page.goto(`${isolated.origin}/tests/js/pages/memory.html`);
    await page.waitForFunction(() => document.body.dataset.ready === '1', null, { timeout: 60_000 });
    const r = await page.evaluate(
      async ({ prompt, n }) => {
        const engine = await window.edgellm.createEngine({ threads: 2, cache: false });
        try {
          await engine.load('/models/good.gguf');
          const req = { prompt, max_tokens: n, temperature: 0 };
          const before = (await engine.completions.create(req)).choices[0].text;
          await engine._debugFault({ at: 'decode', after: 3, fault: 'pool-panic' });
          const t0 = performance.now();
          let code = null;
          let message = '';
          try {
            await engine.completions.create(req);
          } catch (e) {
            code = e.code;
            message = String(e.message);
          }
          const crashMs = performance.now() - t0;
          const after = await engine.completions.create(req);
          return { before, code, message, crashMs, after: after.choices[0].text, threads: engine.info.threads };
        } finally {
          await engine.terminate();
        }
      },
      { prompt: PROMPT, n: TOKENS },
    );
    assert.equal(r.code, 'ENGINE_CRASHED', r.message);
    assert.match(r.message, /pool worker/);
    assert.equal(r.after, r.before);
    assert.equal(r.threads, 2);
    console.log(`threads: a trapped pool worker surfaced as ENGINE_CRASHED after ${r.crashMs.toFixed(0)} ms`);
  } finally {
    await page.close();
  }
});
