// OpenAI's exact semantics, the same in the JS engine (Node worker + wasm), through the router
// and from `edgellm serve` (the native binary on 127.0.0.1), because both check requests with the
// core's one set of rules (src/protocol): unsupported and unknown parameters refused by name,
// OpenAI's limits, include_usage on exactly one chunk, stream.controller.abort(), logprobs,
// structured output and tool calls (the router assembling the server's delta.tool_calls).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { createEngine } from '../../pkg/src/node.js';
import { MODEL, REQUIRED, modelMissing, wasmMissing, cliPath } from './helpers.js';
import { startEdgeServer, cliCanServe } from './router-helpers.js';

const skip = modelMissing() || wasmMissing() || (cliCanServe() ? false : REQUIRED ? false : `native CLI with 'serve' not built (${cliPath() || 'none'})`);

let srv;
let engine;
let routed;

before(async () => {
  if (skip) return;
  [srv, engine] = await Promise.all([startEdgeServer(['--queue', '4']), createEngine({ cache: false })]);
  await engine.load(MODEL);
  routed = await createEngine({ cache: false, route: { mode: 'remote-only', remote: { baseURL: srv.baseURL } } });
});

after(async () => {
  if (engine) engine.terminate();
  if (routed) routed.terminate();
  if (srv) await srv.kill();
});

const PATH = { chat: '/chat/completions', completion: '/completions' };
const hi = (extra = {}) => ({ messages: [{ role: 'user', content: 'Name a color.' }], max_tokens: 5, temperature: 0, ...extra });

async function post(kind, body) {
  const r = await fetch(srv.baseURL + PATH[kind], { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  return { status: r.status, text: await r.text() };
}

/** The SSE chunks of a streamed server response. */
const sseChunks = (text) =>
  text
    .split('\n\n')
    .filter((e) => e.startsWith('data: ') && e !== 'data: [DONE]')
    .map((e) => JSON.parse(e.slice(6)));

async function local(eng, kind, body) {
  const api = kind === 'chat' ? eng.chat.completions : eng.completions;
  return api.create(body);
}

test('a request the engine cannot honour is refused by name, the same locally, routed and by the server', { skip }, async () => {
  const cases = [
    ['chat', hi({ tools: [{ type: 'function', function: { name: 'f', parameters: {} } }], tool_choice: { type: 'function', function: { name: 'g' } } }), 'unknown_tool', 'tool_choice.function.name'],
    ['chat', hi({ tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'array' } } }] }), 'invalid_tools', 'tools[0].function.parameters'],
    ['chat', hi({ functions: [{ name: 'f' }] }), 'unsupported_parameter', 'functions'],
    ['chat', hi({ response_format: { type: 'json_object', schema: {} } }), 'unknown_parameter', 'response_format.schema'],
    ['chat', hi({ frobnicate: true }), 'unknown_parameter', 'frobnicate'],
    ['chat', { ...hi(), messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: null, tool_calls: [] }, { role: 'tool', tool_call_id: 'call_1', content: 'r' }] }, 'unmatched_tool_message', 'messages[2].tool_call_id'],
    ['chat', hi({ n: 129 }), 'invalid_value', 'n'],
    ['chat', hi({ stop: ['a', 'b', 'c', 'd', 'e'] }), 'invalid_value', 'stop'],
    ['chat', hi({ stop: '' }), 'invalid_value', 'stop'],
    ['chat', hi({ repetition_penalty: 50 }), 'invalid_value', 'repetition_penalty'],
    ['chat', hi({ top_logprobs: 3 }), 'invalid_value', 'top_logprobs'],
    ['chat', hi({ stream_options: { include_usage: true } }), 'invalid_value', 'stream_options'],
    ['completion', { prompt: 'x', max_tokens: 2, logprobs: 6 }, 'invalid_value', 'logprobs'],
    ['completion', { prompt: 'x', echo: true }, 'unsupported_parameter', 'echo'],
  ];
  for (const [kind, body, rule, param] of cases) {
    const what = `${kind} ${JSON.stringify(body).slice(0, 120)}`;
    const s = await post(kind, body);
    assert.equal(s.status, 400, `${what}: ${s.text}`);
    const e = JSON.parse(s.text).error;
    assert.deepEqual([e.code, e.param], [rule, param], `server, ${what}`);
    for (const [where, eng] of [['local', engine], ['routed', routed]]) {
      await assert.rejects(local(eng, kind, body), (err) => {
        assert.deepEqual([err.code, err.detail, err.param], ['INVALID_REQUEST', rule, param], `${where}, ${what}: ${err.message}`);
        assert.equal(err.message, e.message, `${where} and the server say the same`);
        return true;
      });
    }
  }
  // A non-finite number never becomes an absent parameter (JSON would turn NaN into null).
  await assert.rejects(engine.chat.completions.create(hi({ temperature: NaN })), (e) => e.code === 'INVALID_REQUEST' && /temperature/.test(e.message));
});

