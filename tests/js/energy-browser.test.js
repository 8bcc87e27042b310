// Issue 20 in Chromium (playwright-core + /usr/bin/chromium) on the real model:
// - the device signals come from the real browser APIs where Chromium has them (Battery Status,
//   Network Information, Compute Pressure) and degrade to 'unknown' with no error where they
//   are taken away;
// - a long local generation reports its decode-speed windows and `throttled` (forced by the
//   test-only decode delay), in usage.compute.sustained, engine.pressure() and 'pressure' events;
// - energy = CPU time × the configured power model, per phase, locally (the browser worker's
//   busy time inside the wasm calls) and remotely through `edgellm serve` (its process CPU time
//   under --watts-per-busy-core).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';

import { startServer } from './server.js';
import { ROOT, MODEL, CHROMIUM, CHROMIUM_ARGS, REQUIRED, modelMissing, wasmMissing, cliPath } from './helpers.js';
import { startEdgeServer, cliCanServe } from './router-helpers.js';
import { checkEnergy } from './browsers/checks.js';

const LOCAL_WATTS = 3;
const SERVER_WATTS = 6;
const skip = modelMissing() || wasmMissing() || (!fs.existsSync(CHROMIUM) && `no Chromium at ${CHROMIUM}`);
const skipServer = skip || (cliCanServe() ? false : REQUIRED ? false : `native CLI with 'serve' not built (${cliPath() || 'none'})`);

let web;
let srv;
let browser;
const errors = [];

async function openPage(init) {
  const page = await browser.newPage();
  page.on('pageerror', (e) => errors.push(e.message));
  if (init) await page.addInitScript(init);
  await page.goto(`${web.origin}/tests/js/pages/router.html`);
  await page.waitForFunction(() => document.body.dataset.ready === '1', null, { timeout: 30_000 });
  return page;
}

before(async () => {
  if (skip) return;
  const { chromium } = await import('playwright-core');
  web = await startServer({ root: ROOT, modelPath: MODEL });
  [srv, browser] = await Promise.all([
    skipServer ? null : startEdgeServer(['--cors-origin', web.origin, '--watts-per-busy-core', String(SERVER_WATTS), '--max-tokens', '16']),
    chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS }),
  ]);
});

after(async () => {
  if (browser) await browser.close();
  if (srv) await srv.kill();
  if (web) await web.close();
});

test('device signals: the real Chromium APIs are read; taken away, they are "unknown" without errors', { skip }, async () => {
  const page = await openPage();
  const real = await page.evaluate(async () => {
    const { DeviceSignals } = await import('/pkg/src/device-signals.js');
    const d = new DeviceSignals();
    const first = await d.read();
    // The Compute Pressure API reports its first record shortly after observe().
    const t0 = performance.now();
    while (d.pressure.observer && d.pressure.state === 'unknown' && performance.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 100));
    const apis = { battery: typeof navigator.getBattery === 'function', connection: !!navigator.connection, pressure: typeof PressureObserver === 'function' };
    const b = apis.battery ? await navigator.getBattery() : null;
    const out = { first, pressure: d.pressure.state, observing: !!d.pressure.observer, apis, battery: b && { level: b.level, charging: b.charging }, connection: navigator.connection && { saveData: navigator.connection.saveData, effectiveType: navigator.connection.effectiveType } };
    d.pressure.stop();
    return out;
  });
  // This Chromium has all three: each is read, and equals what the API itself says.
  assert.deepEqual(real.apis, { battery: true, connection: true, pressure: true }, JSON.stringify(real));
  assert.deepEqual(real.first.battery, { level: real.battery.level, charging: real.battery.charging });
  assert.deepEqual(real.first.connection, { save_data: real.connection.saveData, effective_type: real.connection.effectiveType });
  if (real.observing) assert.ok(['nominal', 'fair', 'serious', 'critical'].includes(real.pressure), `pressure ${real.pressure}`);
  else assert.equal(real.pressure, 'unknown', 'a refused observer stays unknown');
  await page.close();

  // The same page with the APIs removed before any script runs.
  const bare = await openPage(() => {
    delete Navigator.prototype.getBattery;
    Object.defineProperty(Navigator.prototype, 'connection', { get: () => undefined, configurable: true });
    delete window.PressureObserver;
  });
  errors.length = 0;
  const none = await bare.evaluate(async () => {
    const { DeviceSignals } = await import('/pkg/src/device-signals.js');
    const d = new DeviceSignals();
    const s = await d.read();
    const engine = await window.edgellm.createEngine({ cache: false });
    const p = engine.pressure();
    engine.terminate();
    return { s, supported: d.pressure.supported, p };
  });
  assert.deepEqual(none.s, { battery: 'unknown', pressure: 'unknown', connection: 'unknown' });
  assert.equal(none.supported, false);
  assert.deepEqual(none.p, { state: 'unknown', supported: false, last_long: null });
  assert.deepEqual(errors, []);
  await bare.close();
});

