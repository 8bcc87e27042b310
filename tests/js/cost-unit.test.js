// Issue 20 without a model: the router's cost terms with injected battery / pressure / network /
// throttling signals (each term flips the route as documented, privacy and a local-only engine
// always win, the reason names the term), the sustained-speed windows and `throttled`, and the
// device signals over fake browser globals (present, absent, refusing).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { decide } from '../../pkg/src/router/decision.js';
import { costOptions, costTerms, normalizeSignals } from '../../pkg/src/router/cost.js';
import { DecodeWindows, sustainedOptions } from '../../pkg/src/sustained.js';
import { PressureWatch, DeviceSignals, readBattery, readConnection, worsePressure } from '../../pkg/src/device-signals.js';
import { Router } from '../../pkg/src/router.js';
import { CompletionStream } from '../../pkg/src/client.js';

const OPTS = costOptions({});
const calm = { battery: { level: 0.9, charging: false }, pressure: 'nominal', connection: { save_data: false, effective_type: '4g' }, throttled: false };
const base = (signals, x = {}) => ({
  mode: 'prefer-local',
  private: false,
  local: { reason: null },
  remote: { reason: null },
  estimates: { t_local_ms: 1000, t_remote_ms: 500 },
  costTerms: costTerms({ ...calm, ...signals }, OPTS),
  ...x,
});

test('cost terms: each one flips the route as documented, and says so', () => {
  assert.deepEqual(decide(base({})), { target: 'local', reason: 'prefer-local', ruled_out: {}, costs: { local: 0, remote: 1 } });
  // Prefer the server: battery low and not charging, serious/critical pressure, throttled.
  assert.deepEqual([decide(base({ battery: { level: 0.1, charging: false } })).target, decide(base({ battery: { level: 0.1, charging: false } })).reason], ['remote', 'cost_battery_low']);
  assert.equal(decide(base({ battery: { level: 0.1, charging: true } })).target, 'local', 'charging: no battery term');
  assert.equal(decide(base({ battery: { level: 0.25, charging: false } })).target, 'local', 'above the threshold');
  for (const p of ['serious', 'critical']) assert.equal(decide(base({ pressure: p })).reason, 'cost_compute_pressure', p);
  for (const p of ['nominal', 'fair']) assert.equal(decide(base({ pressure: p })).target, 'local', p);
  assert.equal(decide(base({ throttled: true })).reason, 'cost_throttled');
  // Prefer local: saveData, a slow effectiveType (prefer-remote is the mode that shows it).
  const pr = (s) => decide(base(s, { mode: 'prefer-remote' }));
  assert.equal(pr({}).target, 'remote');
  assert.deepEqual([pr({ connection: { save_data: true, effective_type: '4g' } }).target, pr({ connection: { save_data: true, effective_type: '4g' } }).reason], ['local', 'cost_save_data']);
  for (const et of ['slow-2g', '2g']) assert.equal(pr({ connection: { save_data: false, effective_type: et } }).reason, 'cost_slow_network', et);
  assert.equal(pr({ connection: { save_data: false, effective_type: '3g' } }).target, 'remote');
  // Terms on both sides cancel: the mode decides.
  assert.equal(decide(base({ pressure: 'critical', connection: { save_data: true, effective_type: '4g' } })).reason, 'prefer-local');
  // Unknown signals weigh nothing.
  assert.deepEqual(costTerms(normalizeSignals({}), OPTS), { local: [], remote: [] });
});

test('cost terms never override privacy, a local-only mode or a closed route', () => {
  const hot = { battery: { level: 0.05, charging: false }, pressure: 'critical', throttled: true };
  assert.deepEqual(decide(base(hot, { private: true })), { target: 'local', reason: 'private', ruled_out: { remote: 'private' } });
  assert.equal(decide(base(hot, { mode: 'local-only' })).reason, 'local-only');
  assert.equal(decide(base(hot, { remote: { reason: 'remote_unavailable' } })).target, 'local');
  const slow = { connection: { save_data: true, effective_type: 'slow-2g' } };
  assert.equal(decide(base(slow, { mode: 'remote-only' })).target, 'remote');
  assert.equal(decide(base(slow, { mode: 'prefer-remote', local: { reason: 'prompt_over_kv_budget' } })).target, 'remote');
});

