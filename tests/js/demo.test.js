// The demo page (www/) end to end in real Chromium (playwright-core + /usr/bin/chromium): the
// page served by www/serve.js itself (COOP/COEP), the real chat model (SmolLM2 135M Instruct,
// the catalog's default) and, for the routing cases, a throwaway OpenAI-compatible server on
// 127.0.0.1 whose answer is hostile Markdown — all started and stopped here. Steps share one
// page and run in order, as a user would:
//
//   the catalog (facts, "Will it fit?") → pick the chat model → three questions (answers,
//   metrics, token meter) → edit the first message → copy / regenerate → a second conversation
//   and back, rename → a hostile answer from the server renders as safe Markdown; Private sends
//   nothing → reload (conversations and the chosen model survive; the model comes back from the
//   cache) → offline reload still chats → 390×844 (the same controls, no sideways scrolling) →
//   delete the cached model (storage shrinks), delete a conversation → no console errors, no
//   request off 127.0.0.1.
//
// Screenshots go to out/screenshots/ (git-ignored).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';

import { ROOT, CHROMIUM, CHROMIUM_ARGS, REQUIRED, wasmMissing } from './helpers.js';
import { startFake } from './router-helpers.js';
import { fmtMs, fmtTpot, fmtRate, fmtInt, fmtBytes, energyText, sustainedText } from '../../www/format.js';
import { CATALOG, DEFAULT_ENTRY } from '../../www/catalog.js';
import { CUSTOM_CHAT } from '../../www/settings.js';

const CHAT = DEFAULT_ENTRY;
const CHAT_FILE = path.join(ROOT, 'models', CHAT.file);
const chatMissing = () => {
  if (fs.existsSync(CHAT_FILE)) return false;
  if (REQUIRED) throw new Error(`chat model missing at ${CHAT_FILE} (run ./build.sh model)`);
  return `chat model not present at ${CHAT_FILE}`;
};
const skip = chatMissing() || wasmMissing() || (!fs.existsSync(CHROMIUM) && `no Chromium at ${CHROMIUM}`);
const SHOTS = path.join(ROOT, 'out/screenshots');

let web; // www/serve.js
let fake; // the OpenAI-compatible server with a hostile answer
let context;
let page;
let userDataDir;
const consoleErrors = [];
const requests = [];
const report = { screenshots: [] };

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

// What the hostile server answers: Markdown with a table, a list and code, plus every way a
// model's text could try to become markup, script or a request.
const HOSTILE = [
  'Here is **the plan**:\n\n',
  '1. first <img src=x onerror="window.__pwned=1">\n2. second\n\n',
  '| fruit | colour |\n|---|---|\n| apple | red |\n| kiwi | green |\n\n',
  '<script>window.__pwned=2</script>\n\n',
  '[click me](javascript:window.__pwned=3) and [docs](https://example.org/x) ',
  'and ![leak](LEAK_URL)\n\n',
  '```html\n<b onclick="window.__pwned=4">x</b>\n```\n',
  'Done.',
];

