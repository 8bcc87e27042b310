// Test bodies shared by the Chromium-only browser tests and the cross-engine suite. Each takes a
// page with `evaluate(fn, arg)` — a playwright-core Page or browsers/page.js's Page — and the
// path of the engine object in the page's globals (the demo keeps it at 'edgellmApp.engine').
import assert from 'node:assert/strict';

/**
 * Aborts a streamed chat completion after its second content chunk: ABORTED within
 * `maxLatencyMs`, no chunk after the abort, the iterator finished, the next request works.
 * Returns the measured latency (ms).
 */
export async function checkAbortMidStream(page, { engineAt = 'engine', maxLatencyMs = 100 } = {}) {
  const r = await page.evaluate(async (at) => {
    const engine = at.split('.').reduce((o, k) => o[k], window);
    const ac = new AbortController();
    const stream = await engine.chat.completions.create({ messages: [{ role: 'user', content: 'Tell me a long story.' }], max_tokens: 64, temperature: 0, stream: true, signal: ac.signal });
    let contentChunks = 0;
    let afterAbort = 0;
    let t0 = 0;
    let code = null;
    let latency = null;
    try {
      for await (const c of stream) {
        if (t0) afterAbort++;
        if (c.choices[0] && c.choices[0].delta.content) contentChunks++;
        if (contentChunks === 2 && !t0) {
          t0 = performance.now();
          ac.abort();
        }
      }
    } catch (e) {
      latency = performance.now() - t0;
      code = e.code;
    }
    // Chunks really stopped: nothing more arrives on the (finished) iterator.
    const late = await Promise.race([stream[Symbol.asyncIterator]().next().then((x) => (x.done ? 'done' : 'chunk')), new Promise((res) => setTimeout(() => res('none'), 300))]);
    const next = await engine.completions.create({ prompt: 'Hello', max_tokens: 2, temperature: 0 });
    return { code, latency, afterAbort, late, next: { n: next.usage.completion_tokens, finish: next.choices[0].finish_reason } };
  }, engineAt);
  assert.equal(r.code, 'ABORTED');
  assert.ok(r.latency < maxLatencyMs, `abort settled in ${r.latency} ms`);
  assert.equal(r.afterAbort, 0);
  assert.equal(r.late, 'done');
  assert.deepEqual(r.next, { n: 2, finish: 'length' });
  return r.latency;
}

/**
 * A 150 MB memory budget refuses the 253 MB model from its header: OVER_MEMORY_BUDGET with the
 * estimate's terms, wasm memory unchanged, only the header read (the engine's own count: a
 * browser's network stack reads ahead of the abort, 7–33 MB seen in Chromium). Needs
 * window.edgellm (the package) in the page. Returns the figures.
 */
export async function checkRefusedFromHeader(page, url, weights) {
  const r = await page.evaluate(async (u) => {
    const e = await window.edgellm.createEngine({ cache: false, memory: { budget_bytes: 150e6 } });
    try {
      const before = (await e.status()).wasm_memory_bytes;
      let err = null;
      try {
        await e.load(u);
      } catch (x) {
        err = { code: x.code, message: x.message, terms: x.terms, budget: x.budget_bytes, read: x.estimate && x.estimate.bytes_read };
      }
      return { before, after: (await e.status()).wasm_memory_bytes, err };
    } finally {
      e.terminate();
    }
  }, url);
  assert.ok(r.err, 'the load was refused');
  assert.equal(r.err.code, 'OVER_MEMORY_BUDGET');
  assert.equal(r.err.budget, 150e6);
  assert.equal(r.err.terms.weights, weights);
  for (const k of ['kv', 'activations', 'runtime']) assert.ok(r.err.terms[k] > 0, k);
  assert.match(r.err.message, /weights .* KV .* activations .* runtime/);
  assert.equal(r.after, r.before, `wasm memory grew from ${r.before} to ${r.after} during the refused load`);
  assert.ok(r.err.read > 0 && r.err.read < 32 << 20, `the weights were not downloaded (the engine read ${r.err.read} bytes)`);
  return { wasm_before: r.before, wasm_after: r.after, bytes_read: r.err.read };
}

/**
 * Private requests through a router engine (`window.engine`, created with a remote and an
 * `isSensitive` that flags /password/): flagged, streamed and sensitive ones run locally; one
 * whose prompt (`tooLong`) the local side cannot take fails with PRIVATE_REMOTE_FORBIDDEN instead
 * of going to the server. The caller checks that the server saw nothing meanwhile.
 */
