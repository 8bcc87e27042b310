// The router under Node with the real model locally (worker_threads + wasm) and the real server
// (`edgellm serve`, the native binary on 127.0.0.1): each mode, the KV budget, privacy (zero
// requests to the server, counted at the server and by the client's fetch), server down at start,
// failover before the first token, a server killed mid-stream, a wrong API key, and a model
// version mismatch (through a proxy that rewrites /v1/models).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';

import { createEngine } from '../../pkg/src/node.js';
import { MODEL, REQUIRED, modelMissing, wasmMissing, cliPath } from './helpers.js';
import { startEdgeServer, serverRequests, startFake, startProxy, closedPort, countingFetch, cliCanServe } from './router-helpers.js';

const MODEL_SHA256 = 'a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818';
const KEY = 'router-test-key';
const skip = modelMissing() || wasmMissing() || (cliCanServe() ? false : REQUIRED ? false : `native CLI with 'serve' not built (${cliPath() || 'none'})`);

let engine;
let srv;
const report = {};

const hi = (content = 'Say hi.') => ({ messages: [{ role: 'user', content }], max_tokens: 3, temperature: 0 });
const one = (content) => ({ ...hi(content), max_tokens: 1 });
// About 30 tokens with the chat template: over a local budget of 16 ('Say hi.' takes 12).
const BUDGET = 16;
const LONG = 'Summarise in one sentence: apple banana cherry date elderberry fig grape kiwi lemon mango.';

function remote(extra = {}) {
  return { baseURL: srv.baseURL, apiKey: KEY, ...extra };
}

async function expectCode(p, code) {
  try {
    await p;
  } catch (e) {
    assert.equal(e.code, code, `${e.code}: ${e.message}`);
    return e;
  }
  assert.fail(`expected ${code}, but the call succeeded`);
}

before(async () => {
  if (skip) return;
  [srv, engine] = await Promise.all([startEdgeServer(['--api-key', KEY, '--queue', '4']), createEngine({ cache: false })]);
  await engine.load(MODEL);
  assert.equal(engine.model.sha256, MODEL_SHA256);
});

after(async () => {
  if (engine) engine.terminate();
  if (srv) await srv.kill();
  if (Object.keys(report).length) console.log(`router figures: ${JSON.stringify(report)}`);
});

test('each mode routes as specified; local and remote give the same greedy text', { skip }, async () => {
  engine.setRoute({ mode: 'prefer-local', remote: remote() });
  const out = {};
  for (const [mode, target, reason] of [
    ['local-only', 'local', 'local-only'],
    ['prefer-local', 'local', 'prefer-local'],
    ['prefer-remote', 'remote', 'prefer-remote'],
    ['remote-only', 'remote', 'remote-only'],
  ]) {
    const r = await engine.chat.completions.create({ ...hi(), route: { mode } });
    assert.equal(r.route.target, target, `${mode}: ${JSON.stringify(r.route)}`);
    assert.equal(r.route.reason, reason);
    assert.equal(r.route.mode, mode);
    assert.equal(r.object, 'chat.completion');
    assert.ok(r.usage.completion_tokens >= 1 && r.usage.ttft_ms > 0, JSON.stringify(r.usage));
    const e = r.route.estimates;
    if (mode !== 'remote-only') assert.ok(e.t_local_ms > 0, JSON.stringify(e));
    if (mode !== 'local-only') {
      assert.ok(e.t_remote_ms > 0, JSON.stringify(e));
      assert.deepEqual(r.route.version, { local: MODEL_SHA256, remote: MODEL_SHA256, match: true });
    }
    out[mode] = r.choices[0].message.content;
  }
  // The wasm engine in the worker and the native server: same model, same greedy text.
  assert.equal(out['prefer-local'], out['prefer-remote']);
  assert.equal(out['local-only'], out['remote-only']);

  // Streamed, remote: every chunk carries the route; usage with the server's timings at the end.
  const s = await engine.chat.completions.create({ ...hi(), stream: true, stream_options: { include_usage: true }, route: { mode: 'remote-only' } });
  const chunks = [];
  for await (const c of s) chunks.push(c);
  assert.ok(chunks.every((c) => c.route && c.route.target === 'remote'));
  assert.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), out['remote-only']);
  // OpenAI's include_usage: usage on exactly one chunk, the last, with no choices.
  const withUsage = chunks.filter((c) => c.usage);
  assert.equal(withUsage.length, 1, JSON.stringify(chunks));
  const last = chunks[chunks.length - 1];
  assert.equal(last.choices.length, 0);
  assert.ok(last.usage.decode_tokens_per_s > 0 && last.usage.prefill_tokens_per_s > 0, JSON.stringify(last.usage));
  const snap = engine.router.estimates.snapshot();
  assert.ok(snap.local.samples >= 2 && snap.remote.samples >= 2, JSON.stringify(snap));
  report.rates = snap;
});

