// The router's pieces without a model or a server: the decision table and its typed errors,
// latency estimates, the SSE parser, the remote client's error mapping (with a fake fetch), and
// the Router itself over a fake local engine and a fake server (memory budget, capability,
// latency, local crash before / after the first token).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { decide, noRouteError } from '../../pkg/src/router/decision.js';
import { Estimates } from '../../pkg/src/router/estimates.js';
import { RemoteClient, sseData, defaultHealthURL, remoteRetriable, maxTextEvents } from '../../pkg/src/router/remote.js';
import { RemoteState } from '../../pkg/src/router/health.js';
import { Router } from '../../pkg/src/router.js';
import { CompletionStream } from '../../pkg/src/client.js';
import { EdgeLLMError } from '../../pkg/src/errors.js';

const base = (x = {}) => ({
  mode: 'prefer-local',
  private: false,
  local: { reason: null },
  remote: { reason: null },
  estimates: { t_local_ms: 1000, t_remote_ms: 500 },
  ...x,
});

test('decide: modes, privacy, feasibility, latency, pins, cost', () => {
  assert.deepEqual(decide(base()), { target: 'local', reason: 'prefer-local', ruled_out: {} });
  assert.equal(decide(base({ mode: 'prefer-remote' })).target, 'remote');
  assert.deepEqual(decide(base({ mode: 'local-only' })), { target: 'local', reason: 'local-only', ruled_out: { remote: 'mode_local_only' } });
  assert.deepEqual(decide(base({ mode: 'remote-only' })), { target: 'remote', reason: 'remote-only', ruled_out: { local: 'mode_remote_only' } });
  assert.deepEqual(decide(base({ mode: 'prefer-remote', private: true })), { target: 'local', reason: 'private', ruled_out: { remote: 'private' } });
  const over = decide(base({ local: { reason: 'prompt_over_kv_budget' } }));
  assert.deepEqual(over, { target: 'remote', reason: 'prompt_over_kv_budget', ruled_out: { local: 'prompt_over_kv_budget' } });
  assert.equal(decide(base({ mode: 'prefer-remote', remote: { reason: 'remote_unavailable' } })).reason, 'remote_unavailable');
  // T_max rules out the slow route; both too slow: no route.
  assert.deepEqual(decide(base({ maxLatencyMs: 800 })), { target: 'remote', reason: 'latency', ruled_out: { local: 'latency' } });
  assert.equal(decide(base({ maxLatencyMs: 100 })).target, null);
  assert.deepEqual(decide(base({ pinned: 'local', mode: 'prefer-remote' })), { target: 'local', reason: 'version_pinned', ruled_out: { remote: 'version_pinned' } });
  // An app cost function; equal costs go to the lower latency.
  assert.equal(decide(base({ cost: (t) => (t === 'local' ? 5 : 1) })).target, 'remote');
  assert.equal(decide(base({ cost: () => 1 })).target, 'remote');
  assert.equal(decide(base({ cost: () => 1, estimates: { t_local_ms: 10, t_remote_ms: 500 } })).target, 'local');
});

test('no route: one typed error per situation', () => {
  const err = (x) => noRouteError(decide(base(x)), { some: 'route' });
  let e = err({ private: true, local: { reason: 'prompt_over_kv_budget' } });
  assert.equal(e.code, 'PRIVATE_REMOTE_FORBIDDEN');
  assert.equal(e.detail, 'PROMPT_OVER_KV_BUDGET');
  assert.deepEqual(e.route, { some: 'route' });
  assert.equal(err({ mode: 'local-only', local: { reason: 'prompt_over_kv_budget' } }).code, 'PROMPT_OVER_KV_BUDGET');
  assert.equal(err({ mode: 'local-only', local: { reason: 'no_local_model' } }).code, 'MODEL_NOT_LOADED');
  assert.equal(err({ mode: 'remote-only', remote: { reason: 'remote_unavailable' } }).code, 'REMOTE_UNAVAILABLE');
  assert.equal(err({ mode: 'remote-only', remote: { reason: 'remote_unauthorized' } }).code, 'REMOTE_UNAUTHORIZED');
  assert.equal(err({ local: { reason: 'prompt_over_kv_budget' }, remote: { reason: 'remote_unavailable' } }).code, 'REMOTE_UNAVAILABLE');
  assert.equal(err({ local: { reason: 'capability' }, remote: { reason: 'capability' } }).code, 'NO_ROUTE');
  assert.equal(err({ mode: 'remote-only', private: true }).code, 'PRIVATE_REMOTE_FORBIDDEN');
});

