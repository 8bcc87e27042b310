// The package under Node 20 (worker_threads), with the real model: loading from a path, a Blob,
// and URLs (resume, cache, typed errors), abort, crash recovery.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { createEngine } from '../../pkg/src/node.js';
import { relaxedSimdSupported } from '../../pkg/src/tier.js';
import { startServer } from './server.js';
import { ROOT, MODEL, MODEL_SIZE, REQUIRED, modelMissing, wasmMissing, cliPath, cliCanGenerate } from './helpers.js';
import { nativeGreedy, nativeGenerate, GREEDY_PROMPT, GREEDY_TOKENS } from './native.js';

const MODEL_SHA256 = 'a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818';
const skip = modelMissing() || wasmMissing();
const noCli = skip || (cliCanGenerate() ? false : REQUIRED ? false : `native CLI with 'generate' not built (${cliPath() || 'none'})`);

let srv;
let engine;
let cacheDir;
const logs = [];

before(async () => {
  if (skip) return;
  srv = await startServer({ root: ROOT, modelPath: MODEL, dropAt: 24 << 20, slowBytesPerSec: 2 << 20 });
  cacheDir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgellm-node-cache-'));
  engine = await createEngine({ cacheDir, onLog: (level, message) => logs.push({ level, message }) });
});

after(async () => {
  if (engine) engine.terminate();
  if (srv) await srv.close();
  if (cacheDir) fs.rmSync(cacheDir, { recursive: true, force: true });
});

function progressRecorder() {
  const events = [];
  return { events, onProgress: (p) => events.push(p) };
}

function assertMonotonic(events, total, phase) {
  const ev = phase ? events.filter((e) => e.phase === phase) : events;
  assert.ok(ev.length >= 2, `progress events: ${ev.length}`);
  for (let i = 1; i < ev.length; i++) assert.ok(ev[i].loaded >= ev[i - 1].loaded, `progress went back at ${i}`);
  assert.equal(ev[ev.length - 1].loaded, total);
  assert.equal(ev[ev.length - 1].total, total);
}

test('engine starts with the SIMD build and an fs cache', { skip }, () => {
  assert.equal(engine.info.version, '0.1.0');
  assert.equal(engine.info.simd, true);
  // Node 20 has no standard relaxed SIMD (tier.test.js): the probe decides.
  assert.equal(engine.info.simd_tier, relaxedSimdSupported() ? 'relaxed-simd' : 'simd128');
  assert.equal(engine.info.cache, 'fs');
});

test('load from a file path', { skip }, async () => {
  const rec = progressRecorder();
  const info = await engine.load(MODEL, rec);
  assert.equal(info.source, 'file');
  assert.equal(info.file_size, MODEL_SIZE);
  assert.equal(info.sha256, MODEL_SHA256);
  assert.equal(info.architecture, 'gemma3');
  assert.equal(info.quantization, 'Q4_K_M');
  assertMonotonic(rec.events, MODEL_SIZE, 'file');
  assert.deepEqual(engine.model, info);
  const st = await engine.status();
  assert.equal(st.loaded, true);
  assert.ok(st.wasm_memory_bytes > info.weights_bytes);
});

