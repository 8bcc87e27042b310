// Browser tests: the demo page (www/) in real Chromium (playwright-core + /usr/bin/chromium),
// the real model served from 127.0.0.1 by the test server.
//
// One persistent browser profile for the whole file, so OPFS survives a page reload. Steps run
// in order and share the page; each is a separate test for reporting.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { startServer } from './server.js';
import { ROOT, MODEL, MODEL_SIZE, MODEL_SHA256, CHROMIUM, CHROMIUM_ARGS, REQUIRED, modelMissing, wasmMissing, cliPath, cliCanGenerate } from './helpers.js';
import { nativeGreedy, nativeGenerate, GREEDY_PROMPT, GREEDY_TOKENS } from './native.js';
import { checkAbortMidStream } from './browsers/checks.js';

const skip = modelMissing() || wasmMissing() || (!fs.existsSync(CHROMIUM) && `no Chromium at ${CHROMIUM}`);
const noCli = skip || (cliCanGenerate() ? false : REQUIRED ? false : `native CLI with 'generate' not built (${cliPath() || 'none'})`);
const LONG_TASK_MS = 50;
const TIER_TOKENS = 24; // greedy tokens compared across the SIMD tiers and the native CLI

let srv;
let context;
let page;
let userDataDir;
const report = {};

async function openPage(query = '') {
  await page.goto(`${srv.origin}/www/index.html${query}`);
  await page.waitForFunction(() => ['empty', 'failed'].includes(document.body.dataset.state), null, { timeout: 60_000 });
  assert.equal(await page.evaluate(() => document.body.dataset.state), 'empty', await page.textContent('#status'));
}

/** Loads `url` through the page's form; resolves with {state, model, error, progress, longTasks}. */
async function loadViaUi(url, timeout = 180_000) {
  await page.evaluate(() => (window.__longTasks.length = 0));
  await page.fill('#model-url', url);
  await page.click('#load-url');
  await page.waitForFunction(() => document.body.dataset.state === 'loading', null, { timeout: 10_000 }).catch(() => {});
  await page.waitForFunction(() => ['ready', 'empty'].includes(document.body.dataset.state), null, { timeout });
  return page.evaluate(() => ({
    state: document.body.dataset.state,
    model: window.edgellmApp.lastModel,
    error: window.edgellmApp.lastError,
    progress: window.edgellmApp.progress,
    longTasks: window.__longTasks.slice(),
    code: document.getElementById('status').dataset.code || null,
  }));
}

/** Sends GREEDY_PROMPT as a raw greedy turn through the page; resolves when the reply is done. */
async function generateViaUi() {
  await page.evaluate(() => (window.__longTasks.length = 0));
  await page.check('#raw');
  await page.fill('#temperature', '0');
  await page.fill('#max-tokens', String(GREEDY_TOKENS));
  await page.fill('#prompt', GREEDY_PROMPT);
  // Count the DOM updates of the reply as they stream in.
  await page.evaluate(() => {
    window.__deltas = 0;
    if (window.__deltaObserver) window.__deltaObserver.disconnect();
    window.__deltaObserver = new MutationObserver(() => window.__deltas++);
    window.__deltaObserver.observe(document.getElementById('transcript'), { subtree: true, characterData: true, childList: true });
  });
  await page.click('#send');
  await page.waitForFunction(() => document.body.dataset.state === 'generating', null, { timeout: 10_000 }).catch(() => {});
  await page.waitForFunction(() => document.body.dataset.state === 'ready', null, { timeout: 300_000 });
  return page.evaluate(() => {
    const msgs = document.querySelectorAll('#transcript .msg.assistant');
    return { text: msgs[msgs.length - 1].textContent, usage: window.edgellmApp.lastUsage, deltas: window.__deltas, longTasks: window.__longTasks.slice(), err: window.edgellmApp.lastError, shown: document.getElementById('u-decode').textContent };
  });
}

function assertMonotonic(progress, total) {
  assert.ok(progress.length >= 2, `progress events: ${progress.length}`);
  for (let i = 1; i < progress.length; i++) {
    if (progress[i].phase === progress[i - 1].phase) assert.ok(progress[i].loaded >= progress[i - 1].loaded, `progress went back at event ${i}`);
  }
  const last = progress[progress.length - 1];
  assert.equal(last.loaded, total);
  assert.equal(last.total, total);
}

