// The packed package in a fresh app bundled by esbuild with nothing but `--bundle` (its default
// output: one classic script; esbuild emits no assets for new URL(…, import.meta.url)), served
// as is and run in Chromium.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';

import { ROOT } from '../helpers.js';
import { bundlerSkip, setUp, DEMO_JS, mainJs, runTool, runPage, assertDemo } from './apps.js';

const skip = bundlerSkip();
const ESBUILD = path.join(ROOT, 'node_modules/esbuild/bin/esbuild');
const s = setUp('esbuild', skip);

test('esbuild --bundle → the bundle runs in Chromium', { skip, timeout: 300_000 }, async () => {
  const html = '<!doctype html><html><head><meta charset="utf-8"></head><body><pre id="out"></pre><script src="app.js"></script></body></html>\n';
  const app = s.makeApp({ 'src/index.js': mainJs(), 'src/demo.js': DEMO_JS, 'public/index.html': html });
  runTool([ESBUILD, 'src/index.js', '--bundle', '--outfile=public/app.js', '--log-level=warning'], { cwd: app.dir });
  const site = await s.serve(path.join(app.dir, 'public'));
  assertDemo(assert, await runPage(s.browser, `${site.origin}/app/?model=/models/good.gguf`), s.want);
});
