// The demo page (www/) end to end in real Chromium (playwright-core + /usr/bin/chromium): the
// page served by www/serve.js itself (COOP/COEP), the real model, and the native server
// (`edgellm serve`, CORS for the page's origin) for the routing cases — all on 127.0.0.1,
// started and stopped here. Steps share one page and run in order:
//
//   load by URL → chat round trip (figures on screen = the answer's usage; memory gauge = the
//   engine's figures) → stop, regenerate (multi-turn) → screenshots → over the KV budget goes
//   to the server, private refuses with a typed error and sends nothing → offline reload (network
//   blocked, static server stopped) still chats → no console errors.
//
// Screenshots go to out/screenshots/ (git-ignored).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';

import { ROOT, MODEL_SIZE, CHROMIUM, CHROMIUM_ARGS, REQUIRED, modelMissing, wasmMissing, cliPath } from './helpers.js';
import { startEdgeServer, serverRequests, cliCanServe } from './router-helpers.js';
import { fmtMs, fmtTpot, fmtRate, fmtInt, fmtBytes, routeText } from '../../www/format.js';

const skip =
  modelMissing() ||
  wasmMissing() ||
  (!fs.existsSync(CHROMIUM) && `no Chromium at ${CHROMIUM}`) ||
  (cliCanServe() ? false : REQUIRED ? false : `native CLI with 'serve' not built (${cliPath() || 'none'})`);
const SHOTS = path.join(ROOT, 'out/screenshots');

let web; // www/serve.js
let srv; // edgellm serve
let context;
let page;
let userDataDir;
const consoleErrors = [];
const requests = [];
const report = {};

/** Starts `node www/serve.js --port 0`; resolves with its origin once it listens. */
async function startWeb() {
  const proc = spawn(process.execPath, [path.join(ROOT, 'www/serve.js'), '--port', '0', '--host', '127.0.0.1'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`www/serve.js did not start: ${out}`)), 15_000);
    proc.stdout.on('data', (d) => {
      out += d;
      const m = /edgellm demo: (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    proc.on('exit', (code) => reject(new Error(`www/serve.js exited (${code}): ${out}`)));
  });
  const exited = new Promise((r) => proc.on('exit', r));
  return {
    origin: new URL(url).origin,
    async kill() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await exited;
    },
  };
}

const state = () => page.evaluate(() => document.body.dataset.state);
const waitState = (states, timeout = 120_000) => page.waitForFunction((s) => s.includes(document.body.dataset.state), states, { timeout });

/** Types a message in the composer and sends it with Enter; waits for the answer to finish. */
async function ask(text, { timeout = 120_000 } = {}) {
  await page.fill('#prompt', text);
  await page.press('#prompt', 'Enter');
  await waitState(['generating'], 10_000).catch(() => {});
  await waitState(['ready', 'empty'], timeout);
  return page.evaluate(() => {
    const answers = document.querySelectorAll('#transcript .answer');
    const last = answers[answers.length - 1];
    const badge = last.querySelector('.badge.route');
    return {
      answers: answers.length,
      text: last.querySelector('.msg.assistant').textContent,
      code: last.querySelector('.msg.assistant').dataset.code || null,
      error: last.classList.contains('error'),
      badge: badge ? { target: badge.dataset.target, reason: badge.dataset.reason, text: badge.textContent } : null,
      flags: [...last.querySelectorAll('.flag')].map((f) => f.textContent),
      figures: last.querySelector('.figures').textContent,
      reply: window.edgellmApp.lastReply,
      usage: window.edgellmApp.lastUsage,
      route: window.edgellmApp.lastRoute,
      lastError: window.edgellmApp.lastError,
    };
  });
}

async function shot(name, { fullPage = false } = {}) {
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.evaluate(() => {
    const side = document.querySelector('.side');
    if (side) side.scrollTop = 0;
    window.scrollTo(0, 0);
    document.activeElement && document.activeElement.blur();
  });
  // One frame for the chart's canvas to repaint at the new size.
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  const file = path.join(SHOTS, name);
  await page.screenshot({ path: file, fullPage });
  return file;
}

