// Unit tests of the JS package that need no wasm: errors, the URL reader (against the test
// server: Range resume, dropped connections, HTTP errors), the Node file cache, the client's
// request validation and stream object.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import crypto from 'node:crypto';

import { readUrl, readBlob, readPath, parseContentRange } from '../../pkg/src/loader.js';
import { EdgeLLMError, ErrorCode, umbrellaCode, errorFromPayload } from '../../pkg/src/errors.js';
import { FsCache } from '../../pkg/src/cache.js';
import { CompletionStream } from '../../pkg/src/client.js';
import { startServer } from './server.js';
import { ROOT } from './helpers.js';

// A 3 MiB synthetic "model" file is enough to exercise the reader.
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'edgellm-unit-'));
const FILE = path.join(tmp, 'blob.bin');
const DATA = crypto.randomBytes(3 << 20);
fs.writeFileSync(FILE, DATA);
const SHA = crypto.createHash('sha256').update(DATA).digest('hex');

let srv;
before(async () => {
  srv = await startServer({ root: ROOT, modelPath: FILE, dropAt: 1 << 20, truncatedLen: 1000 });
});
after(async () => {
  await srv.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});

async function collect(gen) {
  const h = crypto.createHash('sha256');
  let n = 0;
  for await (const c of gen) {
    h.update(c);
    n += c.byteLength;
  }
  return { n, sha: h.digest('hex') };
}

test('umbrella codes', () => {
  assert.equal(umbrellaCode('GGUF_BAD_MAGIC'), 'GGUF_INVALID');
  assert.equal(umbrellaCode('GGUF_TRUNCATED'), 'GGUF_TRUNCATED');
  assert.equal(umbrellaCode('GGUF_TENSOR_OUT_OF_BOUNDS'), 'GGUF_TRUNCATED');
  assert.equal(umbrellaCode('UNSUPPORTED_TENSOR_TYPE'), 'UNSUPPORTED_MODEL');
  assert.equal(umbrellaCode('UNSUPPORTED_MODEL'), 'UNSUPPORTED_MODEL');
  assert.equal(umbrellaCode('OVER_MEMORY_BUDGET'), 'OVER_MEMORY_BUDGET');
  assert.equal(umbrellaCode('GGUF_ALLOC_FAILED'), 'OVER_MEMORY_BUDGET');
  assert.equal(umbrellaCode('SOMETHING_NEW'), 'INTERNAL');
  // A template's refusal is the request's (the server's 400); an unusable template, a corrupt
  // file or a forward pass gone NaN is the model's.
  assert.equal(umbrellaCode('CHAT_TEMPLATE_ERROR'), 'INVALID_REQUEST');
  assert.equal(umbrellaCode('CHAT_TEMPLATE_TOO_COSTLY'), 'UNSUPPORTED_MODEL');
  assert.equal(umbrellaCode('BAD_METADATA'), 'GGUF_INVALID');
  assert.equal(umbrellaCode('BAD_TENSOR_DATA'), 'GGUF_INVALID');
  assert.equal(umbrellaCode('MODEL_NON_FINITE'), 'UNSUPPORTED_MODEL');
  const e = errorFromPayload({ code: 'NETWORK', message: 'x', status: 404, detail: 'HTTP_STATUS' });
  assert.ok(e instanceof EdgeLLMError && e instanceof Error);
  assert.deepEqual([e.code, e.status, e.detail], ['NETWORK', 404, 'HTTP_STATUS']);
  assert.equal(errorFromPayload({ code: 'NOT_A_CODE', message: 'y' }).code, 'INTERNAL');
  assert.deepEqual(JSON.parse(JSON.stringify(e)), { code: 'NETWORK', message: 'x', detail: 'HTTP_STATUS', status: 404 });
});

test('Content-Range parsing', () => {
  assert.deepEqual(parseContentRange('bytes 10-19/100'), { start: 10, end: 19, total: 100 });
  assert.deepEqual(parseContentRange('bytes 0-0/*'), { start: 0, end: 0, total: null });
  assert.equal(parseContentRange('bytes */100'), null);
  assert.equal(parseContentRange(null), null);
});

test('readUrl streams a whole file and reports its length', async () => {
  let info = null;
  const r = await collect(readUrl(`${srv.origin}/models/good.gguf`, { onStart: (i) => (info = i) }));
  assert.equal(r.n, DATA.length);
  assert.equal(r.sha, SHA);
  assert.equal(info.total, DATA.length);
  assert.ok(info.etag);
});

