// The memory ledger in Chromium (playwright-core + /usr/bin/chromium), with the real model
// served from 127.0.0.1: the estimate from the header alone, estimate vs measured per term
// after load and after a generation that fills the KV budget, the load peak, a refusal that
// does not grow wasm memory, and pressure events ending in a typed error under a tight budget.
//
// The issue asks for a 512-token generation; the wasm engine decodes at a few tokens/s today,
// so the generation here is short and the *prompt* fills the KV budget instead (the KV cache
// and the activation buffers reach their full size either way).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';

import { startServer } from './server.js';
import { ROOT, MODEL, MODEL_SIZE, CHROMIUM, CHROMIUM_ARGS, modelMissing, wasmMissing } from './helpers.js';
import { checkRefusedFromHeader } from './browsers/checks.js';

const skip = modelMissing() || wasmMissing() || (!fs.existsSync(CHROMIUM) && `no Chromium at ${CHROMIUM}`);
const URL_ = '/models/good.gguf';
// A KV budget of 512 tokens: two pages of 256 rows in each of Gemma 3's 18 layers (its local
// layers' window is 512 too).
const KV = { tokens: 512, policy: 'error' };
const report = {};

let srv;
let browser;
let page;

before(async () => {
  if (skip) return;
  const { chromium } = await import('playwright-core');
  srv = await startServer({ root: ROOT, modelPath: MODEL });
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  page = await browser.newPage();
  page.on('pageerror', (e) => console.log(`[page error] ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') console.log(`[page ${m.type()}] ${m.text()}`);
  });
  await page.goto(`${srv.origin}/tests/js/pages/memory.html`);
  await page.waitForFunction(() => document.body.dataset.ready === '1', null, { timeout: 30_000 });
});

after(async () => {
  if (browser) await browser.close();
  if (srv) await srv.close();
  if (Object.keys(report).length) console.log(`memory figures: ${JSON.stringify(report)}`);
});

const within = (what, est, got, tol, over = tol) => {
  const err = (est - got) / got;
  const allowed = err < 0 ? tol : over;
  assert.ok(Math.abs(err) <= allowed, `${what}: estimated ${est}, measured ${got} (${(100 * err).toFixed(1)} %, allowed ${-100 * tol} to +${100 * over} %)`);
  return +(100 * (est / got - 1)).toFixed(2);
};

test('estimate from the header alone (Range requests), before any load', { skip }, async () => {
  srv.resetStats();
  const est = await page.evaluate(async ({ url, kv }) => {
    window.engine = await window.edgellm.createEngine({ cache: false });
    return window.engine.estimate(url, { kv });
  }, { url: URL_, kv: KV });
  assert.equal(est.model.architecture, 'gemma3');
  assert.equal(est.kv.tokens, 512);
  assert.equal(est.terms.weights, 246_587_904);
  assert.equal(est.total, est.terms.weights + est.terms.kv + est.terms.activations + est.terms.runtime);
  assert.ok(est.fits);
  // Only the header (6.5 MB) and the rest of the last range were read, never the weights.
  const sent = srv.stats.bytes[URL_] || 0;
  assert.ok(sent < 16 << 20, `estimate read ${sent} bytes`);
  report.estimate_bytes_read = sent;
  report.estimate = { terms: est.terms, total: est.total, load_peak: est.load_peak };
});

test('a 150 MB budget refuses the 253 MB model before allocating: OVER_MEMORY_BUDGET, wasm memory unchanged', { skip }, async () => {
  srv.resetStats();
  const figures = await checkRefusedFromHeader(page, URL_, 246_587_904);
  assert.ok((srv.stats.bytes[URL_] || 0) < 246_587_904, 'the server stopped before the weights were sent');
  report.refused = { ...figures, bytes_sent: srv.stats.bytes[URL_] };
});

test('estimate vs measured after load and after a generation that fills the KV; load peak', { skip }, async () => {
  const r = await page.evaluate(async ({ url, kv }) => {
    const e = window.engine;
    const events = [];
    e.on('memory', (s) => events.push(s.reason));
    await e.load(url, { kv });
    const loaded = e.memory();
    // ~470 prompt tokens + a few sampled ones: the KV cache (512) and every buffer at full size.
    const prompt = 'Memory is what the tab pays for: weights, the KV cache, activations, and the runtime. '.repeat(23);
    const t0 = performance.now();
    const out = await e.completions.create({ prompt, max_tokens: 8, temperature: 0.7, seed: 3 });
    const ms = performance.now() - t0;
    // That request's decode steps went through the screened head; top-p without top-k needs
    // every logit (the full head's dense buffers): after both, every path's buffers are in use.
    await e.completions.create({ prompt, max_tokens: 2, temperature: 0.7, top_k: 0, top_p: 0.9, seed: 3 });
    return { loaded, generated: e.memory(), usage: out.usage, ms, events };
  }, { url: URL_, kv: KV });
  const L = r.loaded;
  const G = r.generated;
  report.after_load = { wasm: L.wasm_memory_bytes, heap_live: L.heap_live_bytes, js_buffers_peak: L.js_buffers_peak_bytes, terms: L.terms, load_peak: L.load_peak };
  report.after_generation = { wasm: G.wasm_memory_bytes, terms: G.terms, total: G.total, prompt_tokens: r.usage.prompt_tokens, completion_tokens: r.usage.completion_tokens, ms: Math.round(r.ms) };
  // The prompt filled the KV budget: every page of every layer is allocated.
  assert.ok(r.usage.prompt_tokens >= 400, JSON.stringify(r.usage));
  assert.equal(r.usage.kv.allocated_bytes, r.usage.kv.budget_bytes);
  assert.ok(r.events.includes('load') && r.events.includes('request'), r.events.join());
  // After load: weights and runtime; the load peak.
  const dev = {};
  dev.load_weights = within('weights (load)', L.terms.weights.estimated, L.terms.weights.measured, 0.1);
  // Two modes ~2.2 MB apart after load (the calibration hole filled or not): the estimate covers
  // the upper one, up to 15 % above the lower.
  dev.load_runtime = within('runtime (load)', L.terms.runtime.estimated, L.terms.runtime.measured, 0.1, 0.15);
  dev.load_peak = within('load peak', L.load_peak.estimated, L.load_peak.measured, 0.1);
  // wasm memory never shrinks, so its high-water mark during the load is what it was when the
  // load ended; the heap's live bytes then tell how much of it the load's transients left free.
  assert.ok(L.high_water_bytes <= 1.15 * L.wasm_memory_bytes);
  assert.ok(L.wasm_memory_bytes <= 1.15 * L.heap_live_bytes, `wasm ${L.wasm_memory_bytes} vs live ${L.heap_live_bytes}`);
  // After the generation: every term within 10 %, the total within 5 %.
  for (const k of ['weights', 'kv', 'activations', 'runtime']) dev[k] = within(k, G.terms[k].estimated, G.terms[k].measured, 0.1);
  dev.total = within('total', G.total.estimated, G.total.measured, 0.05);
  assert.equal(G.total.measured, G.wasm_memory_bytes);
  report.deviation_percent = dev;
});

test('pressure: every level the memory crosses as the KV fills is announced (elevated, then critical when reached), then OVER_MEMORY_BUDGET instead of a crash', { skip }, async () => {
  const r = await page.evaluate(async ({ url, kv }) => {
    // A fresh engine (a new wasm instance: no free space left by earlier sessions), the same
    // model and KV budget; then read where memory stands.
    const e = await window.edgellm.createEngine({ cache: false });
    await e.load(url, { kv });
    const w0 = e.memory().wasm_memory_bytes;
    const est = await e.estimate(url, { kv });
    // What the generation will add: the activation buffers (the sampler's list at the first
    // sampled token), then the KV cache a page of 256 positions at a time (half of it each).
    const A = est.terms.activations;
    const S = est.parts.activations.sampler;
    const P = est.terms.kv / 2;
    // Phase 1, the levels: a budget with room for the activations and the first KV page as the
    // guard counts them (every new byte grows memory); thresholds between the steps as the
    // estimate sizes them: elevated after the first prefill chunk (activations + first page),
    // critical once the sampler's list is allocated too (the screened head may never need it).
    // The load leaves free space in the heap (how the browser chunked the download, the
    // calibration pass), which these allocations fill first: a step may cross one threshold,
    // both, or none.
    const budget1 = Math.floor(w0 + A + P + P / 2);
    const elevated = (w0 + 0.5 * (A - S + P)) / budget1;
    const critical = (w0 + A - S + P + S / 2) / budget1;
    await e.setMemoryOptions({ budget_bytes: budget1, elevated, critical });
    const levels = [];
    e.on('memory', (s) => levels.push([s.reason, s.level, s.wasm_memory_bytes]));
    const prompt = 'The quick brown fox jumps over the lazy dog. '.repeat(20);
    const run = async (max_tokens) => {
      let tokens = 0;
      let err = null;
      let finish = null;
      try {
        const stream = await e.completions.create({ prompt, max_tokens, temperature: 0.7, seed: 1, stream: true });
        for await (const c of stream) {
          tokens += c.choices[0].text ? 1 : 0;
          finish = c.choices[0].finish_reason || finish;
        }
      } catch (x) {
        err = { code: x.code, message: x.message };
      }
      return { tokens, err, finish };
    };
    // ~200 prompt tokens and 16 more: all within the first KV page.
    const first = await run(16);
    const m1 = e.memory();
    const phase1 = { budget: budget1, levels: levels.slice(), last: m1.wasm_memory_bytes };
    // Phase 2, the refusal: the same conversation continued, under a budget half a page above
    // what the guard counts as the next steps' growth without a KV page: the activation
    // buffers' estimate less what they hold now (a step that may need them is admitted only if
    // they fit). The next KV page cannot fit then, whatever free space the heap holds, and the
    // guard must refuse it before memory grows.
    const actGap = Math.max(0, m1.terms.activations.estimated - m1.terms.activations.measured);
    const budget = Math.floor(phase1.last + actGap + P / 2);
    const elevated2 = Math.min(0.999, phase1.last / budget);
    await e.setMemoryOptions({ budget_bytes: budget, elevated: elevated2, critical: 1 });
    const mark2 = levels.length;
    const second = await run(400);
    const status = await e.status();
    const last = e.memory();
    // Then `critical` for sure: a threshold lowered to where the memory stands is announced as
    // a `level` event before the snapshot that answers setMemoryOptions.
    const mark = levels.length;
    const lowered = last.wasm_memory_bytes / budget;
    await e.setMemoryOptions({ budget_bytes: budget, elevated: Math.min(elevated2, lowered), critical: lowered });
    const afterLowering = levels.slice(mark);
    e.terminate();
    return { w0, P, phase1, first, elevated, critical, budget, elevated2, levels2: levels.slice(mark2, mark), second, last, dead: status.dead, loaded: status.loaded, afterLowering };
  }, { url: URL_, kv: KV });
  report.pressure = {
    budget_phase1: r.phase1.budget, elevated: +r.elevated.toFixed(4), critical: +r.critical.toFixed(4), levels: r.phase1.levels,
    budget: r.budget, levels_phase2: r.levels2, tokens: r.second.tokens, error: r.second.err && r.second.err.message,
  };
  const why = JSON.stringify({ levels: r.phase1.levels, wasm: r.phase1.last, elevated_at: Math.ceil(r.elevated * r.phase1.budget), critical_at: Math.ceil(r.critical * r.phase1.budget) });
  // Phase 1: each announced level is the level of the memory it reports, the levels only rise
  // (memory never shrinks), and no change goes unannounced: the last level event says the level
  // of the memory at the end.
  assert.equal(r.first.err, null, JSON.stringify(r.first.err));
  assert.equal(r.first.finish, 'length');
  const rank = { ok: 0, elevated: 1, critical: 2 };
  const levelOf = (bytes, budget, elevated, critical) => (bytes / budget >= critical ? 'critical' : bytes / budget >= elevated ? 'elevated' : 'ok'); // as MemoryOptions::level
  const level1 = (bytes) => levelOf(bytes, r.phase1.budget, r.elevated, r.critical);
  const changes = r.phase1.levels.filter(([reason]) => reason === 'level');
  for (const [, level, wasm] of r.phase1.levels) assert.equal(level, level1(wasm), why);
  for (let i = 1; i < changes.length; i++) assert.ok(rank[changes[i][1]] > rank[changes[i - 1][1]], why);
  const final1 = level1(r.phase1.last);
  if (final1 !== 'ok') assert.ok(changes.length > 0 && changes[changes.length - 1][1] === final1, why);
  else assert.equal(changes.length, 0, why);
  assert.ok(r.phase1.last <= r.phase1.budget, 'memory stayed within the first budget');
  const lastEvent = r.phase1.levels[r.phase1.levels.length - 1];
  assert.deepEqual([lastEvent[0], lastEvent[1]], ['request', final1], why);
  // Phase 2: refused with the typed error when the next KV page is due (past the first page's
  // 256 positions), memory within the budget, the engine and its model still there.
  const why2 = JSON.stringify({ budget: r.budget, P: r.P, levels: r.levels2, second: r.second, wasm: r.last.wasm_memory_bytes });
  assert.ok(r.second.err, `the generation ended with an error: ${why2}`);
  assert.equal(r.second.err.code, 'OVER_MEMORY_BUDGET', why2);
  assert.ok(r.second.tokens > 0 && r.second.tokens < 400, why2);
  assert.ok(r.last.wasm_memory_bytes <= r.budget, 'memory stayed within the budget');
  assert.ok(!r.dead && r.loaded, 'no crash: the engine and its model are still there');
  // Phase 2 starts at `elevated` of its budget (the memory in use then) and its `critical` is
  // the budget itself, which the memory never reaches: every snapshot says `elevated`.
  for (const [, level, wasm] of r.levels2) assert.equal(level, levelOf(wasm, r.budget, r.elevated2, 1), why2);
  assert.deepEqual(r.levels2[r.levels2.length - 1].slice(0, 2), ['request', 'elevated'], why2);
  // Lowering `critical` to the memory in use: announced first, then the options' snapshot.
  const lowered = r.afterLowering.map(([reason, level]) => [reason, level]);
  assert.deepEqual(lowered, [['level', 'critical'], ['options', 'critical']], JSON.stringify(r.afterLowering));
  report.pressure.reached_critical_phase1 = final1 === 'critical';
});
