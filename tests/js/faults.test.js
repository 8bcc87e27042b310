// The fault matrix, in real Chromium (playwright-core + /usr/bin/chromium): the package on a bare
// page, the real model from the test server, the real server (`edgellm serve`) for the remote
// route. Each fault ends in a typed error or a correct answer; after each one the engine is used
// again and must give the same greedy text as before any fault (the reference), so "usable
// afterwards" means correct, not just alive; and whatever was streamed before a fault stays
// with the app.
//
// The faults are real: a connection cut by the server, bytes changed on disk in OPFS, a storage
// quota set through the DevTools protocol, a server process killed with SIGKILL, and — through
// the worker's test hook (pkg/src/test-faults.js) — a wasm trap or a blocked worker thread at a
// chosen load chunk / prefill chunk / decode step.
//
// Steps run in order on one page and one engine; each is its own test for reporting.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { startServer } from './server.js';
import { ROOT, MODEL, MODEL_SIZE, MODEL_SHA256, CHROMIUM, CHROMIUM_ARGS, REQUIRED, modelMissing, wasmMissing, cliPath } from './helpers.js';
import { startEdgeServer, cliCanServe } from './router-helpers.js';
import { checkAbortMidStream } from './browsers/checks.js';

const skip = modelMissing() || wasmMissing() || (!fs.existsSync(CHROMIUM) && `no Chromium at ${CHROMIUM}`);
const noServer = skip || (cliCanServe() ? false : REQUIRED ? false : `native CLI with 'serve' not built (${cliPath() || 'none'})`);
const GRACE_MS = 3000; // the engine's abortGraceMs here: above the longest prefill chunk (64 tokens) on a busy machine
const REF_REQUEST = { prompt: 'The three primary colours are', max_tokens: 12, temperature: 0 };

let web;
let edge;
let context;
let page;
let cdp;
let userDataDir;
let reference = null; // the greedy text of REF_REQUEST before any fault
const report = {};

/** Runs `fn(engine, arg)` in the page and returns its (JSON) result. */
const inPage = (fn, arg) => page.evaluate(new Function('arg', `return (${fn.toString()})(window.engine, arg);`), arg);

/** Greedy text of REF_REQUEST from the page's engine. */
const refText = () => inPage(async (engine, req) => (await engine.completions.create(req)).choices[0].text, REF_REQUEST);

/** The engine is alive and correct: the reference request gives the reference text. */
async function assertUsable(what) {
  assert.equal(await refText(), reference, `after ${what}: the reference request changed`);
}

/** Loads `url` in the page; {info} or {error: {code, message}}, plus the log lines seen. */
const loadInPage = (url) =>
  inPage(async (engine, u) => {
    window.__logs.length = 0;
    try {
      const info = await engine.load(u);
      return { info: { source: info.source, sha256: info.sha256, file_size: info.file_size }, logs: window.__logs.slice() };
    } catch (e) {
      return { error: { code: e.code, message: e.message }, logs: window.__logs.slice() };
    }
  }, url);

/** The page's view of the OPFS cache: [{url, size, sha256}] of the verified records. */
const cacheList = () => inPage(async (engine) => (await engine.cache.list()).map((e) => ({ path: new URL(e.url).pathname, size: e.size, sha256: e.sha256 })));

/** Every file name in the cache's OPFS directory (records, bytes, crash markers). */
const opfsFiles = () =>
  page.evaluate(async () => {
    const root = await navigator.storage.getDirectory();
    const dir = await root.getDirectoryHandle('edgellm-cache', { create: true });
    const out = [];
    for await (const [name] of dir.entries()) out.push(name);
    return out.sort();
  });

/** Overwrites `bytes` at `offset` of the cached file of the URL whose path is `p`, in OPFS. */
const corruptCached = (p, offset, bytes) =>
  page.evaluate(
    async ({ p, offset, bytes }) => {
      const root = await navigator.storage.getDirectory();
      const dir = await root.getDirectoryHandle('edgellm-cache');
      for await (const [name, h] of dir.entries()) {
        if (!name.endsWith('.json')) continue;
        const rec = JSON.parse(await (await h.getFile()).text());
        if (new URL(rec.url).pathname !== p) continue;
        const fh = await dir.getFileHandle(name.replace(/\.json$/, '.gguf'));
        const w = await fh.createWritable({ keepExistingData: true });
        await w.write({ type: 'write', position: offset, data: new Uint8Array(bytes) });
        await w.close();
        return (await fh.getFile()).size;
      }
      return null;
    },
    { p, offset, bytes },
  );

