// Browser entry of the engine worker (a module worker). Started by client.js as
//   new Worker(new URL('./worker.js', import.meta.url), { type: 'module' })
// which bundlers (Vite, webpack 5) recognise and bundle. The wasm is located the same way, so a
// bundler emits it as an asset; `init.wasmUrl` overrides it. Two builds share one JS glue: the
// relaxed-SIMD tier where the browser validates relaxed SIMD, else SIMD128 (see tier.js).

import init, * as bindings from '../wasm/edgellm.js';
import { Runtime } from './runtime.js';
import { NoCache, OpfsCache } from './cache.js';
import { loadTier } from './tier.js';

const runtime = new Runtime({
  post: (msg) => self.postMessage(msg),
  initWasm: async (wasmUrl, simd, log) => {
    const start = async (url) => ({ bindings, exports: await init({ module_or_path: url }) });
    if (wasmUrl) return start(new URL(wasmUrl, self.location.href));
    // Keep both expressions literal: bundlers emit each wasm as an asset through them.
    return loadTier(
      simd,
      (tier) => start(tier === 'relaxed' ? new URL('../wasm/edgellm_relaxed_bg.wasm', import.meta.url) : new URL('../wasm/edgellm_bg.wasm', import.meta.url)),
      (message) => log('warn', message),
    );
  },
  openCache: async (cfg) => {
    if (!cfg || !cfg.enabled) return new NoCache();
    if (typeof navigator !== 'undefined' && navigator.storage && navigator.storage.getDirectory) return OpfsCache.open();
    return new NoCache();
  },
});

self.onmessage = (e) => runtime.handle(e.data);
self.addEventListener('error', (e) => runtime.fatal(e.error || new Error(e.message)));
self.addEventListener('unhandledrejection', (e) => runtime.fatal(e.reason));
