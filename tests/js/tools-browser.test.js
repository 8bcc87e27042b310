// Structured output and tool calls in Chromium (playwright-core + /usr/bin/chromium): the
// package on a bare page, the small chat model (SmolLM2 135M) served from 127.0.0.1. A
// json_schema answer parses and validates; a required call and a streamed named call come back
// in OpenAI's shapes with arguments valid against the function's schema — the wasm build's
// constrained decoding, in the browser.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { startServer } from './server.js';
import { ROOT, CHROMIUM, CHROMIUM_ARGS, REQUIRED, wasmMissing } from './helpers.js';

const CHAT_MODEL = path.join(ROOT, 'models/SmolLM2-135M-Instruct.Q4_1.gguf');
const skip = (!fs.existsSync(CHAT_MODEL) && !REQUIRED && `no model at ${CHAT_MODEL}`) || wasmMissing() || (!fs.existsSync(CHROMIUM) && `no Chromium at ${CHROMIUM}`);

let web;
let browser;
let page;

before(async () => {
  if (skip) return;
  const { chromium } = await import('playwright-core');
  web = await startServer({ root: ROOT, modelPath: CHAT_MODEL });
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  page = await browser.newPage();
  page.on('pageerror', (e) => console.log(`[page error] ${e.message}`));
  await page.goto(`${web.origin}/tests/js/pages/router.html`);
  await page.waitForFunction(() => document.body.dataset.ready === '1', null, { timeout: 30_000 });
  await page.evaluate(async () => {
    window.engine = await window.edgellm.createEngine({ cache: false });
    await window.engine.load('/models/good.gguf');
  });
});

after(async () => {
  if (browser) await browser.close();
  if (web) await web.close();
});

test('Chromium: json_schema output and tool calls by constrained decoding', { skip, timeout: 120_000 }, async () => {
  const out = await page.evaluate(async () => {
    const e = window.engine;
    const schema = { type: 'object', properties: { color: { type: 'string', enum: ['red', 'green', 'blue'] }, n: { type: 'integer', minimum: 1, maximum: 9 } }, required: ['color', 'n'], additionalProperties: false };
    const structured = await e.chat.completions.create({ messages: [{ role: 'user', content: 'Pick a color and a number.' }], max_tokens: 30, temperature: 1, seed: 3, response_format: { type: 'json_schema', json_schema: { name: 'pick', schema } } });
    const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 20 } }, required: ['city'], additionalProperties: false } } }];
    const ask = { messages: [{ role: 'user', content: 'What is the weather in Paris?' }], tools, max_tokens: 40, temperature: 0 };
    const required = await e.chat.completions.create({ ...ask, tool_choice: 'required' });
    const stream = await e.chat.completions.create({ ...ask, temperature: 1, seed: 9, tool_choice: { type: 'function', function: { name: 'get_weather' } }, stream: true });
    const chunks = [];
    for await (const c of stream) chunks.push(c);
    return { structured, required, chunks };
  });
  const v = JSON.parse(out.structured.choices[0].message.content);
  assert.ok(['red', 'green', 'blue'].includes(v.color) && Number.isInteger(v.n) && v.n >= 1 && v.n <= 9, out.structured.choices[0].message.content);
  const validCall = (c) => {
    assert.equal(c.type, 'function');
    assert.equal(c.function.name, 'get_weather');
    const args = JSON.parse(c.function.arguments);
    assert.deepEqual(Object.keys(args), ['city']);
    assert.ok(typeof args.city === 'string' && args.city.length <= 20);
  };
  const r = out.required.choices[0];
  assert.equal(r.finish_reason, 'tool_calls');
  assert.equal(r.message.content, null);
  r.message.tool_calls.forEach(validCall);
  // Streamed: id, type and name on the first piece, then arguments fragments; finish 'tool_calls'.
  const pieces = out.chunks.flatMap((c) => c.choices[0]?.delta?.tool_calls ?? []);
  assert.ok(pieces[0].id && pieces[0].type === 'function' && pieces[0].function.name === 'get_weather');
  assert.ok(pieces.slice(1).every((d) => d.index === 0 && d.id === undefined && typeof d.function.arguments === 'string'));
  validCall({ type: 'function', function: { name: 'get_weather', arguments: pieces.map((d) => d.function.arguments).join('') } });
  assert.equal(out.chunks.at(-1).choices[0].finish_reason, 'tool_calls');
});