test('readUrl resumes a dropped connection with a Range request', async () => {
  srv.resetDropOnce();
  srv.resetStats();
  const resumes = [];
  const r = await collect(readUrl(`${srv.origin}/models/drop-once.gguf`, { onResume: (x) => resumes.push(x), retryDelayMs: 10 }));
  assert.equal(r.n, DATA.length);
  assert.equal(r.sha, SHA, 'resumed bytes must splice exactly');
  assert.equal(resumes.length, 1);
  const ranged = srv.stats.log.filter((l) => l.path === '/models/drop-once.gguf' && l.range);
  assert.equal(ranged.length, 1);
  assert.match(ranged[0].range, /^bytes=\d+-$/);
  assert.ok(Number(ranged[0].range.slice(6, -1)) > 0);
});

test('readUrl hands over at most maxChunk bytes at a time, however large the network read (WebKit)', async () => {
  // One 3 MiB read, as WebKitGTK delivers what it has buffered: pieces of at most 1 MiB, in order.
  const fetchImpl = async () => new Response(new ReadableStream({ start: (c) => (c.enqueue(new Uint8Array(DATA)), c.close()) }), { headers: { 'Content-Length': String(DATA.length) } });
  const sizes = [];
  const h = crypto.createHash('sha256');
  for await (const c of readUrl('http://127.0.0.1/one-read', { fetchImpl, maxChunk: 1 << 20 })) {
    sizes.push(c.byteLength);
    h.update(c);
  }
  assert.deepEqual(sizes, [1 << 20, 1 << 20, 1 << 20]);
  assert.equal(h.digest('hex'), SHA);
});

test('readUrl gives up with NETWORK when resuming makes no progress', async () => {
  await assert.rejects(collect(readUrl(`${srv.origin}/models/drop-always.gguf`, { retryDelayMs: 5, maxStalls: 3 })), (e) => {
    assert.equal(e.code, ErrorCode.NETWORK);
    assert.equal(e.detail, 'CONNECTION_LOST');
    return true;
  });
});

test('readUrl: HTTP 404 is NETWORK with status', async () => {
  await assert.rejects(collect(readUrl(`${srv.origin}/models/missing.gguf`)), (e) => e.code === 'NETWORK' && e.status === 404);
});

test('readUrl: unreachable server is NETWORK', async () => {
  await assert.rejects(collect(readUrl('http://127.0.0.1:9/x.gguf')), (e) => e.code === 'NETWORK' && e.detail === 'FETCH_FAILED');
});

test('readUrl: abort is ABORTED', async () => {
  const ac = new AbortController();
  const it = readUrl(`${srv.origin}/models/slow.gguf`, { signal: ac.signal });
  await it.next();
  ac.abort();
  await assert.rejects(
    (async () => {
      for await (const _ of it);
    })(),
    (e) => e.code === 'ABORTED',
  );
});

test('readBlob and readPath deliver every byte in order', async () => {
  const blob = new Blob([DATA]);
  const a = await collect(readBlob(blob, { chunkSize: 1 << 19 }));
  assert.deepEqual([a.n, a.sha], [DATA.length, SHA]);
  const b = await collect(readPath(fs, FILE, { chunkSize: 1 << 19 }));
  assert.deepEqual([b.n, b.sha], [DATA.length, SHA]);
});

test('FsCache: a record is written only on commit; size mismatch evicts', async () => {
  const dir = path.join(tmp, 'cache');
  const cache = await FsCache.open(fs, path, dir);
  const url = 'http://127.0.0.1/x.gguf';
  assert.equal(await cache.lookup(url), null);
  const w = await cache.writer(url);
  w.write(DATA.subarray(0, 1000));
  w.write(DATA.subarray(1000));
  assert.equal(await cache.lookup(url), null, 'no record before commit: not trusted');
  await w.commit({ size: DATA.length, sha256: SHA, etag: null });
  const hit = await cache.lookup(url);
  assert.equal(hit.record.sha256, SHA);
  assert.equal(hit.size, DATA.length);
  assert.equal((await collect(hit.read({}))).sha, SHA);
  assert.equal((await cache.list()).length, 1);
  // Truncate the bytes: the size check drops the entry.
  const file = fs.readdirSync(dir).find((n) => n.endsWith('.gguf'));
  fs.truncateSync(path.join(dir, file), 100);
  const stale = await cache.lookup(url);
  assert.equal(stale.stale, true);
  assert.equal(await cache.lookup(url), null);
  assert.deepEqual(fs.readdirSync(dir), []);
  // An aborted write leaves nothing behind.
  const w2 = await cache.writer(url);
  w2.write(DATA.subarray(0, 10));
  await w2.abort();
  assert.deepEqual(fs.readdirSync(dir), []);
});

