// What crosses the wasm boundary: JSON text (every export of src/wasm/mod.rs, JSON.parse in
// pkg/src) against serde-wasm-bindgen JS values, for a decode step's event (once per token) and
// for `usage` (once per request). Measurement only: builds the lib with the `boundary-bench`
// feature into a temporary directory and compares its size with the shipped build
// (pkg/wasm/edgellm_bg.wasm: run `./build.sh build` first), then times each conversion in Node,
// JS side included (the median over batches). The figures and the decision are in the comment
// above `json()` in src/wasm/mod.rs.
//
//   node bench/wasm_boundary.mjs [--model path.gguf] [--batches 41]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name, dflt) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : dflt;
};
const modelPath = arg('--model', path.join(root, 'models/SmolLM2-135M-Instruct.Q4_1.gguf'));
const batches = Number(arg('--batches', 41));
const shipped = path.join(root, 'pkg/wasm/edgellm_bg.wasm');
if (!fs.existsSync(shipped)) throw new Error('pkg/wasm/edgellm_bg.wasm is missing: run ./build.sh build first');

const targetDir = process.env.CARGO_TARGET_DIR || path.join(root, 'target');
// Not RUSTFLAGS: it would replace .cargo/config.toml's +simd128.
const env = { ...process.env };
delete env.RUSTFLAGS;
console.error('building the lib with --features boundary-bench …');
execFileSync('cargo', ['build', '--release', '--target', 'wasm32-unknown-unknown', '--lib', '--features', 'boundary-bench'], { cwd: root, env, stdio: ['ignore', 'inherit', 'inherit'] });
const out = fs.mkdtempSync(path.join(os.tmpdir(), 'edgellm-boundary-'));
execFileSync('wasm-bindgen', ['--target', 'web', '--out-dir', out, path.join(targetDir, 'wasm32-unknown-unknown/release/edgellm.wasm')], { stdio: 'inherit' });

const b = await import(path.join(out, 'edgellm.js'));
b.initSync({ module: fs.readFileSync(path.join(out, 'edgellm_bg.wasm')) });

// A real GenerateResult: a short greedy completion with logprobs.
const e = new b.WasmEngine();
const file = fs.readFileSync(modelPath);
e.load_begin(file.byteLength);
for (let off = 0; off < file.byteLength; off += 1 << 20) e.load_push(file.subarray(off, Math.min(file.byteLength, off + (1 << 20))));
e.load_finish();
const req = JSON.parse(b.parse_openai_request('completion', JSON.stringify({ prompt: 'The capital of France is', max_tokens: 8, temperature: 0, logprobs: 3 }))).request;
e.generate_begin(JSON.stringify(req));
while (!JSON.parse(e.prefill_chunk()).done);
// A decode step's own time, to set the conversions below against.
const stepMs = [];
for (;;) {
  const t0 = performance.now();
  const s = e.decode_step();
  stepMs.push(performance.now() - t0);
  if (JSON.parse(s).finish_reason) break;
}
stepMs.sort((x, y) => x - y);
console.log(`a decode step of ${path.basename(modelPath)}: ${stepMs[stepMs.length >> 1].toFixed(2)} ms (median of ${stepMs.length})`);
const raw = e.generate_end();
const resultObj = JSON.parse(raw);

function median(fn, per) {
  for (let i = 0; i < per; i++) fn(); // warm-up
  const t = [];
  for (let j = 0; j < batches; j++) {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < per; i++) fn();
    t.push(Number(process.hrtime.bigint() - t0) / per);
  }
  t.sort((x, y) => x - y);
  return t[t.length >> 1] / 1000;
}

const sizes = { shipped: fs.statSync(shipped).size, bench: fs.statSync(path.join(out, 'edgellm_bg.wasm')).size };
console.log(`wasm: shipped ${sizes.shipped} bytes; with the bench exports ${sizes.bench} (+${sizes.bench - sizes.shipped})`);
for (const lp of [false, true]) {
  const a = JSON.parse(b.bench_step_json(lp));
  const v = b.bench_step_value(lp);
  const same = JSON.stringify(a) === JSON.stringify(v);
  console.log(`step event${lp ? ' with logprobs' : ''}: the same JS value both ways: ${same}${lp ? ` (logprob ${a.logprobs[0].logprob} from JSON, ${v.logprobs[0].logprob} from serde-wasm-bindgen)` : ''}`);
  console.log(`  ${median(() => JSON.parse(b.bench_step_json(lp)), 2000).toFixed(2)} us JSON text + JSON.parse`);
  console.log(`  ${median(() => b.bench_step_value(lp), 2000).toFixed(2)} us serde-wasm-bindgen`);
}
const same = JSON.stringify(JSON.parse(b.bench_usage_json(raw))) === JSON.stringify(b.bench_usage_value(resultObj));
console.log(`usage of a ${raw.length}-character GenerateResult: the same JS value both ways: ${same}`);
console.log(`  ${median(() => JSON.parse(b.bench_usage_json(raw)), 200).toFixed(2)} us JSON text both ways + JSON.parse`);
console.log(`  ${median(() => b.bench_usage_value(resultObj), 200).toFixed(2)} us serde-wasm-bindgen both ways`);
fs.rmSync(out, { recursive: true, force: true });