before(async () => {
  if (skip) return;
  const { chromium } = await import('playwright-core');
  web = await startWeb();
  [srv, context] = await Promise.all([
    startEdgeServer(['--cors-origin', web.origin]),
    (async () => {
      userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgellm-demo-'));
      return chromium.launchPersistentContext(userDataDir, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, viewport: { width: 1280, height: 800 } });
    })(),
  ]);
  page = context.pages()[0] || (await context.newPage());
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => consoleErrors.push(`pageerror: ${e.message}`));
  page.on('request', (r) => requests.push(`${r.method()} ${r.url()}`));
  await page.goto(`${web.origin}/www/?server=${encodeURIComponent(srv.baseURL)}`);
  await waitState(['empty', 'failed'], 60_000);
  assert.equal(await state(), 'empty', await page.textContent('#status'));
});

after(async () => {
  if (context) await context.close();
  if (srv) await srv.kill();
  if (web) await web.kill();
  if (userDataDir) fs.rmSync(userDataDir, { recursive: true, force: true });
  if (Object.keys(report).length) console.log(`demo figures: ${JSON.stringify(report)}`);
  if (consoleErrors.length) console.log(`page console errors:\n${consoleErrors.join('\n')}`);
});

test('the page is cross-origin isolated and loads the default model by URL, with progress', { skip }, async () => {
  assert.equal(await page.evaluate(() => self.crossOriginIsolated), true, 'COOP/COEP from www/serve.js');
  // "Will it fit?" (when the engine can estimate): the header's estimate, before any download.
  if (await page.evaluate(() => typeof window.edgellmApp.engine.estimate === 'function')) {
    await page.click('#estimate');
    await page.waitForFunction(() => document.getElementById('estimate-result').dataset.peak, null, { timeout: 30_000 });
    const e = await page.evaluate(async () => ({
      shown: document.getElementById('estimate-result').textContent,
      fits: document.getElementById('estimate-result').dataset.fits,
      est: await window.edgellmApp.engine.estimate(document.getElementById('model-url').value, { kv: { tokens: 4096, dtype: 'f16' } }),
    }));
    assert.ok(e.shown.startsWith(`Needs about ${fmtBytes(e.est.peak)} here (weights ${fmtBytes(e.est.terms.weights)}`), e.shown);
    assert.equal(e.fits, String(e.est.fits));
    report.estimate_peak = e.est.peak;
  }
  const t0 = Date.now();
  await page.click('#load-url');
  await waitState(['ready', 'empty'], 180_000);
  report.load_ms = Date.now() - t0;
  const r = await page.evaluate(() => ({
    model: window.edgellmApp.lastModel,
    progress: window.edgellmApp.progress,
    error: window.edgellmApp.lastError,
    text: document.getElementById('progress-text').textContent,
    source: document.getElementById('model-source').textContent,
  }));
  assert.equal(await state(), 'ready', JSON.stringify(r.error));
  assert.equal(r.model.source, 'network');
  assert.equal(r.model.file_size, MODEL_SIZE);
  const last = r.progress[r.progress.length - 1];
  assert.deepEqual([last.loaded, last.total], [MODEL_SIZE, MODEL_SIZE]);
  for (let i = 1; i < r.progress.length; i++) assert.ok(r.progress[i].loaded >= r.progress[i - 1].loaded, 'progress never goes back');
  assert.match(r.text, new RegExp(fmtBytes(MODEL_SIZE).replace('.', '\\.')));
  assert.match(r.source, /downloaded/);
});