function hostileServer(origin) {
  const cors = { 'Access-Control-Allow-Origin': origin, 'Access-Control-Allow-Headers': '*', 'Access-Control-Allow-Methods': 'GET, POST, OPTIONS', 'Cross-Origin-Resource-Policy': 'cross-origin' };
  return startFake((req, res) => {
    if (req.method === 'OPTIONS') {
      res.writeHead(204, cors);
      return res.end();
    }
    if (req.url === '/health') {
      res.writeHead(200, { 'Content-Type': 'application/json', ...cors });
      return res.end('{"status":"ok"}');
    }
    if (req.url === '/v1/models') {
      res.writeHead(200, { 'Content-Type': 'application/json', ...cors });
      return res.end('{"object":"list","data":[{"id":"hostile"}]}');
    }
    if (req.url === '/leak.png') {
      res.writeHead(200, { 'Content-Type': 'image/png', ...cors });
      return res.end();
    }
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', ...cors });
    const leak = `${fake.baseURL.replace(/\/v1$/, '')}/leak.png`;
    const ev = (obj) => res.write(`data: ${JSON.stringify(obj)}\n\n`);
    const base = { id: 'chatcmpl-hostile', object: 'chat.completion.chunk', created: 1, model: 'hostile' };
    ev({ ...base, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
    // Small pieces, so the renderer sees every construct split across chunks.
    for (const part of HOSTILE.map((p) => p.replace('LEAK_URL', leak))) {
      for (let i = 0; i < part.length; i += 5) ev({ ...base, choices: [{ index: 0, delta: { content: part.slice(i, i + 5) }, finish_reason: null }] });
    }
    ev({ ...base, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
    ev({ ...base, choices: [], usage: { prompt_tokens: 12, completion_tokens: 90, total_tokens: 102 } });
    res.end('data: [DONE]\n\n');
  });
}

const state = () => page.evaluate(() => document.body.dataset.state);
const waitState = (states, timeout = 120_000) => page.waitForFunction((s) => s.includes(document.body.dataset.state), states, { timeout });

/** The last answer block as the page shows it, and the app's record of it. */
const lastAnswer = () =>
  page.evaluate(() => {
    const answers = document.querySelectorAll('#transcript .answer');
    const last = answers[answers.length - 1];
    const badge = last.querySelector('.badge.route');
    const energy = last.querySelector('.badge.energy');
    return {
      energy: energy ? energy.textContent : null,
      pressure: document.getElementById('u-pressure').textContent,
      sustained: document.getElementById('u-sustained').textContent,
      answers: answers.length,
      text: last.querySelector('.msg.assistant').textContent,
      code: last.querySelector('.msg.assistant').dataset.code || null,
      error: last.classList.contains('error'),
      badge: badge ? { target: badge.dataset.target, reason: badge.dataset.reason, text: badge.textContent } : null,
      flags: [...last.querySelectorAll('.flag')].map((f) => f.textContent),
      figures: last.querySelector('.figures').textContent,
      reply: window.edgellmApp.lastReply,
      usage: window.edgellmApp.lastUsage,
      lastError: window.edgellmApp.lastError,
      meter: window.edgellmApp.meter,
    };
  });

/** Types a message in the composer and sends it with Enter; waits for the answer to finish. */
async function ask(text, { timeout = 180_000 } = {}) {
  await page.fill('#prompt', text);
  await page.press('#prompt', 'Enter');
  await waitState(['generating'], 10_000).catch(() => {});
  await waitState(['ready', 'empty'], timeout);
  return lastAnswer();
}

async function shot(name, { fullPage = false } = {}) {
  fs.mkdirSync(SHOTS, { recursive: true });
  await page.evaluate(() => {
    const side = document.querySelector('.side');
    if (side) side.scrollTop = 0;
    window.scrollTo(0, 0);
    document.activeElement && document.activeElement.blur();
  });
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  const file = path.join(SHOTS, name);
  await page.screenshot({ path: file, fullPage });
  return file;
}

const storageUsage = () => page.evaluate(async () => (await navigator.storage.estimate()).usage);
const conversations = () => page.evaluate(() => window.edgellmApp.store.items.map((c) => ({ id: c.id, title: c.title, turns: c.turns.map((t) => [t.user, t.assistant]) })));

before(async () => {
  if (skip) return;
  const { chromium } = await import('playwright-core');
  web = await startWeb();
  fake = await hostileServer(web.origin);
  userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgellm-demo-'));
  context = await chromium.launchPersistentContext(userDataDir, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, viewport: { width: 1280, height: 800 } });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: web.origin });
  page = context.pages()[0] || (await context.newPage());
  page.on('console', (m) => {
    if (m.type() === 'error') consoleErrors.push(m.text());
  });
  page.on('pageerror', (e) => consoleErrors.push(`pageerror: ${e.message}`));
  context.on('request', (r) => requests.push(`${r.method()} ${r.url()}`));
  await page.goto(`${web.origin}/www/`);
  await waitState(['empty', 'failed'], 60_000);
  assert.equal(await state(), 'empty', await page.textContent('#status'));
});

after(async () => {
  if (context) await context.close();
  if (fake) await fake.close();
  if (web) await web.kill();
  if (userDataDir) fs.rmSync(userDataDir, { recursive: true, force: true });
  if (Object.keys(report).length) console.log(`demo figures: ${JSON.stringify(report)}`);
  if (consoleErrors.length) console.log(`page console errors:\n${consoleErrors.join('\n')}`);
});

test('the catalog lists each model with its facts, nothing cached yet; "Will it fit?" is the engine\'s estimate', { skip }, async () => {
  assert.equal(await page.evaluate(() => self.crossOriginIsolated), true, 'COOP/COEP from www/serve.js');
  const rows = await page.evaluate(() =>
    [...document.querySelectorAll('#catalog-list .cat-entry')].map((li) => ({
      id: li.dataset.entry,
      kind: li.dataset.kind,
      name: li.querySelector('.cat-name').textContent,
      facts: li.querySelector('.cat-facts').textContent,
      cached: !li.querySelector('.cat-cached').hidden,
      chosen: li.classList.contains('chosen'),
    })),
  );
  assert.deepEqual(rows.map((r) => [r.id, r.kind, r.name]), CATALOG.map((e) => [e.id, e.kind, e.name]));
  for (const [i, e] of CATALOG.entries()) assert.ok(rows[i].facts.startsWith(`${fmtBytes(e.bytes)} · ${e.quantization} · context ${Math.round(e.context / 1024)}k`), rows[i].facts);
  assert.deepEqual(rows.map((r) => r.cached), [false, false]);
  assert.deepEqual(rows.map((r) => r.chosen), [true, false], 'the chat model is the default choice');
  assert.equal(await page.textContent('#cache-usage'), 'No model kept in this browser yet.');

  const row = `#catalog-list .cat-entry[data-entry="${CHAT.id}"]`;
  await page.click(`${row} .cat-fit`);
  await page.waitForFunction((sel) => document.querySelector(`${sel} .cat-fit-result`).dataset.peak, row, { timeout: 30_000 });
  const fit = await page.evaluate(async (sel) => {
    const out = document.querySelector(`${sel} .cat-fit-result`);
    const url = new URL('../models/' + window.edgellmApp.settings.model_url.split('/').pop(), location.href).href;
    return { text: out.textContent, fits: out.dataset.fits, est: await window.edgellmApp.engine.estimate(url, { kv: { tokens: 4096, dtype: 'f16' } }) };
  }, row);
  assert.ok(fit.text.startsWith(`needs about ${fmtBytes(fit.est.peak)}`), fit.text);
  assert.equal(fit.fits, String(fit.est.fits));
  assert.ok(fit.est.terms.weights > 0.8 * CHAT.bytes && fit.est.terms.weights < CHAT.bytes, JSON.stringify(fit.est.terms));
  report.chat_estimate_peak = fit.est.peak;
});

test('picking the chat model from the catalog loads it (sha256-checked), marks it cached and applies its chat defaults', { skip }, async () => {
  const t0 = Date.now();
  await page.click(`#catalog-list .cat-entry[data-entry="${CHAT.id}"] .cat-load`);
  await waitState(['ready', 'empty'], 180_000);
  report.load_ms = Date.now() - t0;
  const r = await page.evaluate(() => ({
    model: window.edgellmApp.lastModel,
    error: window.edgellmApp.lastError,
    progress: window.edgellmApp.progress,
    cached: !document.querySelector('.cat-entry[data-entry="smollm2-135m-instruct"] .cat-cached').hidden,
    loaded: !document.querySelector('.cat-entry[data-entry="smollm2-135m-instruct"] .cat-loaded').hidden,
    usage: document.getElementById('cache-usage').dataset.bytes,
    settings: ['system', 'temperature', 'top-p', 'min-p', 'repetition-penalty', 'max-tokens'].map((id) => document.getElementById(id).value),
    raw: document.getElementById('raw').checked,
  }));
  assert.equal(await state(), 'ready', JSON.stringify(r.error));
  assert.equal(r.model.source, 'network');
  assert.equal(r.model.file_size, CHAT.bytes);
  const last = r.progress[r.progress.length - 1];
  assert.deepEqual([last.loaded, last.total], [CHAT.bytes, CHAT.bytes]);
  assert.ok(r.cached && r.loaded, JSON.stringify(r));
  assert.equal(r.usage, String(CHAT.bytes));
  const d = CHAT.defaults;
  assert.deepEqual(r.settings, [d.system, d.temperature, d.top_p, d.min_p, d.repetition_penalty, d.max_tokens].map(String));
  assert.equal(r.raw, false);
});

test('three questions: each answered, figures = the usage, the token meter = the conversation size', { skip }, async () => {
  // Greedy and short, so the run is bounded and repeatable (the defaults are measured elsewhere).
  await page.fill('#temperature', '0');
  await page.fill('#max-tokens', '48');
  const questions = ['What is the capital of France?', 'How many legs does a dog have?', 'Name one primary colour.'];
  const answers = [];
  for (const q of questions) {
    const a = await ask(q);
    assert.equal(a.error, false, JSON.stringify(a.lastError));
    assert.ok(a.reply.trim().length > 0, `an answer to ${q}`);
    assert.deepEqual([a.badge.target, a.badge.reason], ['local', 'local-only'], 'no server configured: this device only');
    const u = a.usage;
    const shown = await page.evaluate(() => Object.fromEntries(['u-ttft', 'u-tpot', 'u-prefill', 'u-decode', 'u-completion'].map((id) => [id, document.getElementById(id).textContent])));
    assert.deepEqual(shown, { 'u-ttft': fmtMs(u.ttft_ms), 'u-tpot': fmtTpot(u.tpot_ms), 'u-prefill': fmtRate(u.prefill_tokens_per_s), 'u-decode': fmtRate(u.decode_tokens_per_s), 'u-completion': fmtInt(u.completion_tokens) });
    assert.ok(a.figures.includes(fmtMs(u.ttft_ms)), a.figures);
    // The answer's energy badge (estimate and CPU time) and the panel's pressure and sustained/peak.
    assert.ok(u.compute && u.compute.energy_j.total > 0, JSON.stringify(u.compute));
    assert.equal(a.energy, energyText(u.compute));
    assert.match(a.pressure, /^(nominal|fair|serious|critical|unknown)/);
    assert.equal(a.sustained, sustainedText(await page.evaluate(() => window.edgellmApp.engine.pressure().last_long)));
    // The meter: the engine's count of the whole conversation (template included) once idle —
    // the prompt and the answer, plus the answer's closing tag and the next generation prompt.
    const meter = await page.waitForFunction(() => window.edgellmApp.meter && window.edgellmApp.meter.source === 'count' && window.edgellmApp.meter, null, { timeout: 30_000 }).then((h) => h.jsonValue());
    const spoken = u.prompt_tokens + u.completion_tokens;
    assert.ok(meter.tokens >= spoken && meter.tokens <= spoken + 8, `meter ${meter.tokens} vs usage ${spoken}`);
    assert.equal(meter.budget, 4096);
    assert.equal(await page.textContent('#meter-text'), `${fmtInt(meter.tokens)} of 4096 tokens`);
    // usage.prompt_tokens_details.cached_tokens (KV reuse), when the engine reports it, is on screen.
    assert.equal(typeof u.prompt_tokens_details?.cached_tokens, 'number', JSON.stringify(u));
    assert.match(a.figures, new RegExp(`${u.prompt_tokens_details.cached_tokens} of ${u.prompt_tokens} prompt tokens reused`));
    // After the first turn the KV cache holds the conversation so far: the next turn reuses it.
    if (answers.length > 0) assert.ok(u.prompt_tokens_details.cached_tokens > 0, JSON.stringify(u));
    answers.push(a.reply);
  }
  report.answers = answers;
  assert.match(answers[0], /Paris/, 'greedy SmolLM2 with the default system prompt knows this');
  // Every turn is in the next prompt (the chat template renders the history).
  const turns = await conversations();
  assert.equal(turns.length, 1);
  assert.deepEqual(turns[0].turns.map((t) => t[0]), questions);
  assert.equal(turns[0].title, questions[0]);
  // The meter's count agrees with the engine's own countTokens of the conversation.
  const counted = await page.evaluate(async () => {
    const c = window.edgellmApp.store.open;
    const msgs = [{ role: 'system', content: document.getElementById('system').value }];
    for (const t of c.turns) msgs.push({ role: 'user', content: t.user }, { role: 'assistant', content: t.assistant });
    return (await window.edgellmApp.engine.countTokens({ messages: msgs })).prompt_tokens;
  });
  assert.equal(await page.evaluate(() => window.edgellmApp.meter.tokens), counted);
});

test('editing the first message resends it and replaces the history after it; copy and regenerate any answer', { skip }, async () => {
  await page.click('#transcript .turn-user >> nth=0 >> .edit');
  await page.fill('#transcript .edit-text', 'What is the capital of Italy?');
  await page.click('#transcript .edit-box button[type=submit]');
  await waitState(['generating'], 10_000).catch(() => {});
  await waitState(['ready'], 180_000);
  const a = await lastAnswer();
  assert.equal(a.error, false, JSON.stringify(a.lastError));
  assert.equal(a.answers, 1, 'the answers after the edited message are gone');
  assert.match(a.reply, /Rome/);
  const conv = (await conversations())[0];
  assert.deepEqual(conv.turns.map((t) => t[0]), ['What is the capital of Italy?']);
  assert.equal(await page.locator('#transcript .msg.user').count(), 1);
  report.edited_answer = a.reply;

  await page.click('#transcript .answer >> nth=0 >> .copy-answer');
  await page.waitForFunction(() => document.querySelector('#transcript .copy-answer').dataset.copied === '1', null, { timeout: 5000 });
  assert.equal(await page.evaluate(() => navigator.clipboard.readText()), a.reply);

  // A second turn, then Regenerate the FIRST answer: the turn after it goes, one answer stays.
  await ask('And of Spain?');
  assert.equal((await conversations())[0].turns.length, 2);
  await page.click('#transcript .answer >> nth=0 >> .regen');
  await waitState(['generating'], 10_000).catch(() => {});
  await waitState(['ready'], 180_000);
  const r = await lastAnswer();
  assert.equal(r.error, false);
  assert.equal(r.answers, 1);
  assert.equal(r.reply, a.reply, 'greedy: the same answer again');
  assert.equal((await conversations())[0].turns.length, 1);
});

test('a second conversation and back: each keeps its own messages; rename', { skip }, async () => {
  const first = (await conversations())[0];
  await page.click('#conv-new');
  assert.equal(await page.locator('#transcript .answer').count(), 0);
  assert.equal(await page.evaluate(() => window.edgellmApp.meter.tokens), 0);
  const b = await ask('Say hello.');
  assert.ok(b.reply.trim().length > 0);
  const list = await conversations();
  assert.equal(list.length, 2);
  assert.deepEqual(list[0].turns.map((t) => t[0]), ['Say hello.'], 'the newest first');
  // Back to the first: its messages, its size (counted by the engine), its KV session when the
  // engine can restore one.
  await page.click(`#conv-list .conv[data-id="${first.id}"] .conv-open`);
  await page.waitForFunction(() => window.edgellmApp.meter && window.edgellmApp.meter.source === 'count', null, { timeout: 30_000 });
  // The switch restores the conversation's saved KV cache (engine.session.restore) after its count.
  await page.waitForFunction((id) => window.edgellmApp.session.restored === id || window.edgellmApp.session.error, first.id, { timeout: 30_000 });
  const shown = await page.evaluate(() => ({ users: [...document.querySelectorAll('#transcript .msg.user')].map((e) => e.textContent), answers: [...document.querySelectorAll('#transcript .msg.assistant')].map((e) => e.textContent), title: document.getElementById('chat-h').textContent, session: window.edgellmApp.session, hasSession: !!window.edgellmApp.engine.session }));
  assert.deepEqual(shown.users, ['What is the capital of Italy?']);
  assert.equal(shown.answers.length, 1);
  assert.match(shown.answers[0], /Rome/);
  assert.equal(shown.title, 'What is the capital of Italy?');
  // The package has the session API (issue 14): the conversation saved after its answer is restored.
  assert.ok(shown.hasSession, 'engine.session exists');
  assert.equal(shown.session.restored, first.id, JSON.stringify(shown.session));
  assert.equal(shown.session.error, null, JSON.stringify(shown.session));

  await page.click(`#conv-list .conv[data-id="${first.id}"] .conv-rename`);
  await page.fill('#conv-list .conv-rename-input', 'Capitals');
  await page.press('#conv-list .conv-rename-input', 'Enter');
  assert.equal((await conversations()).find((c) => c.id === first.id).title, 'Capitals');
  assert.equal(await page.textContent('#chat-h'), 'Capitals');
});

test('a hostile answer from the server renders as Markdown (list, table, code) and never as markup, script or a request; Private sends nothing', { skip }, async () => {
  await page.fill('#server-url', fake.baseURL);
  await page.click('label[for=mode-remote-only]'); // the radio itself is visually hidden
  await page.click('#conv-new');
  const before = fake.log.length;
  const a = await ask('Make a plan.');
  assert.equal(a.error, false, JSON.stringify(a.lastError));
  assert.equal(a.badge.target, 'remote');
  const dom = await page.evaluate(() => {
    const out = document.querySelectorAll('#transcript .msg.assistant');
    const m = out[out.length - 1];
    return {
      tags: [...new Set([...m.querySelectorAll('*')].map((e) => e.tagName.toLowerCase()))].sort(),
      handlers: [...m.querySelectorAll('*')].flatMap((e) => [...e.attributes].map((x) => x.name)).filter((n) => n.startsWith('on')),
      links: [...m.querySelectorAll('a')].map((x) => [x.textContent, x.getAttribute('href'), x.rel]),
      cells: [...m.querySelectorAll('td, th')].map((x) => x.textContent.trim()),
      items: [...m.querySelectorAll('ol > li')].length,
      code: [...m.querySelectorAll('pre code')].map((x) => [x.dataset.lang, x.textContent]),
      copyButtons: m.querySelectorAll('.code .copy').length,
      pwned: window.__pwned,
      text: m.textContent,
    };
  });
  for (const t of ['img', 'script', 'iframe', 'b', 'object', 'embed']) assert.ok(!dom.tags.includes(t), `no <${t}> from model text: ${dom.tags}`);
  assert.deepEqual(dom.handlers, []);
  assert.equal(dom.pwned, undefined);
  assert.deepEqual(dom.cells, ['fruit', 'colour', 'apple', 'red', 'kiwi', 'green']);
  assert.equal(dom.items, 2);
  assert.deepEqual(dom.code, [['html', '<b onclick="window.__pwned=4">x</b>']]);
  assert.equal(dom.copyButtons, 1);
  const click = dom.links.find((l) => l[0] === 'click me');
  assert.equal(click[1], null, 'a javascript: link has no href');
  assert.deepEqual(dom.links.find((l) => l[0] === 'docs'), ['docs', 'https://example.org/x', 'noopener noreferrer nofollow']);
  // HTML in model text shows as text (Markdown still applies: `__pwned=1…__` is emphasis).
  assert.match(dom.text, /<img src=x onerror="window\.\w*pwned=1">/);
  assert.match(dom.text, /<script>window\.\w*pwned=2<\/script>/);
  assert.match(dom.text, /image not loaded/);
  assert.ok(!fake.log.some((l) => l.includes('/leak.png')), 'the image was never fetched');
  assert.ok(fake.log.length > before, 'the server answered');
  // A link whose text is not its address asks first, showing the address; declined, nothing
  // opens.
  const dialogs = [];
  const onDialog = (d) => {
    dialogs.push(d.message());
    d.dismiss();
  };
  page.on('dialog', onDialog);
  const [pagesBefore, reqMark] = [context.pages().length, requests.length];
  await page.locator('#transcript .msg.assistant').last().locator('a[href="https://example.org/x"]').click();
  await page.waitForTimeout(300);
  page.off('dialog', onDialog);
  assert.equal(dialogs.length, 1, JSON.stringify(dialogs));
  assert.match(dialogs[0], /https:\/\/example\.org\/x/);
  assert.equal(context.pages().length, pagesBefore, 'no tab opened');
  assert.ok(!requests.slice(reqMark).some((q) => q.includes('example.org')), 'nothing requested');

  // Private: the same request, nothing goes to the server (nor anywhere else) — it runs here.
  await page.click('label[for=mode-prefer-remote]');
  await page.check('#private');
  const sent = fake.log.length;
  const mark = requests.length;
  const p = await ask('Say hi.');
  assert.equal(p.error, false, JSON.stringify(p.lastError));
  assert.equal(p.badge.target, 'local');
  assert.equal(fake.log.length, sent, 'the server received nothing');
  assert.deepEqual(requests.slice(mark).filter((q) => !q.includes(`//${new URL(web.origin).host}/`)), [], 'Private: no request left the page’s own origin');
  // Private switched off: the next turn would carry the one sent under Private along, so this
  // conversation stays here.
  await page.uncheck('#private');
  const p2 = await ask('And once more?');
  assert.equal(p2.error, false, JSON.stringify(p2.lastError));
  assert.equal(p2.badge.target, 'local', 'a conversation with a private turn stays on this device');
  assert.equal(fake.log.length, sent, 'the server received nothing');
  assert.ok(await page.evaluate(() => window.edgellmApp.store.open.turns.some((t) => t.private)), 'the private turn is marked (and stored so)');
  await page.fill('#server-url', '');
  await page.click('label[for=mode-prefer-local]');
  report.screenshots.push(await shot('demo-markdown-1280x800.png'));
});

test('after a reload: the conversations, the open one and the chosen model come back (from the cache)', { skip }, async () => {
  const before = await conversations();
  const openId = await page.evaluate(() => window.edgellmApp.store.openId);
  await page.reload();
  await waitState(['ready', 'failed', 'empty'], 120_000);
  // 'ready' comes before the open conversation's KV cache is restored (engine.session.restore).
  await page.waitForFunction((id) => document.body.dataset.state !== 'ready' || window.edgellmApp.session.restored === id || window.edgellmApp.session.error, openId, { timeout: 30_000 });
  const r = await page.evaluate(() => ({ state: document.body.dataset.state, model: window.edgellmApp.lastModel, err: window.edgellmApp.lastError, openId: window.edgellmApp.store.openId, temp: document.getElementById('temperature').value, session: window.edgellmApp.session, hasSession: !!window.edgellmApp.engine.session, chosen: document.querySelector('.cat-entry.chosen').dataset.entry }));
  assert.equal(r.state, 'ready', JSON.stringify(r.err));
  assert.equal(r.model.source, 'cache');
  assert.equal(r.chosen, CHAT.id);
  assert.equal(r.openId, openId);
  assert.equal(r.temp, '0', 'the chat settings are remembered per model');
  assert.deepEqual(await conversations(), before);
  const tables = await page.locator('#transcript .msg.assistant table').count();
  assert.equal(tables, 1, 'the stored answer renders as Markdown again');
  // The open conversation's KV cache comes back from OPFS after the reload (engine.session.restore).
  assert.ok(r.hasSession, 'engine.session exists');
  assert.equal(r.session.restored, openId, JSON.stringify(r.session));
  assert.equal(r.session.error, null, JSON.stringify(r.session));
  // Back to the conversation with the questions, and on with it.
  await page.click(`#conv-list .conv[data-id="${before.find((c) => c.title === 'Capitals').id}"] .conv-open`);
  const a = await ask('And of Germany?');
  assert.equal(a.error, false, JSON.stringify(a.lastError));
  assert.ok(a.reply.trim().length > 0);
  // The restored KV cache serves the conversation's prefix: only the new turn is prefilled.
  assert.ok(a.usage.prompt_tokens_details.cached_tokens > 0, JSON.stringify(a.usage));
  report.screenshots.push(await shot('demo-1280x800.png'));
  await page.emulateMedia({ colorScheme: 'dark' });
  report.screenshots.push(await shot('demo-dark-1280x800.png'));
  await page.emulateMedia({ colorScheme: 'light' });
});

test('offline: a reload without network still loads the chosen model from the cache and chats', { skip }, async () => {
  await page.waitForFunction(() => document.body.dataset.offlineReady === '1', null, { timeout: 30_000 });
  await context.setOffline(true);
  try {
    await page.reload();
    await waitState(['ready', 'empty', 'failed'], 120_000);
    const r = await page.evaluate(() => ({ state: document.body.dataset.state, model: window.edgellmApp.lastModel, err: window.edgellmApp.lastError }));
    assert.equal(r.state, 'ready', JSON.stringify(r.err));
    assert.equal(r.model.source, 'cache');
    assert.match(await page.textContent('#where-pill'), /Offline/);
    const a = await ask('Say hello.');
    assert.equal(a.error, false, JSON.stringify(a.lastError));
    assert.match(a.badge.text, /offline/);
  } finally {
    await context.setOffline(false);
  }
});

test('the service worker precaches the threaded builds too (named at run time: no reference leads its walk there)', { skip }, async () => {
  // A first visit in a fresh profile: the worker that starts the engine is not yet the service
  // worker's, so only the precache can hold the builds. Without the threaded ones an offline
  // reload ran the single-thread build.
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  try {
    const p = await (await browser.newContext()).newPage();
    await p.goto(`${web.origin}/www/`);
    const kept = await p.evaluate(async () => {
      await navigator.serviceWorker.ready;
      const names = (await caches.keys()).filter((k) => k.startsWith('edgellm-shell-'));
      const out = {};
      for (const f of ['edgellm_bg.wasm', 'edgellm_relaxed_bg.wasm']) {
        const url = new URL(`../pkg/wasm/threads/${f}`, location.href).href;
        const served = (await fetch(url, { method: 'HEAD', cache: 'no-store' })).ok;
        let hit = false;
        for (const n of names) hit = hit || !!(await (await caches.open(n)).match(url));
        out[f] = served ? hit : 'not built';
      }
      return out;
    });
    assert.deepEqual(kept, { 'edgellm_bg.wasm': true, 'edgellm_relaxed_bg.wasm': true });
  } finally {
    await browser.close();
  }
});

test('390×844: the same controls work in one column, without sideways scrolling', { skip }, async () => {
  await page.setViewportSize({ width: 390, height: 844 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow <= 0, `no horizontal scrolling at 390 px (${overflow} px too wide)`);
  report.screenshots.push(await shot('demo-390x844.png'), await shot('demo-390x844-full.png', { fullPage: true }));
  // The catalog (folded away once a model runs) opens; the conversations switch; a message is
  // asked and edited.
  await page.click('#catalog > summary');
  assert.ok(await page.isVisible(`#catalog-list .cat-entry[data-entry="${CHAT.id}"] .cat-load`));
  await page.click('#catalog > summary');
  await page.click('#conv-new');
  const a = await ask('What colour is the sky?');
  assert.ok(a.reply.trim().length > 0);
  await page.click('#transcript .turn-user >> nth=0 >> .edit');
  await page.fill('#transcript .edit-text', 'What colour is grass?');
  await page.click('#transcript .edit-box button[type=submit]');
  await waitState(['generating'], 10_000).catch(() => {});
  await waitState(['ready'], 180_000);
  const b = await lastAnswer();
  assert.equal(b.answers, 1);
  assert.ok(b.reply.trim().length > 0);
  report.screenshots.push(await shot('demo-chat-390x844.png'));
  const overflow2 = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  assert.ok(overflow2 <= 0, `no horizontal scrolling at 390 px with answers (${overflow2} px too wide)`);
  await page.setViewportSize({ width: 1280, height: 800 });
});

test('deleting the cached model frees the storage; deleting a conversation removes it', { skip }, async () => {
  await page.click('#catalog > summary').catch(() => {});
  if (!(await page.evaluate(() => document.getElementById('catalog').open))) await page.click('#catalog > summary');
  const before = await storageUsage();
  await page.click(`#catalog-list .cat-entry[data-entry="${CHAT.id}"] .cat-delete`);
  await page.waitForFunction((id) => document.querySelector(`.cat-entry[data-entry="${id}"] .cat-cached`).hidden, CHAT.id, { timeout: 30_000 });
  const after = await storageUsage();
  assert.ok(before - after > 0.9 * CHAT.bytes, `storage ${before} -> ${after}`);
  assert.equal(await page.textContent('#cache-usage'), 'No model kept in this browser yet.');
  assert.equal(await page.evaluate(() => window.edgellmApp.engine.cache.list()).then((l) => l.length), 0);
  report.storage_freed = before - after;

  const list = await conversations();
  const victim = list[list.length - 1];
  await page.hover(`#conv-list .conv[data-id="${victim.id}"]`); // its tools show on hover (or when open)
  await page.click(`#conv-list .conv[data-id="${victim.id}"] .conv-delete`);
  const left = await conversations();
  assert.equal(left.length, list.length - 1);
  assert.ok(!left.some((c) => c.id === victim.id));
  await page.waitForFunction((id) => window.edgellmApp.session.deleted === id || window.edgellmApp.session.error, victim.id, { timeout: 30_000 });
  const s = await page.evaluate(() => ({ session: window.edgellmApp.session, has: !!window.edgellmApp.engine.session }));
  assert.ok(s.has, 'engine.session exists');
  assert.equal(s.session.deleted, victim.id, JSON.stringify(s.session));
});

test('the memory gauge draws a ledger snapshot: each term estimated vs measured, against the budget, by level', { skip }, async () => {
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
    return { cls: g.className, level: g.querySelector('[data-field=level]').textContent, terms, hw: g.querySelector('[data-field=high_water_bytes]').dataset.value };
  }, snap);
  assert.equal(r.cls, 'gauge level-elevated');
  assert.deepEqual(r.terms.kv, { estimated: ['20000000', fmtBytes(20e6)], measured: ['18000000', fmtBytes(18e6)] });
  assert.deepEqual(r.terms.activations.measured, ['', '–'], 'a term not measured shows a dash, not a number');
  assert.equal(r.hw, '310000000');
});

