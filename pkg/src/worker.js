// Browser entry of the engine worker. build.sh bundles it with everything it imports into one
// classic script (wasm/edgellm-worker.js, and as a string wasm/worker-source.js), which
// worker-url.js starts from a Blob URL; `createEngine({ workerUrl })` may start it (or a module
// that imports 'edgellm/worker') instead. Either way it has no base URL to find the wasm from:
// `init.wasmUrl` always says where the builds are (absolute URLs, see worker-url.js), and for the
// ones it only guessed, the parent sends the copy embedded in the package if nothing is served
// there (embedded-wasm.js). Two builds share one JS glue: the relaxed-SIMD tier where the
// browser runs relaxed SIMD, else SIMD128 (tier.js).
//
// Threads (tier.js chooseThreads: a cross-origin isolated page): a threaded build (relaxed or
// SIMD128 by the same rule as one thread; their own glue, wasm/threads/) is instantiated here on a shared memory, and this same script is started
// again once per extra thread (from its own URL: the page's Blob URL, or the workerUrl module);
// each of those gets the module and the memory (THREAD_START) and parks as a pool worker.

import init, * as bindings from '../wasm/edgellm.js';
import { Runtime } from './runtime.js';
import { NoCache, OpfsCache } from './cache.js';
import { loadWasm, loadThreadedWasm, EMBEDDED_WASM, THREAD_START, THREADED_KEYS, chooseThreads } from './tier.js';
import { loadThreadsGlue as threadsGlue } from './threads-glue.js';

const runtime = new Runtime({
  post: (msg) => self.postMessage(msg),
  initWasm: async (wasmUrl, simd, log, threadsOpt) => {
    const located = wasmUrl && typeof wasmUrl === 'object' && Object.values(THREADED_KEYS).some((k) => wasmUrl[k]);
    const opt = threadsOpt ?? 'auto';
    // The glue comes with the builds (./build.sh build-threads): without it nothing is fetched,
    // and it is looked for only where threads could run at all.
    const glue = located && chooseThreads(opt, true) > 1 ? await threadsGlue().catch(() => null) : null;
    const n = chooseThreads(opt, !!(glue && typeof glue.default === 'function'), (m) => log('warn', m));
    if (n > 1) {
      try {
        return await loadThreadedWasm(wasmUrl, simd, (url) => startThreaded(glue, url, n), (m) => log('warn', m));
      } catch (e) {
        // Under 'auto' a package without the threaded build is normal: said at 'info' only.
        log(threadsOpt === undefined || threadsOpt === 'auto' ? 'info' : 'warn', `the threaded build did not start (${e && e.message ? e.message : e}); running 1 thread`);
      }
    }
    return loadWasm(
      wasmUrl,
      simd,
      () => null,
      async (url, tier) => {
        // Only where the location was the package's guess: the copy embedded in the package.
        const fallback = tier && wasmUrl && Array.isArray(wasmUrl.embedded) && wasmUrl.embedded.includes(tier);
        let source;
        try {
          if (!url) throw new Error(`init.wasmUrl does not say where the ${tier} build is`);
          source = await fetchWasm(url);
        } catch (e) {
          if (!fallback) throw e;
          log('warn', `${e.message}; using the ${tier} build embedded in the package (slower to start: serve the package's wasm/ files there or pass wasmUrl)`);
          source = await embedded(tier);
        }
        return { bindings, exports: await init({ module_or_path: source }) };
      },
      (message) => log('warn', message),
    );
  },
  openCache: async (cfg) => {
    if (!cfg || !cfg.enabled) return new NoCache();
    if (typeof navigator !== 'undefined' && navigator.storage && navigator.storage.getDirectory) return OpfsCache.open(cfg.owner);
    return new NoCache();
  },
});

/** How long the pool workers have to start and park (they fetch nothing: module and memory come with THREAD_START). */
const POOL_START_MS = 20_000;

/**
 * The threaded build on a shared memory, with `n - 1` pool workers parked in it; throws (and
 * stops any worker it started) when it cannot, so the caller falls back to one thread.
 */
async function startThreaded(glue, url, n) {
  const module = await WebAssembly.compile(await (await fetchWasm(url)).arrayBuffer());
  const exports = await glue.default({ module_or_path: module });
  const stack = glue.thread_stack_bytes();
  // A module worker (workerUrl) has import.meta.url; the bundled classic script has not.
  const type = typeof import.meta.url === 'string' ? 'module' : 'classic';
  const workers = [];
  try {
    for (let i = 0; i < n - 1; i++) {
      const w = new Worker(self.location.href, { type, name: `edgellm-thread-${i}` });
      w.postMessage({ type: THREAD_START, module, memory: exports.memory, index: i, stack });
      workers.push(w);
    }
    const t0 = performance.now();
    while (glue.thread_workers() < n - 1) {
      if (performance.now() - t0 > POOL_START_MS) throw new Error(`${glue.thread_workers()} of ${n - 1} pool workers started within ${POOL_START_MS} ms`);
      await new Promise((r) => setTimeout(r, 5));
    }
  } catch (e) {
    workers.forEach((w) => w.terminate());
    throw e;
  }
  return { bindings: glue, exports, threads: n };
}

/** A pool worker: the threaded build on the engine's memory, then its part of every job, forever. */
async function runPoolThread(m) {
  const glue = await threadsGlue();
  glue.initSync({ module: m.module, memory: m.memory, thread_stack_size: m.stack });
  try {
    glue.thread_worker_run(m.index);
  } catch (e) {
    // It trapped inside its part of a job: without this the engine's worker would wait for
    // its acknowledgement for ever; with it, the engine traps too (ENGINE_CRASHED → restart).
    glue.thread_worker_failed();
    throw e;
  }
}

/** The wasm's response, or an error that says what came back instead (a dev server's HTML page). */
async function fetchWasm(url) {
  let res;
  try {
    res = await fetch(url, { credentials: 'same-origin' });
  } catch (e) {
    throw new Error(`could not fetch ${url} (${e && e.message ? e.message : e}; a cross-origin wasm needs CORS)`);
  }
  const type = res.headers.get('content-type') || '';
  if (!res.ok || /^text\//i.test(type)) {
    throw new Error(`${url} is not the wasm (HTTP ${res.status}${type ? `, ${type}` : ''}): serve the package's wasm/ files there or pass createEngine({ wasmUrl })`);
  }
  return res;
}

const asked = new Map(); // tier → {resolve, reject} of an EMBEDDED_WASM request

/** The embedded build's bytes, from the parent (worker-url.js), which always answers. */
function embedded(tier) {
  return new Promise((resolve, reject) => {
    asked.set(tier, { resolve, reject });
    self.postMessage({ type: EMBEDDED_WASM, tier });
  });
}

self.onmessage = (e) => {
  const m = e.data;
  if (m && m.type === THREAD_START) {
    runPoolThread(m).catch((err) => console.error(`edgellm pool worker ${m.index}:`, err));
    return;
  }
  if (m && m.type === EMBEDDED_WASM) {
    const w = asked.get(m.tier);
    asked.delete(m.tier);
    if (w) (m.error ? w.reject(new Error(m.error)) : w.resolve(m.bytes));
    return;
  }
  runtime.handle(m);
};
self.addEventListener('error', (e) => runtime.fatal(e.error || new Error(e.message)));
self.addEventListener('unhandledrejection', (e) => runtime.fatal(e.reason));
