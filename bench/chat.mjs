// The chat benchmark (`./build.sh bench --chat`): a scripted 10-turn conversation (user messages
// of ~20 tokens, answers of up to 64 tokens, greedy) sent the way chat apps and OpenAI clients
// send it — the whole, growing message list every turn — in headless Chromium (the npm package,
// bench/chat.html) and through `edgellm serve`, printing per turn the prompt tokens, the tokens
// reused from the KV cache (usage.prompt_tokens_details.cached_tokens) and the TTFT (request to
// first streamed text). Then, in Chromium, a ~2,000-token conversation: prefill vs
// engine.session.restore. Everything listens on 127.0.0.1; times are wall-clock on a shared
// machine, so compare the turns of one run with each other.
//
//   node bench/chat.mjs [--only chromium|server] [--tokens 64] [--long-words 1850] [--model path]
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { CHROMIUM, CHROMIUM_ARGS, startStaticServer } from './harness.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const ONLY = opt('only', null);
const MAX_TOKENS = +opt('tokens', 64);
const LONG_WORDS = +opt('long-words', 1850); // ≈ 2,000 tokens of bench/prompt.txt
const MODEL = path.resolve(opt('model', path.join(ROOT, 'models/gemma-3-270m-q4_k_m.gguf')));
const CLI = process.env.EDGELLM_CLI || path.join(process.env.CARGO_TARGET_DIR || path.join(ROOT, 'target'), 'release/edgellm');

// Ten user messages of about 20 tokens each.
const USERS = [
  'I am planning a weekend trip to the mountains. What should I pack for cold and rainy weather?',
  'Good points. How many layers of clothing would you suggest for hiking at two thousand meters?',
  'What kind of shoes work best on wet rocky trails, and should I waterproof them before leaving?',
  'I also want to cook outside. Which simple meals can I prepare on a small camping stove?',
  'How much water should one person carry for a six hour hike with a lot of climbing?',
  'Is it safe to drink from mountain streams if I boil the water first for a few minutes?',
  'What are the first signs of altitude sickness, and what should I do if I notice them?',
  'Can you suggest a short checklist for the evening before the trip so I forget nothing?',
  'If the weather turns bad halfway through the hike, how do I decide whether to turn back?',
  'Thanks. Please summarize the three most important safety tips from our whole conversation.',
];

const TEXT = fs.readFileSync(path.join(ROOT, 'bench/prompt.txt'), 'utf8').split(/\s+/).filter(Boolean);
const LONG_TEXT = Array.from({ length: LONG_WORDS }, (_, i) => TEXT[i % TEXT.length]).join(' ');

const row = (t, i) => `${i + 1} | ${t.prompt_tokens} | ${t.cached_tokens} | ${t.prompt_tokens - t.cached_tokens} | ${t.completion_tokens} | ${t.ttft_ms.toFixed(0)}`;

function table(title, turns, printed = false) {
  console.log(`\n${title}`);
  console.log('turn | prompt tokens | reused | prefilled | answer tokens | TTFT ms');
  console.log('---: | ---: | ---: | ---: | ---: | ---:');
  if (!printed) turns.forEach((t, i) => console.log(row(t, i)));
}

function ratio(turns) {
  const r = turns[turns.length - 1].ttft_ms / turns[0].ttft_ms;
  console.log(`turn-${turns.length} TTFT / turn-1 TTFT = ${r.toFixed(2)} (goal ≤ 1.5)`);
}