test('a prompt over the local KV budget goes remote under prefer-local, fails under local-only', { skip }, async () => {
  engine.setRoute({ mode: 'prefer-local', remote: remote(), local: { maxContextTokens: BUDGET } });
  const long = { messages: [{ role: 'user', content: LONG }], max_tokens: 2, temperature: 0 };
  const r = await engine.chat.completions.create(long);
  assert.equal(r.route.target, 'remote', JSON.stringify(r.route));
  assert.equal(r.route.reason, 'prompt_over_kv_budget');
  assert.equal(r.route.ruled_out.local, 'prompt_over_kv_budget');
  assert.equal(r.route.kv_budget, BUDGET);
  assert.ok(r.route.prompt_tokens > BUDGET, `prompt_tokens ${r.route.prompt_tokens}`);
  assert.equal(r.usage.prompt_tokens, r.route.prompt_tokens, 'the worker counts what the server counts');

  const before = await serverRequests(srv);
  const e = await expectCode(engine.chat.completions.create({ ...long, route: { mode: 'local-only' } }), 'PROMPT_OVER_KV_BUDGET');
  assert.equal(e.route.ruled_out.local, 'prompt_over_kv_budget');
  assert.equal(await serverRequests(srv), before, 'local-only sent nothing to the server');

  // A short prompt runs locally, its output capped by the budget.
  const short = await engine.chat.completions.create({ ...hi(), max_tokens: 64 });
  assert.equal(short.route.target, 'local');
  assert.ok(short.usage.prompt_tokens + short.usage.completion_tokens <= BUDGET, JSON.stringify(short.usage));
});

test('private requests send nothing to the server, even when local is infeasible', { skip }, async () => {
  const log = [];
  const sensitive = [];
  engine.setRoute({
    mode: 'prefer-remote',
    remote: remote({ fetch: countingFetch(log) }),
    local: { maxContextTokens: BUDGET },
    isSensitive: (messages) => {
      sensitive.push(messages.length);
      return messages.some((m) => /password/i.test(m.content));
    },
  });
  const before = await serverRequests(srv);
  const r = await engine.chat.completions.create({ ...one(), private: true });
  assert.equal(r.route.target, 'local');
  assert.equal(r.route.reason, 'private');
  assert.equal(r.route.private, true);
  const s = await engine.chat.completions.create({ ...one('My password is hunter2.'), stream: true });
  const chunks = [];
  for await (const c of s) chunks.push(c);
  assert.equal(chunks[0].route.target, 'local');
  assert.equal(chunks[0].route.reason, 'private');
  // Local infeasible (over the KV budget): a typed error, nothing sent.
  const e = await expectCode(engine.chat.completions.create({ messages: [{ role: 'user', content: LONG }], max_tokens: 2, private: true }), 'PRIVATE_REMOTE_FORBIDDEN');
  assert.equal(e.detail, 'PROMPT_OVER_KV_BUDGET');
  await expectCode(engine.chat.completions.create({ messages: [{ role: 'user', content: `password: ${LONG}` }], max_tokens: 2 }), 'PRIVATE_REMOTE_FORBIDDEN');
  assert.deepEqual(log, [], 'the client made no request');
  assert.equal(await serverRequests(srv), before, 'the server received no request');
  assert.ok(sensitive.length >= 2);
  // The same request without the flag goes to the server (the log does see traffic).
  const pub = await engine.chat.completions.create(one());
  assert.equal(pub.route.target, 'remote');
  assert.ok(log.some((l) => l.includes('/v1/chat/completions')), log.join('\n'));
  assert.ok((await serverRequests(srv)) > before);
});

test('server down at start: local; remote-only says REMOTE_UNAVAILABLE', { skip }, async () => {
  const port = await closedPort();
  engine.setRoute({ mode: 'prefer-remote', remote: { baseURL: `http://127.0.0.1:${port}/v1` }, health: { healthTimeoutMs: 500 } });
  const r = await engine.chat.completions.create(one());
  assert.equal(r.route.target, 'local', JSON.stringify(r.route));
  assert.equal(r.route.reason, 'remote_unavailable');
  assert.equal(r.route.estimates.t_remote_ms > 0, true);
  await expectCode(engine.chat.completions.create({ ...one(), route: { mode: 'remote-only' } }), 'REMOTE_UNAVAILABLE');
});