test('streamed Markdown is the same DOM however the text is chunked', { skip }, async () => {
  const text = 'Intro **bold** and *em* `x < 1`.\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```js\nconst s = "<i>";\n```\nEnd.';
  const r = await page.evaluate(async (t) => {
    const { StreamRenderer } = await import('./markdown.js');
    const out = [];
    for (const step of [t.length, 1, 2, 3, 7]) {
      const root = document.createElement('div');
      const r = new StreamRenderer(root);
      for (let i = 0; i < t.length; i += step) r.push(t.slice(i, i + step));
      r.end();
      out.push({ html: root.innerHTML.replace(/<button[^>]*><\/button>/g, '') });
    }
    return out;
  }, text);
  for (const x of r) assert.equal(x.html, r[0].html, 'the same DOM whatever the chunking');
  for (const tag of ['<strong>bold</strong>', '<em>em</em>', '<code>x &lt; 1</code>', '<li>one</li>', '<td> 2 </td>', 'const s = "&lt;i&gt;";']) assert.ok(r[0].html.includes(tag), `${tag} in ${r[0].html}`);
});

test('www/serve.js serves only www/, pkg/, models/ and the vendored modules, to loopback names', { skip }, async () => {
  const http = await import('node:http');
  const { port } = new URL(web.origin);
  // Raw paths (no client normalization) and Host headers.
  const get = (p, host = `127.0.0.1:${port}`) =>
    new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port, path: p, headers: { host } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode));
      });
      req.on('error', reject);
      req.end();
    });
  for (const p of ['/www/..%2fREADME.md', '/www/..%2f..%2f..%2fetc%2fpasswd', '/pkg/..%2f.git/HEAD', '/models/..%2fCargo.toml', '/www/%2e%2e/README.md', '/www/../README.md', '/README.md', '/www%2f..%2fREADME.md', '/www/index.html%00.gguf']) {
    assert.equal(await get(p), 404, p);
  }
  for (const p of ['/www/', '/www/index.html', '/www/vendor/smd.js', '/pkg/src/index.js']) assert.equal(await get(p), 200, p);
  assert.equal(await get('/www/', `localhost:${port}`), 200);
  assert.equal(await get('/www/', `rebound.example:${port}`), 403, 'a DNS-rebinding name is refused');
});

