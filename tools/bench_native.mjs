#!/usr/bin/env node
// The native engine next to native llama.cpp (node-llama-cpp 3.21.1's prebuilt CPU libraries),
// same GGUF, same prompt, greedy, at each thread count of `--threads` (default 1), in one run:
// the two engines take turns, round after round and count after count (never at the same time:
// they would share cores), and the medians are reported, with each engine's speed-up over its
// own first count.
//
//   cargo build --release --bin edgellm --example read_bandwidth
//   (cd tools && npm ci --no-audit --no-fund)
//   node tools/bench_native.mjs [--model models/gemma-3-270m-q4_k_m.gguf] [--cli PATH]
//        [--tokens 64] [--rounds 3] [--prompt TEXT] [--threads 1,2]
//
// edgellm: `edgellm generate --json --threads N` (prefill_tok_s = prompt tokens / prefill time,
// decode_tok_s = tokens after the first / decode time, both measured inside the engine;
// decode_gb_s = weight + KV bytes one step reads × decode tok/s). llama.cpp: a context with
// `threads: N`, LlamaContextSequence.evaluate on the same token ids (BOS as the model asks),
// prefill = prompt tokens / time to the first generated token, decode = tokens after the first /
// time from the first to the last; its decode_gb_s uses edgellm's bytes per step (same weights,
// same context length). The machine's read ceiling is the `read_bandwidth` example (4 streams
// over 178 MB per thread) at each count, run before the rounds.
// Prints one JSON line, then a Markdown table for the README.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { benchContext, loadPeer, promptIds, timedGreedy } from './llamacpp_peer.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = {
  model: path.join(root, 'models/gemma-3-270m-q4_k_m.gguf'),
  cli: null,
  tokens: 64,
  rounds: 3,
  threads: '1',
  prompt:
    'The old lighthouse stood at the edge of the northern cliffs, where the sea met the land in a long line of white foam. For more than a hundred years its keepers had climbed the narrow stairs',
};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
args.tokens = Number(args.tokens);
args.rounds = Math.max(1, Number(args.rounds));
const counts = String(args.threads).split(',').map(Number);
if (!counts.length || counts.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`--threads: a list of counts such as 1,2, got ${args.threads}`);
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

function edgellm(threads) {
  const argv = ['generate', '--model', args.model, '--prompt', args.prompt, '--max-tokens', String(args.tokens), '--temperature', '0', '--ignore-eos', '--json', '--threads', String(threads)];
  const o = run(args.cli, argv);
  return { prefill_tok_s: o.prefill_tok_s, decode_tok_s: o.decode_tok_s, decode_gb_s: o.decode_gb_s, decode_bytes_per_token: o.decode_bytes_per_token, prompt_tokens: o.prompt_ids.length, ids: o.ids };
}

const { llama, model } = await loadPeer(args.model);

async function llamacpp(ids, threads) {
  // A fresh context per round: nothing of the previous round's prompt is cached.
  const context = await benchContext(model, threads);
  const { start, first, last, count } = await timedGreedy(context, ids, args.tokens);
  await context.dispose();
  return { prefill_tok_s: (ids.length * 1000) / (first - start), decode_tok_s: ((count - 1) * 1000) / (last - first) };
}

const bandwidth = Object.fromEntries(counts.map((t) => [t, run(probe, ['178', '7', String(t)])]));
const ids = promptIds(model, args.prompt);
await llamacpp(ids, counts[0]); // warm-up (page cache, allocator)
const rounds = Object.fromEntries(counts.map((t) => [t, []]));
for (let r = 0; r < args.rounds; r++) {
  for (const t of counts) rounds[t].push({ e: edgellm(t), l: await llamacpp(ids, t) });
}
const keys = ['prefill_tok_s', 'decode_tok_s'];
const med = (xs, pick) => Object.fromEntries(keys.map((k) => [k, median(xs.map((x) => pick(x)[k]))]));
const bytes = rounds[counts[0]][0].e.decode_bytes_per_token;
const per = counts.map((t) => {
  const e = { ...med(rounds[t], (x) => x.e), decode_gb_s: median(rounds[t].map((x) => x.e.decode_gb_s)) };
  const l = med(rounds[t], (x) => x.l);
  l.decode_gb_s = (bytes * l.decode_tok_s) / 1e9;
  return { threads: t, edgellm: e, llama_cpp: l, read_bandwidth: bandwidth[t], ratio_decode: e.decode_tok_s / l.decode_tok_s, ratio_prefill: e.prefill_tok_s / l.prefill_tok_s };
});
const base = per[0];
for (const p of per) {
  p.speedup = {
    edgellm: { decode: p.edgellm.decode_tok_s / base.edgellm.decode_tok_s, prefill: p.edgellm.prefill_tok_s / base.edgellm.prefill_tok_s },
    llama_cpp: { decode: p.llama_cpp.decode_tok_s / base.llama_cpp.decode_tok_s, prefill: p.llama_cpp.prefill_tok_s / base.llama_cpp.prefill_tok_s },
  };
}
// Every thread count must give the same tokens (the executor never changes a result).
const sameTokens = counts.every((t) => rounds[t].every((x) => JSON.stringify(x.e.ids) === JSON.stringify(rounds[counts[0]][0].e.ids)));
const result = {
  model: path.basename(args.model),
  prompt_tokens: rounds[counts[0]][0].e.prompt_tokens,
  same_prompt_ids: rounds[counts[0]][0].e.prompt_tokens === ids.length,
  same_tokens_every_thread_count: sameTokens,
  tokens: args.tokens,
  rounds: Object.fromEntries(counts.map((t) => [t, rounds[t].map((x) => ({ edgellm: { prefill_tok_s: x.e.prefill_tok_s, decode_tok_s: x.e.decode_tok_s }, llama_cpp: x.l }))])),
  llama_cpp_release: llama.llamaCppRelease,
  per_threads: per,
};
console.log(JSON.stringify(result));
const f = (x, d = 1) => x.toFixed(d);
const lines = [
  `| ${result.prompt_tokens}-token prompt, ${args.tokens} greedy tokens (medians of ${args.rounds}) | threads | prefill tok/s | decode tok/s | decode GB/s | speed-up prefill / decode |`,
  '|---|---|---|---|---|---|',
];
for (const p of per) {
  lines.push(`| edgellm (native) | ${p.threads} | ${f(p.edgellm.prefill_tok_s)} | ${f(p.edgellm.decode_tok_s)} | ${f(p.edgellm.decode_gb_s, 2)} | ${f(p.speedup.edgellm.prefill, 2)}× / ${f(p.speedup.edgellm.decode, 2)}× |`);
  lines.push(`| llama.cpp (node-llama-cpp 3.21.1) | ${p.threads} | ${f(p.llama_cpp.prefill_tok_s)} | ${f(p.llama_cpp.decode_tok_s)} | ${f(p.llama_cpp.decode_gb_s, 2)} | ${f(p.speedup.llama_cpp.prefill, 2)}× / ${f(p.speedup.llama_cpp.decode, 2)}× |`);
  lines.push(`| edgellm / llama.cpp | ${p.threads} | ${f(p.ratio_prefill, 2)}× | ${f(p.ratio_decode, 2)}× | | |`);
}
for (const p of per) lines.push(`| native read ceiling (4 streams × ${p.threads} thread(s), 178 MB) | ${p.threads} | | | ${f(p.read_bandwidth.median_gb_s, 2)} (best ${f(p.read_bandwidth.best_gb_s, 2)}) | |`);
console.log('\n' + lines.join('\n'));
await model.dispose();
process.exit(sameTokens ? 0 : 1);