test('failover before the first token: 5xx and a dropped connection go local; 401 is typed', { skip }, async () => {
  let mode = '503';
  const fake = await startFake((req, res) => {
    if (req.url === '/health') return res.end('{"status":"ok"}');
    if (req.url === '/v1/models') return res.end('{"object":"list","data":[{"id":"other-engine"}]}');
    if (mode === '503') {
      res.writeHead(503, { 'Content-Type': 'application/json' });
      return res.end('{"error":{"message":"overloaded","type":"server_error","code":"overloaded"}}');
    }
    if (mode === 'drop') return req.socket.destroy();
    res.writeHead(401, { 'Content-Type': 'application/json' });
    res.end('{"error":{"message":"bad key","type":"authentication_error","code":"invalid_api_key"}}');
  });
  try {
    engine.setRoute({ mode: 'prefer-remote', remote: { baseURL: fake.baseURL } });
    const a = await engine.chat.completions.create(one());
    assert.equal(a.route.target, 'local');
    assert.equal(a.route.fallback_from, 'remote');
    assert.equal(a.route.reason, 'remote_error_503');
    assert.equal(a.route.error.code, 'REMOTE_ERROR');
    assert.equal(a.route.version.match, null, 'a server that reports no sha256: unknown');
    await expectCode(engine.chat.completions.create({ ...one(), route: { mode: 'remote-only' } }), 'REMOTE_ERROR');

    mode = 'drop';
    engine.setRoute({ mode: 'prefer-remote', remote: { baseURL: fake.baseURL } });
    const s = await engine.chat.completions.create({ ...one(), stream: true });
    const chunks = [];
    for await (const c of s) chunks.push(c);
    assert.equal(chunks[0].route.target, 'local');
    assert.equal(chunks[0].route.fallback_from, 'remote');
    assert.equal(chunks[0].route.reason, 'remote_unavailable');
    assert.equal(chunks[chunks.length - 1].route.fallback_from, 'remote');

    mode = '401';
    engine.setRoute({ mode: 'prefer-remote', remote: { baseURL: fake.baseURL } });
    const e = await expectCode(engine.chat.completions.create(one()), 'REMOTE_UNAUTHORIZED');
    assert.equal(e.status, 401);
  } finally {
    await fake.close();
  }
});

test('wrong API key against the real server: REMOTE_UNAUTHORIZED', { skip }, async () => {
  engine.setRoute({ mode: 'remote-only', remote: remote({ apiKey: 'wrong' }) });
  const e = await expectCode(engine.chat.completions.create(one()), 'REMOTE_UNAUTHORIZED');
  assert.equal(e.route.ruled_out.remote, 'remote_unauthorized');
  // prefer-remote runs locally and says why.
  engine.setRoute({ mode: 'prefer-remote', remote: remote({ apiKey: 'wrong' }) });
  const r = await engine.chat.completions.create(one());
  assert.equal(r.route.target, 'local');
  assert.equal(r.route.reason, 'remote_unauthorized');
});

test('model version mismatch is reported; pinOnVersionMismatch keeps a conversation on its route', { skip }, async () => {
  const OTHER = 'f'.repeat(64);
  const proxy = await startProxy(srv.url, {
    '/v1/models': (j) => ({ ...j, data: j.data.map((m) => ({ ...m, sha256: OTHER })) }),
  });
  try {
    engine.setRoute({ mode: 'prefer-local', remote: remote({ baseURL: proxy.baseURL }), pinOnVersionMismatch: true });
    const convo = [{ role: 'user', content: 'Say hi.' }];
    const t1 = await engine.chat.completions.create({ messages: convo, max_tokens: 1, temperature: 0 });
    assert.equal(t1.route.target, 'local');
    assert.deepEqual(t1.route.version, { local: MODEL_SHA256, remote: OTHER, match: false });
    // Turn 2 of the same conversation, asking for the server: pinned to local.
    const turn2 = [...convo, { role: 'assistant', content: t1.choices[0].message.content }, { role: 'user', content: 'Again.' }];
    const t2 = await engine.chat.completions.create({ messages: turn2, max_tokens: 1, temperature: 0, route: { mode: 'prefer-remote' } });
    assert.equal(t2.route.target, 'local', JSON.stringify(t2.route));
    assert.equal(t2.route.ruled_out.remote, 'version_pinned');
    // A new conversation may go remote (the mismatch is still reported).
    const t3 = await engine.chat.completions.create({ ...one('Something else.'), route: { mode: 'prefer-remote' } });
    assert.equal(t3.route.target, 'remote');
    assert.equal(t3.route.version.match, false);
    // remote-only on a pinned conversation: no route.
    await expectCode(engine.chat.completions.create({ messages: turn2, max_tokens: 2, route: { mode: 'remote-only' } }), 'NO_ROUTE');
  } finally {
    await proxy.close();
  }
});

test('server killed mid-stream: the text so far is kept, the stream ends with finish_reason error', { skip }, async () => {
  const victim = await startEdgeServer([]);
  try {
    engine.setRoute({ mode: 'prefer-remote', remote: { baseURL: victim.baseURL } });
    const s = await engine.completions.create({ prompt: 'Once upon a time', max_tokens: 40, temperature: 0, stream: true });
    const chunks = [];
    let killed = false;
    for await (const c of s) {
      chunks.push(c);
      if (!killed && c.choices[0]?.text) {
        killed = true;
        await victim.kill('SIGKILL');
      }
    }
    assert.ok(killed, 'a token arrived before the kill');
    const last = chunks[chunks.length - 1];
    assert.equal(last.choices[0].finish_reason, 'error');
    assert.equal(last.error.code, 'REMOTE_INTERRUPTED');
    assert.equal(last.route.target, 'remote');
    assert.equal(chunks[0].route.target, 'remote');
    const text = chunks.map((c) => c.choices[0]?.text ?? '').join('');
    assert.ok(text.length > 0);
    assert.ok(chunks.filter((c) => c.choices[0]?.text).length < 40, 'the stream stopped early');
    report.killed_mid_stream_kept = text;
  } finally {
    await victim.kill('SIGKILL');
  }
});