test('a load refused before it replaces the loaded model keeps it (engine.model, kept_model)', { skip }, async () => {
  const info = engine.model;
  assert.ok(info, 'the model of the previous test');
  const greedy = () => engine.completions.create({ prompt: 'The capital of France is', max_tokens: 4, temperature: 0 });
  const before = (await greedy()).choices[0].text;
  const url = (n) => `${srv.origin}/models/${n}`;
  const cases = [
    [url('missing.gguf'), {}, 'NETWORK', 'HTTP_STATUS'],
    [url('not-gguf.bin'), {}, 'GGUF_INVALID', 'GGUF_BAD_MAGIC'],
    [url('tiny-truncated.gguf'), {}, 'GGUF_TRUNCATED', 'GGUF_TRUNCATED'],
    [new Blob([]), {}, 'GGUF_TRUNCATED', 'GGUF_TRUNCATED'],
    [url('no-length.gguf'), { cache: false }, 'NETWORK', 'NO_CONTENT_LENGTH'],
    ['/nonexistent/model.gguf', {}, 'NETWORK', 'FILE_NOT_FOUND'],
    [url('good.gguf'), { memoryBudget: 100 << 20, cache: false }, 'OVER_MEMORY_BUDGET', 'OVER_MEMORY_BUDGET'],
    // The KV options the new load names, not the loaded model's, decide its estimate.
    [MODEL, { kv: { tokens: 131072 }, memoryBudget: info.weights_bytes + (64 << 20) }, 'OVER_MEMORY_BUDGET', 'OVER_MEMORY_BUDGET'],
    [MODEL, { kv: { tokens: 3, sinks: 4 } }, 'INVALID_REQUEST', 'BAD_KV_CONFIG'],
  ];
  for (const [src, opts, code, detail] of cases) {
    await assert.rejects(engine.load(src, opts), (e) => {
      assert.equal(e.code, code, `${src}: ${e.message}`);
      assert.equal(e.detail, detail, `${src}: ${e.message}`);
      assert.deepEqual(e.kept_model, info, src);
      return true;
    });
    assert.deepEqual(engine.model, info, src);
  }
  const st = await engine.status();
  assert.equal(st.loaded, true);
  assert.deepEqual(st.model, info);
  // The kept model still answers, the same as before.
  assert.equal((await greedy()).choices[0].text, before);
});

test('greedy completion equals the native CLI; usage has the timings', { skip: noCli }, async () => {
  const want = nativeGreedy();
  const r = await engine.completions.create({ prompt: GREEDY_PROMPT, max_tokens: GREEDY_TOKENS, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.match(r.id, /^cmpl-/);
  assert.equal(r.model, engine.model.name);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].text, want.text);
  assert.equal(r.choices[0].finish_reason, want.finish_reason);
  const u = r.usage;
  assert.equal(u.prompt_tokens, want.prompt_ids.length);
  assert.equal(u.completion_tokens, want.ids.length);
  assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);
  for (const k of ['ttft_ms', 'tpot_ms', 'prefill_tokens_per_s', 'decode_tokens_per_s']) assert.ok(u[k] > 0, `${k} = ${u[k]}`);
  // Decode memory traffic. Gemma 3's output projection is its token embedding (tied), so a decode
  // step through the full head reads every weight held once, the embedding again as the
  // projection, and one embedding row for the lookup: weights_bytes + one Q8_0 row of 640 values
  // (20 blocks × 34 bytes). Greedy steps go through the screened head (src/ops/screen.rs), which
  // reads a little over half the projection: each step's own bytes, the same as natively.
  for (const k of ['decode_weight_bytes_per_token', 'decode_kv_bytes_last_token', 'decode_bytes_per_token', 'decode_gb_s']) assert.ok(u[k] > 0, `${k} = ${u[k]}`);
  assert.equal(u.decode_weight_bytes_per_token, want.decode_weight_bytes_per_token);
  assert.deepEqual(u.head, want.head);
  assert.equal(u.head.path, 'screened');
  const full = engine.model.weights_bytes + 680;
  const head = 262144 * 680;
  assert.ok(u.decode_weight_bytes_per_token < full && u.decode_weight_bytes_per_token > full - head / 2, `${u.decode_weight_bytes_per_token}`);
  // The last step's attention read every K/V row held at the end.
  assert.equal(u.decode_kv_bytes_last_token, u.kv.bytes);
  assert.ok(u.decode_bytes_per_token > u.decode_weight_bytes_per_token && u.decode_bytes_per_token <= u.decode_weight_bytes_per_token + u.kv.bytes);
  const gbs = (u.decode_bytes_per_token * u.decode_tokens_per_s) / 1e9;
  assert.ok(Math.abs(u.decode_gb_s - gbs) <= 1e-9 * gbs, `decode_gb_s ${u.decode_gb_s} vs ${gbs}`);
  console.log(`node greedy: ${JSON.stringify(r.choices[0].text)} decode ${u.decode_tokens_per_s.toFixed(2)} tok/s, ${(u.decode_bytes_per_token / 1e6).toFixed(1)} MB/tok, ${u.decode_gb_s.toFixed(2)} GB/s, ttft ${u.ttft_ms.toFixed(0)} ms`);
});