test('estimates: T_local = load + prefill + decode, T_remote = RTT + prefill + decode, averaged', () => {
  const e = new Estimates({ local: { prefill_tokens_per_s: 100, tpot_ms: 50, load_ms: 2000 }, remote: { rtt_ms: 40, prefill_tokens_per_s: 1000, tpot_ms: 10 } });
  assert.equal(e.tLocal({ promptTokens: 100, maxTokens: 10, loaded: true }), 1000 + 500);
  assert.equal(e.tLocal({ promptTokens: 100, maxTokens: 10, loaded: false }), 2000 + 1500);
  assert.equal(e.tLocal({ promptTokens: 100, maxTokens: 10, loaded: false, loadMs: 300 }), 300 + 1500);
  assert.equal(e.tRemote({ promptTokens: 100, maxTokens: 10 }), 40 + 100 + 100);
  e.observeLocal({ prefill_tokens_per_s: 200, tpot_ms: 20 }); // first sample replaces the prior
  assert.equal(e.tLocal({ promptTokens: 100, maxTokens: 10, loaded: true }), 500 + 200);
  e.observeLocal({ prefill_tokens_per_s: 0, tpot_ms: NaN }); // ignored
  e.observeLocal({ prefill_tokens_per_s: 100, tpot_ms: 30 });
  assert.ok(Math.abs(e.snapshot().local.tpot_ms - 23) < 1e-9);
  e.observeRemote(undefined, { prompt_tokens: 50, ttft_ms: 100, tpot_ms: 5 }); // no server timings: the client's
  assert.equal(e.snapshot().remote.prefill_tokens_per_s, 500);
  assert.equal(e.snapshot().remote.tpot_ms, 5);
});

function streamOf(parts, { failAfter = null } = {}) {
  const enc = new TextEncoder();
  let i = 0;
  return new ReadableStream({
    pull(c) {
      if (failAfter !== null && i === failAfter) return c.error(new Error('socket hang up'));
      if (i < parts.length) c.enqueue(enc.encode(parts[i++]));
      else c.close();
    },
  });
}

test('SSE parser: split lines, CRLF, multi-line data, comments', async () => {
  const out = [];
  for await (const d of sseData(streamOf([': hi\r\ndata: {"a"', ':1}\r\n\r\nda', 'ta: x\ndata: y\n\nevent: e\ndata: [DONE]\n\n']).getReader())) out.push(d);
  assert.deepEqual(out, ['{"a":1}', 'x\ny', '[DONE]']);
});

