// The `kv` option (bounded KV cache) through the package under Node, on the tiny Gemma 3 fixture
// (window 8, 6 layers): a budget far smaller than the generation, int8 storage, the KV figures
// in usage and ModelInfo, policy 'error' refusing an over-budget prompt before any work, and
// typed errors for bad options. Cheap: a 168 KB model.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { createEngine } from '../../pkg/src/node.js';
import { ROOT, REQUIRED, wasmMissing } from './helpers.js';

const TINY = path.join(ROOT, 'tests/data/tiny_gemma3.gguf');

function wasmWithoutKv() {
  const missing = wasmMissing();
  if (missing) return missing;
  const js = fs.readFileSync(path.join(ROOT, 'pkg/wasm/edgellm.js'), 'utf8');
  if (!js.includes('set_kv_options')) return REQUIRED ? false : 'pkg/wasm predates the kv option (run ./build.sh build)';
  return false;
}
const skip = wasmWithoutKv();

let engine;
before(async () => {
  if (skip) return;
  engine = await createEngine({ cache: false, kv: { tokens: 32, dtype: 'q8' } });
});
after(() => {
  if (engine) engine.terminate();
});

test('a generation far past the KV budget: constant KV figures in usage', { skip }, async () => {
  const info = await engine.load(TINY);
  assert.equal(info.max_context, 32);
  assert.equal(info.kv.budget_tokens, 32);
  assert.equal(info.kv.dtype, 'q8');
  assert.equal(info.kv.policy, 'window-sinks');
  // 1 global layer × 32 tokens + 5 window layers × 8, K and V rows of 32 int8 + one f16 scale.
  assert.equal(info.kv.budget_bytes, (32 + 5 * 8) * 2 * (32 + 2));
  const r = await engine.completions.create({ prompt: 'hello world', max_tokens: 120, temperature: 0 });
  if (r.choices[0].finish_reason === 'length') {
    assert.equal(r.usage.completion_tokens, 120);
    assert.equal(r.usage.kv.tokens_held, 32);
    assert.ok(r.usage.kv.evicted > 60);
  }
  assert.equal(r.usage.kv.bytes, r.usage.kv.budget_bytes);
  assert.equal(r.usage.kv.allocated_bytes, r.usage.kv.budget_bytes);
  assert.deepEqual(r.usage.kv.by_kind.map((k) => k.kind), ['global', 'local']);
});

test("policy 'error': an over-budget prompt is refused before prefill", { skip }, async () => {
  await engine.load(TINY, { kv: { tokens: 4, policy: 'error' } });
  await assert.rejects(engine.completions.create({ prompt: 'one two three four five six', max_tokens: 3 }), (e) => e.code === 'PROMPT_OVER_KV_BUDGET');
  // countTokens says so too, with the exact count (the core's count_tokens, not a parsed message).
  const c = await engine.countTokens({ prompt: 'one two three four five six' });
  assert.equal(c.fits, false);
  assert.equal(c.code, 'PROMPT_OVER_KV_BUDGET');
  assert.equal(c.max_context, 4);
  assert.ok(Number.isInteger(c.prompt_tokens) && c.prompt_tokens >= 4, `${c.prompt_tokens}`);
  const info = await engine.load(TINY, { kv: null });
  assert.equal(info.max_context, 256);
  const short = await engine.countTokens({ messages: [{ role: 'user', content: 'hi' }] });
  assert.deepEqual([short.fits, short.code, short.max_context], [true, null, 256]);
  await assert.rejects(engine.countTokens({ messages: [] }), (e) => e.code === 'INVALID_REQUEST');
});

test('bad kv options are typed errors', { skip }, async () => {
  await assert.rejects(engine.load(TINY, { kv: { tokens: 0 } }), (e) => e.code === 'INVALID_REQUEST');
  await assert.rejects(engine.load(TINY, { kv: { tokens: 8, dtype: 'q4' } }), (e) => e.code === 'INVALID_REQUEST');
  await assert.rejects(engine.load(TINY, { kv: { tokens: 3, sinks: 4 } }), (e) => e.code === 'INVALID_REQUEST' && e.detail === 'BAD_KV_CONFIG');
});

test('wasm memory stays flat across generations far past the KV budget', { skip }, async () => {
  await engine.load(TINY, { kv: { tokens: 32 } });
  const run = () => engine.completions.create({ prompt: 'hello world', max_tokens: 400, temperature: 0.8, seed: 1 });
  await run(); // fills the cache and every scratch buffer once
  const before = (await engine.status()).wasm_memory_bytes;
  for (let i = 0; i < 3; i++) {
    const r = await run();
    assert.equal(r.usage.kv.bytes, r.usage.kv.budget_bytes);
  }
  const after = (await engine.status()).wasm_memory_bytes;
  assert.ok(before > 0);
  assert.equal(after, before, `wasm memory grew from ${before} to ${after} bytes`);
});


// A model admitted under a budget runs requests up to its KV budget under it: the estimate's
// peak keeps room for the free space the load leaves (the step guard does not count free heap).
// Before, admission compared max(total, load_peak), and a model admitted just under its budget
// could be refused every request. And the estimate's module term is the running module's size
// (a stale constant made every runtime term 320 KiB short).
test('admitted at its estimated peak, a model fills its KV budget under that budget', { skip }, async () => {
  const kv = { tokens: 64, policy: 'error' };
  const probe = await createEngine({ cache: false });
  const est = await probe.estimate(TINY, { kv });
  const module = (await probe.refreshMemory()).module_bytes;
  probe.terminate();
  assert.ok(est.parts.runtime.module >= module, `the estimate's module term ${est.parts.runtime.module} < the module's ${module} bytes`);
  assert.ok(est.peak >= est.total && est.peak >= est.load_peak, JSON.stringify(est));
  const e = await createEngine({ cache: false, memory: { budget_bytes: est.peak } });
  try {
    await e.load(TINY, { kv });
    const r = await e.completions.create({ prompt: 'a b c d e f g h '.repeat(3), max_tokens: 64, temperature: 0 });
    assert.ok(r.usage.prompt_tokens >= 40, JSON.stringify(r.usage));
    assert.ok((await e.refreshMemory()).wasm_memory_bytes <= est.peak);
  } finally {
    e.terminate();
  }
});