test('wasm and the native CLI agree on SmolLM2 past 30 positions, greedy and seeded', { skip: noCli }, async () => {
  // Their exp / cos / sin were the platforms' own (glibc, and a port compiled into wasm): a
  // last-bit difference grew into other greedy tokens here (src/ops/math.rs).
  const chat = path.join(ROOT, 'models/SmolLM2-135M-Instruct.Q4_1.gguf');
  const prompt = 'Kilo The quick brown fox jumps over the lazy dog and then runs into the forest where it meets a wise old owl who tells it a story about the ancient kingdom beyond the mountains far away';
  const e2 = await createEngine({ cache: false });
  try {
    await e2.load(chat);
    for (const [t, extra] of [[0, []], [0.9, ['--seed', '11']]]) {
      const want = nativeGenerate(prompt, 24, ['--temperature', String(t), ...extra], chat);
      const r = await e2.completions.create({ prompt, max_tokens: 24, temperature: t, ...(t ? { seed: 11 } : {}) });
      assert.equal(r.choices[0].text, want.text, `temperature ${t}`);
    }
  } finally {
    e2.terminate();
  }
});

test('stop strings cut the text (finish "stop"); a seed makes sampling repeatable', { skip: noCli }, async () => {
  const want = nativeGreedy();
  const cut = want.text.indexOf(' of');
  assert.ok(cut > 0, `the reference text has no ' of': ${JSON.stringify(want.text)}`);
  const r = await engine.completions.create({ prompt: GREEDY_PROMPT, max_tokens: GREEDY_TOKENS, temperature: 0, stop: [' of', 'zzz'] });
  assert.equal(r.choices[0].text, want.text.slice(0, cut));
  assert.equal(r.choices[0].finish_reason, 'stop');
  const sampled = { prompt: GREEDY_PROMPT, max_tokens: 3, temperature: 0.9, top_k: 40, top_p: 0.95, min_p: 0.05, seed: 42 };
  const a = await engine.completions.create(sampled);
  const b = await engine.completions.create(sampled);
  assert.equal(a.choices[0].text, b.choices[0].text);
});

test('streamed chat completion: OpenAI chunk shapes, text equals the non-streamed result', { skip }, async () => {
  const params = { messages: [{ role: 'user', content: 'Say hi' }], max_tokens: 4, temperature: 0 };
  const full = await engine.chat.completions.create(params);
  assert.equal(full.object, 'chat.completion');
  assert.equal(full.choices[0].message.role, 'assistant');
  const stream = await engine.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  assert.ok(chunks.length >= 3);
  assert.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0].id && /^chatcmpl-/.test(c.id)));
  assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
  const last = chunks[chunks.length - 1];
  assert.deepEqual(last.choices, [], 'include_usage: a final usage-only chunk');
  assert.equal(last.usage.completion_tokens, full.usage.completion_tokens);
  assert.equal(chunks.filter((c) => c.usage).length, 1, 'usage on exactly one chunk (OpenAI)');
  const fin = chunks[chunks.length - 2];
  assert.equal(fin.choices[0].finish_reason, full.choices[0].finish_reason);
  assert.equal(fin.usage, null, 'with include_usage, the other chunks have usage: null (OpenAI)');
  const text = chunks.map((c) => (c.choices[0] && c.choices[0].delta.content) || '').join('');
  assert.equal(text, full.choices[0].message.content);
});