before(async () => {
  if (skip) return;
  const { chromium } = await import('playwright-core');
  web = await startServer({ root: ROOT, modelPath: MODEL, dropAt: 24 << 20 });
  userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgellm-faults-'));
  [edge, context] = await Promise.all([
    noServer ? null : startEdgeServer(['--cors-origin', web.origin]),
    chromium.launchPersistentContext(userDataDir, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS }),
  ]);
  page = context.pages()[0] || (await context.newPage());
  page.on('pageerror', (e) => console.log(`[page error] ${e.message}`));
  cdp = await context.newCDPSession(page);
  await page.goto(`${web.origin}/tests/js/pages/router.html`);
  await page.waitForFunction(() => document.body.dataset.ready === '1', null, { timeout: 30_000 });
  await page.evaluate(async (grace) => {
    window.__logs = [];
    window.engine = await window.edgellm.createEngine({ cache: true, abortGraceMs: grace, onLog: (level, message) => window.__logs.push(`${level}: ${message}`) });
  }, GRACE_MS);
});

after(async () => {
  if (cdp) await cdp.send('Storage.overrideQuotaForOrigin', { origin: web.origin }).catch(() => {});
  if (context) await context.close();
  if (edge) await edge.kill('SIGKILL');
  if (web) await web.close();
  if (userDataDir) fs.rmSync(userDataDir, { recursive: true, force: true });
  if (Object.keys(report).length) console.log(`fault matrix figures: ${JSON.stringify(report)}`);
});

test('network cut mid-download: resumed with one Range request, sha256 right, cached; the reference text', { skip }, async () => {
  web.resetDropOnce();
  web.resetStats();
  const r = await loadInPage('/models/drop-once.gguf');
  assert.ok(r.info, JSON.stringify(r));
  assert.deepEqual(r.info, { source: 'network', sha256: MODEL_SHA256, file_size: MODEL_SIZE });
  const ranged = web.stats.log.filter((l) => l.path === '/models/drop-once.gguf' && l.range);
  assert.equal(ranged.length, 1, 'one Range request resumed the download');
  assert.ok(r.logs.some((l) => /resuming/.test(l)), JSON.stringify(r.logs));
  assert.deepEqual(await cacheList(), [{ path: '/models/drop-once.gguf', size: MODEL_SIZE, sha256: MODEL_SHA256 }]);
  reference = await refText();
  assert.ok(reference.length > 0);
  report.reference = reference;
});

test('corrupt cache entry (tensor bytes changed in OPFS): digest mismatch, evicted, downloaded again', { skip }, async () => {
  // Same size, so only the sha256 recomputed while the bytes stream in can tell.
  assert.equal(await corruptCached('/models/drop-once.gguf', Math.floor(MODEL_SIZE / 2), new Array(64).fill(0x5a)), MODEL_SIZE);
  web.resetStats();
  const r = await loadInPage('/models/drop-once.gguf');
  assert.deepEqual(r.info, { source: 'network', sha256: MODEL_SHA256, file_size: MODEL_SIZE }, JSON.stringify(r));
  assert.ok(r.logs.some((l) => /cache entry .* rejected .*sha256/.test(l)), JSON.stringify(r.logs));
  assert.ok((web.stats.bytes['/models/drop-once.gguf'] || 0) >= MODEL_SIZE, 'downloaded again');
  assert.deepEqual(await cacheList(), [{ path: '/models/drop-once.gguf', size: MODEL_SIZE, sha256: MODEL_SHA256 }]);
  await assertUsable('a corrupt cache entry');
});

test('corrupt cache entry (header overwritten): typed parse error, evicted, downloaded again', { skip }, async () => {
  assert.equal(await corruptCached('/models/drop-once.gguf', 0, [0x58, 0x58, 0x58, 0x58]), MODEL_SIZE);
  const r = await loadInPage('/models/drop-once.gguf');
  assert.deepEqual(r.info, { source: 'network', sha256: MODEL_SHA256, file_size: MODEL_SIZE }, JSON.stringify(r));
  assert.ok(r.logs.some((l) => /cache entry .* rejected/.test(l)), JSON.stringify(r.logs));
  // A second load trusts the fresh entry again.
  const again = await loadInPage('/models/drop-once.gguf');
  assert.equal(again.info && again.info.source, 'cache', JSON.stringify(again));
  await assertUsable('a corrupt header in the cache');
});

