// Conformance with a real client: the official `openai` npm SDK (pinned 7.x in package.json)
// against `edgellm serve` (the native binary, 127.0.0.1, a bearer key) AND against the JS engine
// in this process (wasm in a Node worker, through `createOpenAIFetch(engine)`): models, chat,
// stream + include_usage, abort, completions, a bad request, a wrong key (serve), json_object,
// json_schema, logprobs, tools (required and named, streamed and not) — each read through the
// SDK's own types and errors; then the shapes (key sets and types, not the text) of every
// response and chunk are compared between the two.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

import { createEngine, createOpenAIFetch } from '../../pkg/src/node.js';
import { MODEL, REQUIRED, modelMissing, wasmMissing, cliPath } from './helpers.js';
import { startEdgeServer, cliCanServe } from './router-helpers.js';

const skip = modelMissing() || wasmMissing() || (cliCanServe() ? false : REQUIRED ? false : `native CLI with 'serve' not built (${cliPath() || 'none'})`);
const KEY = 'sdk-test-key';

let srv;
let engine;
/** label → the SDK client of that target. */
const clients = {};
/** label → request name → the shapes of what came back (see shape()). */
const shapes = { serve: {}, local: {} };
const TARGETS = ['serve', 'local'];

before(async () => {
  if (skip) return;
  [srv, engine] = await Promise.all([startEdgeServer(['--api-key', KEY, '--queue', '4']), createEngine({ cache: false })]);
  await engine.load(MODEL);
  clients.serve = new OpenAI({ baseURL: srv.baseURL, apiKey: KEY, maxRetries: 0, timeout: 60_000 });
  clients.local = new OpenAI({ baseURL: 'http://edgellm.local/v1', apiKey: 'local', maxRetries: 0, timeout: 60_000, fetch: createOpenAIFetch(engine) });
});

after(async () => {
  if (engine) engine.terminate();
  if (srv) await srv.kill();
});

/** OpenAI's usage fields (each target adds its own extensions beside them). */
const USAGE = ['prompt_tokens', 'completion_tokens', 'total_tokens', 'prompt_tokens_details'];

/** A value's shape: object key sets and value types, arrays by their first element. */
function shape(v, key = '') {
  if (v === null) return 'null';
  if (Array.isArray(v)) return v.length ? [shape(v[0])] : [];
  if (typeof v !== 'object') return typeof v;
  const out = {};
  for (const k of Object.keys(v).sort()) {
    if (key === 'usage' && !USAGE.includes(k)) continue;
    out[k] = shape(v[k], k);
  }
  return out;
}

/** Records what `label` returned for request `name`: a response, or a stream's distinct chunk shapes in order. */
function record(label, name, value) {
  if (!Array.isArray(value)) return (shapes[label][name] = shape(value));
  const seq = [];
  for (const c of value) {
    const s = JSON.stringify(shape(c));
    if (seq[seq.length - 1] !== s) seq.push(s);
  }
  shapes[label][name] = seq;
}

async function collect(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

const TOOLS = [
  { type: 'function', function: { name: 'get_weather', description: 'The weather now', parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 20 }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['city', 'unit'], additionalProperties: false } } },
  { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string', maxLength: 12 } }, required: ['zone'], additionalProperties: false } } },
];

/** A call's arguments parse and follow its function's schema. */
function validCall(c) {
  assert.equal(c.type, 'function');
  assert.match(c.id, /^call_/);
  const args = JSON.parse(c.function.arguments);
  if (c.function.name === 'get_weather') {
    assert.deepEqual(Object.keys(args).sort(), ['city', 'unit']);
    assert.ok(typeof args.city === 'string' && ['celsius', 'fahrenheit'].includes(args.unit), c.function.arguments);
  } else {
    assert.equal(c.function.name, 'get_time');
    assert.deepEqual(Object.keys(args), ['zone']);
  }
}

const hi = (extra = {}) => ({ model: 'any', messages: [{ role: 'user', content: 'Name a color.' }], max_tokens: 5, temperature: 0, ...extra });