test('stream_options.include_usage: usage on exactly one extra last chunk, as OpenAI; none without it', { skip }, async () => {
  for (const includeUsage of [true, false]) {
    const body = hi({ stream: true, ...(includeUsage ? { stream_options: { include_usage: true } } : {}) });
    const server = sseChunks((await post('chat', body)).text);
    const s = await engine.chat.completions.create(body);
    const mine = [];
    for await (const c of s) mine.push(c);
    for (const [where, chunks] of [['server', server], ['local', mine]]) {
      const withUsage = chunks.filter((c) => c.usage);
      assert.equal(withUsage.length, includeUsage ? 1 : 0, `${where}: ${JSON.stringify(chunks)}`);
      if (includeUsage) {
        const last = chunks[chunks.length - 1];
        assert.deepEqual(last.choices, []);
        assert.ok(last.usage.completion_tokens >= 1 && last.usage.total_tokens === last.usage.prompt_tokens + last.usage.completion_tokens);
      }
      assert.ok(chunks.some((c) => c.choices[0] && c.choices[0].finish_reason), `${where}: a finish chunk`);
    }
    // Same text from both engines (greedy), same chunk kinds.
    const text = (cs) => cs.map((c) => c.choices[0]?.delta?.content ?? '').join('');
    assert.equal(text(mine), text(server));
  }
});

test('stream.controller.abort() stops the generation (as in the openai SDK); the next request works', { skip }, async () => {
  const s = await engine.completions.create({ prompt: 'Once upon a time', max_tokens: 200, temperature: 0, stream: true });
  let chunks = 0;
  await assert.rejects(
    (async () => {
      for await (const c of s) {
        if (c.choices[0].text) chunks++;
        if (chunks === 2) s.controller.abort();
        assert.ok(chunks <= 2, 'no chunk after the abort');
      }
    })(),
    (e) => e.code === 'ABORTED',
  );
  assert.ok(s.controller.signal.aborted);
  const r = await engine.completions.create({ prompt: 'Hello', max_tokens: 2, temperature: 0 });
  assert.equal(r.choices[0].finish_reason, 'length');
});

/** Checks one chat logprobs entry list against OpenAI's shape; returns the tokens. */
function checkChatLogprobs(lp, top) {
  assert.equal(lp.refusal, null);
  for (const e of lp.content) {
    assert.equal(typeof e.token, 'string');
    assert.ok(e.logprob <= 0 && Number.isFinite(e.logprob), JSON.stringify(e));
    // bytes: the token's UTF-8 (its text is lossy only where they are not whole characters).
    if (!e.token.includes('\uFFFD')) assert.deepEqual(e.bytes, [...Buffer.from(e.token, 'utf8')]);
    assert.equal(e.top_logprobs.length, top);
    for (let i = 1; i < top; i++) assert.ok(e.top_logprobs[i - 1].logprob >= e.top_logprobs[i].logprob);
    // Greedy: the chosen token is the likeliest of the model's distribution.
    if (top) assert.deepEqual([e.top_logprobs[0].token, e.top_logprobs[0].logprob], [e.token, e.logprob]);
  }
  return lp.content.map((e) => e.token);
}

test('logprobs / top_logprobs in OpenAI shape, streamed and not, equal between the JS engine and the server', { skip }, async () => {
  const body = hi({ logprobs: true, top_logprobs: 3 });
  const server = JSON.parse((await post('chat', body)).text);
  const mine = await engine.chat.completions.create(body);
  const t1 = checkChatLogprobs(mine.choices[0].logprobs, 3);
  const t2 = checkChatLogprobs(server.choices[0].logprobs, 3);
  assert.deepEqual(t1, t2);
  assert.equal(t1.join(''), mine.choices[0].message.content, 'the entries spell the text');
  mine.choices[0].logprobs.content.forEach((e, i) => assert.ok(Math.abs(e.logprob - server.choices[0].logprobs.content[i].logprob) < 1e-2, `${e.logprob} vs ${server.choices[0].logprobs.content[i].logprob}`));
  // Streamed: the chunks' entries add up to the non-streamed ones (server and local).
  const streamBody = { ...body, stream: true };
  const s = await engine.chat.completions.create(streamBody);
  const parts = [];
  for await (const c of s) if (c.choices[0]?.logprobs) parts.push(...c.choices[0].logprobs.content);
  assert.deepEqual(parts, mine.choices[0].logprobs.content);
  const sp = sseChunks((await post('chat', streamBody)).text).flatMap((c) => c.choices[0]?.logprobs?.content ?? []);
  assert.deepEqual(sp.map((e) => e.token), t2);
  // Without logprobs: null, as OpenAI.
  assert.equal((await engine.chat.completions.create(hi())).choices[0].logprobs, null);
  // Completions: OpenAI's legacy shape, text_offset from the prompt's start.
  const prompt = 'The capital of France is';
  const cb = { prompt, max_tokens: 4, temperature: 0, logprobs: 2 };
  const c1 = (await engine.completions.create(cb)).choices[0];
  const c2 = JSON.parse((await post('completion', cb)).text).choices[0];
  for (const c of [c1, c2]) {
    const lp = c.logprobs;
    assert.equal(lp.tokens.join(''), c.text);
    assert.equal(lp.token_logprobs.length, lp.tokens.length);
    assert.equal(lp.text_offset[0], prompt.length);
    lp.top_logprobs.forEach((t, i) => assert.ok(Object.keys(t).length <= 2 && t[lp.tokens[i]] === lp.token_logprobs[i], JSON.stringify(t)));
  }
  assert.deepEqual(c1.logprobs.tokens, c2.logprobs.tokens);
  assert.deepEqual(c1.logprobs.text_offset, c2.logprobs.text_offset);
});

