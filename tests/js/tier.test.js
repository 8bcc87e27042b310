// The SIMD tiers under Node 20: which wasm build the worker picks (pkg/src/tier.js), the
// `simd` option, and the typed error for 'relaxed' where V8 does not run standard relaxed SIMD.
// Node 20 accepts relaxed SIMD only with --experimental-wasm-relaxed-simd, and then runs a
// pre-standard draft whose dot product gives other results: the tier probe must refuse it. This
// process runs without the flag (as node --test starts it), a child process with it. No model
// needed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

import { createEngine, ErrorCode } from '../../pkg/src/node.js';
import { chooseTier, loadTier, loadThreadedWasm, relaxedSimdSupported, chooseThreads, threadsOption, canShareMemory, wasmUrlOption } from '../../pkg/src/tier.js';
import { ROOT, WASM, wasmMissing, relaxedWasmMissing } from './helpers.js';

const skip = wasmMissing() || relaxedWasmMissing();
const FLAG = '--experimental-wasm-relaxed-simd';
const flagged = process.execArgv.includes(FLAG);

test('chooseTier / loadTier: option values, fallback under auto only', async () => {
  assert.equal(chooseTier('simd128'), 'simd128');
  assert.equal(chooseTier(), relaxedSimdSupported() ? 'relaxed' : 'simd128');
  assert.throws(() => chooseTier('avx'), (e) => e.code === ErrorCode.INVALID_REQUEST);
  if (!relaxedSimdSupported()) {
    assert.throws(() => chooseTier('relaxed'), (e) => e.code === ErrorCode.ENGINE_INIT_FAILED && e.detail === 'RELAXED_SIMD_UNSUPPORTED');
  }
  // A relaxed build that fails to load falls back under 'auto' (with a warning), not under 'relaxed'.
  const warnings = [];
  const tried = [];
  const load = async (tier) => {
    tried.push(tier);
    if (tier === 'relaxed') throw new Error('no such file');
    return tier;
  };
  assert.equal(await loadTier('simd128', load), 'simd128');
  assert.deepEqual(tried, ['simd128']);
  if (relaxedSimdSupported()) {
    tried.length = 0;
    assert.equal(await loadTier('auto', load, (w) => warnings.push(w)), 'simd128');
    assert.deepEqual(tried, ['relaxed', 'simd128']);
    assert.match(warnings[0], /relaxed-SIMD build did not load/);
    await assert.rejects(loadTier('relaxed', load), /no such file/);
  }
});

test('threads: option values, isolation and the build decide, an explicit count falls back with a warning', () => {
  assert.equal(threadsOption(undefined), 'auto');
  assert.equal(threadsOption('auto'), 'auto');
  assert.equal(threadsOption(3), 3);
  for (const bad of [0, -1, 1.5, '2', 257, null, NaN]) assert.throws(() => threadsOption(bad), (e) => e.code === ErrorCode.INVALID_REQUEST, String(bad));
  const isolated = { crossOriginIsolated: true, SharedArrayBuffer, Atomics, navigator: { hardwareConcurrency: 4 } };
  const plain = { ...isolated, crossOriginIsolated: false };
  assert.equal(canShareMemory(isolated), true);
  assert.equal(canShareMemory(plain), false);
  assert.equal(canShareMemory({ ...isolated, SharedArrayBuffer: undefined }), false);
  const warnings = [];
  const warn = (m) => warnings.push(m);
  assert.equal(chooseThreads('auto', true, warn, isolated), 4);
  assert.equal(chooseThreads(2, true, warn, isolated), 2);
  assert.equal(chooseThreads(1, true, warn, isolated), 1);
  assert.equal(chooseThreads('auto', true, warn, plain), 1);
  assert.equal(chooseThreads('auto', false, warn, isolated), 1);
  assert.deepEqual(warnings, [], 'auto never warns');
  assert.equal(chooseThreads(2, true, warn, plain), 1);
  assert.match(warnings.pop(), /not cross-origin isolated/);
  assert.equal(chooseThreads(2, false, warn, isolated), 1);
  assert.match(warnings.pop(), /threaded build is not available/);
  assert.equal(chooseThreads('auto', true, warn, { ...isolated, navigator: {} }), 1);
  // This Node process is not isolated: 'auto' is one thread.
  assert.equal(chooseThreads('auto', true), 1);
  assert.deepEqual(wasmUrlOption({ threads: 'http://x/t.wasm' }, (l) => l), { threads: 'http://x/t.wasm' });
});

