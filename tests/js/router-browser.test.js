// The router in Chromium (playwright-core + /usr/bin/chromium): the package loaded by a page
// from one 127.0.0.1 origin, the real server (`edgellm serve`, CORS for that origin, a bearer
// token) on another. Private requests — and a private request that cannot run locally — cause
// ZERO requests to the server: checked in the browser's own request log (`page.on('request')`)
// and by the server's request counter. A public request then reaches the server (CORS, SSE).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';

import { startServer } from './server.js';
import { ROOT, MODEL, CHROMIUM, CHROMIUM_ARGS, REQUIRED, modelMissing, wasmMissing, cliPath } from './helpers.js';
import { startEdgeServer, serverRequests, cliCanServe } from './router-helpers.js';
import { checkPrivateRequestsStayLocal } from './browsers/checks.js';

const KEY = 'browser-router-key';
const skip =
  modelMissing() ||
  wasmMissing() ||
  (!fs.existsSync(CHROMIUM) && `no Chromium at ${CHROMIUM}`) ||
  (cliCanServe() ? false : REQUIRED ? false : `native CLI with 'serve' not built (${cliPath() || 'none'})`);

let web;
let srv;
let browser;
let page;
const requests = [];

before(async () => {
  if (skip) return;
  const { chromium } = await import('playwright-core');
  web = await startServer({ root: ROOT, modelPath: MODEL });
  [srv, browser] = await Promise.all([
    startEdgeServer(['--api-key', KEY, '--cors-origin', web.origin]),
    chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS }),
  ]);
  page = await browser.newPage();
  page.on('request', (r) => requests.push(`${r.method()} ${r.url()}`));
  page.on('pageerror', (e) => console.log(`[page error] ${e.message}`));
  await page.goto(`${web.origin}/tests/js/pages/router.html`);
  await page.waitForFunction(() => document.body.dataset.ready === '1', null, { timeout: 30_000 });
  await page.evaluate(
    async ({ baseURL, apiKey }) => {
      window.engine = await window.edgellm.createEngine({
        cache: false,
        route: {
          mode: 'prefer-remote',
          remote: { baseURL, apiKey },
          local: { maxContextTokens: 16 },
          isSensitive: (messages) => messages.some((m) => /password/i.test(m.content)),
        },
      });
      await window.engine.load('/models/good.gguf');
    },
    { baseURL: srv.baseURL, apiKey: KEY },
  );
});

after(async () => {
  if (browser) await browser.close();
  if (srv) await srv.kill();
  if (web) await web.close();
});

const toServer = () => requests.filter((r) => r.includes(srv.url));

test('private requests: zero requests to the server (browser log and server counter)', { skip }, async () => {
  requests.length = 0;
  const before = await serverRequests(srv);
  // Over the local limit of 16 tokens (maxContextTokens above).
  await checkPrivateRequestsStayLocal(page, 'Summarise in one sentence: apple banana cherry date elderberry fig grape kiwi lemon mango.');
  assert.deepEqual(toServer(), [], 'the browser sent nothing to the server');
  assert.equal(await serverRequests(srv), before, 'the server received nothing');
});

test('a public request reaches the server across origins (CORS, bearer token, SSE)', { skip }, async () => {
  requests.length = 0;
  const before = await serverRequests(srv);
  const r = await page.evaluate(async () => {
    const s = await window.engine.chat.completions.create({ messages: [{ role: 'user', content: 'Say hi.' }], max_tokens: 2, temperature: 0, stream: true, stream_options: { include_usage: true } });
    const chunks = [];
    for await (const c of s) chunks.push(c);
    return { first: chunks[0].route, last: chunks[chunks.length - 1], n: chunks.length };
  });
  assert.equal(r.first.target, 'remote', JSON.stringify(r.first));
  assert.equal(r.first.version.match, true);
  // OpenAI's shape: with include_usage, one last chunk with no choices carries the usage.
  assert.deepEqual(r.last.choices, [], JSON.stringify(r.last));
  assert.ok(r.last.usage && r.last.usage.completion_tokens >= 1, JSON.stringify(r.last));
  assert.ok(toServer().some((u) => u.startsWith('POST') && u.endsWith('/v1/chat/completions')), toServer().join('\n'));
  assert.ok((await serverRequests(srv)) > before);
});