test('response_format json_object / json_schema: the output always parses and validates, locally and from the server', { skip }, async () => {
  const schema = {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 20 }, age: { type: 'integer', minimum: 0, maximum: 150 }, tags: { type: 'array', items: { type: 'string', maxLength: 10 }, maxItems: 3 } },
    required: ['name', 'age', 'tags'],
    additionalProperties: false,
  };
  const ask = (response_format, max_tokens = 60) => hi({ messages: [{ role: 'user', content: 'Describe a person as JSON.' }], max_tokens, response_format });
  // Any JSON object: unbounded, so a small model may still be inside it at max_tokens; what it
  // wrote is the start of an object (and parses whenever the grammar ended it).
  const obj = { type: 'json_object' };
  for (const [where, r] of [['local', await engine.chat.completions.create(ask(obj, 24))], ['server', JSON.parse((await post('chat', ask(obj, 24))).text)]]) {
    const c = r.choices[0];
    assert.match(c.message.content, /^\{/, where);
    if (c.finish_reason === 'stop') assert.equal(typeof JSON.parse(c.message.content), 'object');
  }
  for (const [rf, check] of [
    [
      { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } },
      (v) => {
        assert.deepEqual(Object.keys(v).sort(), ['age', 'name', 'tags']);
        assert.ok(typeof v.name === 'string' && v.name.length <= 20);
        assert.ok(Number.isInteger(v.age) && v.age >= 0 && v.age <= 150);
        assert.ok(Array.isArray(v.tags) && v.tags.length <= 3 && v.tags.every((t) => typeof t === 'string'));
      },
    ],
  ]) {
    const mine = await engine.chat.completions.create(ask(rf));
    const server = JSON.parse((await post('chat', ask(rf))).text);
    for (const [where, r] of [['local', mine], ['server', server]]) {
      const c = r.choices[0];
      assert.equal(c.finish_reason, 'stop', `${where}: the grammar ended the output (${c.message.content})`);
      check(JSON.parse(c.message.content));
    }
    assert.equal(mine.choices[0].message.content, server.choices[0].message.content, 'greedy: the same JSON from both engines');
    // Streamed: the chunks add up to the same JSON.
    const s = await engine.chat.completions.create({ ...ask(rf), stream: true });
    let text = '';
    for await (const c of s) text += c.choices[0]?.delta?.content ?? '';
    assert.equal(text, mine.choices[0].message.content);
  }
  // Extension: a Lark grammar, the same sentence from both engines.
  const g = { type: 'grammar', grammar: 'start: answer "."\nanswer: "yes" | "no" | "maybe"' };
  const gl = (await engine.chat.completions.create(ask(g, 8))).choices[0].message.content;
  const gs = JSON.parse((await post('chat', ask(g, 8))).text).choices[0].message.content;
  assert.ok(['yes.', 'no.', 'maybe.'].includes(gl), gl);
  assert.equal(gl, gs);
  // A schema that cannot be compiled, or a malformed response_format: typed errors.
  for (const rf of [{ type: 'json_schema', json_schema: { name: 'x', schema: { type: 'nonsense' } } }, { type: 'json_schema', json_schema: { schema: {} } }, { type: 'xml' }]) {
    const s = await post('chat', ask(rf));
    assert.equal(s.status, 400, s.text);
    await assert.rejects(engine.chat.completions.create(ask(rf)), (e) => e.code === 'INVALID_REQUEST' && /response_format/.test(e.message), JSON.stringify(rf));
  }
});