test('the memory gauge draws a ledger snapshot: each term estimated vs measured, against the budget, by level', { skip }, async () => {
  // The gauge's own rendering, fed a snapshot of the ledger's documented shape (the real one is
  // compared with the engine's in the next step when the engine has a ledger).
  const snap = {
    level: 'elevated',
    budget_bytes: 400e6,
    wasm_memory_bytes: 300e6,
    high_water_bytes: 310e6,
    terms: { weights: { estimated: 246e6, measured: 246.5e6 }, kv: { estimated: 20e6, measured: 18e6 }, activations: { estimated: 5e6, measured: null }, runtime: { estimated: 8e6, measured: 9e6 } },
    total: { estimated: 279e6, measured: 273.5e6 },
    load_peak: { estimated: 280e6, measured: 281e6 },
  };
  const r = await page.evaluate(async (s) => {
    const { renderLedger } = await import('./gauge.js');
    const g = document.createElement('div');
    renderLedger(g, s);
    const terms = {};
    for (const row of g.querySelectorAll('tr[data-term]')) {
      terms[row.dataset.term] = {};
      for (const c of row.querySelectorAll('td[data-kind]')) terms[row.dataset.term][c.dataset.kind] = [c.dataset.value, c.textContent];
    }
    const bars = [...g.querySelectorAll('.bar')].map((b) => ({ segs: [...b.querySelectorAll('.seg')].map((x) => [x.className, x.style.width]), mark: b.querySelector('.budget-mark') ? b.querySelector('.budget-mark').style.left : null }));
    return { cls: g.className, level: g.querySelector('[data-field=level]').textContent, terms, bars, hw: g.querySelector('[data-field=high_water_bytes]').dataset.value };
  }, snap);
  assert.equal(r.cls, 'gauge level-elevated');
  assert.equal(r.level, 'elevated');
  assert.deepEqual(r.terms.kv, { estimated: ['20000000', fmtBytes(20e6)], measured: ['18000000', fmtBytes(18e6)] });
  assert.deepEqual(r.terms.activations.measured, ['', '–'], 'a term not measured shows a dash, not a number');
  assert.deepEqual(r.terms.total.measured, ['273500000', fmtBytes(273.5e6)]);
  assert.equal(r.hw, '310000000');
  // Against the budget: the measured terms, the budget at the end of the scale.
  assert.equal(r.bars.length, 3);
  assert.deepEqual(r.bars[0].segs.map((x) => x[0]), ['seg seg-weights', 'seg seg-kv', 'seg seg-runtime']);
  assert.equal(r.bars[0].segs[0][1], '61.625%'); // 246.5 MB of the 400 MB budget
  assert.equal(r.bars[0].mark, '100%');
  // The split, estimated vs measured, at the scale of the larger total (279 MB).
  assert.deepEqual(r.bars[1].segs.map((x) => x[0]), ['seg seg-weights', 'seg seg-kv', 'seg seg-activations', 'seg seg-runtime']);
  assert.equal(r.bars[1].segs[0][1], `${((246e6 / 279e6) * 100).toFixed(3).replace(/0+$/, '')}%`);
  assert.deepEqual(r.bars[2].segs.map((x) => x[0]), ['seg seg-weights', 'seg seg-kv', 'seg seg-runtime']);
  assert.equal(r.bars[2].mark, null);
});

test('markdown-ish rendering builds DOM nodes: code blocks, inline code, bold; model text never becomes markup', { skip }, async () => {
  const text = 'Here: <b>not bold</b> `x < 1` and **strong**.\n```js\nconst s = "<img src=x onerror=alert(1)>";\n```\nDone.';
  const r = await page.evaluate(async (t) => {
    const { StreamRenderer } = await import('./markdown.js');
    const out = [];
    // Whole, and split at every possible point into streamed pieces of 1..7 characters.
    for (const step of [t.length, 1, 2, 3, 7]) {
      const root = document.createElement('div');
      const r = new StreamRenderer(root);
      for (let i = 0; i < t.length; i += step) r.push(t.slice(i, i + step));
      r.end();
      out.push({
        tags: [...root.querySelectorAll('*')].map((e) => e.tagName.toLowerCase()),
        code: [...root.querySelectorAll('pre code')].map((c) => [c.dataset.lang, c.textContent]),
        inline: [...root.querySelectorAll('code.inline')].map((c) => c.textContent),
        strong: [...root.querySelectorAll('strong')].map((c) => c.textContent),
        text: root.textContent,
      });
    }
    return out;
  }, text);
  for (const x of r) {
    assert.deepEqual(x, r[0], 'the same DOM whatever the chunking');
  }
  const x = r[0];
  assert.deepEqual(x.code, [['js', 'const s = "<img src=x onerror=alert(1)>";\n']]);
  assert.deepEqual(x.inline, ['x < 1']);
  assert.deepEqual(x.strong, ['strong']);
  assert.ok(!x.tags.includes('img') && !x.tags.includes('b'), x.tags.join(','));
  assert.match(x.text, /^Here: <b>not bold<\/b> x < 1 and strong\./);
  assert.match(x.text, /Done\.$/);
});

