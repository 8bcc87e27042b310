// The npm package as a user gets it, in a fresh Vite 7 app with no plugins and no config file:
// `npm pack` → install the tarball → the dev server (`vite`, which pre-bundles dependencies into
// node_modules/.vite/deps) and `vite build`; each app runs in Chromium, loads the real model and
// generates greedy tokens on the relaxed-SIMD build, and starts the SIMD128 build.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { ROOT } from './helpers.js';
import { bundlerSkip, setUp, DEMO_JS, mainJs, indexHtml, freePort, startTool, runTool, runPage, assertDemo } from './bundlers/apps.js';

const skip = bundlerSkip();
const VITE = path.join(ROOT, 'node_modules/vite/bin/vite.js');
const s = setUp('vite', skip);
let app;
let models; // the model's host (CORS: the dev server's page fetches it cross-origin)

before(async () => {
  if (skip) return;
  for (const f of ['package.json', 'index.d.ts', 'src/index.js', 'src/worker.js', 'src/worker-url.js', 'src/node.js', 'src/tier.js', 'wasm/edgellm.js', 'wasm/worker-source.js', 'wasm/edgellm-worker.js', 'wasm/edgellm_bg.wasm', 'wasm/edgellm_relaxed_bg.wasm']) {
    assert.ok(s.files.includes(f), `tarball lacks ${f}: ${s.files.join(', ')}`);
  }
  app = s.makeApp({ 'index.html': indexHtml('/main.js'), 'main.js': mainJs(), 'demo.js': DEMO_JS });
  models = await s.serve(null, { cors: true });
});

test('Vite 7 dev server (dependencies pre-bundled), no config → the model runs in Chromium', { skip, timeout: 300_000 }, async () => {
  const port = await freePort();
  const origin = `http://127.0.0.1:${port}`;
  const dev = await startTool([VITE, '--host', '127.0.0.1', '--port', String(port), '--strictPort'], { cwd: app.dir, url: `${origin}/` });
  try {
    const r = await runPage(s.browser, `${origin}/?model=${encodeURIComponent(`${models.origin}/models/good.gguf`)}`);
    assertDemo(assert, r, s.want);
    // The case this guards: the package ran from Vite's pre-bundled copy, not from its own files;
    // the wasm still came from the package's files (not from the embedded fallback).
    assert.ok(fs.readdirSync(path.join(app.dir, 'node_modules/.vite/deps')).some((f) => f.startsWith('edgellm')), 'Vite pre-bundled edgellm');
    assert.deepEqual(r.wasm.map(([status, u]) => `${status} ${new URL(u).pathname}`).sort(), ['200 /node_modules/edgellm/wasm/edgellm_bg.wasm', '200 /node_modules/edgellm/wasm/edgellm_relaxed_bg.wasm']);
  } finally {
    await dev.stop();
  }
});

test("vite build, no config → the built app runs in Chromium; both wasm builds emitted and fetched from the build's assets", { skip, timeout: 300_000 }, async () => {
  const log = runTool([VITE, 'build', '--base', '/app/', '--logLevel', 'warn'], { cwd: app.dir });
  assert.doesNotMatch(log, /larger than 500 kB/, 'no chunk-size warning from the package (the embedded wasm is split)');
  const dist = path.join(app.dir, 'dist');
  const assets = fs.readdirSync(path.join(dist, 'assets'));
  const wasm = assets.filter((f) => f.endsWith('.wasm'));
  assert.ok(wasm.some((f) => f.startsWith('edgellm_relaxed_bg')) && wasm.some((f) => f.startsWith('edgellm_bg')), `both wasm builds emitted: ${assets.join(', ')}`);

  const site = await s.serve(dist);
  const r = await runPage(s.browser, `${site.origin}/app/?model=/models/good.gguf`);
  assertDemo(assert, r, s.want);
  const fetched = site.stats.log.filter((l) => l.path.endsWith('.wasm')).map((l) => l.path);
  assert.ok(fetched.length === 2 && fetched.every((p) => p.startsWith('/app/assets/')), `the emitted wasm files were fetched: ${fetched.join(', ')}`);
  assert.equal(fetched.filter((p) => p.includes('edgellm_relaxed_bg')).length, 1, 'the relaxed build once (the demo engine), the SIMD128 build once (its second engine)');
});
