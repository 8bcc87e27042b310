// Browser entry of the engine worker (a module worker). Started by client.js as
//   new Worker(new URL('./worker.js', import.meta.url), { type: 'module' })
// which bundlers (Vite, webpack 5) recognise and bundle. The wasm is located the same way, so a
// bundler emits it as an asset; `init.wasmUrl` overrides it.

import init, * as bindings from '../wasm/edgellm.js';
import { Runtime } from './runtime.js';
import { NoCache, OpfsCache } from './cache.js';

const runtime = new Runtime({
  post: (msg) => self.postMessage(msg),
  initWasm: async (wasmUrl) => {
    const url = wasmUrl ? new URL(wasmUrl, self.location.href) : new URL('../wasm/edgellm_bg.wasm', import.meta.url);
    const exports = await init({ module_or_path: url });
    return { bindings, exports };
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