test('a chat round trip with the real model: streamed answer, figures = the usage, memory = the engine', { skip }, async () => {
  await page.fill('#temperature', '0');
  await page.fill('#max-tokens', '12');
  const a = await ask('Write a haiku about the sea.');
  assert.equal(a.error, false, JSON.stringify(a.lastError));
  assert.ok(a.reply.length > 0, 'the model answered');
  const norm = (s) => s.replace(/```[^\n]*\n?/g, '').replace(/[`*\s]/g, '');
  assert.equal(norm(a.text), norm(a.reply), 'what is shown is what was streamed');
  assert.deepEqual(a.badge && [a.badge.target, a.badge.reason], ['local', 'prefer-local'], JSON.stringify(a.badge));
  // The metrics panel shows this answer's usage, formatted by the page's own formatter.
  const shown = await page.evaluate(() => {
    const t = (id) => document.getElementById(id).textContent;
    return { usage: JSON.parse(document.getElementById('metrics').dataset.usage), ttft: t('u-ttft'), tpot: t('u-tpot'), prefill: t('u-prefill'), decode: t('u-decode'), prompt: t('u-prompt'), completion: t('u-completion') };
  });
  const u = a.usage;
  assert.deepEqual(shown.usage, u);
  assert.equal(shown.ttft, fmtMs(u.ttft_ms));
  assert.equal(shown.tpot, fmtTpot(u.tpot_ms));
  assert.equal(shown.prefill, fmtRate(u.prefill_tokens_per_s));
  assert.equal(shown.decode, fmtRate(u.decode_tokens_per_s));
  assert.equal(shown.prompt, fmtInt(u.prompt_tokens));
  assert.equal(shown.completion, fmtInt(u.completion_tokens));
  assert.ok(u.ttft_ms > 0 && u.completion_tokens >= 1 && u.completion_tokens <= 12, JSON.stringify(u));
  assert.ok(a.figures.includes(fmtMs(u.ttft_ms)) && a.figures.includes(fmtTpot(u.tpot_ms)), a.figures);
  report.ttft_ms = Math.round(u.ttft_ms);
  report.decode_tok_s = Number(u.decode_tokens_per_s.toFixed(1));
  // The live chart got one point per streamed chunk after the first.
  const chart = await page.evaluate(() => ({ points: window.edgellmApp.chart.points.length, times: window.edgellmApp.chart.times.length, summary: document.getElementById('tps-summary').textContent }));
  assert.ok(chart.points >= 1 && chart.points === chart.times - 1, JSON.stringify(chart));
  assert.match(chart.summary, /peak .* sustained .* tok\/s/);

  // The memory gauge: the engine's latest memory snapshot when the ledger exists; otherwise
  // what the engine reports (wasm memory, weights from the header) and nothing invented.
  const mem = await page.evaluate(async () => {
    const app = window.edgellmApp;
    const g = document.getElementById('memory');
    const fields = {};
    for (const e of g.querySelectorAll('[data-field]')) fields[e.dataset.field] = { value: e.dataset.value ?? null, text: e.textContent };
    const terms = {};
    for (const row of g.querySelectorAll('tr[data-term]')) {
      terms[row.dataset.term] = {};
      for (const c of row.querySelectorAll('td[data-kind]')) terms[row.dataset.term][c.dataset.kind] = { value: c.dataset.value, text: c.textContent };
    }
    const snapshot = app.ledger ? await app.engine.memory() : null;
    const status = await app.engine.status();
    return { ledger: g.dataset.ledger, level: g.dataset.level, fields, terms, snapshot, status };
  });
  const asShown = (v) => (typeof v === 'number' ? String(v) : '');
  if (mem.ledger === '1') {
    const s = mem.snapshot;
    assert.equal(mem.level, s.level);
    for (const t of ['weights', 'kv', 'activations', 'runtime']) {
      for (const k of ['estimated', 'measured']) {
        assert.equal(mem.terms[t][k].value, asShown(s.terms[t][k]), `${t}.${k}`);
        assert.equal(mem.terms[t][k].text, fmtBytes(s.terms[t][k]), `${t}.${k} text`);
      }
    }
    for (const k of ['estimated', 'measured']) {
      assert.equal(mem.terms.total[k].value, asShown(s.total[k]));
      assert.equal(mem.terms.load_peak[k].value, asShown(s.load_peak[k]));
    }
    assert.equal(mem.fields.wasm_memory_bytes.value, asShown(s.wasm_memory_bytes));
    assert.equal(mem.fields.high_water_bytes.value, asShown(s.high_water_bytes));
    report.memory_ledger = 'shown';
  } else {
    assert.equal(mem.ledger, '0');
    assert.equal(mem.fields.wasm_memory_bytes.value, String(mem.status.wasm_memory_bytes));
    assert.equal(mem.fields.wasm_memory_bytes.text, fmtBytes(mem.status.wasm_memory_bytes));
    assert.equal(mem.fields.weights_bytes.value, String(mem.status.model.weights_bytes));
    report.memory_ledger = 'absent in this engine build (wasm memory + header weights shown)';
  }
  // KV occupancy: the engine's own figures when it reports them.
  const kv = await page.evaluate(() => ({ source: document.getElementById('kv').dataset.source, held: document.getElementById('kv-held').dataset.value, evicted: document.getElementById('kv-evicted').dataset.value }));
  if (u.kv) assert.deepEqual(kv, { source: 'engine', held: String(u.kv.tokens_held), evicted: String(u.kv.evicted) });
  else assert.deepEqual(kv, { source: 'usage', held: String(u.prompt_tokens + u.completion_tokens), evicted: '' });
  report.kv = u.kv ? 'engine' : 'from usage (engine reports none)';
});