const longOnes = (tasks) => tasks.filter((t) => t.duration > LONG_TASK_MS);

/**
 * Runs a measured step (`run(attempt)` resolves with an object holding `longTasks`) and, if the
 * page saw a long task, runs it once more and returns the second result, which the caller checks.
 * Why: quiet, the page's longest main-thread task during a load is ~30 ms and during generation
 * less (measured 2026-12-03 with a MessageChannel gap probe); on a shared 2-core machine another
 * process can stretch one of those past 50 ms (seen in CI, and reproduced with one busy core
 * beside the suite). A task that is really long is long in both runs, so the check still fails.
 */
async function steady(what, run) {
  const first = await run(0);
  const long = longOnes(first.longTasks);
  if (long.length === 0) return first;
  console.log(`# ${what}: long tasks ${JSON.stringify(long)} in the first run; running the step once more`);
  report[`${what}_first_run_long_tasks`] = long.length;
  return run(1);
}

before(async () => {
  if (skip) return;
  const { chromium } = await import('playwright-core');
  srv = await startServer({ root: ROOT, modelPath: MODEL, dropAt: 40 << 20 });
  userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgellm-chromium-'));
  context = await chromium.launchPersistentContext(userDataDir, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  await context.addInitScript(() => {
    window.__longTasks = [];
    try {
      new PerformanceObserver((list) => {
        for (const e of list.getEntries()) window.__longTasks.push({ start: e.startTime, duration: e.duration });
      }).observe({ type: 'longtask', buffered: true });
    } catch {
      /* no longtask support: the array stays empty */
    }
  });
  page = context.pages()[0] || (await context.newPage());
  page.on('console', (m) => {
    if (m.type() === 'error' || m.type() === 'warning') console.log(`[page ${m.type()}] ${m.text()}`);
  });
  page.on('pageerror', (e) => console.log(`[page error] ${e.message}`));
  await openPage();
});

after(async () => {
  if (context) await context.close();
  if (srv) await srv.close();
  if (userDataDir) fs.rmSync(userDataDir, { recursive: true, force: true });
  if (Object.keys(report).length) console.log(`browser figures: ${JSON.stringify(report)}`);
});

test('the long-task observer works (harness self-check)', { skip }, async () => {
  // A busy timer task on the page (a task run by the page's own event loop; code run through
  // page.evaluate is not attributed as a long task).
  await page.evaluate(() => {
    window.__longTasks.length = 0;
    setTimeout(() => {
      const t = performance.now();
      while (performance.now() - t < 120);
    }, 0);
  });
  await page.waitForFunction(() => window.__longTasks.some((t) => t.duration > 100), null, { timeout: 5000 });
  await page.evaluate(() => (window.__longTasks.length = 0));
});

test('load by URL: monotonic progress to the file size, no long task on the page', { skip }, async () => {
  const r = await steady('load_network', async (attempt) => {
    if (attempt > 0) {
      // The second run must download again: a fresh page, the cache emptied.
      await openPage();
      await page.evaluate(() => window.edgellmApp.engine.cache.clear());
      srv.resetStats();
    }
    const t0 = Date.now();
    const out = await loadViaUi('/models/good.gguf');
    report.load_network_ms = Date.now() - t0;
    return out;
  });
  assert.equal(r.state, 'ready', JSON.stringify(r.error));
  assert.equal(r.model.source, 'network');
  assert.equal(r.model.file_size, MODEL_SIZE);
  assert.equal(r.model.sha256, MODEL_SHA256);
  assertMonotonic(r.progress, MODEL_SIZE);
  assert.ok(r.progress.every((p) => p.phase === 'download'));
  report.load_long_tasks = r.longTasks.length;
  report.load_longest_task_ms = Math.max(0, ...r.longTasks.map((t) => t.duration));
  assert.deepEqual(longOnes(r.longTasks), [], `long tasks during load: ${JSON.stringify(r.longTasks)}`);
  assert.equal(srv.stats.bytes['/models/good.gguf'], MODEL_SIZE);
});

test('streamed generation in the page; greedy output equals the native CLI; no long task', { skip: noCli }, async () => {
  const want = nativeGreedy();
  // Raw turns are left out of the chat context, so a second run of the step gives the same reply.
  const r = await steady('generate', generateViaUi);
  assert.equal(r.err, null);
  assert.equal(r.text, want.text);
  assert.ok(r.deltas >= 3, `the reply streamed in ${r.deltas} DOM updates`);
  assert.equal(r.usage.completion_tokens, want.ids.length);
  assert.equal(r.usage.prompt_tokens, want.prompt_ids.length);
  assert.match(r.shown, /tok\/s$/);
  report.decode_tok_s = Number(r.usage.decode_tokens_per_s.toFixed(2));
  report.prefill_tok_s = Number(r.usage.prefill_tokens_per_s.toFixed(2));
  report.ttft_ms = Math.round(r.usage.ttft_ms);
  report.generate_long_tasks = r.longTasks.length;
  assert.deepEqual(longOnes(r.longTasks), [], `long tasks during generation: ${JSON.stringify(r.longTasks)}`);
});

test('SIMD tiers: the page runs relaxed-simd, simd:"simd128" the fallback; 24 greedy tokens equal in both and in the native CLI', { skip: noCli }, async () => {
  // Chromium 156 ships relaxed SIMD, so 'auto' picks edgellm_relaxed_bg.wasm; a second engine
  // forced to the SIMD128 build loads the same model (from OPFS) and must agree token for token.
  const want = nativeGenerate(GREEDY_PROMPT, TIER_TOKENS);
  const r = await page.evaluate(
    async ({ prompt, n }) => {
      const edgellm = await import('/pkg/src/index.js');
      const req = { prompt, max_tokens: n, temperature: 0 };
      const engine = window.edgellmApp.engine;
      const relaxed = await engine.completions.create(req);
      const fallback = await edgellm.createEngine({ simd: 'simd128' });
      try {
        const model = await fallback.load('/models/good.gguf');
        const simd128 = await fallback.completions.create(req);
        return {
          tiers: [engine.info.simd_tier, fallback.info.simd_tier],
          relaxed: { text: relaxed.choices[0].text, n: relaxed.usage.completion_tokens, tok_s: relaxed.usage.decode_tokens_per_s },
          simd128: { text: simd128.choices[0].text, n: simd128.usage.completion_tokens, tok_s: simd128.usage.decode_tokens_per_s },
          source: model.source,
        };
      } finally {
        fallback.terminate();
      }
    },
    { prompt: GREEDY_PROMPT, n: TIER_TOKENS },
  );
  assert.deepEqual(r.tiers, ['relaxed-simd', 'simd128']);
  assert.equal(r.source, 'cache');
  assert.equal(r.relaxed.text, want.text, 'relaxed-SIMD tier vs native CLI');
  assert.equal(r.simd128.text, want.text, 'SIMD128 tier vs native CLI');
  assert.equal(r.relaxed.n, want.ids.length);
  assert.equal(r.simd128.n, want.ids.length);
  report.decode_tok_s_relaxed = Number(r.relaxed.tok_s.toFixed(2));
  report.decode_tok_s_simd128 = Number(r.simd128.tok_s.toFixed(2));
});

test('abort mid-generation settles within 100 ms, chunks stop, the next request works', { skip }, async () => {
  report.abort_latency_ms = Number((await checkAbortMidStream(page, { engineAt: 'edgellmApp.engine', maxLatencyMs: 100 })).toFixed(2));
});

test('after a reload the model comes from the cache with zero network bytes', { skip }, async () => {
  const r = await steady('load_cache', async () => {
    await openPage();
    srv.resetStats();
    const t0 = Date.now();
    const out = await loadViaUi('/models/good.gguf');
    report.load_cache_ms = Date.now() - t0;
    return out;
  });
  assert.equal(r.state, 'ready', JSON.stringify(r.error));
  assert.equal(r.model.source, 'cache');
  assert.equal(r.model.sha256, MODEL_SHA256);
  assertMonotonic(r.progress, MODEL_SIZE);
  assert.equal(srv.stats.requests['/models/good.gguf'] || 0, 0, 'requests for the model');
  assert.equal(srv.stats.bytes['/models/good.gguf'] || 0, 0, 'network bytes for the model');
  assert.deepEqual(longOnes(r.longTasks), [], `long tasks during the cached load: ${JSON.stringify(r.longTasks)}`);
  const entries = await page.evaluate(() => window.edgellmApp.engine.cache.list());
  assert.equal(entries.length, 1);
  assert.equal(entries[0].size, MODEL_SIZE);
  assert.equal(entries[0].sha256, MODEL_SHA256);
});

test('404, non-GGUF, truncated GGUF and a cut connection give typed errors; a good model loads after', { skip }, async () => {
  // Those refused from the header keep the model loaded before (the page stays ready); a
  // connection cut in the weights comes after the engine freed it.
  const cases = [
    ['/models/missing.gguf', 'NETWORK', 'ready'],
    ['/models/not-gguf.bin', 'GGUF_INVALID', 'ready'],
    ['/models/truncated.gguf', 'GGUF_TRUNCATED', 'ready'],
    ['/models/tiny-truncated.gguf', 'GGUF_TRUNCATED', 'ready'],
    ['/models/drop-always.gguf', 'NETWORK', 'empty'],
  ];
  for (const [url, code, state] of cases) {
    const r = await loadViaUi(url, 60_000);
    assert.equal(r.state, state, url);
    assert.equal(r.error && r.error.code, code, `${url}: ${JSON.stringify(r.error)}`);
    assert.equal(r.code, code, `${url}: the page shows the code`);
  }
  // Nothing of the failed downloads was trusted by the cache.
  const entries = await page.evaluate(() => window.edgellmApp.engine.cache.list());
  assert.deepEqual(entries.map((e) => new URL(e.url).pathname), ['/models/good.gguf']);
  // Same engine, a good model: this URL drops the connection once and must resume with Range.
  srv.resetDropOnce();
  srv.resetStats();
  const r = await loadViaUi('/models/drop-once.gguf');
  assert.equal(r.state, 'ready', JSON.stringify(r.error));
  assert.equal(r.model.sha256, MODEL_SHA256);
  assertMonotonic(r.progress, MODEL_SIZE);
  const ranged = srv.stats.log.filter((l) => l.path === '/models/drop-once.gguf' && l.range);
  assert.equal(ranged.length, 1, 'one Range request resumed the download');
});

test('load from a File chosen in the page', { skip }, async () => {
  const r = await steady('load_file', async (attempt) => {
    if (attempt > 0) await openPage(); // a fresh page: its file input takes the same file again
    await page.evaluate(() => (window.__longTasks.length = 0));
    const t0 = Date.now();
    await page.setInputFiles('#model-file', MODEL);
    await page.waitForFunction(() => document.body.dataset.state === 'loading', null, { timeout: 10_000 }).catch(() => {});
    await page.waitForFunction(() => ['ready', 'empty'].includes(document.body.dataset.state), null, { timeout: 180_000 });
    report.load_file_ms = Date.now() - t0;
    return page.evaluate(() => ({ model: window.edgellmApp.lastModel, progress: window.edgellmApp.progress, longTasks: window.__longTasks.slice(), error: window.edgellmApp.lastError }));
  });
  assert.equal(r.model && r.model.source, 'file', JSON.stringify(r.error));
  assert.equal(r.model.sha256, MODEL_SHA256);
  assertMonotonic(r.progress, MODEL_SIZE);
  assert.deepEqual(longOnes(r.longTasks), [], `long tasks during the file load: ${JSON.stringify(r.longTasks)}`);
});

test('a wasm panic becomes ENGINE_CRASHED; the engine restarts and reloads the model', { skip }, async () => {
  const r = await page.evaluate(async () => {
    const engine = window.edgellmApp.engine;
    let err = null;
    try {
      await engine._debugPanic();
    } catch (e) {
      err = { code: e.code, message: e.message };
    }
    const restarts = engine.restarts;
    const modelAfterCrash = engine.model;
    // The next request starts a fresh worker and reloads the last model (the File) first.
    const next = await engine.completions.create({ prompt: 'Hello', max_tokens: 2, temperature: 0 });
    const status = await engine.status();
    return { err, restarts, modelAfterCrash, n: next.usage.completion_tokens, loaded: status.loaded, source: engine.model.source };
  });
  assert.equal(r.err && r.err.code, 'ENGINE_CRASHED');
  assert.match(r.err.message, /deliberate panic/);
  assert.equal(r.restarts, 1);
  assert.equal(r.modelAfterCrash, null);
  assert.equal(r.n, 2);
  assert.equal(r.loaded, true);
  assert.equal(r.source, 'file');
});