export async function checkPrivateRequestsStayLocal(page, tooLong) {
  const r = await page.evaluate(async (long) => {
    const run = async (params) => {
      try {
        const x = await window.engine.chat.completions.create(params);
        if (params.stream) {
          const chunks = [];
          for await (const c of x) chunks.push(c);
          return { route: chunks[0].route, last: chunks[chunks.length - 1].route };
        }
        return { route: x.route, text: x.choices[0].message.content };
      } catch (e) {
        return { code: e.code, detail: e.detail, route: e.route };
      }
    };
    const msg = (content) => [{ role: 'user', content }];
    return {
      flagged: await run({ messages: msg('Say hi.'), max_tokens: 1, temperature: 0, private: true }),
      streamed: await run({ messages: msg('Say hi.'), max_tokens: 1, temperature: 0, private: true, stream: true }),
      sensitive: await run({ messages: msg('My password is x.'), max_tokens: 1, temperature: 0 }),
      infeasible: await run({ messages: msg(long), max_tokens: 1, private: true }),
      sensitiveInfeasible: await run({ messages: msg(`My password is x. ${long}`), max_tokens: 1 }),
    };
  }, tooLong);
  assert.equal(r.flagged.route && r.flagged.route.target, 'local', JSON.stringify(r.flagged));
  assert.equal(r.flagged.route.reason, 'private');
  assert.equal(r.streamed.route && r.streamed.route.target, 'local', JSON.stringify(r.streamed));
  assert.equal(r.streamed.last.target, 'local');
  assert.equal(r.sensitive.route && r.sensitive.route.target, 'local', JSON.stringify(r.sensitive));
  assert.equal(r.sensitive.route.private, true);
  for (const k of ['infeasible', 'sensitiveInfeasible']) {
    assert.equal(r[k].code, 'PRIVATE_REMOTE_FORBIDDEN', `${k}: ${JSON.stringify(r[k])}`);
    assert.equal(r[k].detail, 'PROMPT_OVER_KV_BUDGET');
  }
  return r;
}

/** usage.compute: energy = CPU time × the power model, per phase (the one formula, src/work.rs). */
export function checkEnergy(c, watts, clock) {
  assert.ok(c, 'usage.compute is reported');
  assert.equal(c.cpu_clock, clock, JSON.stringify(c));
  assert.equal(c.watts_per_busy_core, watts);
  for (const ph of ['prefill', 'decode', 'total']) {
    assert.ok(c.cpu_ms[ph] > 0, `cpu_ms.${ph} = ${c.cpu_ms[ph]}`);
    assert.ok(Math.abs(c.energy_j[ph] - (c.cpu_ms[ph] / 1000) * watts) <= 1e-9 * Math.max(1, c.energy_j[ph]), `${ph}: ${c.energy_j[ph]} J vs ${c.cpu_ms[ph]} ms × ${watts} W`);
  }
  assert.ok(Math.abs(c.cpu_ms.total - c.cpu_ms.prefill - c.cpu_ms.decode) < 1e-6);
}

/**
 * In the page: the device signals next to what the browser itself exposes. Each is read where
 * its API exists and 'unknown' where it does not, without an error. Returns what was seen.
 */
export async function checkDeviceSignals(page) {
  const r = await page.evaluate(async () => {
    const { DeviceSignals } = await import('/pkg/src/device-signals.js');
    const d = new DeviceSignals();
    const signals = await d.read();
    d.pressure.stop();
    return { signals, supported: d.pressure.supported, apis: { battery: typeof navigator.getBattery === 'function', connection: !!navigator.connection, pressure: typeof PressureObserver === 'function' } };
  });
  const { signals, apis } = r;
  assert.equal(r.supported, apis.pressure);
  if (!apis.battery) assert.equal(signals.battery, 'unknown');
  else assert.ok(signals.battery === 'unknown' || (typeof signals.battery.level === 'number' && typeof signals.battery.charging === 'boolean'), JSON.stringify(signals));
  if (!apis.connection) assert.equal(signals.connection, 'unknown');
  else assert.equal(typeof signals.connection.save_data, 'boolean', JSON.stringify(signals));
  if (!apis.pressure) assert.equal(signals.pressure, 'unknown');
  else assert.ok(['nominal', 'fair', 'serious', 'critical', 'unknown'].includes(signals.pressure));
  return r;
}
