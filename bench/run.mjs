// Side-by-side benchmark, one run: edgellm (../pkg) and wllama (npm @wllama/wllama, llama.cpp in
// wasm) on the same GGUF, the same prompt and sampling, in the same headless Chromium (playwright-core
// + /usr/bin/chromium), alternating engines for several rounds, each round on a fresh (cold)
// browser profile with no model cache. Everything is served from 127.0.0.1; Chromium is kept off
// every other host.
//
//   node bench/run.mjs [--rounds N] [--tokens 128] [--prompt-tokens 128] [--sustained S]
//                      [--model path.gguf] [--only edgellm|wllama] [--simd auto|relaxed|simd128|both]
//                      [--threads 1,2] [--sampling greedy|chain|demo]
//
// --sampling: greedy (default); chain = llama.cpp's default chain (T 0.8, top-k 40, top-p 0.95,
// min-p 0.05: an edgellm request with no sampling fields); demo = the demo page's base-model
// defaults (T 0.7, top-p 0.95, min-p 0.05, repetition penalty 1.1), both seeded (bench/page.html
// holds each engine's settings).
//
// Each round ends with bench/membw.mjs, a memory-bandwidth probe in a Worker of a fresh browser:
// the decode traffic is reported as a share of what one wasm thread streams in the same minutes.
//
// --threads runs each engine at each count (edgellm's `threads` option, wllama's n_threads) on a
// cross-origin isolated page (COOP/COEP, so both can share memory), as `edgellm@2t`, `wllama@2t`;
// the ratios are then edgellm/wllama at each count and each engine's counts against its first.
// edgellm needs its threaded build for more than one (./build.sh build-threads); every line says
// how many threads actually ran. Without --threads both run one thread on a plain page.
//
// --simd picks edgellm's wasm build (the engine's `simd` option; default auto = relaxed SIMD where
// Chromium runs it); `both` runs edgellm twice per round, as edgellm-relaxed and edgellm-simd128,
// each with its own ratios vs wllama. Every edgellm line names the tier that actually ran.
//
// Per engine: cold load s (worker start + download + load), TTFT ms, prefill tok/s (prompt
// tokens / TTFT), decode tok/s ((tokens-1) / time from first to last token), peak wasm memory MB
// (largest WebAssembly.Memory the worker created, sampled every 100 ms) and renderer peak RSS MB
// (VmHWM/VmRSS of this browser's renderer processes from /proc, polled every 100 ms), medians over
// the rounds, then the ratios edgellm / wllama. Speed figures are only meaningful as ratios
// within one run: the machine is shared.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFileSync } from 'node:child_process';
import { chromium } from 'playwright-core';
import { CHROMIUM, CHROMIUM_ARGS, ISOLATION, startStaticServer } from './harness.mjs';
import { membwModule, MEMBW_WORKER } from './membw.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const ROUNDS = +opt('rounds', 3);
const N_PREDICT = +opt('tokens', 128);
const PROMPT_TOKENS = +opt('prompt-tokens', 128);
const SUSTAINED = +opt('sustained', 0);
const ONLY = opt('only', null);
const SIMD = opt('simd', 'auto');
const SAMPLING = opt('sampling', 'greedy');
if (!['greedy', 'chain', 'demo'].includes(SAMPLING)) {
  console.error(`bench: --sampling must be greedy, chain or demo (got ${SAMPLING})`);
  process.exit(2);
}
if (!['auto', 'relaxed', 'simd128', 'both'].includes(SIMD)) {
  console.error(`bench: --simd must be auto, relaxed, simd128 or both (got ${SIMD})`);
  process.exit(2);
}
// The edgellm runs: name → the engine's simd option.
const EDGELLM_RUNS = SIMD === 'both' ? { 'edgellm-relaxed': 'relaxed', 'edgellm-simd128': 'simd128' } : SIMD === 'auto' ? { edgellm: 'auto' } : { [`edgellm-${SIMD}`]: SIMD };
const THREADS = opt('threads', null) && opt('threads').split(',').map(Number);
if (THREADS && THREADS.some((n) => !Number.isInteger(n) || n < 1)) {
  console.error(`bench: --threads takes counts such as 1,2 (got ${opt('threads')})`);
  process.exit(2);
}
const MODEL = path.resolve(opt('model', path.join(ROOT, 'models/gemma-3-270m-q4_k_m.gguf')));
const WLLAMA_WASM = path.join(ROOT, 'bench/node_modules/@wllama/wllama/esm/wasm/wllama.wasm');

