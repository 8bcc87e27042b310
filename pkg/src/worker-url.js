// Where the browser engine's worker script and its wasm builds come from (used by index.js).
//
// No configuration in any bundler, nor from a CDN: by default the worker is ONE self-contained
// classic script (worker.js + runtime + wasm-bindgen glue, bundled by build.sh into
// wasm/worker-source.js as a string) started from a Blob URL. No bundler has to find, move or
// rewrite it (Vite's dev server pre-bundles dependencies away from the files they reference), and
// a page may import the package from another origin (a worker script must be same-origin; a blob:
// URL has the page's origin). A blob worker has no useful base URL, so the wasm builds are located
// here, in the main thread, by literal `new URL('../wasm/…', import.meta.url)` expressions that
// Vite, webpack 5, Next.js and Rollup emit as assets, and handed to the worker in `init`.
//
// Overrides for strict Content-Security-Policies (no `blob:` in worker-src) and self-hosting:
// `workerUrl` (a same-origin module worker: wasm/edgellm-worker.js copied as is, or a file that
// imports 'edgellm/worker') and `wasmUrl` (tier.js: one build, or {relaxed, simd128}).

import { EdgeLLMError, ErrorCode } from './errors.js';
import { wasmUrlOption, TIERS, EMBEDDED_WASM } from './tier.js';
import { embeddedWasm } from './embedded-wasm.js';

/** The package's name: its directory under node_modules (tested against package.json). */
export const PACKAGE_NAME = 'edgellm';

/**
 * Vite's dev server serves pre-bundled dependencies from <root>/node_modules/.vite/deps/ without
 * the files they reference (vitejs/vite#8427), so a `new URL('../wasm/…', import.meta.url)` there
 * names nothing; the package's own files are served from <root>/node_modules/edgellm/.
 * Returns that directory's URL when this module runs pre-bundled, else null.
 */
export function vitePrebundledPackageUrl(moduleUrl) {
  const m = /^(.*\/node_modules\/)\.vite\/deps(?:_[^/]*)?\/[^/]*$/.exec(moduleUrl.split(/[?#]/)[0]);
  return m ? `${m[1]}${PACKAGE_NAME}/` : null;
}

/** The package's wasm builds, by tier (tier.js TIERS) and the threaded builds (THREADED_KEYS), as absolute URLs. */
export function defaultWasmUrls() {
  // esbuild's classic-script output has an empty import.meta: no location (the embedded copy).
  const here = typeof import.meta.url === 'string' ? import.meta.url : null;
  const vite = here && vitePrebundledPackageUrl(here);
  if (vite) return { relaxed: `${vite}wasm/edgellm_relaxed_bg.wasm`, simd128: `${vite}wasm/edgellm_bg.wasm`, threads: `${vite}wasm/threads/edgellm_bg.wasm`, threadsRelaxed: `${vite}wasm/threads/edgellm_relaxed_bg.wasm` };
  if (!here) return { relaxed: null, simd128: null, threads: null, threadsRelaxed: null };
  // Keep both expressions literal: bundlers emit each build as an asset through them. Turbopack
  // (Next.js) replaces them by objects whose href is a path ('/_next/static/media/…'), hence the
  // resolution against the page.
  const simd128 = absolute(new URL('../wasm/edgellm_bg.wasm', import.meta.url));
  return {
    relaxed: absolute(new URL('../wasm/edgellm_relaxed_bg.wasm', import.meta.url)),
    simd128,
    // Beside the SIMD128 build, derived at run time, never an asset reference: the threaded
    // build is optional (./build.sh build-threads) and a bundler would fail on a missing file.
    // Where a bundler renamed the builds, or nothing is served there, one thread runs (or pass
    // wasmUrl.threads).
    threads: simd128.replace(/edgellm_bg\.wasm$/, 'threads/edgellm_bg.wasm'),
    threadsRelaxed: simd128.replace(/edgellm_bg\.wasm$/, 'threads/edgellm_relaxed_bg.wasm'),
  };
}

const pageBase = () => (typeof document !== 'undefined' && document.baseURI) || (globalThis.location && globalThis.location.href) || undefined;
const absolute = (url) => new URL(url.href, pageBase()).href;

/**
 * The `wasmUrl` the worker gets in `init`: the user's (relative locations resolved against the
 * page), with the package's own files for the tiers it does not name.
 */
export function resolveWasmUrl(option) {
  const given = wasmUrlOption(option, (loc) => new URL(loc, pageBase()).href);
  if (typeof given === 'string') return given;
  // `embedded`: the tiers located by the package's guess, which fall back to the embedded copy.
  return { ...defaultWasmUrls(), ...given, embedded: TIERS.filter((t) => !given || given[t] === undefined) };
}

let blobUrl = null; // one per page, kept for its lifetime: every engine (and restart) reuses it

async function bundledWorkerUrl() {
  if (!blobUrl) {
    // Loaded only when an engine starts (bundlers put it in its own chunk).
    const { default: source } = await import('../wasm/worker-source.js');
    blobUrl = URL.createObjectURL(new Blob([source], { type: 'text/javascript' }));
  }
  return blobUrl;
}

/** Answers the worker's EMBEDDED_WASM request (tier.js) with the build's bytes, transferred. */
async function sendEmbedded(worker, tier) {
  try {
    const bytes = await embeddedWasm(tier);
    worker.postMessage({ type: EMBEDDED_WASM, tier, bytes }, [bytes]);
  } catch (e) {
    worker.postMessage({ type: EMBEDDED_WASM, tier, error: `the embedded ${tier} build could not be read: ${e && e.message ? e.message : e}` });
  }
}

/**
 * Starts the engine worker; returns the client's adapter {post, terminate} at once. Messages
 * posted before the worker exists (the bundled script loads asynchronously) are queued.
 */
export function spawnBrowserWorker({ onMessage, onFatal }, options) {
  let worker = null;
  let queue = [];
  let terminated = false;
  const fail = (what) => onFatal(new EdgeLLMError(ErrorCode.ENGINE_CRASHED, `the engine worker failed: ${what}`));

  const attach = (w) => {
    worker = w;
    w.onmessage = (e) => (e.data && e.data.type === EMBEDDED_WASM ? sendEmbedded(w, e.data.tier) : onMessage(e.data));
    w.onerror = (e) => {
      if (e && e.preventDefault) e.preventDefault();
      const hint = options.workerUrl ? ` (workerUrl ${options.workerUrl})` : '';
      fail(`${(e && e.message) || 'could not load or run the worker script'}${hint}`);
    };
    w.onmessageerror = () => onFatal(new EdgeLLMError(ErrorCode.ENGINE_CRASHED, 'a message from the engine worker could not be deserialized'));
    const queued = queue;
    queue = null;
    try {
      for (const m of queued) w.postMessage(m);
    } catch (e) {
      fail(`a queued message could not be sent: ${e.message}`);
    }
  };

  const start = async () => {
    // A workerUrl is a module worker (it may import the package's modules); the bundle is classic.
    if (options.workerUrl) return new Worker(options.workerUrl, { type: 'module', name: 'edgellm' });
    return new Worker(await bundledWorkerUrl(), { name: 'edgellm' });
  };
  start().then(
    (w) => (terminated ? w.terminate() : attach(w)),
    (e) => terminated || fail(`could not start it: ${e && e.message ? e.message : e}`),
  );

  return {
    post: (m) => (worker ? worker.postMessage(m) : queue.push(m)),
    terminate: () => {
      terminated = true;
      queue = [];
      if (worker) worker.terminate();
    },
  };
}