test('two tabs load the cached model at once: both from the cache, nothing evicted or downloaded', { skip }, async () => {
  // A second tab of the same origin (same OPFS), its own engine. Its load starts while the
  // first tab's is in progress (its crash marker is on disk): a load in progress is not a crash.
  const page2 = await context.newPage();
  try {
    await page2.goto(`${web.origin}/tests/js/pages/router.html`);
    await page2.waitForFunction(() => document.body.dataset.ready === '1', null, { timeout: 30_000 });
    await page2.evaluate(async () => {
      window.__logs = [];
      window.engine = await window.edgellm.createEngine({ cache: true, onLog: (level, message) => window.__logs.push(`${level}: ${message}`) });
    });
    web.resetStats();
    const first = loadInPage('/models/drop-once.gguf');
    const second = page2.evaluate(async () => {
      const root = await navigator.storage.getDirectory();
      const dir = await root.getDirectoryHandle('edgellm-cache', { create: true });
      const until = performance.now() + 20_000;
      let seen = false;
      while (!seen && performance.now() < until) {
        for await (const [name] of dir.entries()) seen ||= name.endsWith('.loading');
        if (!seen) await new Promise((res) => setTimeout(res, 5));
      }
      try {
        const info = await window.engine.load('/models/drop-once.gguf');
        return { seen, info: { source: info.source, sha256: info.sha256 }, logs: window.__logs.slice() };
      } catch (e) {
        return { seen, error: { code: e.code, message: e.message }, logs: window.__logs.slice() };
      }
    });
    const [a, b] = await Promise.all([first, second]);
    assert.equal(b.seen, true, 'the second load started while the first one was in progress');
    assert.deepEqual(a.info, { source: 'cache', sha256: MODEL_SHA256, file_size: MODEL_SIZE }, JSON.stringify(a));
    assert.deepEqual(b.info, { source: 'cache', sha256: MODEL_SHA256 }, JSON.stringify(b));
    assert.ok(![...a.logs, ...b.logs].some((l) => /did not finish|dropped|rejected/.test(l)), JSON.stringify([a.logs, b.logs]));
    assert.equal(web.stats.bytes['/models/drop-once.gguf'] || 0, 0, 'nothing downloaded');
    assert.deepEqual(await cacheList(), [{ path: '/models/drop-once.gguf', size: MODEL_SIZE, sha256: MODEL_SHA256 }]);
    assert.ok(!(await opfsFiles()).some((f) => f.endsWith('.loading')), 'both markers are gone');
  } finally {
    await page2.evaluate(() => window.engine && window.engine.terminate()).catch(() => {});
    await page2.close();
  }
  await assertUsable('two tabs loading at once');
});

test('a cache entry that crashes the engine mid-load: ENGINE_CRASHED once, evicted, never a crash loop', { skip }, async () => {
  const r = await inPage(async (engine) => {
    await engine._debugFault({ at: 'load', after: 8, fault: 'panic' });
    try {
      await engine.load('/models/drop-once.gguf');
      return { loaded: true };
    } catch (e) {
      return { code: e.code, restarts: engine.restarts };
    }
  });
  assert.equal(r.code, 'ENGINE_CRASHED', JSON.stringify(r));
  assert.deepEqual(await cacheList(), [], 'the crashing entry is gone');
  const next = await loadInPage('/models/drop-once.gguf');
  assert.deepEqual(next.info, { source: 'network', sha256: MODEL_SHA256, file_size: MODEL_SIZE }, JSON.stringify(next));
  await assertUsable('a crash during a cache load');
});

test('an engine killed mid-load (stuck, then terminated): the crash marker evicts the entry at the next load', { skip }, async () => {
  // The worker blocks inside the load; the abort cannot reach it, so the client terminates it
  // after the grace period. Nothing in the worker ran to evict the entry: only the marker knows.
  const r = await inPage(async (engine, grace) => {
    const before = engine.restarts;
    await engine._debugFault({ at: 'load', after: 8, fault: 'stall', ms: 30_000 });
    const ac = new AbortController();
    const t0 = performance.now();
    const p = engine.load('/models/drop-once.gguf', { signal: ac.signal });
    await new Promise((res) => setTimeout(res, 1500)); // well inside the stall
    const tAbort = performance.now();
    ac.abort();
    let code = null;
    try {
      await p;
    } catch (e) {
      code = e.code;
    }
    const settled = performance.now() - tAbort;
    // The worker is terminated after the grace period; wait for it, bounded.
    const until = performance.now() + grace + 5000;
    while (engine.restarts === before && performance.now() < until) await new Promise((res) => setTimeout(res, 50));
    return { code, settled, replaced: engine.restarts - before, elapsed: performance.now() - t0 };
  }, GRACE_MS);
  assert.equal(r.code, 'ABORTED', JSON.stringify(r));
  assert.ok(r.settled < GRACE_MS, `the load rejected ${r.settled} ms after the abort`);
  assert.equal(r.replaced, 1, 'the stuck worker was terminated once');
  const files = await opfsFiles();
  assert.ok(files.some((f) => f.endsWith('.loading')), `the crash marker is left behind: ${files}`);
  const next = await loadInPage('/models/drop-once.gguf');
  assert.deepEqual(next.info, { source: 'network', sha256: MODEL_SHA256, file_size: MODEL_SIZE }, JSON.stringify(next));
  assert.ok(next.logs.some((l) => /did not finish/.test(l)), JSON.stringify(next.logs));
  assert.ok(!(await opfsFiles()).some((f) => f.endsWith('.loading')), 'the marker is gone');
  report.stuck_load_abort_ms = Math.round(r.settled);
  await assertUsable('a worker killed during a cache load');
});

