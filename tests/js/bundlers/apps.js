// Shared by the bundler tests (tests/js/bundlers/*.test.js and tests/js/vite-app.test.js): the
// package as a user gets it (`npm pack`), a fresh app that depends on the tarball (installed
// offline from the npm cache), a dev server or a static server on 127.0.0.1, and the app run in
// Chromium: it loads the real model, generates greedy tokens and starts the other wasm build.
//
// The bundlers themselves (webpack 5, Next.js, React) are installed once by `./build.sh setup`
// in tests/js/bundlers/node_modules; the apps are made under tests/js/bundlers/.apps/ so that
// Node's resolution finds them there (Vite and esbuild come from the workspace's node_modules).
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { spawn, spawnSync, execFileSync } from 'node:child_process';
import { before, after } from 'node:test';
import { createHash } from 'node:crypto';

import { startServer } from '../server.js';
import { ROOT, MODEL, WASM, RELAXED_WASM, CHROMIUM, CHROMIUM_ARGS, REQUIRED, modelMissing, wasmMissing, relaxedWasmMissing } from '../helpers.js';

export const TOOLS = path.join(ROOT, 'tests/js/bundlers');
const APPS = path.join(TOOLS, '.apps');
export const PROMPT = 'The capital of France is';
export const MAX_TOKENS = 4;

/** Why the bundler tests cannot run here (a skip reason), or false. */
export function bundlerSkip({ tools = false } = {}) {
  const missing = modelMissing() || wasmMissing() || relaxedWasmMissing();
  if (missing) return missing;
  if (!fs.existsSync(path.join(ROOT, 'pkg/wasm/worker-source.js'))) {
    if (REQUIRED) throw new Error('pkg/wasm/worker-source.js missing (run ./build.sh build)');
    return 'worker bundle not built (run ./build.sh build)';
  }
  if (!fs.existsSync(CHROMIUM)) return `no Chromium at ${CHROMIUM}`;
  if (tools && !fs.existsSync(path.join(TOOLS, 'node_modules/next/package.json'))) {
    if (REQUIRED) throw new Error('tests/js/bundlers/node_modules missing (run ./build.sh setup)');
    return 'bundler tools not installed (run ./build.sh setup)';
  }
  return false;
}

/** `npm pack` of pkg/ into `dir`: {tarball, files}. */
export function packPackage(dir) {
  fs.mkdirSync(dir, { recursive: true });
  const packed = JSON.parse(execFileSync('npm', ['pack', '--json', '--pack-destination', dir], { cwd: path.join(ROOT, 'pkg'), encoding: 'utf8' }));
  return { tarball: path.join(dir, packed[0].filename), files: packed[0].files.map((f) => f.path), size: packed[0].size, unpackedSize: packed[0].unpackedSize };
}

/**
 * A fresh app directory (removed by `remove()`): `files` written, the tarball installed offline
 * with npm as its only dependency.
 */
