// Both wasm builds carried inside the package as JS strings (gzip + base64, made by
// scripts/browser_assets.mjs): the fallback where no wasm file is served where worker-url.js
// looked, e.g. after esbuild, which emits no asset for new URL(…, import.meta.url). Each build's
// modules are dynamic imports, so bundlers that split chunks emit them but never load them where
// the file is found; the worker asks for a build (EMBEDDED_WASM in tier.js) only when it is not.

import { EMBEDDED_PARTS } from '../wasm/embedded-wasm.js';

/** The wasm bytes of one build ('relaxed' | 'simd128'). */
export async function embeddedWasm(tier) {
  const load = EMBEDDED_PARTS[tier];
  if (!load) throw new Error(`no embedded ${tier} build`);
  const b64 = (await load()).map((m) => m.default).join('');
  const bin = atob(b64);
  const gz = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) gz[i] = bin.charCodeAt(i);
  return new Response(new Blob([gz]).stream().pipeThrough(new DecompressionStream('gzip'))).arrayBuffer();
}
