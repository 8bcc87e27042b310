// The npm package as a user gets it: `npm pack` → install the tarball into a fresh Vite 7 app
// (no plugins, no config) → `vite build` → run the built app in Chromium, which loads the real
// model and generates two tokens.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';

import { startServer } from './server.js';
import { ROOT, MODEL, CHROMIUM, CHROMIUM_ARGS, modelMissing, wasmMissing } from './helpers.js';

const skip = modelMissing() || wasmMissing() || (!fs.existsSync(CHROMIUM) && `no Chromium at ${CHROMIUM}`);
const VITE = path.join(ROOT, 'node_modules/vite/bin/vite.js');

let work;
let srv;
let browser;

before(() => {
  if (!skip) work = fs.mkdtempSync(path.join(os.tmpdir(), 'edgellm-vite-'));
});

after(async () => {
  if (browser) await browser.close();
  if (srv) await srv.close();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

const APP_JS = `
import { createEngine, ErrorCode } from 'edgellm';

const out = document.getElementById('out');
const report = (o) => { out.textContent = JSON.stringify(o); document.body.dataset.done = '1'; };
try {
  const engine = await createEngine({ cache: false });
  const info = await engine.load('/models/good.gguf');
  const result = { version: engine.info.version, simd: engine.info.simd, simd_tier: engine.info.simd_tier, sha256: info.sha256, codes: Object.keys(ErrorCode).length };
  if (new URLSearchParams(location.search).get('generate')) {
    const r = await engine.completions.create({ prompt: 'The capital of France is', max_tokens: 2, temperature: 0 });
    result.text = r.choices[0].text;
    result.usage = r.usage;
  }
  report(result);
} catch (e) {
  report({ error: { code: e.code, message: e.message } });
}
`;

test('npm pack → Vite 7 app (no plugins) → runs in Chromium', { skip, timeout: 600_000 }, async () => {
  // 1. Pack.
  const packDir = path.join(work, 'pack');
  fs.mkdirSync(packDir);
  const packed = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', packDir], { cwd: path.join(ROOT, 'pkg'), encoding: 'utf8' }));
  const files = packed[0].files.map((f) => f.path);
  for (const f of ['package.json', 'index.d.ts', 'src/index.js', 'src/worker.js', 'src/node.js', 'src/tier.js', 'wasm/edgellm.js', 'wasm/edgellm_bg.wasm', 'wasm/edgellm_relaxed_bg.wasm']) {
    assert.ok(files.includes(f), `tarball lacks ${f}: ${files.join(', ')}`);
  }
  const tarball = path.join(packDir, packed[0].filename);

  // 2. A fresh app that depends on the tarball.
  const app = path.join(work, 'app');
  fs.mkdirSync(app);
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'edgellm-vite-app', private: true, type: 'module' }, null, 2));
  fs.writeFileSync(path.join(app, 'index.html'), '<!doctype html><html><body><pre id="out"></pre><script type="module" src="/main.js"></script></body></html>\n');
  fs.writeFileSync(path.join(app, 'main.js'), APP_JS);
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', tarball], { cwd: app, stdio: 'pipe' });
  assert.ok(fs.existsSync(path.join(app, 'node_modules/edgellm/wasm/edgellm_bg.wasm')));

  // 3. Build with Vite, no config file and no plugins.
  execFileSync(process.execPath, [VITE, 'build', '--base', '/app/', '--logLevel', 'warn'], { cwd: app, stdio: 'pipe', timeout: 300_000 });
  const dist = path.join(app, 'dist');
  const assets = fs.readdirSync(path.join(dist, 'assets'));
  const wasm = assets.filter((f) => f.endsWith('.wasm'));
  // Both tiers are emitted (the worker names each with a literal new URL(…, import.meta.url)).
  assert.ok(wasm.some((f) => f.startsWith('edgellm_relaxed_bg')) && wasm.some((f) => f.startsWith('edgellm_bg')), `both wasm tiers emitted: ${assets.join(', ')}`);

  // 4. Serve the built app and run it.
  srv = await startServer({ root: ROOT, modelPath: MODEL, appDir: dist, staticDirs: [] });
  const { chromium } = await import('playwright-core');
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  const page = await browser.newPage();
  page.on('pageerror', (e) => console.log(`[app error] ${e.message}`));
  await page.goto(`${srv.origin}/app/?generate=1`);
  await page.waitForFunction(() => document.body.dataset.done === '1', null, { timeout: 300_000 });
  const r = JSON.parse(await page.textContent('#out'));
  assert.equal(r.error, undefined, JSON.stringify(r.error));
  assert.equal(r.version, '0.1.0');
  assert.equal(r.simd, true);
  assert.equal(r.simd_tier, 'relaxed-simd', 'Chromium runs the relaxed-SIMD tier');
  assert.equal(r.sha256, 'a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818');
  assert.equal(r.usage.completion_tokens, 2);
  assert.equal(typeof r.text, 'string');
  const fetchedWasm = srv.stats.log.filter((l) => l.path.startsWith('/app/assets/') && l.path.endsWith('.wasm'));
  assert.ok(fetchedWasm.length >= 1, 'the app fetched the wasm the bundler emitted');
  assert.ok(fetchedWasm.every((l) => l.path.includes('edgellm_relaxed_bg')), `only the relaxed tier was fetched: ${fetchedWasm.map((l) => l.path).join(', ')}`);
});