for (const [f, what] of [[MODEL, 'model (./build.sh model)'], [path.join(ROOT, 'pkg/wasm/edgellm_bg.wasm'), 'edgellm wasm (./build.sh build)'], [WLLAMA_WASM, 'wllama (npm install in bench/)']]) {
  if (!fs.existsSync(f)) {
    console.error(`bench: missing ${what}: ${f}`);
    process.exit(2);
  }
}

// ---- the prompt: a fixed English text cut to PROMPT_TOKENS tokens by the native tokenizer ----
function cli() {
  if (process.env.EDGELLM_CLI) return process.env.EDGELLM_CLI;
  for (const d of [process.env.CARGO_TARGET_DIR, path.join(ROOT, 'target')].filter(Boolean)) {
    const p = path.join(d, 'release/edgellm');
    if (fs.existsSync(p)) return p;
  }
  return null;
}
const TEXT = fs.readFileSync(path.join(ROOT, 'bench/prompt.txt'), 'utf8');
function promptOfTokens(n) {
  const bin = cli();
  if (!bin) return { prompt: TEXT.split(/\s+/).slice(0, Math.round(n * 0.75)).join(' '), counted: false };
  // Grow a word prefix until the tokenizer (BOS included) says n tokens.
  const words = TEXT.split(/\s+/);
  let lo = 1;
  let hi = words.length;
  const count = (k) => {
    const out = execFileSync(bin, ['tokenize', '--model', MODEL, '--text', words.slice(0, k).join(' ')], { encoding: 'utf8' });
    const ids = out.match(/\d+/g) || [];
    return ids.length;
  };
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (count(mid) <= n) lo = mid;
    else hi = mid - 1;
  }
  return { prompt: words.slice(0, lo).join(' '), counted: count(lo) };
}

// ---- 127.0.0.1 static server (Range-capable): bench/harness.mjs ----
const startServer = () => startStaticServer(ROOT, { '/model.gguf': MODEL, '/wllama.wasm': WLLAMA_WASM }, THREADS ? ISOLATION : {});

// ---- renderer RSS from /proc ----
function rendererPids(profileDir) {
  const pids = [];
  for (const p of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8');
      if (cmd.includes('--type=renderer') && cmd.includes(profileDir)) pids.push(p);
    } catch {}
  }
  return pids;
}
function rssMb(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (k) => +((new RegExp(`${k}:\\s+(\\d+)`).exec(s) || [])[1] || 0);
    return Math.max(kb('VmRSS'), kb('VmHWM')) / 1024;
  } catch {
    return 0;
  }
}


async function runOnce(engine, origin, prompt) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'edgellm-bench-'));
  const ctx = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  let peakRss = 0;
  const poll = setInterval(() => {
    for (const pid of rendererPids(profile)) peakRss = Math.max(peakRss, rssMb(pid));
  }, 100);
  try {
    const page = ctx.pages()[0] || (await ctx.newPage());
    page.on('pageerror', (e) => console.error(`[${engine} page error]`, e.message));
    await page.goto(`${origin}/bench/page.html`);
    await page.waitForFunction(() => window.benchReady, null, { timeout: 30_000 });
    const { base, threads } = runOf(engine);
    const fn = base in EDGELLM_RUNS ? 'runEdgellm' : 'runWllama';
    const r = await page.evaluate(([fn, o]) => window[fn](o), [fn, { modelUrl: `${origin}/model.gguf`, wasmUrl: `${origin}/wllama.wasm`, prompt, nPredict: N_PREDICT, sustainedS: SUSTAINED, simd: EDGELLM_RUNS[base], threads, sampling: SAMPLING }]);
    for (const pid of rendererPids(profile)) peakRss = Math.max(peakRss, rssMb(pid));
    r.rss_mb = peakRss;
    return r;
  } finally {
    clearInterval(poll);
    await ctx.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

// The memory-bandwidth probe (bench/membw.mjs) in a Worker of a fresh browser, once per round
// between the engines: decode traffic is judged against what one wasm thread can stream in the
// same minutes (the machine's bandwidth is shared and drifts).
const PROBE_MB = 178; // the size of Gemma 3 270M's tied Q8_0 output projection
async function runProbe(origin) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'edgellm-bench-'));
  const ctx = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  try {
    const page = ctx.pages()[0] || (await ctx.newPage());
    await page.goto(`${origin}/bench/page.html`);
    return await page.evaluate(
      ([src, bytes, mb]) =>
        new Promise((resolve) => {
          const w = new Worker(URL.createObjectURL(new Blob([src], { type: 'text/javascript' })));
          w.onmessage = (e) => {
            w.terminate();
            resolve(e.data);
          };
          w.postMessage({ bytes: new Uint8Array(bytes), mb, passes: 6 });
        }),
      [MEMBW_WORKER, [...membwModule()], PROBE_MB],
    );
  } finally {
    await ctx.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

const median = (xs) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  return s.length ? s[(s.length - 1) >> 1] : NaN;
};