test('stop keeps the partial answer; regenerate re-asks with the conversation so far', { skip }, async () => {
  const first = await page.evaluate(() => window.edgellmApp.lastUsage);
  await page.fill('#max-tokens', '64');
  await page.fill('#prompt', 'Tell me a long story about a dragon who learns to cook.');
  await page.click('#send');
  // Stop after a few streamed characters.
  await page.waitForFunction(() => {
    const a = document.querySelectorAll('#transcript .msg.assistant');
    return a.length && a[a.length - 1].textContent.length >= 8;
  }, null, { timeout: 60_000 });
  const t0 = Date.now();
  await page.click('#stop');
  await waitState(['ready'], 5_000);
  report.stop_ms = Date.now() - t0;
  const stopped = await page.evaluate(() => {
    const answers = document.querySelectorAll('#transcript .answer');
    const last = answers[answers.length - 1];
    return { n: answers.length, flags: [...last.querySelectorAll('.flag')].map((f) => f.textContent), text: last.querySelector('.msg.assistant').textContent, err: window.edgellmApp.lastError };
  });
  assert.equal(stopped.err && stopped.err.code, 'ABORTED');
  assert.deepEqual(stopped.flags, ['stopped']);
  assert.ok(stopped.text.length >= 8, 'the partial answer stays');
  assert.equal(stopped.n, 2);

  await page.fill('#max-tokens', '8');
  await page.click('#regenerate');
  await waitState(['generating'], 10_000).catch(() => {});
  await waitState(['ready'], 120_000);
  const r = await page.evaluate(() => ({ n: document.querySelectorAll('#transcript .answer').length, usage: window.edgellmApp.lastUsage, err: window.edgellmApp.lastError, flags: [...document.querySelectorAll('#transcript .answer:last-child .flag')].map((f) => f.textContent) }));
  assert.equal(r.err, null);
  assert.equal(r.n, 2, 'the stopped answer was replaced, not added to');
  // Turn 1 (question + answer) is in the prompt of turn 2, through the chat template.
  assert.ok(r.usage.prompt_tokens > first.prompt_tokens + first.completion_tokens, `${r.usage.prompt_tokens} vs ${JSON.stringify(first)}`);
  assert.ok(!r.flags.includes('stopped'));

  report.screenshots = [await shot('demo-1280x800.png')];
  await page.emulateMedia({ colorScheme: 'dark' });
  report.screenshots.push(await shot('demo-dark-1280x800.png'));
  await page.emulateMedia({ colorScheme: 'light' });
  await page.setViewportSize({ width: 390, height: 844 });
  report.screenshots.push(await shot('demo-390x844.png'), await shot('demo-390x844-full.png', { fullPage: true }));
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 0, `no horizontal scrolling at 390 px (${overflow} px too wide)`);
  await page.setViewportSize({ width: 1280, height: 800 });
});

