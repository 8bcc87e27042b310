#!/usr/bin/env node
// llama.cpp (via node-llama-cpp 3.21.1, CPU backend) reference driver for edgellm's forward-pass
// fixtures.  Writes RAW llama.cpp results as JSON; tools/reference/make_fixtures.py merges them with
// the float64 reference into tests/data/fwd_*.json.
//
// Modes:
//   prompts: node tools/reference/llama_ref.mjs --model M.gguf --prompts tools/prompts/forward_prompts.json \
//              --out out/ref/llama_gemma.json [--steps 48] [--top 40] [--spread name,name,...] [--only name,...]
//     per prompt: ids as llama.cpp tokenizes them (BOS prepended when the model's metadata asks
//     for it: model.tokenize() itself never adds BOS), the whole-prompt top-`top` log-probs at the
//     last prompt position, and `steps` greedy steps (argmax of the full distribution; the
//     generated token is fed back whatever it is, EOS/end_of_turn included; no penalties), each
//     with top1/top2 ids and log-probs.  For the prompts in --spread, the prompt is evaluated again
//     one token per decode call and the last-position top log-probs are recorded too.
//   ids:     node tools/reference/llama_ref.mjs --model tiny.gguf --ids-file ids.json --out out.json
//     full log-prob vectors at ALL positions for a fixed id sequence (tiny models), whole batch and
//     token by token.  --kv F32 selects an F32 KV cache (default F16).
//
// Values are natural-log probabilities (log-softmax over the FULL vocabulary) computed from the
// probabilities node-llama-cpp returns: its addon applies a float32 softmax to the raw logits of the
// greedy sampler chain (no top-k, no temperature, no penalties), so logprob = logit - logsumexp(logits)
// up to float32 rounding; differences of logprobs at one position equal differences of logits.
import fs from "node:fs";
import path from "node:path";
import {getLlama} from "node-llama-cpp";

function parseArgs(argv) {
    const a = {steps: 48, top: 40, spread: "", only: "", ctx: 2048, batch: 2048, threads: 1};
    for (let i = 2; i < argv.length; i++) {
        const k = argv[i].replace(/^--/, "");
        const v = argv[i + 1];
        i++;
        a[k.replace(/-([a-z])/g, (_, c) => c.toUpperCase())] = v;
    }
    for (const k of ["steps", "top", "ctx", "batch", "threads"]) a[k] = Number(a[k]);
    return a;
}

const args = parseArgs(process.argv);
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const model = await llama.loadModel({modelPath: args.model, gpuLayers: 0});
const contextOptions = {
    contextSize: args.ctx, batchSize: args.batch, flashAttention: false, threads: args.threads, sequences: 1
};
if (args.kv) {
    // e.g. --kv F32 (default: F16, llama.cpp's default KV cache type)
    contextOptions.experimentalKvCacheKeyType = args.kv;
    contextOptions.experimentalKvCacheValueType = args.kv;
}
const context = await model.createContext(contextOptions);
const seq = context.getSequence();

const engine = {
    node_llama_cpp: "3.21.1",
    llama_cpp_release: llama.llamaCppRelease,
    build_type: llama.buildType,
    gpu: llama.gpu,
    context: contextOptions,
    notes: "n_ubatch = n_batch (node-llama-cpp sets both); KV cache " + (args.kv || "F16 (default)") +
        "; swa_full = false; " +
        "flash attention off; CPU backend",
};

function toLogprobs(probMap) {
    // Map (sorted by probability, descending) -> [[id, logprob], ...] in the same order
    const out = [];
    for (const [tok, p] of probMap) out.push([tok, Math.log(p)]);
    return out;
}

function topN(lp, n) {
    return lp.slice(0, n);
}

async function evalWhole(ids) {
    await seq.clearHistory();
    const input = ids.map((t, i) => (i === ids.length - 1 ? [t, {generateNext: {probabilities: true}}] : t));
    const res = await seq.controlledEvaluate(input);
    return toLogprobs(res[ids.length - 1].next.probabilities);
}