test("the page's Content-Security-Policy stops markup that got through from fetching or running anything", { skip }, async () => {
  const res = await page.request.get(`${web.origin}/www/`);
  const csp = res.headers()['content-security-policy'] || '';
  for (const d of ["script-src 'self' 'wasm-unsafe-eval'", "img-src 'self' data: blob:", "object-src 'none'"]) assert.ok(csp.includes(d), csp);
  const leak = `${fake.baseURL.replace(/\/v1$/, '')}/leak.png?csp`;
  const mark = consoleErrors.length;
  const r = await page.evaluate(async (url) => {
    // As if a renderer bug had let model text become markup.
    const box = document.createElement('div');
    document.body.append(box);
    const img = document.createElement('img');
    img.src = url;
    box.append(img);
    const s = document.createElement('script');
    s.textContent = 'window.__cspRan = 1';
    box.append(s);
    await new Promise((ok) => setTimeout(ok, 500));
    box.remove();
    return { ran: window.__cspRan };
  }, leak);
  assert.equal(r.ran, undefined, 'an inline script does not run');
  assert.ok(!fake.log.some((l) => l.includes('/leak.png?csp')), 'a remote image is not fetched');
  // The browser reports each blocked load in the console: those are this test's, not errors.
  const blocked = consoleErrors.splice(mark);
  assert.ok(blocked.every((e) => /Content Security Policy/.test(e)), blocked.join('\n'));
});