test('abort mid-generation settles within 100 ms; no chunk after it; the next request works', { skip }, async () => {
  const ac = new AbortController();
  const stream = await engine.completions.create({ prompt: 'Once upon a time', max_tokens: 64, temperature: 0, stream: true, signal: ac.signal });
  let n = 0;
  let afterAbort = 0;
  let aborted = false;
  let latency = null;
  let t0 = 0;
  try {
    for await (const c of stream) {
      if (aborted) afterAbort++;
      if (c.choices[0].text) n++;
      if (n === 2 && !aborted) {
        aborted = true;
        t0 = performance.now();
        ac.abort();
      }
    }
    assert.fail('the stream should reject');
  } catch (e) {
    latency = performance.now() - t0;
    assert.equal(e.code, 'ABORTED');
  }
  assert.equal(afterAbort, 0);
  assert.ok(latency < 100, `abort settled in ${latency} ms`);
  // While a generation runs, status is answered between steps.
  const running = engine.completions.create({ prompt: 'Hello', max_tokens: 2, temperature: 0 });
  await new Promise((r) => setTimeout(r, 50));
  const t1 = performance.now();
  const st = await engine.status();
  const statusMs = performance.now() - t1;
  assert.equal(st.busy, true);
  assert.equal(st.running, 'generate');
  console.log(`node: status answered in ${statusMs.toFixed(0)} ms during a generation`);
  const r = await running;
  assert.equal(r.usage.completion_tokens, 2);
  // An already-aborted signal rejects at once; bad parameters are INVALID_REQUEST.
  await assert.rejects(engine.completions.create({ prompt: 'x', signal: AbortSignal.abort() }), (e) => e.code === 'ABORTED');
  await assert.rejects(engine.chat.completions.create({ messages: [] }), (e) => e.code === 'INVALID_REQUEST');
  await assert.rejects(engine.completions.create({ prompt: 'x', temperature: -1 }), (e) => e.code === 'INVALID_REQUEST');
  await assert.rejects(engine.completions.create({ prompt: 'x '.repeat(5000), max_tokens: 1 }), (e) => e.code === 'PROMPT_TOO_LONG');
  // A signal that is not an AbortSignal is refused as such (it was a TypeError).
  await assert.rejects(engine.completions.create({ prompt: 'x', signal: 'x' }), (e) => e.code === 'INVALID_REQUEST' && /AbortSignal/.test(e.message));
  await assert.rejects(engine.completions.create({ prompt: 'x' }, { signal: {} }), (e) => e.code === 'INVALID_REQUEST');
  // A negative seed is a 64-bit seed like any other (it came back from the core past 2^53 and
  // every request with it was refused).
  const neg = await engine.completions.create({ prompt: 'Once', max_tokens: 3, temperature: 0.9, seed: -5 });
  const neg2 = await engine.completions.create({ prompt: 'Once', max_tokens: 3, temperature: 0.9, seed: -5 });
  assert.equal(neg.choices[0].text, neg2.choices[0].text);
  // One request's `route` does not install a router on the engine.
  assert.equal(engine.router, null);
  const routed = await engine.completions.create({ prompt: 'Once', max_tokens: 1, route: { mode: 'local-only' } });
  assert.equal(routed.route.target, 'local');
  assert.equal(engine.router, null);
  const plain = await engine.completions.create({ prompt: 'Once', max_tokens: 1 });
  assert.equal(plain.route, undefined);
});

test('requests queued behind one whose abort the stuck worker cannot hear run on the restarted worker', { skip }, async () => {
  const e = await createEngine({ cache: false, abortGraceMs: 300 });
  try {
    await e.load(MODEL);
    const p = { prompt: 'The capital of France is', max_tokens: 6, temperature: 0 };
    const ref = (await e.completions.create(p)).choices[0].text;
    // The worker blocks inside A's third decode step (one wasm call: it cannot read the ABORT).
    await e._debugFault({ at: 'decode', after: 3, fault: 'stall', ms: 8000 });
    const ac = new AbortController();
    const a = e.completions.create({ ...p, signal: ac.signal });
    const b = e.completions.create(p);
    const c = e.completions.create({ ...p, stream: true });
    setTimeout(() => ac.abort(), 1500);
    await assert.rejects(a, (err) => err.code === 'ABORTED');
    // B and C never reached the engine: they run on the new worker (the model reloaded).
    assert.equal((await b).choices[0].text, ref);
    let text = '';
    for await (const chunk of await c) text += chunk.choices[0]?.text ?? '';
    assert.equal(text, ref);
    assert.equal(e.restarts, 1, 'the stuck worker was replaced once');
  } finally {
    e.terminate();
  }
});