test('remote client: errors before the first token vs after it', async () => {
  assert.equal(defaultHealthURL('http://h:1/v1'), 'http://h:1/health');
  assert.equal(defaultHealthURL('http://h:1/api/v1/'), 'http://h:1/api/health');
  const chunk = (t, fin = null) => `data: ${JSON.stringify({ id: 'x', choices: [{ index: 0, text: t, finish_reason: fin }] })}\n\n`;
  const respond = (status, body, headers = {}) => async () => new Response(body, { status, headers });
  const client = (fetch, extra = {}) => new RemoteClient({ baseURL: 'http://fake/v1', fetch, ...extra });
  const drain = async (conn) => {
    const got = [];
    for await (const c of conn.chunks) got.push(c);
    return got;
  };
  // Complete stream.
  let c = client(respond(200, streamOf([chunk('a'), chunk('b', 'stop'), 'data: [DONE]\n\n'])));
  assert.equal((await drain(await c.open('completion', {}, null))).length, 2);
  // Broken after a token: REMOTE_INTERRUPTED. Broken before any: REMOTE_UNAVAILABLE (retriable).
  c = client(respond(200, streamOf([chunk('a')], { failAfter: 1 })));
  await assert.rejects(drain(await c.open('completion', {}, null)), { code: 'REMOTE_INTERRUPTED' });
  c = client(respond(200, streamOf([], { failAfter: 0 })));
  const e = await drain(await c.open('completion', {}, null)).catch((x) => x);
  assert.equal(e.code, 'REMOTE_UNAVAILABLE');
  assert.ok(remoteRetriable(e));
  // An error event in the stream, HTTP statuses, refused connections.
  c = client(respond(200, streamOf(['data: {"error":{"message":"boom","type":"server_error","code":"x"}}\n\n'])));
  await assert.rejects(drain(await c.open('completion', {}, null)), { code: 'REMOTE_ERROR', detail: 'x' });
  await assert.rejects(client(respond(401, '{"error":{"message":"no","code":"invalid_api_key"}}')).open('chat', {}, null), { code: 'REMOTE_UNAUTHORIZED', status: 401 });
  const e5 = await client(respond(500, 'oops')).open('chat', {}, null).catch((x) => x);
  assert.equal(e5.code, 'REMOTE_ERROR');
  assert.ok(remoteRetriable(e5));
  const e4 = await client(respond(400, '{"error":{"message":"bad","code":"max_tokens_exceeded"}}')).open('chat', {}, null).catch((x) => x);
  assert.equal(e4.detail, 'max_tokens_exceeded');
  assert.ok(!remoteRetriable(e4));
  await assert.rejects(client(async () => Promise.reject(new TypeError('fetch failed'))).open('chat', {}, null), { code: 'REMOTE_UNAVAILABLE' });
  // No first token within timeoutMs.
  const never = async (url, init) =>
    new Response(
      new ReadableStream({
        start(ctl) {
          init.signal.addEventListener('abort', () => ctl.error(new Error('aborted')));
        },
      }),
      { status: 200 },
    );
  const t0 = Date.now();
  await assert.rejects(drain(await client(never, { timeoutMs: 150 }).open('chat', {}, null)), { code: 'REMOTE_UNAVAILABLE', detail: 'TIMEOUT' });
  assert.ok(Date.now() - t0 < 2000);
});

test('remote state: health cached, shared in flight, marked down', async () => {
  let calls = 0;
  const client = { health: async () => (calls++, { ok: true, status: 200, rtt_ms: 3 }), modelInfo: async () => ({ id: 'm', sha256: 'ab' }) };
  const st = new RemoteState(client, { healthTtlMs: 10_000 });
  const [a, b] = await Promise.all([st.checkHealth(), st.checkHealth()]);
  assert.equal(calls, 1);
  assert.equal(a, b);
  await st.checkHealth();
  assert.equal(calls, 1);
  st.markDown();
  assert.equal((await st.checkHealth()).ok, false, 'down until the down-TTL passes');
  assert.equal((await st.modelInfo()).sha256, 'ab');
});

// ── the Router with a fake local engine and a fake server ─────────────────────────────────────

function fakeServer(log = []) {
  const sse = (objs) => new ReadableStream({ start(c) { for (const o of objs) c.enqueue(new TextEncoder().encode(`data: ${typeof o === 'string' ? o : JSON.stringify(o)}\n\n`)); c.close(); } });
  return async (url, init = {}) => {
    log.push(`${init.method || 'GET'} ${url}`);
    if (url.endsWith('/health')) return new Response('{"status":"ok"}');
    if (url.endsWith('/models')) return new Response(JSON.stringify({ data: [{ id: 'm', sha256: 'aa' }] }));
    const ch = (delta, fin = null) => ({ id: 'r', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, logprobs: null, finish_reason: fin }] });
    return new Response(sse([ch({ role: 'assistant', content: '' }), ch({ content: 'remote' }), ch({}, 'stop'), { id: 'r', choices: [], usage: { prompt_tokens: 3, completion_tokens: 1 } }, '[DONE]']));
  };
}