test('hostile Markdown neither nests without bound nor stalls the page', { skip }, async () => {
  const r = await page.evaluate(async () => {
    const { StreamRenderer, MAX_DEPTH, MARKDOWN_MAX_CHARS } = await import('./markdown.js');
    const depth = (el) => {
      let max = 0;
      for (const walk = document.createTreeWalker(el, NodeFilter.SHOW_ELEMENT); walk.nextNode(); ) {
        let d = 0;
        for (let n = walk.currentNode; n !== el; n = n.parentNode) d += 1;
        max = Math.max(max, d);
      }
      return max;
    };
    const out = { MAX_DEPTH, MARKDOWN_MAX_CHARS, cases: [] };
    // Quotes and alternating emphasis nested thousands deep (each crashed the renderer before),
    // then 200 Ki of characters smd parses in quadratic time, streamed in small pieces.
    const texts = { quotes: '>'.repeat(5000) + ' deep', spaced: '> '.repeat(3000) + 'deep', emph: '*_'.repeat(6000) + 'deep', stars: '*'.repeat(200 * 1024), ticks: '`'.repeat(100 * 1024) + 'é😀' + 'tail' };
    for (const [name, t] of Object.entries(texts)) {
      const root = document.createElement('div');
      document.body.append(root);
      const t0 = performance.now();
      const r = new StreamRenderer(root);
      for (let i = 0; i < t.length; i += 16) r.push(t.slice(i, i + 16));
      r.end();
      const ms = performance.now() - t0;
      const plain = root.querySelector('.md-plain');
      out.cases.push({ name, ms, depth: depth(root), text: root.textContent.length, plain: plain ? plain.textContent : null, len: t.length, tail: t.slice(MARKDOWN_MAX_CHARS) });
      root.remove();
    }
    return out;
  });
  for (const c of r.cases) {
    assert.ok(c.depth <= r.MAX_DEPTH + 4, `${c.name}: nesting ${c.depth}`);
    assert.ok(c.ms < 5000, `${c.name}: ${c.ms} ms`);
    if (c.len > r.MARKDOWN_MAX_CHARS) assert.equal(c.plain, c.tail, `${c.name}: the rest as plain text, whole`);
    else assert.equal(c.plain, null, c.name);
  }
  assert.ok(r.cases.find((c) => c.name === 'quotes').text > 0, 'the deep text is still shown');
});

