// Unit tests of where the browser engine finds its worker and wasm (pkg/src/worker-url.js) and
// of the `wasmUrl` option (pkg/src/tier.js), run under Node without a browser.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { ROOT } from './helpers.js';
import { PACKAGE_NAME, vitePrebundledPackageUrl, defaultWasmUrls, resolveWasmUrl } from '../../pkg/src/worker-url.js';
import { wasmUrlOption, loadWasm } from '../../pkg/src/tier.js';

test('PACKAGE_NAME is the package.json name (the directory Vite serves it from)', () => {
  assert.equal(PACKAGE_NAME, JSON.parse(fs.readFileSync(path.join(ROOT, 'pkg/package.json'), 'utf8')).name);
});

test("Vite's pre-bundled copy is recognised and mapped to the package's own directory", () => {
  assert.equal(vitePrebundledPackageUrl('http://127.0.0.1:5173/node_modules/.vite/deps/edgellm.js?v=1a2b3c'), 'http://127.0.0.1:5173/node_modules/edgellm/');
  assert.equal(vitePrebundledPackageUrl('http://h/base/node_modules/.vite/deps/chunk-ABC.js'), 'http://h/base/node_modules/edgellm/');
  assert.equal(vitePrebundledPackageUrl('http://h/node_modules/.vite/deps_temp_1234/edgellm.js'), 'http://h/node_modules/edgellm/');
  for (const u of ['http://h/node_modules/edgellm/src/worker-url.js', 'https://cdn.example/npm/edgellm@0.1.0/src/worker-url.js', 'http://h/assets/index-abc.js', 'file:///app/node_modules/.vite/other/x.js']) {
    assert.equal(vitePrebundledPackageUrl(u), null, u);
  }
});

test('the default wasm locations are the package files, one per tier, and the threaded builds', () => {
  const d = defaultWasmUrls();
  assert.deepEqual(Object.keys(d).sort(), ['relaxed', 'simd128', 'threads', 'threadsRelaxed']);
  assert.match(d.relaxed, /\/pkg\/wasm\/edgellm_relaxed_bg\.wasm$/);
  assert.match(d.simd128, /\/pkg\/wasm\/edgellm_bg\.wasm$/);
  assert.match(d.threads, /\/pkg\/wasm\/threads\/edgellm_bg\.wasm$/);
  assert.match(d.threadsRelaxed, /\/pkg\/wasm\/threads\/edgellm_relaxed_bg\.wasm$/);
});

test('wasmUrl: one build, per-tier builds (the others default), and bad values rejected with INVALID_REQUEST', () => {
  assert.equal(resolveWasmUrl('http://h/x.wasm'), 'http://h/x.wasm');
  assert.equal(resolveWasmUrl(new URL('http://h/y.wasm')), 'http://h/y.wasm');
  // Only the package's own (guessed) locations fall back to the embedded copy.
  const per = resolveWasmUrl({ relaxed: 'http://h/r.wasm' });
  assert.deepEqual(per, { relaxed: 'http://h/r.wasm', simd128: defaultWasmUrls().simd128, threads: defaultWasmUrls().threads, threadsRelaxed: defaultWasmUrls().threadsRelaxed, embedded: ['simd128'] });
  // The threaded build has no embedded copy: where it is not served, one thread runs.
  assert.deepEqual(resolveWasmUrl({ threads: 'http://h/t.wasm' }).threads, 'http://h/t.wasm');
  assert.deepEqual(resolveWasmUrl(undefined), { ...defaultWasmUrls(), embedded: ['relaxed', 'simd128'] });
  for (const bad of [42, '', { relaxed: 1 }, { avx: 'http://h/a.wasm' }, true]) {
    assert.throws(() => wasmUrlOption(bad, String), (e) => e.code === 'INVALID_REQUEST', JSON.stringify(bad));
  }
});

test('loadWasm: a string wins over simd; per-tier entries are used for the chosen tier', async () => {
  const seen = [];
  const start = async (loc) => (seen.push(loc), loc);
  assert.equal(await loadWasm('one.wasm', 'simd128', () => 'default', start), 'one.wasm');
  assert.equal(await loadWasm({ simd128: 's.wasm' }, 'simd128', () => 'default', start), 's.wasm');
  assert.equal(await loadWasm({ relaxed: 'r.wasm' }, 'simd128', (t) => `default-${t}`, start), 'default-simd128');
  assert.deepEqual(seen, ['one.wasm', 's.wasm', 'default-simd128']);
});