/** A fake local engine: `behaviour` = 'ok' | 'crash-before' | 'crash-after'. */
function fakeHooks(state, behaviour = 'ok') {
  return {
    localState: () => state,
    countTokens: async () => ({ prompt_tokens: 5, max_context: 100, fits: true }),
    makeStream: (onCancel, signal) => new CompletionStream(onCancel, signal),
    local: async () => {
      if (behaviour === 'crash-before') throw new EdgeLLMError('ENGINE_CRASHED', 'the wasm engine crashed');
      const s = new CompletionStream(() => {});
      const ch = (delta, fin = null, usage) => ({ id: 'l', object: 'chat.completion.chunk', created: 1, model: 'x', choices: [{ index: 0, delta, logprobs: null, finish_reason: fin }], ...(usage ? { usage } : {}) });
      s._push(ch({ role: 'assistant', content: '' }));
      s._push(ch({ content: 'local' }));
      setTimeout(() => {
        if (behaviour === 'crash-after') return s._end(new EdgeLLMError('ENGINE_CRASHED', 'trap'));
        s._push(ch({}, 'stop'));
        s._push({ id: 'l', object: 'chat.completion.chunk', created: 1, model: 'x', choices: [], usage: { prompt_tokens: 5, completion_tokens: 1, ttft_ms: 10, tpot_ms: 0, prefill_tokens_per_s: 500, decode_tokens_per_s: 0 } });
        s._end();
      }, 5);
      return s;
    },
  };
}

const MODEL_INFO = { sha256: 'aa', max_context: 100, weights_bytes: 10, load_ms: 50 };
const chat = (extra = {}) => ({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, ...extra });

test('router: memory budget, capability and latency rules; local crash fails over or ends the stream', async () => {
  const remote = { baseURL: 'http://fake/v1', fetch: fakeServer() };
  // The last load was refused for memory: remote, and why.
  let r = new Router(fakeHooks({ model: null, reloadable: false, lastModel: null, lastLoadError: 'OVER_MEMORY_BUDGET' }), { mode: 'prefer-local', remote });
  let out = await r.create('chat', chat());
  assert.equal(out.route.target, 'remote');
  assert.equal(out.route.reason, 'over_memory_budget');
  assert.equal(out.choices[0].message.content, 'remote');
  assert.equal(out.usage.completion_tokens, 1);
  const state = { model: MODEL_INFO, reloadable: false, lastModel: MODEL_INFO, lastLoadError: null, memoryBudget: null };
  // The app's capability rule.
  r = new Router(fakeHooks(state), { mode: 'prefer-local', remote, capability: ({ target, params }) => params.metadata?.quality !== 'high' || target === 'remote' });
  assert.equal((await r.create('chat', chat({ metadata: { quality: 'high' } }))).route.target, 'remote');
  assert.equal((await r.create('chat', chat())).route.target, 'local');
  // T_max: with slow local priors, a tight limit sends it remote; an impossible one fails typed.
  r = new Router(fakeHooks(state), { mode: 'prefer-local', remote, priors: { local: { tpot_ms: 1000 } } });
  out = await r.create('chat', chat({ max_latency_ms: 2000 }));
  assert.equal(out.route.target, 'remote');
  assert.equal(out.route.ruled_out.local, 'latency');
  await assert.rejects(r.create('chat', chat({ max_latency_ms: 1 })), { code: 'NO_ROUTE' });
  // Local crash before the first token: the server takes over.
  r = new Router(fakeHooks(state, 'crash-before'), { mode: 'prefer-local', remote });
  out = await r.create('chat', chat());
  assert.equal(out.route.target, 'remote');
  assert.equal(out.route.fallback_from, 'local');
  assert.equal(out.route.reason, 'engine_crashed');
  // ... but never for a private request.
  await assert.rejects(r.create('chat', chat({ private: true })), { code: 'ENGINE_CRASHED' });
  // Local crash after the first token: text kept, finish_reason 'error'.
  r = new Router(fakeHooks(state, 'crash-after'), { mode: 'prefer-local', remote });
  const s = await r.create('chat', chat({ stream: true }));
  const chunks = [];
  for await (const c of s) chunks.push(c);
  assert.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'local');
  assert.equal(chunks[chunks.length - 1].choices[0].finish_reason, 'error');
  assert.equal(chunks[chunks.length - 1].error.code, 'ENGINE_CRASHED');
  out = await r.create('chat', chat());
  assert.equal(out.choices[0].message.content, 'local');
  assert.equal(out.choices[0].finish_reason, 'error');
  assert.equal(out.error.code, 'ENGINE_CRASHED');
});