test('a long local generation reports its windows and `throttled`; energy = CPU time × the model per phase', { skip }, async () => {
  const page = await openPage();
  errors.length = 0;
  const r = await page.evaluate(async ({ watts, baseURL }) => {
    const prompt = 'Here is a long list of fruits, one per line:\n1. apple\n2. banana\n3.';
    const engine = await window.edgellm.createEngine({ cache: false, energy: { watts_per_busy_core: watts } });
    await engine.load('/models/good.gguf');
    // This machine's own decode speed first: the windows and the delay are sized from it, so
    // the verdict does not depend on how fast the machine is.
    const warm = await engine.completions.create({ prompt, max_tokens: 12, temperature: 0 });
    const tpot = Math.max(5, warm.usage.tpot_ms);
    const window_ms = Math.max(300, Math.round(10 * tpot));
    const perWindow = Math.ceil(window_ms / tpot);
    engine.terminate();

    const e = await window.edgellm.createEngine({ cache: false, energy: { watts_per_busy_core: watts }, sustained: { window_ms, throttle_fraction: 0.75 } });
    await e.load('/models/good.gguf');
    const events = [];
    e.on('pressure', (ev) => events.push(ev));
    // Normal speed for two windows' worth of tokens, then 5 × TPOT more per token: the later
    // windows run at most at a sixth of the first one's speed.
    await e._debugDecodeDelay({ after_tokens: 2 * perWindow, ms: Math.round(5 * tpot) });
    const s = await e.completions.create({ prompt, max_tokens: 2 * perWindow + 8, temperature: 0, stream: true, stream_options: { include_usage: true } });
    let usage = null;
    for await (const c of s) if (c.usage) usage = c.usage;
    const out = { tpot, window_ms, usage, events, pressure: e.pressure(), warmCompute: warm.usage.compute };
    await e._debugDecodeDelay({ ms: 0 });
    // The router reads that throttling: with a server and the cost terms on (battery and
    // pressure off, so only this term can weigh), the next request goes to the server.
    if (baseURL) {
      e.setRoute({ mode: 'prefer-local', remote: { baseURL }, cost: { battery: false, pressure: false } });
      const routed = await e.completions.create({ prompt, max_tokens: 2, temperature: 0 });
      out.routed = routed.route;
      e.setRoute(null);
    }
    // The hook is off again: a short request is not slowed and is not "long".
    const again = await e.completions.create({ prompt, max_tokens: 4, temperature: 0 });
    out.after = again.usage.compute.sustained;
    e.terminate();
    return out;
  }, { watts: LOCAL_WATTS, baseURL: srv ? srv.baseURL : null });
  const c = r.usage.compute;
  assert.ok(r.usage.completion_tokens > 0 && r.usage.prompt_tokens > 0);
  // OpenAI's fields are where OpenAI clients read them; the extension is one sub-object.
  for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens']) assert.equal(typeof r.usage[k], 'number');
  checkEnergy(c, LOCAL_WATTS, 'wasm-busy-wall');
  checkEnergy(r.warmCompute, LOCAL_WATTS, 'wasm-busy-wall');
  assert.equal(c.busy_cores, 1, 'busy wall time on one worker: one core');
  // Busy time inside the wasm calls excludes the test's waits between decode steps.
  assert.ok(c.busy_wall_ms.decode < r.usage.completion_tokens * r.tpot * 4 + 1000, JSON.stringify(c));
  const s = c.sustained;
  assert.equal(s.window_ms, r.window_ms);
  assert.ok(s.windows.length >= 2, JSON.stringify(s));
  assert.equal(s.long, true);
  assert.equal(s.first_tps, s.windows[0]);
  assert.equal(s.latest_tps, s.windows[s.windows.length - 1]);
  assert.ok(s.latest_tps < 0.75 * s.first_tps, JSON.stringify(s));
  assert.equal(s.throttled, true);
  assert.ok(Math.abs(s.ratio - s.latest_tps / s.first_tps) < 1e-12);
  assert.ok(['nominal', 'fair', 'serious', 'critical', 'unknown'].includes(c.pressure.state), JSON.stringify(c.pressure));
  // The same figures as 'pressure' events, one per closed window, and engine.pressure().
  const windows = r.events.filter((e) => e.reason === 'window');
  assert.equal(windows.length, s.windows.length, JSON.stringify(r.events));
  assert.deepEqual(windows[windows.length - 1].sustained, s);
  assert.deepEqual(r.pressure.last_long, s);
  assert.equal(!!r.routed, !!srv, 'with the server up, the routed request ran');
  if (r.routed) {
    assert.deepEqual([r.routed.target, r.routed.reason], ['remote', 'cost_throttled'], JSON.stringify(r.routed));
    assert.deepEqual(r.routed.cost.terms, { local: ['throttled'], remote: [] });
    assert.equal(r.routed.cost.signals.throttled, true);
  }
  assert.equal(r.after.long, false);
  assert.equal(r.after.throttled, null);
  assert.deepEqual(errors, []);
  await page.close();
});

