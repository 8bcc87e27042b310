// The packed package in a fresh app bundled by esbuild with nothing but `--bundle` (its default
// output: one classic script; esbuild emits no assets for new URL(…, import.meta.url)), served
// as is and run in Chromium.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { build } from 'esbuild';

import { bundlerSkip, setUp, DEMO_JS, mainJs, runPage, assertDemo } from './apps.js';

const skip = bundlerSkip();
const s = setUp('esbuild', skip);

test('esbuild --bundle → the bundle runs in Chromium (the wasm builds embedded in the package, as no file is served)', { skip, timeout: 300_000 }, async () => {
  const html = '<!doctype html><html><head><meta charset="utf-8"></head><body><pre id="out"></pre><script src="app.js"></script></body></html>\n';
  const app = s.makeApp({ 'src/index.js': mainJs(), 'src/demo.js': DEMO_JS, 'public/index.html': html });
  // `esbuild src/index.js --bundle --outfile=public/app.js`, through its API.
  await build({ absWorkingDir: app.dir, entryPoints: ['src/index.js'], bundle: true, outfile: 'public/app.js', logLevel: 'warning' });
  const pub = path.join(app.dir, 'public');
  assert.deepEqual(fs.readdirSync(pub).sort(), ['app.js', 'index.html'], 'no wasm file is served');
  const site = await s.serve(pub);
  const r = await runPage(s.browser, `${site.origin}/app/?model=/models/good.gguf`);
  assertDemo(assert, r, s.want);
  assert.deepEqual(r.wasm, [], "no .wasm was fetched: both builds came from the package's embedded copy");
});