test('router: `private` accepts only booleans; a local-only engine cannot be widened per request', async () => {
  const log = [];
  const remote = { baseURL: 'http://fake/v1', fetch: fakeServer(log) };
  const state = { model: MODEL_INFO, reloadable: false, lastModel: MODEL_INFO, lastLoadError: null, memoryBudget: null };
  const r = new Router(fakeHooks(state), { mode: 'prefer-remote', remote });
  // "true", 1, "yes" used to read as not private, and the prompt went to the server.
  for (const v of ['true', 1, 'yes', 0, {}, 'false']) {
    await assert.rejects(r.create('chat', chat({ private: v })), { code: 'INVALID_REQUEST' }, JSON.stringify(v));
  }
  assert.deepEqual(log, [], 'not a single request left (not even a health check)');
  assert.equal((await r.create('chat', chat({ private: true }))).route.target, 'local');
  assert.ok(!log.some((l) => l.includes('/chat/completions')), 'a private request is never sent');
  assert.equal((await r.create('chat', chat({ private: false }))).route.target, 'remote');
  // An engine configured local-only (a server is configured, but not to be used).
  log.length = 0;
  const lo = new Router(fakeHooks(state), { mode: 'local-only', remote });
  for (const mode of ['prefer-remote', 'remote-only', 'prefer-local']) {
    await assert.rejects(lo.create('chat', chat({ route: { mode } })), { code: 'INVALID_REQUEST' }, mode);
  }
  assert.equal((await lo.create('chat', chat({ route: { mode: 'local-only' } }))).route.target, 'local');
  // Even when the local engine crashes, a local-only engine does not fail over.
  const crashing = new Router(fakeHooks(state, 'crash-before'), { mode: 'local-only', remote });
  await assert.rejects(crashing.create('chat', chat()), { code: 'ENGINE_CRASHED' });
  assert.deepEqual(log, [], 'a local-only engine sent nothing');
});

test('remote client: a stalled or huge body is cut, never awaited for good', async () => {
  // Headers, then a body that never ends (and ends only when the fetch is aborted).
  const stalled = (status) => async (url, init) =>
    new Response(
      new ReadableStream({
        start(ctl) {
          ctl.enqueue(new TextEncoder().encode(status === 200 ? '{"data": [' : '{"error":'));
          init.signal.addEventListener('abort', () => ctl.error(new Error('aborted')));
        },
      }),
      { status },
    );
  const c = (fetch, extra = {}) => new RemoteClient({ baseURL: 'http://fake/v1', fetch, ...extra });
  let t0 = Date.now();
  await assert.rejects(c(stalled(200)).modelInfo(150), { code: 'REMOTE_UNAVAILABLE' });
  assert.ok(Date.now() - t0 < 2000, 'GET /models with a stalled body ends at its timeout');
  t0 = Date.now();
  const e = await c(stalled(502), { timeoutMs: 150 }).open('chat', {}, null).catch((x) => x);
  assert.equal(e.code, 'REMOTE_ERROR');
  assert.equal(e.status, 502);
  assert.ok(Date.now() - t0 < 2000, 'an error status with a stalled body ends at the timeout');
  // ... and the caller's abort ends it sooner.
  const ac = new AbortController();
  setTimeout(() => ac.abort(), 50);
  await assert.rejects(c(stalled(502), { timeoutMs: 60_000 }).open('chat', {}, ac.signal), { code: 'ABORTED' });
  // A 2xx with no body is a typed error, not a TypeError.
  await assert.rejects(c(async () => new Response(null, { status: 204 })).open('chat', {}, null), { code: 'REMOTE_ERROR', detail: 'BAD_RESPONSE' });
  // An SSE line that never ends: cut at MAX_SSE_EVENT_CHARS, not buffered without bound.
  const endless = new ReadableStream({
    pull(ctl) {
      ctl.enqueue(new TextEncoder().encode('data: ' + 'x'.repeat(1 << 20)));
    },
  });
  t0 = Date.now();
  await assert.rejects(
    (async () => {
      for await (const _ of sseData(endless.getReader()));
    })(),
    { detail: 'BAD_RESPONSE' },
  );
  assert.ok(Date.now() - t0 < 5000);
});

