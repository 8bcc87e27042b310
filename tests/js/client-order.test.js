// The client's rules under an app that calls it in unusual ways (found by an API-abuse probe),
// on the tiny models in Node: calls reach the worker in the order they were made; a refused
// load leaves the loaded model in place; leaving one loop over a stream ends the other reads;
// a throwing progress callback does not kill the process; values JSON cannot carry are refused
// rather than dropped; odd engine options and sources are typed errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import os from 'node:os';
import path from 'node:path';

import { createEngine } from '../../pkg/src/node.js';
import { ROOT, wasmMissing } from './helpers.js';

const skip = wasmMissing();
const A = path.join(ROOT, 'tests/data/tiny_llama.gguf');
const B = path.join(ROOT, 'tests/data/tiny_gemma3.gguf');
const P = { prompt: 'Once upon a time', max_tokens: 8, temperature: 0 };

/** `fn(engine)` on a fresh engine (model `model` loaded, if given), terminated after. */
async function withEngine(model, fn, options = {}) {
  const e = await createEngine({ cache: false, ...options });
  try {
    if (model) await e.load(model);
    return await fn(e);
  } finally {
    e.terminate();
  }
}

const textOn = (model) => withEngine(model, async (e) => (await e.completions.create(P)).choices[0].text);

test('a load() or unload() called after create() runs after its generation', { skip }, async () => {
  const [tA, tB] = [await textOn(A), await textOn(B)];
  assert.notEqual(tA, tB, 'the two models answer differently');
  await withEngine(A, async (e) => {
    const first = e.completions.create(P);
    const load = e.load(B);
    const r = await first;
    await load;
    assert.equal(r.choices[0].text, tA, 'ran on the model loaded when it was called');
    assert.equal(e.model.architecture, 'gemma3');
    const second = e.completions.create(P);
    const unload = e.unload();
    assert.equal((await second).choices[0].text, tB);
    await unload;
    assert.equal(e.model, null);
  });
});

test('a refused load leaves the loaded model in place', { skip }, async () => {
  await withEngine(A, async (e) => {
    const aborted = AbortSignal.abort();
    await assert.rejects(e.load(B, { signal: aborted }), (x) => x.code === 'ABORTED');
    assert.equal(e.model && e.model.architecture, 'llama');
    assert.ok((await e.countTokens({ prompt: 'hi' })).prompt_tokens > 0);
    // KV options refused once the new file's header is read: whatever the worker holds then,
    // the engine says the same.
    await assert.rejects(e.load(B, { kv: { bytes: 1 } }), (x) => x.code === 'INVALID_REQUEST');
    const st = await e.status();
    assert.equal(!!e.model, st.loaded);
  });
});

test('leaving one loop over a stream ends a read waiting in another', { skip }, async () => {
  await withEngine(A, async (e) => {
    const s = await e.completions.create({ ...P, max_tokens: 200, stream: true });
    const it = s[Symbol.asyncIterator]();
    const waiting = Promise.all([it.next(), it.next(), it.next()]).then(() => it.next());
    await it.return();
    const r = await Promise.race([waiting, new Promise((_, rej) => setTimeout(() => rej(new Error('a read never ended')), 5000))]);
    assert.equal(r.done, true);
    assert.equal((await e.completions.create(P)).choices[0].text.length > 0, true, 'the engine still answers');
  });
});

test('a throwing onProgress does not stop the load', { skip }, async () => {
  const logs = [];
  await withEngine(null, async (e) => {
    const info = await e.load(A, { onProgress: () => { throw new Error('app bug'); } });
    assert.equal(info.architecture, 'llama');
    assert.ok(logs.some((m) => /onProgress threw: app bug/.test(m)), logs.join('\n'));
  }, { onLog: (level, m) => logs.push(m) });
});

test('functions and symbols among the parameters are refused, not dropped', { skip }, async () => {
  await withEngine(A, async (e) => {
    for (const [k, v] of [['top_p', () => 0.1], ['stop', Symbol('x')], ['onToken', () => {}]]) {
      await assert.rejects(e.completions.create({ ...P, [k]: v }), (x) => x.code === 'INVALID_REQUEST' && x.param === k, k);
    }
  });
});

test('odd engine options and sources are typed errors', { skip }, async () => {
  for (const abortGraceMs of [-1, NaN, '5']) {
    await assert.rejects(createEngine({ cache: false, abortGraceMs }), (x) => x.code === 'INVALID_REQUEST', String(abortGraceMs));
  }
  await withEngine(null, async (e) => {
    for (const src of ['http://[bad', { url: 'not a url' }, 'ftp://example.test/m.gguf']) {
      await assert.rejects(e.load(src), (x) => x.code === 'INVALID_REQUEST', JSON.stringify(src));
    }
    await assert.rejects(e.load(os.tmpdir()), (x) => x.code === 'NETWORK' && /not a file/.test(x.message));
    // An array is no kv object (it was taken as {}: no budget).
    await assert.rejects(e.load(A, { kv: [] }), (x) => x.code === 'INVALID_REQUEST' && /kv must be an object/.test(x.message));
  });
});

test('a request over maxRequestBytes is refused before it reaches wasm memory; the default is 1 MiB', { skip }, async () => {
  const tooLarge = (x) => x.code === 'INVALID_REQUEST' && x.detail === 'request_too_large';
  await withEngine(A, async (e) => {
    const wasmBytes = async () => (await e.refreshMemory()).wasm_memory_bytes;
    const before = await wasmBytes();
    // 1 MiB + a little of prompt: refused, wasm memory untouched; under it: tokenized (too long).
    await assert.rejects(e.completions.create({ prompt: 'a'.repeat(1 << 20), max_tokens: 1 }), tooLarge);
    await assert.rejects(e.countTokens({ prompt: 'é'.repeat(600_000) }), tooLarge, 'counted in UTF-8 bytes, not characters');
    assert.equal(await wasmBytes(), before);
    const r = await e.countTokens({ prompt: 'a'.repeat(200_000) });
    assert.ok(r.prompt_tokens > 0 && r.fits === false, JSON.stringify(r));
  });
  await withEngine(
    A,
    async (e) => {
      await assert.rejects(e.chat.completions.create({ messages: [{ role: 'user', content: 'x'.repeat(300) }], max_tokens: 1 }), tooLarge);
      assert.equal((await e.completions.create({ prompt: 'hi', max_tokens: 1 })).usage.completion_tokens, 1);
    },
    { maxRequestBytes: 256 },
  );
  await assert.rejects(createEngine({ cache: false, maxRequestBytes: 0 }), (x) => x.code === 'INVALID_REQUEST');
});