async function evalAllPositions(ids, tokenByToken) {
    await seq.clearHistory();
    const rows = [];
    if (!tokenByToken) {
        const input = ids.map((t) => [t, {generateNext: {probabilities: true}}]);
        const res = await seq.controlledEvaluate(input);
        for (let i = 0; i < ids.length; i++) rows.push(toLogprobs(res[i].next.probabilities));
    } else {
        for (let i = 0; i < ids.length; i++) {
            const res = await seq.controlledEvaluate([[ids[i], {generateNext: {probabilities: true}}]]);
            rows.push(toLogprobs(res[0].next.probabilities));
        }
    }
    return rows;
}

async function evalTokenByToken(ids) {
    await seq.clearHistory();
    let last = null;
    for (let i = 0; i < ids.length; i++) {
        const isLast = i === ids.length - 1;
        const res = await seq.controlledEvaluate([isLast ? [ids[i], {generateNext: {probabilities: true}}] : ids[i]]);
        if (isLast) last = toLogprobs(res[0].next.probabilities);
    }
    return last;
}

function tokenizePrompt(p) {
    const body = model.tokenize(p.text, !!p.special);
    const bos = model.tokens.bos;
    const addBos = model.tokens.shouldPrependBosToken && bos != null;
    return {ids: addBos ? [bos, ...body] : body, bos_added: addBos};
}

const out = {engine, model: path.basename(args.model)};

if (args.idsFile) {
    const ids = JSON.parse(fs.readFileSync(args.idsFile, "utf8"));
    const whole = await evalAllPositions(ids, false);
    const single = await evalAllPositions(ids, true);
    // full vectors indexed by token id
    const dense = (rows) => rows.map((r) => {
        const v = new Array(r.length);
        for (const [t, lp] of r) v[t] = lp;
        return v;
    });
    out.ids = ids;
    out.vocab = whole[0].length;
    out.logprobs_whole = dense(whole);
    out.logprobs_token_by_token = dense(single);
} else {
    const corpus = JSON.parse(fs.readFileSync(args.prompts, "utf8")).prompts;
    const only = args.only ? new Set(args.only.split(",")) : null;
    const spread = new Set(args.spread ? args.spread.split(",") : []);
    out.steps = args.steps;
    out.top = args.top;
    out.prompts = [];
    for (const p of corpus) {
        if (only && !only.has(p.name)) continue;
        const t0 = Date.now();
        const {ids, bos_added} = tokenizePrompt(p);
        const rec = {name: p.name, text: p.text, special: !!p.special, bos_added, ids};
        // whole prompt in one batch, then greedy decode one token per call
        const input = ids.map((t, i) => (i === ids.length - 1 ? [t, {generateNext: {probabilities: true}}] : t));
        await seq.clearHistory();
        const res = await seq.controlledEvaluate(input);
        let lp = toLogprobs(res[ids.length - 1].next.probabilities);
        rec.last_top = topN(lp, args.top);
        rec.greedy = [];
        for (let s = 0; s < args.steps; s++) {
            const [t1, l1] = lp[0];
            const [t2, l2] = lp[1];
            rec.greedy.push({token: t1, top1_logprob: l1, top2: t2, top2_logprob: l2, margin: l1 - l2});
            if (s === args.steps - 1) break;
            const r = await seq.controlledEvaluate([[t1, {generateNext: {probabilities: true}}]]);
            lp = toLogprobs(r[0].next.probabilities);
        }
        if (spread.has(p.name)) {
            const tbt = await evalTokenByToken(ids);
            rec.last_top_token_by_token = topN(tbt, args.top);
        }
        out.prompts.push(rec);
        console.error(`${p.name}: ${ids.length} tokens, ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    }
}

fs.mkdirSync(path.dirname(path.resolve(args.out)), {recursive: true});
fs.writeFileSync(args.out, JSON.stringify(out));
console.error(`wrote ${args.out}`);
await context.dispose();
await model.dispose();
await llama.dispose();