// A server that breaks OpenAI's stream: each case, before and after the first output, with the
// error a caller (and the router's failover rule) must see. From a probe with hostile servers.
test('remote client: a stream that breaks the protocol or its bounds is a typed error, in bounded time and memory', async () => {
  const enc = new TextEncoder();
  const ev = (o) => enc.encode(`data: ${typeof o === 'string' ? o : JSON.stringify(o)}\n\n`);
  const role = { choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] };
  const tok = (text, index = 0) => ({ choices: [{ index, delta: { content: text }, finish_reason: null }] });
  const fin = (index = 0) => ({ choices: [{ index, delta: {}, finish_reason: 'stop' }] });
  // `events` then close; `forever(i)`: one event per pull, endlessly, until the fetch is aborted.
  const server = (events, forever, seen) => async (url, init) => {
    if (seen) seen.push(init);
    let i = 0;
    return new Response(
      new ReadableStream({
        start(ctl) {
          // As fetch does: the abort errors the body.
          init.signal.addEventListener('abort', () => ctl.error(new Error('aborted')));
        },
        async pull(ctl) {
          if (i < events.length) return ctl.enqueue(ev(events[i++]));
          if (!forever) return ctl.close();
          await new Promise((r) => setTimeout(r, forever.ms ?? 0));
          ctl.enqueue(ev(forever.event(i++)));
        },
      }),
      { status: 200 },
    );
  };
  const read = async (fetch, body = {}, extra = {}, readerDelayMs = 0) => {
    const c = new RemoteClient({ baseURL: 'http://fake/v1', fetch, timeoutMs: 400, idleTimeoutMs: 400, ...extra });
    const got = [];
    const t0 = Date.now();
    try {
      const { chunks } = await c.open('chat', body, null);
      for await (const x of chunks) {
        got.push(x);
        if (readerDelayMs) await new Promise((r) => setTimeout(r, readerDelayMs));
      }
      return { got, ms: Date.now() - t0 };
    } catch (e) {
      return { got, e, ms: Date.now() - t0 };
    }
  };
  const expect = async (what, r, code, detail) => {
    const x = await r;
    assert.equal(x.e && x.e.code, code, `${what}: ${x.e}`);
    if (detail) assert.equal(x.e.detail, detail, what);
    assert.ok(x.ms < 5000, `${what}: ${x.ms} ms`);
    return x;
  };
  // Before the first output: failures that the router may fail over from (not "interrupted").
  await expect('a role chunk, then the connection drops', read(server([role])), 'REMOTE_UNAVAILABLE', 'CONNECTION_LOST');
  await expect('[DONE] with no finish_reason', read(server([role, '[DONE]'])), 'REMOTE_UNAVAILABLE', 'CONNECTION_LOST');
  await expect('choices not an array', read(server([{ choices: 'abc' }])), 'REMOTE_UNAVAILABLE', 'BAD_RESPONSE');
  await expect('data: null', read(server(['null'])), 'REMOTE_UNAVAILABLE', 'BAD_RESPONSE');
  const html = async () => new Response('<html><body>Login</body></html>', { status: 200, headers: { 'content-type': 'text/html' } });
  const x0 = await expect('an HTML page', read(html), 'REMOTE_UNAVAILABLE', 'BAD_RESPONSE');
  assert.match(x0.e.message, /text\/html/);
  await expect('a choice index past n', read(server([tok('a', 3)]), { n: 2 }), 'REMOTE_UNAVAILABLE', 'BAD_RESPONSE');
  // Empty deltas dripping in never hold the first-output deadline open, nor pile up.
  await expect('a drip of empty deltas', read(server([], { ms: 50, event: () => role })), 'REMOTE_UNAVAILABLE', 'TIMEOUT');
  await expect('a flood of empty deltas', read(server([], { event: () => role }), {}, { timeoutMs: 60_000 }), 'REMOTE_UNAVAILABLE', 'BAD_RESPONSE');
  // After it: interrupted, and what arrived was delivered.
  let x = await expect('tokens far past max_tokens', read(server([role], { event: () => tok('x') }), { max_tokens: 5 }), 'REMOTE_INTERRUPTED', 'TOO_LONG');
  assert.equal(x.got.filter((c) => c.choices[0].delta.content).length, maxTextEvents(5));
  await expect('text past the output cap', read(server([role], { event: () => tok('y'.repeat(1 << 20)) })), 'REMOTE_INTERRUPTED', 'TOO_LONG');
  await expect('empty deltas after the first token', read(server([role, tok('a')], { ms: 50, event: () => role })), 'REMOTE_INTERRUPTED', 'TIMEOUT');
  await expect('choice 1 never finishes', read(server([tok('a', 0), tok('b', 1), fin(0), '[DONE]']), { n: 2 }), 'REMOTE_INTERRUPTED', 'CONNECTION_LOST');
  // Valid answers that the checks must not refuse: reasoning deltas before the content (llama.cpp's
  // and vLLM's reasoning parsers), more than 256 of them and slower than timeoutMs in all; a
  // reader slower than idleTimeoutMs; a server that ignores n = 2 and answers one choice; a
  // role chunk with an empty tool_calls list under max_tokens 1; a few flushed events past max_tokens.
  const think = { choices: [{ index: 0, delta: { reasoning_content: 'hmm ' }, finish_reason: null }] };
  x = await read(server([role, ...Array(300).fill(think), tok('A'), fin(), '[DONE]']));
  assert.equal(x.e, undefined, String(x.e));
  x = await read(server([role], { ms: 30, event: (i) => (i < 20 ? think : i === 20 ? tok('A') : i === 21 ? fin() : '[DONE]') }), {}, {});
  assert.equal(x.e, undefined, String(x.e));
  x = await read(server([role, tok('a'), tok('b'), tok('c'), fin(), '[DONE]']), {}, {}, 500);
  assert.equal(x.e, undefined, `a slow reader is not a slow server: ${x.e}`);
  x = await read(server([role, tok('A'), fin(), '[DONE]']), { n: 2 });
  assert.equal(x.e, undefined, String(x.e));
  x = await read(server([{ choices: [{ index: 0, delta: { role: 'assistant', content: '', tool_calls: [] } }] }, tok('A'), fin(), '[DONE]']), { max_tokens: 1 });
  assert.equal(x.e, undefined, String(x.e));
  x = await read(server([tok('a'), tok('b<'), tok('<'), { choices: [{ index: 0, delta: {}, finish_reason: 'length' }] }, '[DONE]']), { max_tokens: 2 });
  assert.equal(x.e, undefined, String(x.e));
  // A well-formed answer still reads through, n = 2 and an index-less n = 1.
  x = await read(server([role, tok('a', 0), tok('b', 1), fin(0), fin(1), '[DONE]']), { n: 2 });
  assert.equal(x.e, undefined);
  x = await read(server([{ choices: [{ delta: { content: 'hi' } }] }, { choices: [{ delta: {}, finish_reason: 'stop' }] }]));
  assert.equal(x.e, undefined, String(x.e));
  // A server's usage: token counts that are not counts are dropped, other fields kept.
  x = await read(server([tok('a'), fin(), { choices: [], usage: { prompt_tokens: -5, completion_tokens: 'x', total_tokens: 1e308, extra: 1 } }, '[DONE]']));
  assert.deepEqual(x.got.at(-1).usage, { extra: 1 });
  x = await read(server([tok('a'), fin(), { choices: [], usage: 'lots' }, '[DONE]']));
  assert.equal(x.got.at(-1).usage, null);
  // A choice ends at its finish_reason: text a server sends for it afterwards is dropped, so
  // an answer (streamed or collected) never runs past its finish nor ends on a non-final chunk.
  const text = (got, i = 0) => got.map((c) => (c.choices || []).filter((ch) => (ch.index ?? 0) === i).map((ch) => ch.delta.content || '').join('')).join('');
  x = await read(server([role, tok('A'), fin(), tok('B'), tok('C'), '[DONE]']));
  assert.equal(x.e, undefined, String(x.e));
  assert.equal(text(x.got), 'A');
  assert.equal(x.got.at(-1).choices[0].finish_reason, 'stop');
  x = await read(server([tok('a', 0), fin(0), { choices: [{ index: 0, delta: { content: 'late' } }, { index: 1, delta: { content: 'b' } }] }, fin(1), { choices: [], usage: { prompt_tokens: 1 } }, '[DONE]']), { n: 2 });
  assert.equal(x.e, undefined, String(x.e));
  assert.deepEqual([text(x.got, 0), text(x.got, 1)], ['a', 'b']);
  assert.deepEqual(x.got.at(-1).usage, { prompt_tokens: 1 }, 'a usage-only chunk after the finishes still arrives');
  // Redirects are never followed: they would send the prompt to another origin.
  const seen = [];
  await read(server([tok('a'), fin()], false, seen));
  assert.equal(seen[0].redirect, 'error');
});