test('typed errors: 404, non-GGUF, truncated, cut connection, no length, wrong sha256', { skip }, async () => {
  const url = (n) => `${srv.origin}/models/${n}`;
  const cases = [
    [url('missing.gguf'), 'NETWORK', 'HTTP_STATUS'],
    [url('not-gguf.bin'), 'GGUF_INVALID', 'GGUF_BAD_MAGIC'],
    [url('truncated.gguf'), 'GGUF_TRUNCATED', 'GGUF_TENSOR_OUT_OF_BOUNDS'],
    [url('tiny-truncated.gguf'), 'GGUF_TRUNCATED', 'GGUF_TRUNCATED'],
    [url('drop-always.gguf'), 'NETWORK', 'CONNECTION_LOST'],
    [url('no-length.gguf'), 'NETWORK', 'NO_CONTENT_LENGTH'],
    ['/nonexistent/model.gguf', 'NETWORK', 'FILE_NOT_FOUND'],
  ];
  for (const [src, code, detail] of cases) {
    let kept;
    await assert.rejects(engine.load(src), (e) => {
      assert.equal(e.name, 'EdgeLLMError');
      assert.equal(e.code, code, `${src}: ${e.message}`);
      assert.equal(e.detail, detail, `${src}: ${e.message}`);
      kept = e.kept_model ?? null;
      return true;
    });
    // Refused before the loaded model was replaced, or after: then no model is loaded.
    assert.deepEqual(engine.model, kept, src);
  }
  assert.equal((await engine.cache.list()).length, 0, 'nothing from a failed download is in the cache');
  // A wrong expected sha256 is refused after the bytes are read.
  await assert.rejects(engine.load(new Blob([])), (e) => e.code === 'GGUF_TRUNCATED');
  await assert.rejects(engine.load(MODEL, { sha256: '0'.repeat(64) }), (e) => e.code === 'CHECKSUM_MISMATCH');
  // A malformed one is refused before anything is read (the loaded model, none here, is kept).
  srv.resetStats();
  for (const bad of ['xyz', '0'.repeat(63), 'g'.repeat(64), 42]) {
    await assert.rejects(engine.load(url('good.gguf'), { sha256: bad }), (e) => e.code === 'INVALID_REQUEST' && /sha256/.test(e.message));
  }
  assert.equal(srv.stats.bytes['/models/good.gguf'] || 0, 0, 'no byte fetched for a malformed sha256');
  // Over the memory budget: refused from the header, before the weights are downloaded.
  srv.resetStats();
  const rec = progressRecorder();
  await assert.rejects(engine.load(url('good.gguf'), { memoryBudget: 100 << 20, cache: false, onProgress: rec.onProgress }), (e) => e.code === 'OVER_MEMORY_BUDGET');
  assert.ok((srv.stats.bytes['/models/good.gguf'] || 0) < 64 << 20, `bytes sent before the refusal: ${srv.stats.bytes['/models/good.gguf']}`);
  assert.equal((await engine.status()).loaded, false);
});

test('abort during a load settles at once, the next load works', { skip }, async () => {
  const ac = new AbortController();
  const rec = progressRecorder();
  const p = engine.load(`${srv.origin}/models/slow.gguf`, { signal: ac.signal, cache: false, onProgress: rec.onProgress });
  while (rec.events.length < 2) await new Promise((r) => setTimeout(r, 20));
  const t0 = performance.now();
  ac.abort();
  await assert.rejects(p, (e) => e.code === 'ABORTED');
  const ms = performance.now() - t0;
  assert.ok(ms < 100, `abort settled in ${ms} ms`);
  const st = await engine.status();
  assert.equal(st.loaded, false);
});

test('URL: a cut connection is resumed with Range; the copy is cached and verified', { skip }, async () => {
  srv.resetDropOnce();
  srv.resetStats();
  const u = `${srv.origin}/models/drop-once.gguf`;
  const rec = progressRecorder();
  const info = await engine.load(u, rec);
  assert.equal(info.source, 'network');
  assert.equal(info.sha256, MODEL_SHA256);
  assertMonotonic(rec.events, MODEL_SIZE, 'download');
  const ranged = srv.stats.log.filter((l) => l.path === '/models/drop-once.gguf' && l.range);
  assert.equal(ranged.length, 1);
  assert.ok(logs.some((l) => /resuming/.test(l.message)));
  const entries = await engine.cache.list();
  assert.equal(entries.length, 1);
  assert.deepEqual([entries[0].size, entries[0].sha256], [MODEL_SIZE, MODEL_SHA256]);

  // Second load: from the cache, zero network bytes.
  srv.resetStats();
  const rec2 = progressRecorder();
  const info2 = await engine.load(u, rec2);
  assert.equal(info2.source, 'cache');
  assert.equal(info2.sha256, MODEL_SHA256);
  assertMonotonic(rec2.events, MODEL_SIZE, 'cache');
  assert.equal(srv.stats.bytes['/models/drop-once.gguf'] || 0, 0);
  assert.equal(srv.stats.requests['/models/drop-once.gguf'] || 0, 0);
});