test('OPFS quota exceeded: the model loads from the network, nothing partial is kept; caching resumes with room', { skip }, async () => {
  await inPage(async (engine) => engine.cache.clear());
  await cdp.send('Storage.overrideQuotaForOrigin', { origin: web.origin, quotaSize: 32 << 20 });
  try {
    const r = await loadInPage('/models/good.gguf');
    assert.deepEqual(r.info, { source: 'network', sha256: MODEL_SHA256, file_size: MODEL_SIZE }, JSON.stringify(r));
    assert.ok(r.logs.some((l) => /cache write failed|not caching/.test(l)), JSON.stringify(r.logs));
    assert.deepEqual(await cacheList(), []);
    assert.deepEqual(await opfsFiles(), [], 'no partial bytes, record or marker left');
    await assertUsable('a full disk');
  } finally {
    await cdp.send('Storage.overrideQuotaForOrigin', { origin: web.origin });
  }
  const r = await loadInPage('/models/good.gguf');
  assert.equal(r.info && r.info.source, 'network', JSON.stringify(r));
  assert.deepEqual(await cacheList(), [{ path: '/models/good.gguf', size: MODEL_SIZE, sha256: MODEL_SHA256 }]);
});

test('worker crash mid-generation: the tokens streamed so far stay, ENGINE_CRASHED, the next request reloads and is right', { skip }, async () => {
  const r = await inPage(async (engine, req) => {
    await engine._debugFault({ at: 'decode', after: 4, fault: 'panic' });
    const stream = await engine.completions.create({ ...req, stream: true });
    const texts = [];
    let code = null;
    try {
      for await (const c of stream) if (c.choices[0] && c.choices[0].text) texts.push(c.choices[0].text);
    } catch (e) {
      code = e.code;
    }
    return { code, texts, modelAfter: engine.model, restarts: engine.restarts };
  }, REF_REQUEST);
  assert.equal(r.code, 'ENGINE_CRASHED', JSON.stringify(r));
  assert.equal(r.modelAfter, null);
  // The crash came after the 4th token was posted: those 4 reached the app, and they are the
  // reference's first tokens (nothing emitted was lost or changed).
  assert.ok(r.texts.length >= 3 && r.texts.length <= 4, JSON.stringify(r.texts));
  assert.ok(reference.startsWith(r.texts.join('')), `${JSON.stringify(r.texts)} vs ${JSON.stringify(reference)}`);
  await assertUsable('a crash mid-generation');
  assert.equal(await inPage(async (engine) => engine.model && engine.model.source), 'cache', 'reloaded from the cache');
});

test('abort during prefill: ABORTED before any token; the same prompt afterwards gives the same text as a fresh run', { skip }, async () => {
  const long = `${'The history of the city is long and full of change. '.repeat(20)}\nIn one word, the city is`;
  const fresh = await inPage(async (engine, prompt) => (await engine.completions.create({ prompt, max_tokens: 6, temperature: 0 })).choices[0].text, long);
  await refText(); // another prompt in between: the next long run starts from a different cache
  const r = await inPage(async (engine, prompt) => {
    const ac = new AbortController();
    const stream = await engine.completions.create({ prompt, max_tokens: 6, temperature: 0, stream: true, signal: ac.signal });
    let tokens = 0;
    let code = null;
    let tAbort = 0;
    setTimeout(() => {
      tAbort = performance.now();
      ac.abort();
    }, 60);
    try {
      for await (const c of stream) if (c.choices[0] && c.choices[0].text) tokens++;
    } catch (e) {
      code = e.code;
    }
    return { code, tokens, settled: performance.now() - tAbort };
  }, long);
  assert.equal(r.code, 'ABORTED', JSON.stringify(r));
  assert.equal(r.tokens, 0, 'aborted inside the prefill');
  assert.ok(r.settled < GRACE_MS, `settled ${r.settled} ms after the abort`);
  report.prefill_abort_ms = Math.round(r.settled);
  const again = await inPage(async (engine, prompt) => (await engine.completions.create({ prompt, max_tokens: 6, temperature: 0 })).choices[0].text, long);
  assert.equal(again, fresh, 'a partial prefill left nothing wrong behind');
  await assertUsable('an abort during prefill');
});