test('a routed stream holds its source back for a slow reader', async () => {
  const s = new CompletionStream(() => {});
  for (let i = 0; i < 64; i++) s._push({ i });
  let room = false;
  s._room(64).then(() => (room = true));
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(room, false, 'a full queue makes the producer wait');
  const it = s[Symbol.asyncIterator]();
  await it.next();
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(room, true, 'one chunk taken: room again');
  s._push({ i: 64 });
  let ended = false;
  s._room(1).then(() => (ended = true));
  s._end();
  await new Promise((r) => setTimeout(r, 0));
  assert.equal(ended, true, 'the end releases a waiting producer');
});

test('router: a remote tool-call stream without indexes, or with hostile ones, still gives every call', async () => {
  const sse = (objs) => new ReadableStream({ start(c) { for (const o of objs) c.enqueue(new TextEncoder().encode(`data: ${typeof o === 'string' ? o : JSON.stringify(o)}\n\n`)); c.close(); } });
  const ch = (delta, fin = null) => ({ id: 'r', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, logprobs: null, finish_reason: fin }] });
  const server = (calls) => async (url) => {
    if (url.endsWith('/health')) return new Response('{"status":"ok"}');
    if (url.endsWith('/models')) return new Response(JSON.stringify({ data: [{ id: 'm' }] }));
    return new Response(sse([ch({ role: 'assistant', content: null }), ...calls.map((c) => ch({ tool_calls: [c] })), ch({}, 'tool_calls'), '[DONE]']));
  };
  const run = async (calls) => {
    const r = new Router(fakeHooks({ model: null, reloadable: false, lastModel: null, lastLoadError: null }), { mode: 'remote-only', remote: { baseURL: 'http://fake/v1', fetch: server(calls) } });
    return (await r.create('chat', chat())).choices[0].message.tool_calls;
  };
  const fn = (name, args) => ({ type: 'function', function: { name, arguments: args } });
  // No index (some servers omit it): a piece with an id starts a call, one without continues it.
  let got = await run([{ id: 'a', ...fn('f', '{"x"') }, { function: { arguments: ': 1}' } }, { id: 'b', ...fn('g', '{}') }]);
  assert.deepEqual(got.map((c) => [c.id, c.function.name, c.function.arguments]), [['a', 'f', '{"x": 1}'], ['b', 'g', '{}']]);
  // A huge index, a negative one, `__proto__`: the next position, never a sparse array or a throw.
  got = await run([{ index: 1e9, id: 'a', ...fn('f', '{}') }, { index: '__proto__', id: 'b', ...fn('g', '{}') }, { index: -3, id: 'c', ...fn('h', '{}') }]);
  assert.deepEqual(got.map((c) => c.id), ['a', 'b', 'c']);
});