test('a corrupt cache entry is detected by its sha256 and fetched again', { skip }, async () => {
  const file = fs.readdirSync(cacheDir).find((n) => n.endsWith('.gguf'));
  const p = path.join(cacheDir, file);
  const fd = fs.openSync(p, 'r+');
  const b = Buffer.alloc(1);
  fs.readSync(fd, b, 0, 1, 100_000_000);
  b[0] ^= 0xff;
  fs.writeSync(fd, b, 0, 1, 100_000_000);
  fs.closeSync(fd);
  srv.resetStats();
  const rec = progressRecorder();
  const info = await engine.load(`${srv.origin}/models/drop-once.gguf`, rec);
  assert.equal(info.source, 'network');
  assert.equal(info.sha256, MODEL_SHA256);
  assert.ok(rec.events.some((e) => e.phase === 'cache'), 'the cached copy was tried first');
  assertMonotonic(rec.events, MODEL_SIZE, 'download');
  assert.equal(srv.stats.bytes['/models/drop-once.gguf'], MODEL_SIZE);
  assert.ok(logs.some((l) => /rejected/.test(l.message)), 'the rejection was logged');
});

test('a truncated cache entry is detected by its size and fetched again', { skip }, async () => {
  const file = fs.readdirSync(cacheDir).find((n) => n.endsWith('.gguf'));
  fs.truncateSync(path.join(cacheDir, file), 1_000_000);
  srv.resetStats();
  const rec = progressRecorder();
  const info = await engine.load(`${srv.origin}/models/drop-once.gguf`, rec);
  assert.equal(info.source, 'network');
  assert.ok(!rec.events.some((e) => e.phase === 'cache'), 'the size check rejected it before reading');
  assert.equal(srv.stats.bytes['/models/drop-once.gguf'], MODEL_SIZE);
});

test('Blobs: in-memory ones load, file-backed ones are refused with a hint', { skip }, async () => {
  const head = new Blob([fs.readFileSync(MODEL).subarray(0, 4096)]);
  await assert.rejects(engine.load(head), (e) => e.code === 'GGUF_TRUNCATED');
  const fileBacked = await fs.openAsBlob(MODEL);
  await assert.rejects(engine.load(fileBacked), (e) => e.code === 'INVALID_REQUEST' && /file path/.test(e.message));
});

test('a wasm panic is ENGINE_CRASHED; the client restarts the worker and reloads the model', { skip }, async () => {
  const crashes = [];
  const e2 = await createEngine({ cacheDir, onCrash: (e) => crashes.push(e) });
  try {
    await e2.load(MODEL);
    await assert.rejects(e2._debugPanic(), (e) => {
      assert.equal(e.code, 'ENGINE_CRASHED');
      assert.match(e.message, /deliberate panic/);
      return true;
    });
    assert.equal(e2.restarts, 1);
    assert.equal(crashes.length, 1);
    assert.equal(e2.model, null);
    // The next request starts a fresh worker, reloads the model, and works.
    const r = await e2.completions.create({ prompt: 'Hello', max_tokens: 2, temperature: 0 });
    assert.equal(r.usage.completion_tokens, 2);
    assert.equal(e2.model.sha256, MODEL_SHA256);
    const st = await e2.status();
    assert.deepEqual([st.loaded, st.dead], [true, false]);
  } finally {
    e2.terminate();
  }
  await assert.rejects(e2.status(), (e) => e.code === 'TERMINATED');
  // Every call after terminate() says so, countTokens too (it checks the model client-side).
  await assert.rejects(e2.countTokens({ prompt: 'Hello' }), (e) => e.code === 'TERMINATED');
  await assert.rejects(e2.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1 }), (e) => e.code === 'TERMINATED');
});
