#!/usr/bin/env node
// The native engine next to native llama.cpp (node-llama-cpp 3.21.1's prebuilt CPU libraries),
// one thread each, same GGUF, same prompt, greedy, in one run: the two engines take turns, round
// after round (never at the same time: they would share cores), and the medians are reported.
//
//   cargo build --release --bin edgellm --example read_bandwidth
//   (cd tools && npm ci --no-audit --no-fund)
//   node tools/bench_native.mjs [--model models/gemma-3-270m-q4_k_m.gguf] [--cli PATH]
//        [--tokens 64] [--rounds 3] [--prompt TEXT]
//
// edgellm: `edgellm generate --json` (prefill_tok_s = prompt tokens / prefill time, decode_tok_s =
// tokens after the first / decode time, both measured inside the engine; decode_gb_s = weight +
// KV bytes one step reads × decode tok/s). llama.cpp: LlamaContextSequence.evaluate on the same
// token ids (BOS as the model asks), prefill = prompt tokens / time to the first generated token,
// decode = tokens after the first / time from the first to the last; its decode_gb_s uses
// edgellm's bytes per step (same weights, same context length). The machine's read ceiling is
// the `read_bandwidth` example (4 streams over 178 MB, one thread), run before the rounds.
// Prints one JSON line, then a Markdown table row set for the README.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { loadPeer, oneThreadContext, promptIds, timedGreedy } from './llamacpp_peer.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = {
  model: path.join(root, 'models/gemma-3-270m-q4_k_m.gguf'),
  cli: null,
  tokens: 64,
  rounds: 3,
  prompt:
    'The old lighthouse stood at the edge of the northern cliffs, where the sea met the land in a long line of white foam. For more than a hundred years its keepers had climbed the narrow stairs',
};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
args.tokens = Number(args.tokens);
args.rounds = Math.max(1, Number(args.rounds));
const targets = [process.env.CARGO_TARGET_DIR, path.join(root, 'target')].filter(Boolean);
const built = (rel) => targets.map((d) => path.join(d, 'release', rel)).find((p) => fs.existsSync(p));
args.cli ??= built('edgellm');
const probe = built('examples/read_bandwidth');
if (!args.cli || !probe) throw new Error('not built: cargo build --release --bin edgellm --example read_bandwidth (or pass --cli)');
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

function run(cmd, argv) {
  const r = spawnSync(cmd, argv, { encoding: 'utf8', maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`${cmd} ${argv.join(' ')} failed (${r.status}): ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split('\n').pop());
}

function edgellm() {
  const argv = ['generate', '--model', args.model, '--prompt', args.prompt, '--max-tokens', String(args.tokens), '--temperature', '0', '--ignore-eos', '--json'];
  const o = run(args.cli, argv);
  return { prefill_tok_s: o.prefill_tok_s, decode_tok_s: o.decode_tok_s, decode_gb_s: o.decode_gb_s, decode_bytes_per_token: o.decode_bytes_per_token, prompt_tokens: o.prompt_ids.length, ids: o.ids };
}

const { model } = await loadPeer(args.model);

async function llamacpp(ids) {
  // A fresh context per round: nothing of the previous round's prompt is cached.
  const context = await oneThreadContext(model);
  const { start, first, last, count } = await timedGreedy(context, ids, args.tokens);
  await context.dispose();
  return { prefill_tok_s: (ids.length * 1000) / (first - start), decode_tok_s: ((count - 1) * 1000) / (last - first) };
}

const bandwidth = run(probe, ['178', '7']);
const ids = promptIds(model, args.prompt);
await llamacpp(ids); // warm-up (page cache, allocator)
const rounds = [];
for (let r = 0; r < args.rounds; r++) {
  const e = edgellm();
  const l = await llamacpp(ids);
  rounds.push({ e, l });
}
const e = { prefill_tok_s: median(rounds.map((x) => x.e.prefill_tok_s)), decode_tok_s: median(rounds.map((x) => x.e.decode_tok_s)), decode_gb_s: median(rounds.map((x) => x.e.decode_gb_s)) };
const l = { prefill_tok_s: median(rounds.map((x) => x.l.prefill_tok_s)), decode_tok_s: median(rounds.map((x) => x.l.decode_tok_s)) };
const bytes = rounds[0].e.decode_bytes_per_token;
l.decode_gb_s = (bytes * l.decode_tok_s) / 1e9;
const result = {
  model: path.basename(args.model),
  prompt_tokens: rounds[0].e.prompt_tokens,
  same_prompt_ids: rounds[0].e.prompt_tokens === ids.length,
  tokens: args.tokens,
  threads: 1,
  rounds: rounds.map((x) => ({ edgellm: { prefill_tok_s: x.e.prefill_tok_s, decode_tok_s: x.e.decode_tok_s }, llama_cpp: x.l })),
  edgellm: e,
  llama_cpp: { ...l, release: llama.llamaCppRelease },
  read_bandwidth: bandwidth,
  ratio_decode: e.decode_tok_s / l.decode_tok_s,
  ratio_prefill: e.prefill_tok_s / l.prefill_tok_s,
};
console.log(JSON.stringify(result));
const f = (x, d = 1) => x.toFixed(d);
console.log(`
| 1 thread, ${result.prompt_tokens}-token prompt, ${args.tokens} greedy tokens (medians of ${args.rounds}) | prefill tok/s | decode tok/s | decode GB/s |
|---|---|---|---|
| edgellm (native, AVX2) | ${f(e.prefill_tok_s)} | ${f(e.decode_tok_s)} | ${f(e.decode_gb_s, 2)} |
| llama.cpp (node-llama-cpp 3.21.1) | ${f(l.prefill_tok_s)} | ${f(l.decode_tok_s)} | ${f(l.decode_gb_s, 2)} |
| edgellm / llama.cpp | ${f(result.ratio_prefill, 2)}× | ${f(result.ratio_decode, 2)}× | |
| native read ceiling (4 streams, 178 MB) | | | ${f(bandwidth.median_gb_s, 2)} (best ${f(bandwidth.best_gb_s, 2)}) |`);
await model.dispose();
process.exit(0);
