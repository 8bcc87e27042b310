// The packed package in a fresh webpack 5 app with webpack's defaults (entry ./src/index.js,
// output dist/, production mode; no loaders, no plugins: what `npx webpack` does in the app's
// directory; the Node API needs the output path spelled out, as it defaults to the process's cwd):
// built, served, run in Chromium.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';

import { TOOLS, bundlerSkip, setUp, DEMO_JS, mainJs, indexHtml, runPage, assertDemo } from './apps.js';

const skip = bundlerSkip({ tools: true });
const s = setUp('webpack', skip);

test('webpack 5, default configuration → the built app runs in Chromium', { skip, timeout: 300_000 }, async () => {
  const app = s.makeApp({ 'src/index.js': mainJs(), 'src/demo.js': DEMO_JS, 'dist/index.html': indexHtml('main.js') });
  const webpack = createRequire(path.join(TOOLS, 'package.json'))('webpack');
  const dist = path.join(app.dir, 'dist');
  const stats = await new Promise((resolve, reject) => webpack({ context: app.dir, mode: 'production', output: { path: dist } }, (err, st) => (err ? reject(err) : resolve(st))));
  assert.ok(!stats.hasErrors(), stats.toString({ all: false, errors: true }));
  const emitted = fs.readdirSync(dist);
  assert.equal(emitted.filter((f) => f.endsWith('.wasm')).length, 2, `both wasm builds emitted: ${emitted.join(', ')}`);

  const site = await s.serve(dist);
  assertDemo(assert, await runPage(s.browser, `${site.origin}/app/?model=/models/good.gguf`), s.want);
});