test('cost options: defaults, switches and typed refusals', () => {
  assert.deepEqual(costTerms({ ...calm, battery: { level: 0.3, charging: false } }, costOptions({ battery: { below: 0.5 } })).local, ['battery_low']);
  assert.deepEqual(costTerms({ ...calm, battery: { level: 0.01, charging: false } }, costOptions({ battery: false })).local, []);
  assert.deepEqual(costTerms({ ...calm, pressure: 'fair' }, costOptions({ pressure: ['fair'] })).local, ['compute_pressure']);
  assert.deepEqual(costTerms({ ...calm, throttled: true }, costOptions({ throttled: false })).local, []);
  assert.deepEqual(costTerms({ ...calm, connection: { save_data: false, effective_type: '3g' } }, costOptions({ slowConnection: ['3g'] })).remote, ['slow_network']);
  for (const bad of [{ battery: { below: 2 } }, { pressure: ['hot'] }, { throttled: 'yes' }, { slowConnection: '2g' }, { wat: 1 }, { signals: 3 }]) {
    assert.throws(() => costOptions(bad), { code: 'INVALID_REQUEST' }, JSON.stringify(bad));
  }
});

function hooks(state) {
  return {
    localState: () => state,
    countTokens: async () => ({ prompt_tokens: 5, max_context: 100, fits: true }),
    makeStream: (onCancel, signal) => new CompletionStream(onCancel, signal),
    local: async () => {
      const s = new CompletionStream(() => {});
      const ch = (delta, fin = null) => ({ id: 'l', object: 'chat.completion.chunk', created: 1, model: 'x', choices: [{ index: 0, delta, logprobs: null, finish_reason: fin }] });
      s._push(ch({ content: 'local' }));
      s._push(ch({}, 'stop'));
      s._end();
      return s;
    },
  };
}

function fakeFetch(log) {
  return async (url, init = {}) => {
    log.push(`${init.method || 'GET'} ${url}`);
    if (url.endsWith('/health')) return new Response('{"status":"ok"}');
    if (url.endsWith('/models')) return new Response(JSON.stringify({ data: [{ id: 'm' }] }));
    const body = [{ id: 'r', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: 'remote' }, logprobs: null, finish_reason: 'stop' }] }, '[DONE]'];
    return new Response(body.map((o) => `data: ${typeof o === 'string' ? o : JSON.stringify(o)}\n\n`).join(''));
  };
}

test('router: injected signals reach the decision; route.cost says what was read and why', async () => {
  const log = [];
  const MODEL = { sha256: 'aa', max_context: 100, weights_bytes: 10, load_ms: 50 };
  const state = { model: MODEL, lastModel: MODEL, throttled: null };
  let signals = { battery: { level: 0.1, charging: false } };
  const r = new Router(hooks(state), { mode: 'prefer-local', remote: { baseURL: 'http://fake/v1', fetch: fakeFetch(log) }, cost: { signals: () => signals } });
  const chat = (x = {}) => ({ messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, ...x });
  let out = await r.create('chat', chat());
  assert.equal(out.route.target, 'remote');
  assert.equal(out.route.reason, 'cost_battery_low');
  assert.deepEqual(out.route.cost.terms, { local: ['battery_low'], remote: [] });
  assert.equal(out.route.cost.signals.pressure, 'unknown');
  assert.deepEqual(out.route.cost.costs, { local: 2, remote: 1 });
  // The engine's own throttling record (localState().throttled) is a signal too.
  signals = {};
  state.throttled = true;
  assert.equal((await r.create('chat', chat())).route.reason, 'cost_throttled');
  state.throttled = false;
  assert.equal((await r.create('chat', chat())).route.target, 'local');
  // Private: local, and not one request left for the server (not even a health check).
  signals = { battery: { level: 0.01, charging: false }, pressure: 'critical' };
  log.length = 0;
  out = await r.create('chat', chat({ private: true }));
  assert.equal(out.route.target, 'local');
  assert.equal(out.route.reason, 'private');
  assert.equal(out.route.cost, null, 'no cost terms read for a private request');
  assert.deepEqual(log, []);
  // Without a signals function the router reads the engine's DeviceSignals (here: a Node
  // global without the browser APIs, so everything is 'unknown' and nothing throws).
  const plain = new Router({ ...hooks({ ...state, throttled: null }), deviceSignals: () => new DeviceSignals({ navigator: {} }) }, { mode: 'prefer-local', remote: { baseURL: 'http://fake/v1', fetch: fakeFetch([]) }, cost: {} });
  out = await plain.create('chat', chat());
  assert.deepEqual(out.route.cost.signals, { battery: 'unknown', pressure: 'unknown', connection: 'unknown', throttled: null });
  assert.equal(out.route.reason, 'prefer-local');
  // The function form of route.cost still replaces the cost (no terms).
  const fn = new Router(hooks(state), { mode: 'prefer-local', remote: { baseURL: 'http://fake/v1', fetch: fakeFetch([]) }, cost: (t) => (t === 'local' ? 3 : 1) });
  out = await fn.create('chat', chat());
  assert.deepEqual([out.route.target, out.route.reason, out.route.cost], ['remote', 'lower_cost', null]);
});