test('a load refused before the engine replaced the model (not a GGUF) keeps it, named and usable', { skip }, async () => {
  const before = await page.evaluate(() => window.edgellmApp.engine.model);
  assert.ok(before, 'a model is loaded before');
  const check = async (what) => {
    await waitState(['empty', 'ready'], 60_000);
    const r = await page.evaluate(() => ({
      model: window.edgellmApp.engine.model,
      summary: document.getElementById('model-summary').textContent,
      infoHidden: document.getElementById('model-info').hidden,
      progressHidden: document.getElementById('load-progress').hidden,
      code: document.getElementById('status').dataset.code,
    }));
    assert.equal(await state(), 'ready', `${what}: ${JSON.stringify(r)}`);
    assert.deepEqual(r.model, before, what);
    assert.match(r.summary, new RegExp(`${CHAT.name} · chat · loaded`), what);
    assert.ok(!r.infoHidden && r.progressHidden, `${what}: ${JSON.stringify(r)}`);
    return r.code;
  };
  // Not a GGUF (the demo's own page): a clean failure, no network error in the console.
  await page.fill('#model-url', new URL('index.html', page.url()).href);
  await page.click('#load-url');
  assert.equal(await check('not a GGUF'), 'GGUF_INVALID');
  // A URL that answers 404.
  await page.fill('#model-url', new URL('/models/missing.gguf', page.url()).href);
  await page.click('#load-url');
  assert.equal(await check('404'), 'NETWORK');
  // It still answers.
  const a = await ask('What is the capital of France?');
  assert.ok(!a.error && a.text.trim().length > 0, JSON.stringify(a));
});