test('through `edgellm serve`: energy = the server process CPU time × its --watts-per-busy-core, per phase', { skip: skipServer }, async () => {
  const page = await openPage();
  const r = await page.evaluate(async (baseURL) => {
    const e = await window.edgellm.createEngine({ cache: false, route: { mode: 'remote-only', remote: { baseURL } } });
    const out = await e.chat.completions.create({ messages: [{ role: 'user', content: 'Say hi.' }], max_tokens: 8, temperature: 0 });
    e.terminate();
    return { route: out.route, usage: out.usage };
  }, srv.baseURL);
  assert.equal(r.route.target, 'remote');
  checkEnergy(r.usage.compute, SERVER_WATTS, 'process-cpu');
  // The router measured the answer's windows on arrival (too short here to be long).
  assert.equal(r.usage.compute.sustained.long, false, JSON.stringify(r.usage.compute.sustained));
  await page.close();
});

test('bad energy and sustained options are refused with INVALID_REQUEST; the decode-delay hook checks its input', { skip }, async () => {
  const page = await openPage();
  const codes = await page.evaluate(async () => {
    const code = (p) => p.then(() => 'resolved', (e) => e.code);
    const out = {};
    for (const [name, opts] of Object.entries({
      zero: { energy: { watts_per_busy_core: 0 } },
      negative: { energy: { watts_per_busy_core: -2 } },
      huge: { energy: { watts_per_busy_core: 1e9 } },
      text: { energy: { watts_per_busy_core: '3' } },
      unknownKey: { energy: { watts: 3 } },
      notObject: { energy: 3 },
      window: { sustained: { window_ms: 1 } },
      fraction: { sustained: { throttle_fraction: 2 } },
    })) {
      out[name] = await code(window.edgellm.createEngine({ cache: false, ...opts }));
    }
    const ok = await window.edgellm.createEngine({ cache: false, energy: { watts_per_busy_core: 12.5 } });
    out.hook = await code(ok._debugDecodeDelay({ ms: -1 }));
    ok.terminate();
    return out;
  });
  for (const [name, code] of Object.entries(codes)) assert.equal(code, 'INVALID_REQUEST', name);
  await page.close();
});