async function inChromium() {
  const srv = await startStaticServer(ROOT, { '/model.gguf': MODEL });
  const origin = `http://127.0.0.1:${srv.address().port}`;
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'edgellm-bench-chat-'));
  const ctx = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  try {
    const page = ctx.pages()[0] || (await ctx.newPage());
    page.on('pageerror', (e) => console.error('page error:', e.message));
    await page.goto(`${origin}/bench/chat.html`);
    await page.waitForFunction(() => window.benchReady, null, { timeout: 30_000 });
    const simd = fs.existsSync(path.join(ROOT, 'pkg/wasm/edgellm_relaxed_bg.wasm')) ? 'auto' : 'simd128';
    const r = await page.evaluate((o) => window.runChat(o), { modelUrl: `${origin}/model.gguf`, users: USERS, maxTokens: MAX_TOKENS, longText: LONG_TEXT, simd });
    table(`Chromium (${r.simd_tier}), the npm package in a worker`, r.turns);
    ratio(r.turns);
    const l = r.long;
    console.log(`\nlong conversation in Chromium: ${l.tokens} tokens`);
    console.log(`  prefill ${l.prefill_ms.toFixed(0)} ms (engine TTFT; ${l.prefill_wall_ms.toFixed(0)} ms wall)`);
    console.log(`  session.save ${l.save_ms.toFixed(0)} ms (${(l.saved.bytes / 2 ** 20).toFixed(1)} MiB to OPFS); session.restore ${l.restore_ms.toFixed(0)} ms`);
    console.log(`  next request after restore: ${l.next_cached} of ${l.next_prompt} prompt tokens reused, ${l.next_wall_ms.toFixed(0)} ms wall`);
    console.log(`  restore is ${(l.prefill_ms / l.restore_ms).toFixed(1)}× faster than prefilling (goal ≥ 5×)`);
  } finally {
    await ctx.close();
    srv.close();
    fs.rmSync(profile, { recursive: true, force: true });
  }
}

/** Starts `edgellm serve --port 0` and resolves its URL once it listens. */
function startServe() {
  return new Promise((resolve, reject) => {
    const p = spawn(CLI, ['serve', '--model', MODEL, '--port', '0', '--max-tokens', String(MAX_TOKENS)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    const timer = setTimeout(() => reject(new Error('edgellm serve did not start within 120 s')), 120_000);
    const onData = (d) => {
      out += d;
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve({ url: m[1], proc: p });
      }
    };
    p.stdout.on('data', onData);
    p.stderr.on('data', onData);
    p.on('exit', (c) => reject(new Error(`edgellm serve exited (${c}): ${out}`)));
  });
}

async function serverTurn(url, messages) {
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ messages, max_tokens: MAX_TOKENS, temperature: 0, stream: true, stream_options: { include_usage: true } }),
  });
  if (!res.ok) throw new Error(`server: HTTP ${res.status} ${await res.text()}`);
  let first = null;
  let usage = null;
  let text = '';
  let buf = '';
  const dec = new TextDecoder();
  for await (const chunk of res.body) {
    buf += dec.decode(chunk, { stream: true });
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, i).replace(/^data: /, '');
      buf = buf.slice(i + 2);
      if (ev === '[DONE]') continue;
      const c = JSON.parse(ev);
      if (c.usage) usage = c.usage;
      const d = c.choices && c.choices[0] && c.choices[0].delta && c.choices[0].delta.content;
      if (d) {
        if (first === null) first = performance.now();
        text += d;
      }
    }
  }
  return { text, usage, ttft_ms: (first ?? performance.now()) - t0 };
}

async function throughServer() {
  if (!fs.existsSync(CLI)) throw new Error(`no native CLI at ${CLI} (./build.sh build)`);
  const { url, proc } = await startServe();
  try {
    const messages = [];
    const turns = [];
    table('edgellm serve (native), OpenAI streaming client resending the message list', turns, true);
    for (const u of USERS) {
      messages.push({ role: 'user', content: u });
      const r = await serverTurn(url, messages);
      messages.push({ role: 'assistant', content: r.text });
      turns.push({ prompt_tokens: r.usage.prompt_tokens, cached_tokens: r.usage.prompt_tokens_details.cached_tokens, completion_tokens: r.usage.completion_tokens, ttft_ms: r.ttft_ms });
      console.log(row(turns[turns.length - 1], turns.length - 1)); // as it goes: the native build is slow
    }
    ratio(turns);
  } finally {
    proc.kill('SIGTERM');
  }
}

console.log(`bench --chat: ${path.basename(MODEL)}, ${USERS.length} turns, answers ≤ ${MAX_TOKENS} tokens, greedy`);
if (ONLY !== 'server') await inChromium();
if (ONLY !== 'chromium') await throughServer();