test('a model opened from a file has the custom chat settings, not those of the model chosen by URL', { skip }, async () => {
  await page.setInputFiles('#model-file', CHAT_FILE);
  await waitState(['ready', 'empty'], 180_000);
  assert.equal(await state(), 'ready');
  const r = await page.evaluate(() => ({
    source: window.edgellmApp.engine.model.source,
    for: document.getElementById('settings-for').textContent,
    settings: ['system', 'temperature', 'top-p', 'min-p', 'repetition-penalty', 'max-tokens'].map((id) => document.getElementById(id).value),
    raw: document.getElementById('raw').checked,
    chosen: [...document.querySelectorAll('#catalog-list .cat-entry')].filter((e) => e.classList.contains('chosen')).length,
  }));
  assert.equal(r.source, 'file');
  assert.equal(r.for, 'for this model');
  const c = CUSTOM_CHAT;
  assert.deepEqual(r.settings, [c.system, c.temperature, c.top_p, c.min_p, c.repetition_penalty, c.max_tokens].map(String));
  assert.equal(r.raw, c.raw);
  assert.equal(r.chosen, 0, 'no catalog model is marked chosen while a file model runs');
});

test('no console errors and no request off 127.0.0.1 during the run', { skip }, () => {
  assert.deepEqual(consoleErrors, []);
  const off = requests.filter((q) => !/^[A-Z]+ (http:\/\/127\.0\.0\.1[:/]|blob:|data:)/.test(q));
  assert.deepEqual(off, []);
});
