// Conformance with a real client: the official `openai` npm SDK (pinned 7.x in package.json)
// against `edgellm serve` (the native binary, 127.0.0.1, a bearer key): models, chat, stream +
// include_usage, abort, completions, a bad request, a wrong key, json_object, json_schema,
// logprobs — each read through the SDK's own types and errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

import { REQUIRED, modelMissing, cliPath } from './helpers.js';
import { startEdgeServer, cliCanServe } from './router-helpers.js';

const skip = modelMissing() || (cliCanServe() ? false : REQUIRED ? false : `native CLI with 'serve' not built (${cliPath() || 'none'})`);
const KEY = 'sdk-test-key';

let srv;
let client;

before(async () => {
  if (skip) return;
  srv = await startEdgeServer(['--api-key', KEY, '--queue', '4']);
  client = new OpenAI({ baseURL: srv.baseURL, apiKey: KEY, maxRetries: 0, timeout: 60_000 });
});

after(async () => {
  if (srv) await srv.kill();
});

const hi = (extra = {}) => ({ model: 'any', messages: [{ role: 'user', content: 'Name a color.' }], max_tokens: 5, temperature: 0, ...extra });

test('openai SDK: models, chat, completions, streaming with include_usage, abort', { skip }, async () => {
  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  const id = models.data[0].id;

  const chat = await client.chat.completions.create(hi());
  assert.equal(chat.object, 'chat.completion');
  assert.equal(chat.model, id);
  assert.equal(chat.choices[0].message.role, 'assistant');
  assert.ok(chat.choices[0].message.content.length > 0);
  assert.equal(chat.usage.total_tokens, chat.usage.prompt_tokens + chat.usage.completion_tokens);

  const stream = await client.chat.completions.create(hi({ stream: true, stream_options: { include_usage: true } }));
  let text = '';
  let usageChunks = 0;
  for await (const c of stream) {
    text += c.choices[0]?.delta?.content ?? '';
    if (c.usage) {
      usageChunks++;
      assert.deepEqual(c.choices, []);
    }
  }
  assert.equal(text, chat.choices[0].message.content, 'streamed = not streamed (greedy)');
  assert.equal(usageChunks, 1, 'usage once, on the extra last chunk');

  // The SDK's abort: the stream ends early, the server carries on.
  const long = await client.completions.create({ model: id, prompt: 'Once upon a time', max_tokens: 200, temperature: 0, stream: true });
  let n = 0;
  for await (const c of long) {
    if (c.choices[0].text && ++n === 2) long.controller.abort();
  }
  assert.ok(n >= 2 && n < 200);

  const done = await client.completions.create({ model: id, prompt: 'The capital of France is', max_tokens: 4, temperature: 0 });
  assert.equal(done.object, 'text_completion');
  assert.ok(done.choices[0].text.length > 0);
});

test('openai SDK: typed errors for a bad request and a wrong key', { skip }, async () => {
  await assert.rejects(client.chat.completions.create(hi({ tools: [{ type: 'function', function: { name: 'f', parameters: {} } }] })), (e) => {
    assert.ok(e instanceof OpenAI.BadRequestError, e.constructor.name);
    assert.equal(e.status, 400);
    assert.equal(e.code, 'unsupported_parameter');
    assert.equal(e.param, 'tools');
    return true;
  });
  const wrong = new OpenAI({ baseURL: srv.baseURL, apiKey: 'nope', maxRetries: 0 });
  await assert.rejects(wrong.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});

test('openai SDK: json_object, json_schema and logprobs', { skip }, async () => {
  const schema = { type: 'object', properties: { color: { type: 'string', enum: ['red', 'green', 'blue'] }, n: { type: 'integer', minimum: 1, maximum: 9 } }, required: ['color', 'n'], additionalProperties: false };
  const r = await client.chat.completions.create(hi({ max_tokens: 40, response_format: { type: 'json_schema', json_schema: { name: 'pick', schema, strict: true } } }));
  const v = JSON.parse(r.choices[0].message.content);
  assert.ok(['red', 'green', 'blue'].includes(v.color) && Number.isInteger(v.n) && v.n >= 1 && v.n <= 9, r.choices[0].message.content);
  const o = await client.chat.completions.create(hi({ max_tokens: 16, response_format: { type: 'json_object' } }));
  assert.match(o.choices[0].message.content, /^\{/);
  const lp = await client.chat.completions.create(hi({ logprobs: true, top_logprobs: 2 }));
  const content = lp.choices[0].logprobs.content;
  assert.equal(content.map((e) => e.token).join(''), lp.choices[0].message.content);
  assert.ok(content.every((e) => e.logprob <= 0 && e.top_logprobs.length === 2 && Array.isArray(e.bytes)));
});
