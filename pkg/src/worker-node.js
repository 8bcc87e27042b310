// Node entry of the engine worker (worker_threads). Started by node.js. Node's fetch cannot read
// `file:` URLs, so the wasm is read from disk and instantiated synchronously. The tier is chosen
// as in the browser (tier.js): Node 20 validates relaxed SIMD only when started with
// --experimental-wasm-relaxed-simd (V8 flags are process-wide, so the worker inherits it).

import { parentPort } from 'node:worker_threads';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { initSync } from '../wasm/edgellm.js';
import * as bindings from '../wasm/edgellm.js';
import { Runtime } from './runtime.js';
import { FsCache, NoCache } from './cache.js';
import { loadWasm } from './tier.js';

const runtime = new Runtime({
  post: (msg) => parentPort.postMessage(msg),
  initWasm: async (wasmUrl, simd, log) =>
    loadWasm(
      wasmUrl,
      simd,
      (tier) => (tier === 'relaxed' ? new URL('../wasm/edgellm_relaxed_bg.wasm', import.meta.url) : new URL('../wasm/edgellm_bg.wasm', import.meta.url)).href,
      async (loc) => ({ bindings, exports: initSync({ module: fs.readFileSync(loc.startsWith('file:') ? fileURLToPath(loc) : loc) }) }),
      (message) => log('warn', message),
    ),
  openCache: async (cfg) => (cfg && cfg.enabled && cfg.dir ? FsCache.open(fs, path, cfg.dir, cfg.owner) : new NoCache()),
  fs,
});

parentPort.on('message', (msg) => runtime.handle(msg));
process.on('uncaughtException', (e) => runtime.fatal(e));
process.on('unhandledRejection', (e) => runtime.fatal(e));
