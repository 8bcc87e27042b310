// The package under Node 20 (worker_threads), with the real model: loading from a path, a Blob,
// and URLs (resume, cache, typed errors), abort, crash recovery.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { createEngine } from '../../pkg/src/node.js';
import { startServer } from './server.js';
import { ROOT, MODEL, MODEL_SIZE, modelMissing, wasmMissing } from './helpers.js';

const MODEL_SHA256 = 'a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818';
const skip = modelMissing() || wasmMissing();

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
    await assert.rejects(engine.load(src), (e) => {
      assert.equal(e.name, 'EdgeLLMError');
      assert.equal(e.code, code, `${src}: ${e.message}`);
      assert.equal(e.detail, detail, `${src}: ${e.message}`);
      return true;
    });
    assert.equal(engine.model, null);
  }
  assert.equal((await engine.cache.list()).length, 0, 'nothing from a failed download is in the cache');
  // A wrong expected sha256 is refused after the bytes are read.
  await assert.rejects(engine.load(new Blob([])), (e) => e.code === 'GGUF_TRUNCATED');
  await assert.rejects(engine.load(MODEL, { sha256: '0'.repeat(64) }), (e) => e.code === 'CHECKSUM_MISMATCH');
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

test('a wasm panic is ENGINE_CRASHED; the client restarts the worker', { skip }, async () => {
  const crashes = [];
  await assert.rejects(engine._debugPanic(), (e) => {
    assert.equal(e.code, 'ENGINE_CRASHED');
    assert.match(e.message, /deliberate panic/);
    return true;
  });
  assert.equal(engine.restarts, 1);
  assert.equal(engine.model, null);
  const st = await engine.status(); // starts a fresh worker
  assert.equal(st.loaded, false);
  assert.equal(st.dead, false);
  void crashes;
});
