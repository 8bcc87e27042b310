// The package from a CDN: the tarball's files served by another origin (with CORS, as CDNs
// do) and imported by a plain <script type="module"> of a page without any build step. A worker
// script must be same-origin, so this only works because the worker starts from a Blob URL. The
// model cache (OPFS) works from that worker: the second visit reads no model byte from the network.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { execFileSync } from 'node:child_process';

import { bundlerSkip, setUp, DEMO_JS, mainJs, indexHtml, runPage, assertDemo } from './apps.js';

const skip = bundlerSkip();
const s = setUp('cdn', skip);

test('<script type="module"> importing the package from another origin (a CDN copy) → runs, and the model cache works', { skip, timeout: 300_000 }, async () => {
  execFileSync('tar', ['xzf', s.tarball, '-C', s.work]);
  const cdn = await s.serve(path.join(s.work, 'package'), { cors: true });

  const page = path.join(s.work, 'page');
  fs.mkdirSync(page);
  fs.writeFileSync(path.join(page, 'index.html'), indexHtml('main.js'));
  fs.writeFileSync(path.join(page, 'main.js'), mainJs(`${cdn.origin}/app/src/index.js`));
  fs.writeFileSync(path.join(page, 'demo.js'), DEMO_JS);
  const site = await s.serve(page);
  assert.notEqual(site.origin, cdn.origin);

  const context = await s.browser.newContext(); // one profile: the second visit sees the first's cache
  const url = `${site.origin}/app/?cache=1&model=/models/good.gguf`;
  const first = await runPage(context, url);
  assertDemo(assert, first, s.want);
  assert.equal(first.cache, 'opfs');
  const cdnWasm = cdn.stats.log.filter((l) => l.path.endsWith('.wasm')).map((l) => l.path);
  assert.deepEqual(cdnWasm.sort(), ['/app/wasm/edgellm_bg.wasm', '/app/wasm/edgellm_relaxed_bg.wasm'], 'the wasm came from the CDN');

  const modelBytes = () => site.stats.bytes['/models/good.gguf'] || 0;
  const downloaded = modelBytes();
  assert.ok(downloaded >= site.modelSize, 'the first visit downloaded the model');
  const second = await runPage(context, url);
  assertDemo(assert, second, s.want);
  assert.equal(modelBytes(), downloaded, 'the second visit read the model from the cache');
  await context.close();
});

test('a strict Content-Security-Policy (no blob: workers): workerUrl names a same-origin copy of the worker, the package still comes from the CDN', { skip, timeout: 300_000 }, async () => {
  const cdn = await s.serve(path.join(s.work, 'package'), { cors: true });
  const page = path.join(s.work, 'csp-page');
  fs.mkdirSync(page);
  // Self-hosted as the README says: the worker script copied as is from the package.
  fs.copyFileSync(path.join(s.work, 'package/wasm/edgellm-worker.js'), path.join(page, 'edgellm-worker.js'));
  const csp = `default-src 'none'; script-src 'self' ${cdn.origin} 'wasm-unsafe-eval'; worker-src 'self'; connect-src 'self' ${cdn.origin}`;
  fs.writeFileSync(path.join(page, 'index.html'), indexHtml('main.js').replace('<meta charset="utf-8">', `<meta charset="utf-8"><meta http-equiv="Content-Security-Policy" content="${csp}">`));
  fs.writeFileSync(
    path.join(page, 'main.js'),
    `import { createEngine } from '${cdn.origin}/app/src/index.js';
import { demo, show, failure } from './demo.js';
const params = new URLSearchParams(location.search);
const workerUrl = new URL('edgellm-worker.js', location.href);
// The default (a blob: worker) is refused by this policy, with a typed error.
const refused = await createEngine().then((e) => (e.terminate(), null), (e) => e.code);
demo((o) => createEngine({ ...o, workerUrl }), params).then((r) => show({ ...r, refused }), (e) => show(failure(e)));
`,
  );
  fs.writeFileSync(path.join(page, 'demo.js'), DEMO_JS);
  const site = await s.serve(page);
  const r = await runPage(s.browser, `${site.origin}/app/?model=/models/good.gguf`);
  assertDemo(assert, r, s.want);
  assert.equal(r.refused, 'ENGINE_INIT_FAILED', 'the blob: worker is refused under worker-src \'self\'');
});
