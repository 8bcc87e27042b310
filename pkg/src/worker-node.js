// Node entry of the engine worker (worker_threads). Started by node.js. Node's fetch cannot read
// `file:` URLs, so the wasm is read from disk and instantiated synchronously.

import { parentPort } from 'node:worker_threads';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { initSync } from '../wasm/edgellm.js';
import * as bindings from '../wasm/edgellm.js';
import { Runtime } from './runtime.js';
import { FsCache, NoCache } from './cache.js';

const runtime = new Runtime({
  post: (msg) => parentPort.postMessage(msg),
  initWasm: async (wasmUrl) => {
    const file = wasmUrl ? (wasmUrl.startsWith('file:') ? fileURLToPath(wasmUrl) : wasmUrl) : fileURLToPath(new URL('../wasm/edgellm_bg.wasm', import.meta.url));
    const exports = initSync({ module: fs.readFileSync(file) });
    return { bindings, exports };
  },
  openCache: async (cfg) => (cfg && cfg.enabled && cfg.dir ? FsCache.open(fs, path, cfg.dir) : new NoCache()),
  fs,
});

parentPort.on('message', (msg) => runtime.handle(msg));
process.on('uncaughtException', (e) => runtime.fatal(e));
process.on('unhandledRejection', (e) => runtime.fatal(e));
