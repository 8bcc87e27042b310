// A worker stuck inside one wasm call (it cannot even read the ABORT): the request rejects
// ABORTED at once, the worker is terminated after the grace period, and the next request runs
// on a new worker. A fake worker stands in for the stuck one (no model needed).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Engine } from '../../pkg/src/client.js';
import { Req, Ev, PROTOCOL_VERSION } from '../../pkg/src/protocol.js';

/** spawn() for Engine: each worker answers INIT and CACHE; `stuck` ones never answer a LOAD. */
function fakeWorkers() {
  const workers = [];
  const spawn = (handlers) => {
    const w = {
      terminated: false,
      answersAborts: workers.length > 0, // the first worker is the stuck one
      post(msg) {
        if (this.terminated) return;
        const reply = (m) => setTimeout(() => !this.terminated && handlers.onMessage(m), 1);
        if (msg.type === Req.INIT) reply({ type: Ev.RESULT, id: msg.id, value: { protocol: PROTOCOL_VERSION, cache: 'none' } });
        else if (msg.type === Req.CACHE) reply({ type: Ev.RESULT, id: msg.id, value: [] });
        else if (msg.type === Req.LOAD) this.loading = msg.id; // never answers
        else if (msg.type === Req.ABORT && this.answersAborts) reply({ type: Ev.ERROR, id: msg.target, error: { code: 'ABORTED', message: 'aborted' } });
      },
      terminate() {
        this.terminated = true;
      },
    };
    workers.push(w);
    return w;
  };
  return { workers, spawn };
}

const normalize = (s) => ({ kind: 'url', url: String(s) });

test('a stuck worker is terminated after the abort grace period; the next request works', async () => {
  const { workers, spawn } = fakeWorkers();
  const crashes = [];
  const engine = new Engine(spawn, normalize, { abortGraceMs: 100, cache: false, onCrash: (e) => crashes.push(e.code) });
  await engine.start();
  const ac = new AbortController();
  const load = engine.load('http://models.test/m.gguf', { signal: ac.signal });
  await new Promise((r) => setTimeout(r, 20));
  ac.abort();
  await assert.rejects(load, { code: 'ABORTED' });
  assert.equal(workers[0].terminated, false, 'the grace period first');
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(workers[0].terminated, true, 'then the stuck worker is terminated');
  assert.deepEqual(crashes, ['ENGINE_CRASHED']);
  assert.deepEqual(await engine.cache.list(), [], 'the next request runs on a new worker');
  assert.equal(workers.length, 2);
  engine.terminate();
});

test('a worker that answers its abort in time is kept', async () => {
  const { workers, spawn } = fakeWorkers();
  workers.push({ placeholder: true }); // so the spawned worker answers aborts
  const engine = new Engine(spawn, normalize, { abortGraceMs: 100, cache: false });
  await engine.start();
  const ac = new AbortController();
  const load = engine.load('http://models.test/m.gguf', { signal: ac.signal });
  await new Promise((r) => setTimeout(r, 20));
  ac.abort();
  await assert.rejects(load, { code: 'ABORTED' });
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(workers[1].terminated, false);
  assert.equal(engine.restarts, 0);
  engine.terminate();
});