test('over the KV budget under prefer-local: answered by the server; private: a typed error and nothing sent', { skip }, async () => {
  await page.click('#clear');
  await page.fill('#kv-tokens', '24');
  await page.fill('#max-tokens', '8');
  const long = 'Summarise in one sentence: apple banana cherry date elderberry fig grape kiwi lemon mango nectarine orange papaya quince raspberry strawberry.';
  const before0 = await serverRequests(srv);
  const a = await ask(long);
  assert.equal(a.error, false, JSON.stringify(a.lastError));
  assert.deepEqual([a.badge.target, a.badge.reason], ['remote', 'prompt_over_kv_budget'], JSON.stringify(a.badge));
  assert.match(a.badge.text, /server · prompt over the KV budget/);
  assert.ok(a.route.prompt_tokens > 24 && a.route.kv_budget === 24, JSON.stringify(a.route));
  assert.ok(a.reply.length > 0);
  assert.ok((await serverRequests(srv)) > before0, 'the server answered');
  assert.ok(requests.some((q) => q.startsWith('POST') && q.includes(`${srv.url}/v1/chat/completions`)));

  await page.check('#private');
  assert.match(await page.textContent('#where-pill'), /Private/);
  requests.length = 0;
  const before1 = await serverRequests(srv);
  const b = await ask(long);
  assert.equal(b.error, true);
  assert.equal(b.code, 'PRIVATE_REMOTE_FORBIDDEN');
  assert.equal(b.lastError.detail, 'PROMPT_OVER_KV_BUDGET');
  assert.match(b.text, /PRIVATE_REMOTE_FORBIDDEN/);
  assert.match(b.badge.text, /^not sent · this device: prompt over the KV budget · server: private/);
  assert.equal(await page.evaluate(() => document.getElementById('status').dataset.code), 'PRIVATE_REMOTE_FORBIDDEN');
  assert.deepEqual(requests.filter((q) => q.includes(srv.url)), [], 'the browser sent nothing to the server');
  assert.equal(await serverRequests(srv), before1, 'the server received nothing');
  report.screenshots.push(await shot('demo-routing-1280x800.png'));
});

test('offline: after the first visit, a reload without network still loads the model and chats', { skip }, async () => {
  await page.fill('#kv-tokens', '4096');
  await page.uncheck('#private');
  await page.waitForFunction(() => document.body.dataset.offlineReady === '1', null, { timeout: 30_000 });
  // Block the network and stop the static server: only the service worker and the model cache
  // can bring the page back.
  await context.setOffline(true);
  await web.kill();
  requests.length = 0;
  await page.goto(`${web.origin}/www/?autoload=1`);
  await waitState(['ready', 'empty', 'failed'], 120_000);
  const r = await page.evaluate(() => ({ state: document.body.dataset.state, model: window.edgellmApp.lastModel, err: window.edgellmApp.lastError, tag: document.getElementById('model-source').textContent, online: navigator.onLine }));
  assert.equal(r.state, 'ready', JSON.stringify(r.err));
  assert.equal(r.model.source, 'cache');
  assert.equal(r.tag, 'loaded from cache');
  assert.match(await page.textContent('#where-pill'), /Offline/);
  // The settings came back from localStorage (this URL carries none of them).
  const kept = await page.evaluate(() => ['temperature', 'max-tokens', 'kv-tokens', 'server-url'].map((id) => document.getElementById(id).value));
  assert.deepEqual(kept, ['0', '8', '4096', srv.baseURL]);
  const a = await ask('Say hello.');
  assert.equal(a.error, false, JSON.stringify(a.lastError));
  assert.ok(a.reply.length > 0);
  assert.deepEqual([a.badge.target, a.badge.reason], ['local', 'local-only']);
  assert.match(a.badge.text, /offline/);
  report.screenshots.push(await shot('demo-offline-1280x800.png'));
  await context.setOffline(false);
});

test('route badges say where and why, failovers included (format.js, no browser)', () => {
  assert.equal(routeText({ target: 'local', reason: 'prefer-local' }), 'this device · preferred: this device');
  assert.equal(routeText({ target: 'remote', reason: 'prompt_over_kv_budget' }), 'server · prompt over the KV budget');
  assert.equal(routeText({ target: 'local', reason: 'remote_error_503', fallback_from: 'remote' }), 'this device · server error 503 (fell back from server)');
  assert.equal(routeText({ target: 'remote', reason: 'engine_crashed', fallback_from: 'local' }), 'server · the local engine crashed (fell back from this device)');
  assert.equal(routeText({ target: null, reason: 'no_route', ruled_out: { remote: 'private', local: 'prompt_over_kv_budget' } }), 'not sent · this device: prompt over the KV budget · server: private');
});

test('no console errors during the run', { skip }, () => {
  assert.deepEqual(consoleErrors, []);
});