const server = await startServer();
const origin = `http://127.0.0.1:${server.address().port}`;
const { prompt, counted } = promptOfTokens(PROMPT_TOKENS);
console.log(`bench: ${path.basename(MODEL)}, prompt ${counted || '~' + PROMPT_TOKENS} tokens, ${N_PREDICT} ${SAMPLING === 'greedy' ? 'greedy' : `sampled (${SAMPLING})`} tokens, ${ROUNDS} rounds, Chromium ${execFileSync(CHROMIUM, ['--version'], { encoding: 'utf8' }).trim()}`);
console.log(`loadavg before: ${fs.readFileSync('/proc/loadavg', 'utf8').trim()}`);
const bases = (ONLY ? [ONLY] : ['edgellm', 'wllama']).flatMap((e) => (e === 'edgellm' ? Object.keys(EDGELLM_RUNS) : [e]));
// A run's name: the engine (and tier), then `@Nt` with --threads.
const engines = THREADS ? THREADS.flatMap((t) => bases.map((b) => `${b}@${t}t`)) : bases;
function runOf(name) {
  const m = /^(.*)@(\d+)t$/.exec(name);
  return m ? { base: m[1], threads: +m[2] } : { base: name, threads: 1 };
}
const results = Object.fromEntries(engines.map((e) => [e, []]));
// Which output head edgellm's decode steps used (usage.head): steps screened of all, the
// screened steps that fell back to the full head, candidate rows computed exactly per step.
const headLine = (h) => `head=${h.path} (${h.screened_steps}/${h.screened_steps + h.full_steps} steps screened, ${h.fallback_steps} fell back; candidates median ${h.candidates_median.toFixed(0)} mean ${h.candidates_mean.toFixed(0)} max ${h.candidates_max})`;
const KEYS = ['load_s', 'ttft_ms', 'prefill_tps', 'decode_tps', 'wasm_mb', 'rss_mb'];
const probes = [];
try {
  for (let round = 0; round < ROUNDS; round++) {
    const order = round % 2 ? [...engines].reverse() : engines;
    for (const e of order) {
      const r = await runOnce(e, origin, prompt);
      // Decode memory traffic as edgellm counts it (usage.decode_bytes_per_token: weights + mean
      // K/V per decode step; decode_gb_s over the worker's decode time); wllama reports neither.
      r.decode_mb_tok = r.usage && r.usage.decode_bytes_per_token !== undefined ? r.usage.decode_bytes_per_token / 1e6 : NaN;
      r.decode_gb_s = r.usage && r.usage.decode_gb_s !== undefined ? r.usage.decode_gb_s : NaN;
      results[e].push(r);
      console.log(`round ${round + 1} ${e.padEnd(15)} ${r.simd_tier ? `tier=${r.simd_tier} ` : ''}threads=${r.threads} ${KEYS.map((k) => `${k}=${(+r[k]).toFixed(k.endsWith('tps') || k === 'load_s' ? 2 : 0)}`).join(' ')} prompt_tokens=${r.prompt_tokens} tokens=${r.tokens}${Number.isFinite(r.decode_gb_s) ? ` decode ${r.decode_mb_tok.toFixed(1)} MB/tok ${r.decode_gb_s.toFixed(2)} GB/s` : ''}${r.usage && r.usage.head ? ` ${headLine(r.usage.head)}` : ''}${r.windows ? ` windows=[${r.windows.map((x) => x.toFixed(2)).join(', ')}]` : ''}${r.timings ? ` (wllama timings: prefill ${r.timings.prompt_per_second?.toFixed(2)} tok/s, decode ${r.timings.predicted_per_second?.toFixed(2)} tok/s)` : ''}`);
    }
    const pr = await runProbe(origin);
    if (pr.error) console.log(`round ${round + 1} membw probe failed: ${pr.error}`);
    else {
      probes.push(pr);
      console.log(`round ${round + 1} ${'membw probe'.padEnd(15)} ${PROBE_MB} MB, one wasm thread: sum1 (one stream) ${pr.sum1.toFixed(2)} GB/s, sum4 (four streams) ${pr.sum4.toFixed(2)} GB/s`);
    }
  }
} finally {
  server.close();
}
console.log(`loadavg after: ${fs.readFileSync('/proc/loadavg', 'utf8').trim()}`);
const ratioLabels = [...engines.map((e) => `${e}/${e}`), ...Object.keys(EDGELLM_RUNS).map((e) => `${e}/wllama`), ...(SIMD === 'both' ? ['edgellm-relaxed/edgellm-simd128'] : [])];
const pad = 2 + Math.max(15, ...engines.map((e) => e.length), ...ratioLabels.map((l) => l.length));
console.log('\n' + 'medians'.padEnd(pad) + KEYS.map((k) => k.padStart(12)).join(''));
const med = {};
for (const e of engines) {
  med[e] = Object.fromEntries(KEYS.map((k) => [k, median(results[e].map((r) => +r[k]))]));
  console.log(e.padEnd(pad) + KEYS.map((k) => med[e][k].toFixed(2).padStart(12)).join(''));
}
const ratio = (a, b) => console.log(`${a}/${b}`.padEnd(pad) + KEYS.map((k) => (med[a][k] / med[b][k]).toFixed(2).padStart(12)).join(''));
const at = (b, t) => (THREADS ? `${b}@${t}t` : b);
for (const t of THREADS || [1]) {
  const ran = Object.keys(EDGELLM_RUNS).filter((e) => med[at(e, t)]);
  for (const e of ran) {
    const tiers = [...new Set(results[at(e, t)].map((r) => r.simd_tier))];
    const counts = [...new Set(results[at(e, t)].map((r) => r.threads))];
    console.log(`${at(e, t)} ran the ${tiers.join(' / ')} build (simd: '${EDGELLM_RUNS[e]}') on ${counts.join(' / ')} thread(s)`);
  }
  if (med[at('wllama', t)]) for (const e of ran) ratio(at(e, t), at('wllama', t));
  if (med[at('edgellm-relaxed', t)] && med[at('edgellm-simd128', t)]) ratio(at('edgellm-relaxed', t), at('edgellm-simd128', t));
}
// Each engine's speed-up over its first thread count.
if (THREADS && THREADS.length > 1) for (const b of bases) for (const t of THREADS.slice(1)) if (med[at(b, t)] && med[at(b, THREADS[0])]) ratio(at(b, t), at(b, THREADS[0]));
const ran = Object.keys(EDGELLM_RUNS);
if (ran.length) console.log('(ratios > 1 are better for prefill_tps and decode_tps; < 1 is better for load_s, ttft_ms, wasm_mb, rss_mb)');
const cell = (x, d) => (Number.isFinite(x) ? x.toFixed(d) : '-').padStart(12);
console.log('\n' + 'decode traffic'.padEnd(pad) + ['MB/token', 'GB/s'].map((k) => k.padStart(12)).join(''));
for (const e of engines) console.log(e.padEnd(pad) + cell(median(results[e].map((r) => r.decode_mb_tok)), 1) + cell(median(results[e].map((r) => r.decode_gb_s)), 2));
console.log('(edgellm usage: weight + mean K/V bytes read per decode step, × decode tok/s; wllama reports neither)');
for (const e of engines) {
  const hs = results[e].map((r) => r.usage && r.usage.head).filter(Boolean);
  if (!hs.length) continue;
  const sum = (k) => hs.reduce((a, h) => a + h[k], 0);
  const steps = sum('screened_steps') + sum('full_steps');
  console.log(`${e} output head over ${hs.length} rounds: ${sum('screened_steps')} of ${steps} decode steps screened, ${sum('fallback_steps')} fell back (${((100 * sum('fallback_steps')) / Math.max(1, sum('screened_steps'))).toFixed(1)}%); candidates per step: median of the rounds' medians ${median(hs.map((h) => h.candidates_median)).toFixed(0)}, max ${Math.max(...hs.map((h) => h.candidates_max))}`);
}
if (probes.length) {
  const p1 = median(probes.map((p) => p.sum1));
  const p4 = median(probes.map((p) => p.sum4));
  console.log(`membw probe (medians of ${probes.length} rounds): sum1 ${p1.toFixed(2)} GB/s, sum4 ${p4.toFixed(2)} GB/s`);
  for (const e of engines) {
    const g = median(results[e].map((r) => r.decode_gb_s));
    if (Number.isFinite(g)) console.log(`${e} decode traffic: ${((100 * g) / p4).toFixed(0)}% of the probe's four-stream GB/s (${((100 * g) / p1).toFixed(0)}% of one stream)`);
  }
}