test('CompletionStream: chunks, end, abort', async () => {
  let cancelled = 0;
  const s = new CompletionStream(() => cancelled++);
  s._push(1);
  s._push(2);
  s._end();
  const got = [];
  for await (const c of s) got.push(c);
  assert.deepEqual(got, [1, 2]);

  const s2 = new CompletionStream(() => cancelled++);
  const it = s2[Symbol.asyncIterator]();
  const pending = it.next();
  s2.abort();
  await assert.rejects(pending, (e) => e.code === 'ABORTED');
  assert.equal(cancelled, 1);
  s2._push(3); // late chunks are dropped
  assert.deepEqual(await it.next(), { value: undefined, done: true });

  const s3 = new CompletionStream(() => cancelled++);
  s3._push(1);
  s3._push(2);
  for await (const c of s3) {
    assert.equal(c, 1);
    break; // leaving the loop cancels
  }
  assert.equal(cancelled, 2);

  // The request's own signal ends the stream at once, as abort() does: chunks already queued
  // are dropped and the very next read rejects ABORTED (it used to deliver one more chunk,
  // ending only when the worker confirmed).
  const ac = new AbortController();
  const s4 = new CompletionStream(() => cancelled++, ac.signal);
  s4._push(1);
  s4._push(2);
  const it4 = s4[Symbol.asyncIterator]();
  assert.deepEqual(await it4.next(), { value: 1, done: false });
  ac.abort();
  assert.equal(cancelled, 3);
  await assert.rejects(it4.next(), (e) => e.code === 'ABORTED');
  assert.deepEqual(await it4.next(), { value: undefined, done: true });
  // A signal aborted before the stream exists ends it before any read.
  const s5 = new CompletionStream(() => cancelled++, AbortSignal.abort());
  s5._push(1);
  await assert.rejects(s5[Symbol.asyncIterator]().next(), (e) => e.code === 'ABORTED');
});

test('readUrl: a body that goes silent without closing resumes after idleTimeoutMs', async () => {
  // First response: 1 MiB, then silence (the connection stays open). The resume (Range) gets
  // the rest; the bytes splice exactly.
  const ranges = [];
  const fetchImpl = async (url, init) => {
    const range = init.headers.Range;
    ranges.push(range || null);
    if (!range) {
      const body = new ReadableStream({
        start(c) {
          c.enqueue(new Uint8Array(DATA.subarray(0, 1 << 20)));
          init.signal?.addEventListener('abort', () => c.error(new Error('aborted')));
        },
      });
      return new Response(body, { headers: { 'Content-Length': String(DATA.length), ETag: '"v1"' } });
    }
    const from = Number(/bytes=(\d+)-/.exec(range)[1]);
    return new Response(new Uint8Array(DATA.subarray(from)), { status: 206, headers: { 'Content-Range': `bytes ${from}-${DATA.length - 1}/${DATA.length}`, ETag: '"v1"' } });
  };
  const t0 = Date.now();
  const r = await collect(readUrl('http://127.0.0.1/stall', { fetchImpl, idleTimeoutMs: 100, retryDelayMs: 5 }));
  assert.equal(r.sha, SHA);
  assert.deepEqual(ranges, [null, `bytes=${1 << 20}-`]);
  assert.ok(Date.now() - t0 < 5000);
});

