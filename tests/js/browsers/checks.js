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