test('abort during decode: ABORTED within 100 ms, no chunk after it, the next request works', { skip }, async () => {
  report.decode_abort_ms = Number((await checkAbortMidStream(page, { engineAt: 'engine', maxLatencyMs: 100 })).toFixed(2));
  await assertUsable('an abort during decode');
});

test('abort during a stuck call: ABORTED at once, the stuck worker is replaced after the grace period, the next request is right', { skip }, async () => {
  const r = await inPage(async (engine, { req, grace }) => {
    const before = engine.restarts;
    await engine._debugFault({ at: 'decode', after: 2, fault: 'stall', ms: 30_000 });
    const ac = new AbortController();
    const stream = await engine.completions.create({ ...req, stream: true, signal: ac.signal });
    const texts = [];
    let code = null;
    let tAbort = 0;
    // Two tokens arrive, then the worker is stuck: abort 500 ms after the second one.
    try {
      for await (const c of stream) {
        if (c.choices[0] && c.choices[0].text) texts.push(c.choices[0].text);
        if (texts.length === 2 && !tAbort) {
          tAbort = -1;
          setTimeout(() => {
            tAbort = performance.now();
            ac.abort();
          }, 500);
        }
      }
    } catch (e) {
      code = e.code;
    }
    const settled = performance.now() - tAbort;
    const until = performance.now() + grace + 5000;
    while (engine.restarts === before && performance.now() < until) await new Promise((res) => setTimeout(res, 50));
    return { code, texts, settled, replaced: engine.restarts - before, replacedAfter: performance.now() - tAbort };
  }, { req: REF_REQUEST, grace: GRACE_MS });
  assert.equal(r.code, 'ABORTED', JSON.stringify(r));
  assert.ok(r.texts.length >= 1 && r.texts.length <= 2, JSON.stringify(r.texts));
  assert.ok(reference.startsWith(r.texts.join('')));
  assert.ok(r.settled < 100, `the request rejected ${r.settled} ms after the abort`);
  assert.equal(r.replaced, 1, 'the stuck worker was terminated once');
  assert.ok(r.replacedAfter >= GRACE_MS, `replaced ${r.replacedAfter} ms after the abort`);
  report.stuck_abort_ms = Math.round(r.settled);
  await assertUsable('an abort during a stuck call');
});

test('server killed mid-stream: the text so far is kept, finish_reason error (REMOTE_INTERRUPTED); local works after', { skip: noServer }, async () => {
  await inPage(async (engine, baseURL) => void engine.setRoute({ mode: 'remote-only', remote: { baseURL } }), edge.baseURL);
  try {
    // The page reads the stream; Node kills the server once the page has seen a token.
    const done = inPage(async (engine, req) => {
      const stream = await engine.completions.create({ ...req, max_tokens: 48, stream: true });
      const chunks = [];
      for await (const c of stream) {
        chunks.push({ text: c.choices[0] ? c.choices[0].text || '' : '', finish: c.choices[0] ? c.choices[0].finish_reason : null, error: c.error ? c.error.code : null, target: c.route ? c.route.target : null });
        if (chunks.length === 1) window.__firstRemoteToken = true;
      }
      return chunks;
    }, REF_REQUEST);
    await page.waitForFunction(() => window.__firstRemoteToken === true, null, { timeout: 60_000 });
    await edge.kill('SIGKILL');
    const chunks = await done;
    const last = chunks[chunks.length - 1];
    assert.equal(last.finish, 'error', JSON.stringify(last));
    assert.equal(last.error, 'REMOTE_INTERRUPTED');
    assert.ok(chunks.every((c) => c.target === 'remote'));
    const text = chunks.map((c) => c.text).join('');
    assert.ok(text.length > 0, 'the text before the kill is kept');
    assert.ok(chunks.filter((c) => c.text).length < 48, 'the stream ended early');
    // The server runs the same core: what came before the kill is the reference's beginning.
    assert.ok(reference.startsWith(text) || text.startsWith(reference), `${JSON.stringify(text)} vs ${JSON.stringify(reference)}`);
  } finally {
    await inPage(async (engine) => void engine.setRoute(null));
  }
  await assertUsable('the server dying mid-stream');
});
