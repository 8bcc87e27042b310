// Browser entry of the engine worker. build.sh bundles it with everything it imports into one
// classic script (wasm/edgellm-worker.js, and as a string wasm/worker-source.js), which
// worker-url.js starts from a Blob URL; `createEngine({ workerUrl })` may start it (or a module
// that imports 'edgellm/worker') instead. Either way it has no base URL to find the wasm from:
// `init.wasmUrl` always says where the builds are (absolute URLs, see worker-url.js), and for the
// ones it only guessed, the parent sends the copy embedded in the package if nothing is served
// there (embedded-wasm.js). Two builds share one JS glue: the relaxed-SIMD tier where the
// browser runs relaxed SIMD, else SIMD128 (tier.js).

import init, * as bindings from '../wasm/edgellm.js';
import { Runtime } from './runtime.js';
import { NoCache, OpfsCache } from './cache.js';
import { loadWasm, EMBEDDED_WASM } from './tier.js';

const runtime = new Runtime({
  post: (msg) => self.postMessage(msg),
  initWasm: async (wasmUrl, simd, log) =>
    loadWasm(
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
    ),
  openCache: async (cfg) => {
    if (!cfg || !cfg.enabled) return new NoCache();
    if (typeof navigator !== 'undefined' && navigator.storage && navigator.storage.getDirectory) return OpfsCache.open();
    return new NoCache();
  },
});

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