export function makeApp(name, tarball, files) {
  fs.mkdirSync(APPS, { recursive: true });
  const dir = fs.mkdtempSync(path.join(APPS, `${name}-`));
  fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: `edgellm-${name}-app`, private: true, type: 'module' }, null, 2));
  for (const [rel, text] of Object.entries(files)) {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), text);
  }
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--ignore-scripts', tarball], { cwd: dir, stdio: 'pipe' });
  if (!fs.existsSync(path.join(dir, 'node_modules/edgellm/wasm/worker-source.js'))) throw new Error('the tarball did not install');
  return { dir, remove: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

/**
 * What every app runs (a module of its own, ./demo.js): load the model, generate MAX_TOKENS
 * greedy tokens, then start an engine on the SIMD128 build too (Chromium picks the relaxed one).
 * `?model=` is the model's URL; `?cache=1` keeps the model in the browser's cache.
 */
export const DEMO_JS = `
export async function demo(createEngine, params) {
  const engine = await createEngine({ cache: params.get('cache') === '1' });
  try {
    const info = await engine.load(params.get('model'));
    const r = await engine.completions.create({ prompt: ${JSON.stringify(PROMPT)}, max_tokens: ${MAX_TOKENS}, temperature: 0 });
    const result = { simd_tier: engine.info.simd_tier, cache: engine.info.cache, sha256: info.sha256, text: r.choices[0].text, completion_tokens: r.usage.completion_tokens };
    const fallback = await createEngine({ simd: 'simd128', cache: false });
    result.fallback_tier = fallback.info.simd_tier;
    fallback.terminate();
    return result;
  } finally {
    engine.terminate();
  }
}

export function show(result) {
  document.getElementById('out').textContent = JSON.stringify(result);
  document.body.dataset.done = '1';
}

export const failure = (e) => ({ error: { code: e && e.code, message: String(e && e.message ? e.message : e) } });
`;

/** The entry module of a plain app: imports the package from `from` and runs the demo. */
export function mainJs(from = 'edgellm', demo = './demo.js') {
  return `import { createEngine } from '${from}';
import { demo, show, failure } from '${demo}';
demo(createEngine, new URLSearchParams(location.search)).then(show, (e) => show(failure(e)));
`;
}

export const indexHtml = (src) => `<!doctype html><html><head><meta charset="utf-8"><title>edgellm app</title></head><body><pre id="out"></pre><script type="module" src="${src}"></script></body></html>\n`;

/** A free TCP port on 127.0.0.1 (for tools that need a port number up front). */
export async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

/**
 * Starts a tool (a dev server) in its own process group; resolves once `url` answers HTTP.
 * `stop()` ends the whole group (bounded). Output is kept for error messages.
 */
export async function startTool(args, { cwd, url, env = {}, timeoutMs = 120_000 }) {
  const child = spawn(process.execPath, args, { cwd, env: { ...process.env, NEXT_TELEMETRY_DISABLED: '1', BROWSER: 'none', ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let output = '';
  const keep = (d) => {
    output = (output + d).slice(-8000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const exited = new Promise((r) => child.once('exit', r));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    try {
      process.kill(-child.pid, 'SIGTERM');
    } catch {
      return;
    }
    const timer = setTimeout(() => {
      try {
        process.kill(-child.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }, 5000);
    await exited;
    clearTimeout(timer);
  };
  const t0 = Date.now();
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${args.join(' ')} exited (${child.exitCode}):\n${output}`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
      await res.arrayBuffer();
      break;
    } catch {
      /* not up yet */
    }
    if (Date.now() - t0 > timeoutMs) {
      await stop();
      throw new Error(`${args.join(' ')} did not answer at ${url} within ${timeoutMs} ms:\n${output}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return { stop, output: () => output };
}

/** Runs a tool to completion (a build); returns its output (stdout + stderr), throws with it on failure. */
export function runTool(args, { cwd, env = {}, timeoutMs = 300_000 }) {
  const r = spawnSync(process.execPath, args, { cwd, env: { ...process.env, NEXT_TELEMETRY_DISABLED: '1', ...env }, encoding: 'utf8', timeout: timeoutMs });
  const output = `${r.stdout || ''}${r.stderr || ''}`;
  if (r.status !== 0) throw new Error(`${args.join(' ')} failed (${r.error ? r.error.message : `exit ${r.status}`}):\n${output}`);
  return output;
}

/** One Chromium for a test file; `close()` at the end. */
export async function launchChromium() {
  const { chromium } = await import('playwright-core');
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
}

/** Opens `url` in a fresh page, waits for the demo's result (bounded) and returns it. */
export async function runPage(browser, url, { timeoutMs = 240_000 } = {}) {
  const page = await browser.newPage();
  const logs = [];
  page.on('pageerror', (e) => logs.push(`[page error] ${e.message}`));
  page.on('console', (m) => m.type() === 'error' && logs.push(`[console] ${m.text()}`));
  const wasm = []; // the .wasm responses the page and its worker got: [status, url]
  page.on('response', (res) => new URL(res.url()).pathname.endsWith('.wasm') && wasm.push([res.status(), res.url()]));
  try {
    await page.goto(url);
    await page.waitForFunction(() => document.body && document.body.dataset.done === '1', null, { timeout: timeoutMs });
    const result = JSON.parse(await page.textContent('#out'));
    result.logs = logs;
    result.wasm = wasm;
    return result;
  } catch (e) {
    throw new Error(`${url}: ${e.message}\n${logs.join('\n')}`);
  } finally {
    await page.close();
  }
}

let reference = null;

/**
 * The same greedy completion from the Node engine (the same wasm): what every app must print.
 * Computed once per build of the wasm and kept under .apps/ for the other test files (each runs
 * in its own process), keyed by the wasm files' size and mtime, the model and the request.
 */
export async function referenceText() {
  if (reference !== null) return reference;
  const stamp = (f) => {
    const st = fs.statSync(f);
    return `${st.size}:${st.mtimeMs}`;
  };
  const key = createHash('sha256').update(JSON.stringify([stamp(WASM), stamp(RELAXED_WASM), stamp(MODEL), PROMPT, MAX_TOKENS])).digest('hex').slice(0, 16);
  const file = path.join(APPS, `reference-${key}.json`);
  if (fs.existsSync(file)) return (reference = JSON.parse(fs.readFileSync(file, 'utf8')).text);
  const { createEngine } = await import('../../../pkg/src/node.js');
  const engine = await createEngine({ cache: false });
  try {
    await engine.load(MODEL);
    const r = await engine.completions.create({ prompt: PROMPT, max_tokens: MAX_TOKENS, temperature: 0 });
    reference = r.choices[0].text;
  } finally {
    engine.terminate();
  }
  fs.mkdirSync(APPS, { recursive: true });
  fs.writeFileSync(`${file}.tmp`, JSON.stringify({ text: reference }));
  fs.renameSync(`${file}.tmp`, file);
  return reference;
}

/** The checks every setup must pass: the relaxed build ran the model, the SIMD128 one started. */
export function assertDemo(assert, r, want) {
  assert.equal(r.error, undefined, `${JSON.stringify(r.error)}\n${(r.logs || []).join('\n')}`);
  assert.equal(r.simd_tier, 'relaxed-simd', 'Chromium runs the relaxed-SIMD build');
  assert.equal(r.fallback_tier, 'simd128', 'the SIMD128 build loads too');
  assert.equal(r.sha256, 'a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818');
  assert.equal(r.completion_tokens, MAX_TOKENS);
  assert.equal(r.text, want, 'the same greedy tokens as the Node engine');
}

/**
 * A test file's shared state, made in `before` and undone in `after` (node:test hooks): the
 * packed tarball (`tarball`, `files`), one Chromium (`browser`), the reference text (`want`) and
 * `serve(dir, opts)`, a test server on 127.0.0.1 with the real model (and `dir` at /app/),
 * closed at the end. Apps made with `s.makeApp` are removed at the end too.
 */
export function setUp(name, skip) {
  const s = { work: null, tarball: null, files: null, browser: null, want: null };
  const cleanups = [];
  s.serve = async (dir, opts = {}) => {
    const srv = await startServer({ root: ROOT, modelPath: MODEL, appDir: dir || undefined, staticDirs: [], ...opts });
    cleanups.push(() => srv.close());
    return srv;
  };
  s.makeApp = (files) => {
    const app = makeApp(name, s.tarball, files);
    cleanups.push(() => app.remove());
    return app;
  };
  before(async () => {
    if (skip) return;
    s.work = fs.mkdtempSync(path.join(os.tmpdir(), `edgellm-${name}-`));
    Object.assign(s, packPackage(s.work));
    s.browser = await launchChromium();
    s.want = await referenceText();
  });
  after(async () => {
    if (s.browser) await s.browser.close();
    for (const undo of cleanups.reverse()) await undo();
    if (s.work) fs.rmSync(s.work, { recursive: true, force: true });
  });
  return s;
}