test('readUrl: a server that sends no headers is a stall too: retried, then NETWORK, never a hang', async () => {
  // A fetch that never answers (the server took the connection and went silent) until aborted.
  const silent = (init) =>
    new Promise((_, reject) => init.signal.addEventListener('abort', () => reject(init.signal.reason || new Error('aborted')), { once: true }));
  let calls = 0;
  const t0 = Date.now();
  await assert.rejects(collect(readUrl('http://127.0.0.1/silent', { fetchImpl: (u, init) => (calls++, silent(init)), idleTimeoutMs: 60, retryDelayMs: 5, maxStalls: 2 })), (e) => {
    assert.equal(e.code, ErrorCode.NETWORK);
    assert.equal(e.detail, 'CONNECTION_LOST');
    assert.match(e.message, /no response headers within 60 ms/);
    return true;
  });
  assert.equal(calls, 3, 'the first request and maxStalls retries');
  assert.ok(Date.now() - t0 < 3000);
  // Silent once, then answering: the load goes on. The caller's abort still ends a silent fetch at once.
  let n = 0;
  const once = (u, init) => (n++ === 0 ? silent(init) : Promise.resolve(new Response(new Uint8Array(DATA), { headers: { 'Content-Length': String(DATA.length) } })));
  assert.equal((await collect(readUrl('http://127.0.0.1/once', { fetchImpl: once, idleTimeoutMs: 60, retryDelayMs: 5 }))).sha, SHA);
  const ac = new AbortController();
  setTimeout(() => ac.abort(), 30);
  await assert.rejects(collect(readUrl('http://127.0.0.1/silent', { fetchImpl: (u, init) => silent(init), signal: ac.signal, idleTimeoutMs: 10_000 })), (e) => e.code === 'ABORTED');
});

/** A body that delivers `bytes`, then fails (a connection reset after them). */
function cutAfter(bytes) {
  let sent = false;
  return new ReadableStream({
    pull(c) {
      if (sent) return c.error(new Error('reset'));
      sent = true;
      c.enqueue(new Uint8Array(bytes));
    },
  });
}

test('readUrl: a resume answered 503 / 429 is tried again (after Retry-After), the bytes so far kept', async () => {
  const seen = [];
  const fetchImpl = async (url, init) => {
    const range = init.headers.Range || null;
    seen.push(range);
    if (!range) {
      return new Response(cutAfter(DATA.subarray(0, 1 << 20)), { headers: { 'Content-Length': String(DATA.length), ETag: '"v1"' } });
    }
    if (seen.length === 2) return new Response('busy', { status: 503, headers: { 'Retry-After': '0' } });
    if (seen.length === 3) return new Response('slow down', { status: 429 });
    const from = Number(/bytes=(\d+)-/.exec(range)[1]);
    return new Response(new Uint8Array(DATA.subarray(from)), { status: 206, headers: { 'Content-Range': `bytes ${from}-${DATA.length - 1}/${DATA.length}`, ETag: '"v1"' } });
  };
  const resumes = [];
  const r = await collect(readUrl('http://127.0.0.1/busy', { fetchImpl, retryDelayMs: 5, onResume: (x) => resumes.push(x.reason) }));
  assert.equal(r.sha, SHA);
  assert.deepEqual(seen, [null, `bytes=${1 << 20}-`, `bytes=${1 << 20}-`, `bytes=${1 << 20}-`]);
  assert.equal(resumes.length, 3);
  assert.match(resumes[1], /HTTP 503/);
  // Other statuses on a resume stay final.
  let k = 0;
  const gone = async (url, init) =>
    k++ === 0
      ? new Response(cutAfter(DATA.subarray(0, 1000)), { headers: { 'Content-Length': String(DATA.length) } })
      : new Response('gone', { status: 410 });
  await assert.rejects(collect(readUrl('http://127.0.0.1/gone', { fetchImpl: gone, retryDelayMs: 5 })), (e) => e.code === 'NETWORK' && e.status === 410);
});

test('readUrl: a resume that meets another version of the file (a new ETag) fails, never splices', async () => {
  for (const status of [200, 206]) {
    let first = true;
    const fetchImpl = async (url, init) => {
      if (first) {
        first = false;
        const body = new ReadableStream({ start: (c) => (c.enqueue(new Uint8Array(DATA.subarray(0, 1000))), c.error(new Error('reset'))) });
        return new Response(body, { headers: { 'Content-Length': String(DATA.length), ETag: '"v1"' } });
      }
      const headers = status === 206 ? { 'Content-Range': `bytes 1000-${DATA.length - 1}/${DATA.length}`, ETag: '"v2"' } : { 'Content-Length': String(DATA.length), ETag: '"v2"' };
      return new Response(new Uint8Array(DATA.length - (status === 206 ? 1000 : 0)), { status, headers });
    };
    await assert.rejects(collect(readUrl('http://127.0.0.1/changed', { fetchImpl, retryDelayMs: 5 })), (e) => {
      assert.equal(e.code, ErrorCode.NETWORK);
      assert.equal(e.detail, 'RESOURCE_CHANGED', String(status));
      return true;
    });
  }
});