for (const label of TARGETS) {
  test(`openai SDK (${label}): models, chat, completions, streaming with include_usage, abort`, { skip }, async () => {
    const client = clients[label];
    const models = await client.models.list();
    assert.equal(models.data.length, 1);
    record(label, 'models', models.data[0]);
    const id = models.data[0].id;

    const chat = await client.chat.completions.create(hi());
    assert.equal(chat.object, 'chat.completion');
    assert.equal(chat.model, id);
    assert.equal(chat.choices[0].message.role, 'assistant');
    assert.ok(chat.choices[0].message.content.length > 0);
    assert.equal(chat.usage.total_tokens, chat.usage.prompt_tokens + chat.usage.completion_tokens);
    record(label, 'chat', chat);

    const chunks = await collect(await client.chat.completions.create(hi({ stream: true, stream_options: { include_usage: true } })));
    let text = '';
    let usageChunks = 0;
    for (const c of chunks) {
      text += c.choices[0]?.delta?.content ?? '';
      if (c.usage) {
        usageChunks++;
        assert.deepEqual(c.choices, []);
      }
    }
    assert.equal(text, chat.choices[0].message.content, 'streamed = not streamed (greedy)');
    assert.equal(usageChunks, 1, 'usage once, on the extra last chunk');
    record(label, 'chat stream', chunks);

    // The SDK's abort: the stream ends early, the engine carries on.
    const long = await client.completions.create({ model: id, prompt: 'Once upon a time', max_tokens: 200, temperature: 0, stream: true });
    let n = 0;
    for await (const c of long) {
      if (c.choices[0].text && ++n === 2) long.controller.abort();
    }
    assert.ok(n >= 2 && n < 200);

    const done = await client.completions.create({ model: id, prompt: 'The capital of France is', max_tokens: 4, temperature: 0 });
    assert.equal(done.object, 'text_completion');
    assert.ok(done.choices[0].text.length > 0);
    record(label, 'completion', done);
    // logit_bias: +100 on the end-of-text token (id 1 in Gemma's vocabulary) ends the answer
    // at once, where the same request without it writes text.
    const ended = await client.completions.create({ model: id, prompt: 'The capital of France is', max_tokens: 4, temperature: 0, logit_bias: { 1: 100 } });
    assert.equal(ended.choices[0].text, '');
    assert.equal(ended.choices[0].finish_reason, 'stop');
    // An id the model does not have: a 400 naming the parameter, on both targets.
    await assert.rejects(client.completions.create({ model: id, prompt: 'x', max_tokens: 2, logit_bias: { 999999999: 1 } }), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.param, 'logit_bias');
      return true;
    });
  });

  test(`openai SDK (${label}): n choices, whole and streamed`, { skip }, async () => {
    const client = clients[label];
    const req = { model: 'any', messages: [{ role: 'user', content: 'Say a word.' }], max_tokens: 5, temperature: 1.2, seed: 11, n: 3 };
    const whole = await client.chat.completions.create(req);
    assert.deepEqual(whole.choices.map((c) => c.index), [0, 1, 2]);
    for (const c of whole.choices) assert.ok(['stop', 'length'].includes(c.finish_reason) && typeof c.message.content === 'string');
    assert.ok(whole.usage.completion_tokens > 5 && whole.usage.completion_tokens <= 15, JSON.stringify(whole.usage));
    record(label, 'n choices', whole);
    // The same seed streamed: the same choices, read by index as the SDK's users do.
    const chunks = await collect(await client.chat.completions.create({ ...req, stream: true, stream_options: { include_usage: true } }));
    const texts = ['', '', ''];
    const finish = [null, null, null];
    for (const c of chunks) {
      for (const ch of c.choices) {
        texts[ch.index] += ch.delta.content ?? '';
        if (ch.finish_reason) finish[ch.index] = ch.finish_reason;
      }
    }
    assert.deepEqual(texts, whole.choices.map((c) => c.message.content));
    assert.deepEqual(finish, whole.choices.map((c) => c.finish_reason));
    assert.equal(chunks.at(-1).usage.completion_tokens, whole.usage.completion_tokens);
    record(label, 'n choices stream', chunks);
  });

  test(`openai SDK (${label}): typed errors for a bad request${label === 'serve' ? ' and a wrong key' : ''}`, { skip }, async () => {
    const client = clients[label];
    await assert.rejects(client.chat.completions.create(hi({ prediction: { type: 'content', content: 'x' } })), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, e.constructor.name);
      assert.equal(e.status, 400);
      assert.equal(e.code, 'unsupported_parameter');
      assert.equal(e.param, 'prediction');
      record(label, 'bad request', e.error);
      return true;
    });
    await assert.rejects(client.chat.completions.create(hi({ tools: TOOLS, tool_choice: { type: 'function', function: { name: 'nope' } } })), (e) => {
      assert.ok(e instanceof OpenAI.BadRequestError, e.constructor.name);
      assert.equal(e.code, 'unknown_tool');
      assert.equal(e.param, 'tool_choice.function.name');
      return true;
    });
    // The engine's own errors carry the server's codes too (a prompt past the context).
    await assert.rejects(client.completions.create({ model: 'x', prompt: 'x '.repeat(5000), max_tokens: 1 }), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.code, 'context_length_exceeded');
      return true;
    });
    if (label === 'serve') {
      const wrong = new OpenAI({ baseURL: srv.baseURL, apiKey: 'nope', maxRetries: 0 });
      await assert.rejects(wrong.models.list(), (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    }
  });

  test(`openai SDK (${label}): json_object, json_schema and logprobs`, { skip }, async () => {
    const client = clients[label];
    const schema = { type: 'object', properties: { color: { type: 'string', enum: ['red', 'green', 'blue'] }, n: { type: 'integer', minimum: 1, maximum: 9 } }, required: ['color', 'n'], additionalProperties: false };
    const r = await client.chat.completions.create(hi({ max_tokens: 40, response_format: { type: 'json_schema', json_schema: { name: 'pick', schema, strict: true } } }));
    const v = JSON.parse(r.choices[0].message.content);
    assert.ok(['red', 'green', 'blue'].includes(v.color) && Number.isInteger(v.n) && v.n >= 1 && v.n <= 9, r.choices[0].message.content);
    record(label, 'json_schema', r);
    const o = await client.chat.completions.create(hi({ max_tokens: 16, response_format: { type: 'json_object' } }));
    assert.match(o.choices[0].message.content, /^\{/);
    const lp = await client.chat.completions.create(hi({ logprobs: true, top_logprobs: 2 }));
    const content = lp.choices[0].logprobs.content;
    assert.equal(content.map((e) => e.token).join(''), lp.choices[0].message.content);
    assert.ok(content.every((e) => e.logprob <= 0 && e.top_logprobs.length === 2 && Array.isArray(e.bytes)));
    record(label, 'logprobs', lp);
  });

  test(`openai SDK (${label}): tool calls, required and named, streamed and not`, { skip }, async () => {
    const client = clients[label];
    const ask = (extra) => ({ model: 'any', messages: [{ role: 'user', content: 'What is the weather in Paris?' }], tools: TOOLS, max_tokens: 60, temperature: 0, ...extra });
    const r = await client.chat.completions.create(ask({ tool_choice: 'required' }));
    const m = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    assert.equal(m.content, null);
    assert.ok(m.tool_calls.length >= 1);
    m.tool_calls.forEach(validCall);
    record(label, 'tools required', r);

    // Named, streamed: the first piece of the call has id, type and name; then arguments fragments.
    const chunks = await collect(await client.chat.completions.create(ask({ tool_choice: { type: 'function', function: { name: 'get_time' } }, stream: true })));
    const calls = [];
    let finish = null;
    let pieces = 0;
    for (const c of chunks) {
      const ch = c.choices[0];
      if (!ch) continue;
      for (const d of ch.delta.tool_calls ?? []) {
        pieces++;
        if (!calls[d.index]) {
          assert.ok(d.id && d.type === 'function' && d.function.name, JSON.stringify(d));
          calls[d.index] = { id: d.id, type: d.type, function: { name: d.function.name, arguments: '' } };
        }
        calls[d.index].function.arguments += d.function.arguments ?? '';
      }
      if (ch.finish_reason) finish = ch.finish_reason;
    }
    assert.equal(finish, 'tool_calls');
    assert.equal(calls.length, 1);
    assert.ok(pieces > 1);
    // As OpenAI's: the first chunk is the role, content null and the call's opening, so deltas
    // added up give content null, as the whole response has.
    const first = chunks.find((c) => c.choices[0])?.choices[0].delta;
    assert.deepEqual([first.role, first.content, first.tool_calls?.[0]?.function?.name], ['assistant', null, 'get_time'], JSON.stringify(first));
    assert.equal(calls[0].function.name, 'get_time');
    validCall(calls[0]);
    record(label, 'tools named stream', chunks);

    // The call and its result in the history: the model answers (text or another valid call).
    const next = await client.chat.completions.create({
      model: 'any',
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }, m, { role: 'tool', tool_call_id: m.tool_calls[0].id, content: '{"temperature": 21}' }],
      tools: TOOLS,
      tool_choice: 'none',
      max_tokens: 12,
      temperature: 0,
    });
    assert.equal(typeof next.choices[0].message.content, 'string');
    assert.equal(next.choices[0].message.tool_calls, undefined);
    record(label, 'tool result', next);
  });
}

test('openai SDK: the JS engine answers every request in the shapes edgellm serve does', { skip }, () => {
  const names = Object.keys(shapes.serve);
  assert.ok(names.length >= 10, `recorded ${names.join(', ')}`);
  assert.deepEqual(Object.keys(shapes.local).sort(), names.sort());
  for (const n of names) assert.deepEqual(shapes.local[n], shapes.serve[n], n);
});