test('sustained windows: rates per window, throttled below the fraction of the first', () => {
  const w = new DecodeWindows({ window_ms: 1000, throttle_fraction: 0.75 });
  let t = 0;
  assert.equal(w.token(t), null, 'the first token only starts window 0');
  for (let i = 0; i < 20; i++) w.token((t += 50)); // 20 tok/s for 1 s
  assert.deepEqual(w.windows, [20]);
  assert.equal(w.summary().throttled, null, 'one window: not long, no verdict');
  for (let i = 0; i < 20; i++) w.token((t += 50));
  assert.equal(w.summary().throttled, false);
  for (let i = 0; i < 10; i++) w.token((t += 100)); // 10 tok/s
  const s = w.summary();
  assert.deepEqual(s.windows, [20, 20, 10]);
  assert.deepEqual([s.first_tps, s.latest_tps, s.peak_tps, s.ratio, s.long, s.throttled], [20, 10, 20, 0.5, true, true]);
  assert.deepEqual(sustainedOptions(undefined), { window_ms: 10_000, throttle_fraction: 0.75 });
  for (const bad of [{ window_ms: 5 }, { throttle_fraction: 0 }, { throttle_fraction: 1.5 }, { x: 1 }, 'fast']) {
    assert.throws(() => sustainedOptions(bad), { code: 'INVALID_REQUEST' }, JSON.stringify(bad));
  }
});

test('device signals: real-shaped APIs are read, absent or refusing ones are "unknown"', async () => {
  assert.equal(await readBattery(undefined), 'unknown');
  assert.equal(await readBattery({}), 'unknown');
  assert.equal(await readBattery({ getBattery: () => Promise.reject(new Error('NotAllowedError')) }), 'unknown');
  assert.deepEqual(await readBattery({ getBattery: async () => ({ level: 0.42, charging: false }) }), { level: 0.42, charging: false });
  assert.equal(readConnection({}), 'unknown');
  assert.deepEqual(readConnection({ connection: { saveData: true, effectiveType: '2g' } }), { save_data: true, effective_type: '2g' });
  assert.equal(worsePressure('fair', 'serious'), 'serious');
  assert.equal(worsePressure('fair', 'unknown'), 'fair');

  // PressureObserver: absent, refusing, and one that reports states.
  const none = new PressureWatch({});
  await none.start();
  assert.deepEqual([none.supported, none.state], [false, 'unknown']);
  const refusing = new PressureWatch({ PressureObserver: class { observe() { return Promise.reject(new Error('NotAllowedError')); } disconnect() {} } });
  await refusing.start();
  assert.equal(refusing.state, 'unknown');
  let cb = null;
  const fake = { PressureObserver: class { constructor(f) { cb = f; } async observe(src) { assert.equal(src, 'cpu'); } disconnect() {} } };
  const p = new PressureWatch(fake);
  const changes = [];
  p.onChange((s) => changes.push(s));
  const seen = p.track();
  await p.start();
  cb([{ source: 'cpu', state: 'fair' }]);
  cb([{ source: 'cpu', state: 'critical' }]);
  cb([{ source: 'cpu', state: 'nominal' }]);
  assert.deepEqual(changes, ['fair', 'critical', 'nominal']);
  assert.deepEqual(seen.end(), { state: 'critical', last: 'nominal' }, 'the worst state seen during the request');
  p.stop();
});