test('threaded builds: the tier by the simd rule, relaxed falling back to SIMD128 under auto, a missing location failing', async () => {
  const urls = { threads: 'http://x/t.wasm', threadsRelaxed: 'http://x/tr.wasm' };
  const started = [];
  const start = async (url, tier) => (started.push([url, tier]), tier);
  assert.equal(await loadThreadedWasm(urls, 'simd128', start), 'simd128');
  assert.deepEqual(started.pop(), ['http://x/t.wasm', 'simd128']);
  // This Node has no standard relaxed SIMD, so 'auto' is SIMD128 and 'relaxed' is refused.
  assert.equal(await loadThreadedWasm(urls, 'auto', start), 'simd128');
  await assert.rejects(loadThreadedWasm(urls, 'relaxed', start), (e) => e.detail === 'RELAXED_SIMD_UNSUPPORTED');
  await assert.rejects(loadThreadedWasm({ threadsRelaxed: 'http://x/tr.wasm' }, 'simd128', start), /no threaded simd128 build located \(wasmUrl\.threads\)/);
});

test('an unknown simd option is INVALID_REQUEST before any worker starts', async () => {
  await assert.rejects(createEngine({ simd: 'relaxed-simd', cache: false }), (e) => e.code === ErrorCode.INVALID_REQUEST && /simd must be one of/.test(e.message));
});

test(`Node without ${FLAG}: auto runs the probed tier, 'relaxed' is a typed error where unsupported, 'simd128' runs simd128`, { skip: skip || (flagged && `this process runs with ${FLAG}`) }, async () => {
  const supported = relaxedSimdSupported();
  const auto = await createEngine({ cache: false });
  try {
    assert.equal(auto.info.simd_tier, supported ? 'relaxed-simd' : 'simd128');
    assert.equal(auto.info.simd, true);
  } finally {
    auto.terminate();
  }
  if (!supported) {
    await assert.rejects(createEngine({ simd: 'relaxed', cache: false }), (e) => {
      assert.equal(e.code, ErrorCode.ENGINE_INIT_FAILED);
      assert.equal(e.detail, 'RELAXED_SIMD_UNSUPPORTED');
      assert.match(e.message, /relaxed SIMD/);
      return true;
    });
  }
  const forced = await createEngine({ simd: 'simd128', cache: false });
  assert.equal(forced.info.simd_tier, 'simd128');
  forced.terminate();
});

test(`Node with ${FLAG}: the draft relaxed SIMD fails the probe, so auto runs simd128 and 'relaxed' is refused; wasmUrl wins`, { skip }, () => {
  // A child node with the flag (V8 flags are per process; the engine's worker inherits them).
  const script = `
    import { createEngine } from ${JSON.stringify(pathToFileURL(path.join(ROOT, 'pkg/src/node.js')).href)};
    import { relaxedSimdSupported, RELAXED_PROBE } from ${JSON.stringify(pathToFileURL(path.join(ROOT, 'pkg/src/tier.js')).href)};
    const out = { probe: relaxedSimdSupported(), validates: WebAssembly.validate(RELAXED_PROBE) };
    for (const [k, o] of Object.entries({ auto: {}, relaxed: { simd: 'relaxed' }, simd128: { simd: 'simd128' },
        url: { simd: 'relaxed', wasmUrl: ${JSON.stringify(pathToFileURL(WASM).href)} } })) {
      try {
        const e = await createEngine({ cache: false, ...o });
        out[k] = e.info.simd_tier;
        e.terminate();
      } catch (e) {
        out[k] = e.detail || e.code;
      }
    }
    console.log(JSON.stringify(out));`;
  // A script file, not --eval: the engine's worker inherits execArgv, and --input-type breaks it.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'edgellm-tier-'));
  let out;
  try {
    fs.writeFileSync(path.join(dir, 'tiers.mjs'), script);
    out = execFileSync(process.execPath, [FLAG, path.join(dir, 'tiers.mjs')], { cwd: ROOT, encoding: 'utf8', timeout: 60_000 });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  const got = JSON.parse(out.trim().split('\n').pop());
  if (got.probe) {
    // A Node whose flagged relaxed SIMD is the standard one: the relaxed build runs.
    assert.deepEqual(got, { probe: true, validates: true, auto: 'relaxed-simd', relaxed: 'relaxed-simd', simd128: 'simd128', url: 'simd128' });
  } else {
    // Node 20: the opcode validates, but the probe's dot product is wrong, so it is not used.
    assert.deepEqual(got, { probe: false, validates: true, auto: 'simd128', relaxed: 'RELAXED_SIMD_UNSUPPORTED', simd128: 'simd128', url: 'simd128' });
  }
});