test('tool calls: the same call locally, through the router (assembled from the server stream) and from the server', { skip }, async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 20 } }, required: ['city'], additionalProperties: false } } }];
  const ask = { messages: [{ role: 'user', content: 'What is the weather in Paris?' }], tools, tool_choice: 'required', max_tokens: 40, temperature: 0 };
  const server = JSON.parse((await post('chat', ask)).text).choices[0];
  const mine = (await engine.chat.completions.create(ask)).choices[0];
  const viaRouter = (await routed.chat.completions.create(ask)).choices[0];
  for (const [where, c] of [['server', server], ['local', mine], ['routed', viaRouter]]) {
    assert.equal(c.finish_reason, 'tool_calls', where);
    assert.equal(c.message.content, null, where);
    assert.equal(c.message.tool_calls.length, 1, where);
    const call = c.message.tool_calls[0];
    assert.deepEqual([call.type, call.function.name, Object.keys(JSON.parse(call.function.arguments))], ['function', 'get_weather', ['city']], where);
  }
  // Greedy: the same arguments from both engines, and the router passes the server's on.
  assert.equal(mine.message.tool_calls[0].function.arguments, server.message.tool_calls[0].function.arguments);
  assert.equal(viaRouter.message.tool_calls[0].function.arguments, server.message.tool_calls[0].function.arguments);
});

test('n choices: the router assembles each choice from the server stream by its index, as the server answers whole', { skip }, async () => {
  const ask = { messages: [{ role: 'user', content: 'Say a word.' }], max_tokens: 5, temperature: 1.1, seed: 3, n: 3, logprobs: true };
  const s = await post('chat', ask);
  assert.equal(s.status, 200, s.text);
  const server = JSON.parse(s.text);
  const viaRouter = await routed.chat.completions.create(ask);
  const view = (r) => r.choices.map((c) => [c.index, c.message.content, c.finish_reason, c.logprobs.content.map((e) => e.token).join('')]);
  assert.deepEqual(view(viaRouter), view(server));
  for (const c of server.choices) assert.equal(c.logprobs.content.map((e) => e.token).join(''), c.message.content);
  assert.equal(viaRouter.usage.completion_tokens, server.usage.completion_tokens);
  // Streamed through the router: every choice's chunks, by index.
  const texts = ['', '', ''];
  for await (const c of await routed.chat.completions.create({ ...ask, stream: true })) {
    for (const ch of c.choices) texts[ch.index] += ch.delta.content ?? '';
  }
  assert.deepEqual(texts, server.choices.map((c) => c.message.content));
  // The JS engine: three choices of the same shape (its kernels are wasm, the draw may differ).
  const local = await engine.chat.completions.create(ask);
  assert.deepEqual(local.choices.map((c) => c.index), [0, 1, 2]);
});

test('odd values from JS: non-finite numbers and BigInts name the parameter, lone surrogates become U+FFFD, every 64-bit seed JS can hold runs, a long prompt names its parameter', { skip }, async () => {
  for (const [k, v] of [['temperature', NaN], ['max_tokens', Infinity], ['seed', 5n]]) {
    await assert.rejects(engine.chat.completions.create(hi({ [k]: v })), (e) => {
      assert.deepEqual([e.code, e.detail, e.param], ['INVALID_REQUEST', 'invalid_value', k], `${k}: ${e.message}`);
      return true;
    });
  }
  const lone = await engine.chat.completions.create({ ...hi(), messages: [{ role: 'user', content: 'Repeat: abc\uD800' }] });
  const same = await engine.chat.completions.create({ ...hi(), messages: [{ role: 'user', content: 'Repeat: abc\uFFFD' }] });
  assert.equal(lone.choices[0].message.content, same.choices[0].message.content);
  // -2^63 (JS prints it past i64) and 2^63: accepted, and the same seed repeats.
  for (const seed of [-(2 ** 63), 2 ** 63]) {
    const ask = hi({ temperature: 1, seed, max_tokens: 4 });
    const a = await engine.chat.completions.create(ask);
    const b = await engine.chat.completions.create(ask);
    assert.equal(a.choices[0].message.content, b.choices[0].message.content, `seed ${seed}`);
  }
  for (const [kind, body, param] of [['completion', { prompt: 'x '.repeat(5000), max_tokens: 1 }, 'prompt'], ['chat', { messages: [{ role: 'user', content: 'x '.repeat(5000) }], max_tokens: 1 }, 'messages']]) {
    await assert.rejects(local(engine, kind, body), (e) => {
      assert.deepEqual([e.code, e.param], ['PROMPT_TOO_LONG', param], e.message);
      return true;
    });
    const s = await post(kind, body);
    assert.equal(JSON.parse(s.text).error.param, param, s.text);
  }
});
