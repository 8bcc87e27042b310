#!/usr/bin/env node
// Decode speed of `edgellm serve` next to llama.cpp (node-llama-cpp 3.21.1, CPU, 1 thread) on the
// same GGUF, run one after the other in one go (never at the same time: they would share cores).
//
//   node tools/bench_server_decode.mjs [--model models/gemma-3-270m-q4_k_m.gguf] [--cli PATH]
//        [--tokens 32] [--runs 3] [--prompt "Once upon a time"]
//
// edgellm: greedy POST /v1/completions; decode tok/s = the server's usage.decode_tokens_per_s
// (tokens after the first / decode time, measured inside the server). llama.cpp: greedy
// generation through LlamaContextSequence.evaluate, timed from the first generated token to the
// last (the same definition). Prints one JSON line with the medians and their ratio.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import { benchContext, loadPeer, promptIds, timedGreedy } from './llamacpp_peer.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = { model: path.join(root, 'models/gemma-3-270m-q4_k_m.gguf'), cli: null, tokens: 32, runs: 3, prompt: 'Once upon a time' };
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
args.tokens = Number(args.tokens);
args.runs = Number(args.runs);
if (!args.cli) {
  const dirs = [process.env.CARGO_TARGET_DIR, path.join(root, 'target')].filter(Boolean);
  args.cli = dirs.map((d) => path.join(d, 'release/edgellm')).find((p) => fs.existsSync(p));
  if (!args.cli) throw new Error('edgellm not built: cargo build --release --bin edgellm (or pass --cli)');
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function edgellm() {
  const proc = spawn(args.cli, ['serve', '--model', args.model, '--port', '0', '--threads', '1'], { stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    const url = await new Promise((resolve, reject) => {
      let out = '';
      proc.stdout.on('data', (d) => {
        out += d;
        const m = /listening on (http:\/\/\S+)/.exec(out);
        if (m) resolve(m[1]);
      });
      proc.on('exit', (c) => reject(new Error(`edgellm serve exited (${c})`)));
    });
    const run = async (n) => {
      const r = await fetch(`${url}/v1/completions`, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ prompt: args.prompt, max_tokens: n, temperature: 0 }),
      });
      return (await r.json()).usage;
    };
    await run(4); // warm-up
    const rates = [];
    let tokens = 0;
    for (let i = 0; i < args.runs; i++) {
      const u = await run(args.tokens);
      rates.push(u.decode_tokens_per_s);
      tokens = u.completion_tokens;
    }
    return { decode_tokens_per_s: median(rates), runs: rates, completion_tokens: tokens };
  } finally {
    proc.kill('SIGKILL');
  }
}

async function llamacpp() {
  const { llama, model } = await loadPeer(args.model);
  const context = await benchContext(model, 1);
  const ids = promptIds(model, args.prompt);
  const once = async (n) => {
    const { first, last, count } = await timedGreedy(context, ids, n);
    return count > 1 ? ((count - 1) * 1000) / (last - first) : 0;
  };
  await once(4);
  const rates = [];
  for (let i = 0; i < args.runs; i++) rates.push(await once(args.tokens));
  await context.dispose();
  await model.dispose();
  return { decode_tokens_per_s: median(rates), runs: rates, threads: 1, release: llama.llamaCppRelease };
}

const e = await edgellm();
const l = await llamacpp();
console.log(
  JSON.stringify({
    model: path.basename(args.model),
    prompt: args.prompt,
    tokens: args.tokens,
    edgellm_serve: e,
    llama_cpp_1_thread: l,
    ratio_edgellm_over_llamacpp: e.decode_tokens_per_s / l.decode_tokens_per_s,
  }),
);
process.exit(0);
