#!/usr/bin/env python3
"""Builds the forward-pass fixtures of a real model: tests/data/fwd_<model>_greedy.json and
tests/data/fwd_<model>_logits.json, for --model gemma (Gemma 3 270M Q4_K_M, the default) or
--model smollm2 (SmolLM2 135M Instruct Q4_1, llama architecture).

Rerun (from the repository root; gemma ~10-15 minutes on 2 cores, ~3 GB RAM; smollm2 ~2-4 min):
  (cd tools && npm ci)                      # node-llama-cpp 3.21.1 with prebuilt CPU binaries
  python3 tools/prompts/make_forward_prompts.py   # only if the corpus changed
  python3 tools/reference/make_forward_fixtures.py [--model gemma|smollm2] [--reuse]

The prompts: gemma takes the whole corpus (tools/prompts/forward_prompts.json); smollm2 its
prompts of at most SHORT_CHARS characters (the tests keep to short prompts) plus the ChatML
conversations in CHATML_PROMPTS, rendered as SmolLM2's template renders them.

Steps:
  1. node tools/reference/llama_ref.mjs on every prompt of tools/prompts/forward_prompts.json
     (raw output: out/ref/llama_<model>.json; --reuse skips this step when that file exists).
  2. float64 reference (ref_forward.py) over prompt ids + the first 47 greedy tokens, logits at
     the 48 positions where llama.cpp chose a token -> f64 argmax/margin per greedy step.
  3. For the LOGIT_PROMPTS: llama.cpp top-40 log-probs (whole batch and token by token) and the
     f64 top-40 (raw logits and log-probs) at the last prompt position, plus distances.
  4. (gemma) Graph checks on long_gpl_600: distance to llama.cpp of the f64 pass with gemma3
     graph variants (no sliding window / global rope base on local layers / extra +1 on norm
     weights), to show which reading of the GGUF llama.cpp uses.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from ref_forward import RefModel, log_softmax  # noqa: E402

PROMPTS = os.path.join(ROOT, "tools", "prompts", "forward_prompts.json")
STEPS = 48
TOP = 40
SHORT_CHARS = 100


def chatml(turns):
    """SmolLM2's chat template (its GGUF's tokenizer.chat_template) with the generation prompt."""
    return "".join(f"<|im_start|>{r}\n{c}<|im_end|>\n" for r, c in turns) + "<|im_start|>assistant\n"


CHATML_PROMPTS = [
    {"name": "chatml_capital", "special": True, "kind": "chat",
     "text": chatml([("system", "You are a helpful assistant."), ("user", "What is the capital of France?")])},
    {"name": "chatml_legs", "special": True, "kind": "chat",
     "text": chatml([("system", "You are a helpful assistant."), ("user", "How many legs does a dog have?")])},
    {"name": "chatml_template_default", "special": True, "kind": "chat",
     "text": chatml([("system", "You are a helpful AI assistant named SmolLM, trained by Hugging Face"),
                     ("user", "What is the capital of France?")])},
    {"name": "chatml_multi", "special": True, "kind": "chat",
     "text": chatml([("system", "You are a helpful assistant."), ("user", "What is the capital of Italy?"),
                     ("assistant", "The capital of Italy is Rome."), ("user", "And the capital of Spain?")])},
]

MODELS = {
    "gemma": {
        "file": "gemma-3-270m-q4_k_m.gguf", "title": "Gemma 3 270M Q4_K_M",
        "logit_prompts": ["en_capital", "code_python", "zh_beijing", "arith_add", "chat_haiku",
                          "long_gpl_400", "long_gpl_600", "long_gpl_chat_750"],
        "graph_checks": True,
    },
    "smollm2": {
        "file": "SmolLM2-135M-Instruct.Q4_1.gguf", "title": "SmolLM2 135M Instruct Q4_1",
        "logit_prompts": ["en_capital", "code_python", "zh_beijing", "arith_add", "chatml_capital",
                          "chatml_template_default", "chatml_multi"],
        "graph_checks": False,
    },
}


def prompts_for(name: str) -> str:
    """The prompts file llama_ref.mjs reads for this model."""
    if name == "gemma":
        return PROMPTS
    corpus = json.load(open(PROMPTS))["prompts"]
    chosen = [p for p in corpus if 0 < len(p["text"]) <= SHORT_CHARS and p["kind"] != "chat"] + CHATML_PROMPTS
    path_ = os.path.join(ROOT, "out", "ref", f"prompts_{name}.json")
    os.makedirs(os.path.dirname(path_), exist_ok=True)
    with open(path_, "w", encoding="utf-8") as f:
        json.dump({"prompts": chosen}, f, ensure_ascii=False)
    return path_


def r6(x):
    return float(round(float(x), 6))


def dist_on(ids, a: dict, b: dict):
    """rms and max |a-b| over ids (a, b: id -> value)."""
    d = np.array([a[i] - b[i] for i in ids], dtype=np.float64)
    if d.size == 0:
        return {"n": 0, "rms": None, "max_abs": None}
    return {"n": int(d.size), "rms": r6(np.sqrt(np.mean(d * d))), "max_abs": r6(np.max(np.abs(d)))}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=sorted(MODELS), default="gemma")
    ap.add_argument("--reuse", action="store_true", help="reuse out/ref/llama_<model>.json")
    args = ap.parse_args()
    cfg = MODELS[args.model]
    MODEL = os.path.join(ROOT, "models", cfg["file"])
    RAW = os.path.join(ROOT, "out", "ref", f"llama_{args.model}.json")
    OUT_GREEDY = os.path.join(ROOT, "tests", "data", f"fwd_{args.model}_greedy.json")
    OUT_LOGITS = os.path.join(ROOT, "tests", "data", f"fwd_{args.model}_logits.json")
    LOGIT_PROMPTS = cfg["logit_prompts"]

    if not (args.reuse and os.path.exists(RAW)):
        cmd = ["node", os.path.join(HERE, "llama_ref.mjs"), "--model", MODEL, "--prompts", prompts_for(args.model),
               "--out", RAW, "--steps", str(STEPS), "--top", str(TOP), "--spread", ",".join(LOGIT_PROMPTS)]
        print(" ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True)
    raw = json.load(open(RAW))

    t0 = time.time()
    m = RefModel(MODEL)
    desc = m.describe()
    print(json.dumps(desc), file=sys.stderr)

    greedy_out = []
    logits_out = []
    n_steps = n_margin_05 = n_margin_1 = n_agree = n_agree_05 = n_agree_1 = 0
    disagreements = []
    for p in raw["prompts"]:
        ids = p["ids"]
        g = p["greedy"]
        toks = [s["token"] for s in g]
        seq = ids + toks[:-1]
        positions = list(range(len(ids) - 1, len(ids) - 1 + len(toks)))
        hs = m.hidden(seq)
        logits = m.output_logits(hs[positions])
        f_arg, f_margin, f_lp_tok = [], [], []
        for k, row in enumerate(logits):
            top2 = np.argpartition(-row, 2)[:2]
            top2 = top2[np.argsort(-row[top2])]
            f_arg.append(int(top2[0]))
            f_margin.append(r6(row[top2[0]] - row[top2[1]]))
            lsm = log_softmax(row)
            f_lp_tok.append(r6(lsm[toks[k]]))
        margins = [s["margin"] for s in g]
        agree = [int(a == t) for a, t in zip(f_arg, toks)]
        n_steps += len(toks)
        n_margin_05 += sum(1 for x in margins if x >= 0.5)
        n_agree += sum(agree)
        n_agree_05 += sum(a for a, x in zip(agree, margins) if x >= 0.5)
        n_margin_1 += sum(1 for x in margins if x >= 1.0)
        n_agree_1 += sum(a for a, x in zip(agree, margins) if x >= 1.0)
        disagreements += [{"prompt": p["name"], "step": k, "llama": toks[k], "f64": f_arg[k],
                           "llama_margin": r6(margins[k]), "f64_margin": f_margin[k]}
                          for k in range(len(toks)) if not agree[k]]
        greedy_out.append({
            "name": p["name"], "text": p["text"], "special": p["special"], "bos_added": p["bos_added"],
            "ids": ids,
            "tokens": toks,
            "margin": [r6(x) for x in margins],
            "top1_logprob": [r6(s["top1_logprob"]) for s in g],
            "top2": [s["top2"] for s in g],
            "top2_logprob": [r6(s["top2_logprob"]) for s in g],
            "f64_argmax": f_arg,
            "f64_margin": f_margin,
            "f64_logprob_of_token": f_lp_tok,
        })

        if p["name"] in LOGIT_PROMPTS:
            row = logits[0]
            lsm = log_softmax(row)
            ftop = np.argsort(-row)[:TOP]
            l_whole = {t: v for t, v in p["last_top"]}
            l_tbt = {t: v for t, v in p.get("last_top_token_by_token", [])}
            f_lp = {int(i): float(lsm[i]) for i in ftop}
            top20_l = [t for t, _ in p["last_top"][:20]]
            top20_f = [int(i) for i in ftop[:20]]
            shared20 = [t for t in top20_l if t in set(top20_f)]
            # f64 log-probs are defined for every id: use them on llama's whole top-20 too
            f_lp_all = lambda ids_: {i: float(lsm[i]) for i in ids_}  # noqa: E731
            shared_tbt = [t for t, _ in p["last_top"] if t in l_tbt]
            shared_tbt20 = [t for t in top20_l if t in l_tbt]
            logits_out.append({
                "name": p["name"], "n_ids": len(ids), "ids": ids,
                "llama_top": [[t, r6(v)] for t, v in p["last_top"]],
                "llama_top_token_by_token": [[t, r6(v)] for t, v in p.get("last_top_token_by_token", [])],
                "f64_top": [[int(i), r6(row[i]), r6(lsm[i])] for i in ftop],
                "f64_logsumexp": r6(row.max() + np.log(np.exp(row - row.max()).sum())),
                "figures": {
                    "llama_vs_f64_shared_top20": dist_on(shared20, l_whole, f_lp),
                    "llama_vs_f64_llama_top20": dist_on(top20_l, l_whole, f_lp_all(top20_l)),
                    "llama_vs_f64_llama_top40": dist_on([t for t, _ in p["last_top"]], l_whole,
                                                        f_lp_all([t for t, _ in p["last_top"]])),
                    "llama_token_by_token_vs_f64_llama_top20": dist_on(
                        [t for t in top20_l if t in l_tbt], l_tbt, f_lp_all([t for t in top20_l if t in l_tbt])),
                    "llama_self_spread_top40": dist_on(shared_tbt, l_whole, l_tbt),
                    "llama_self_spread_top20": dist_on(shared_tbt20, l_whole, l_tbt),
                    "top1_llama": p["last_top"][0][0], "top1_f64": int(ftop[0]),
                    "top1_llama_token_by_token": p["last_top_token_by_token"][0][0]
                    if p.get("last_top_token_by_token") else None,
                },
            })
        print(f"{p['name']}: {len(ids)} ids, agree {sum(agree)}/{len(toks)}, {time.time() - t0:.0f} s",
              file=sys.stderr)

    # ---- graph checks (variants of the gemma3 reading) on one long and one short prompt
    checks = {}
    by_name = {p["name"]: p for p in raw["prompts"]}
    for pname in (["long_gpl_600", "en_capital"] if cfg["graph_checks"] else []):
        p = by_name[pname]
        l_whole = {t: v for t, v in p["last_top"]}
        top20_l = [t for t, _ in p["last_top"][:20]]

        def run_variant():
            lsm = log_softmax(m.forward(p["ids"], [-1])[0])
            return dist_on(top20_l, l_whole, {i: float(lsm[i]) for i in top20_l})

        res = {"as_implemented": run_variant()}
        saved = list(m.swa_layers)
        m.swa_layers = [False] * m.n_layer
        res["no_sliding_window"] = run_variant()
        m.swa_layers = [True] * m.n_layer
        res["all_layers_sliding"] = run_variant()
        m.swa_layers = saved
        m.local_rope_base = m.rope_base
        res["local_layers_global_rope_base"] = run_variant()
        m.local_rope_base = 10000.0
        norm_keys = [k for k in list(m._cache) if k.split(":")[0].endswith("norm.weight")]
        for k in norm_keys:
            m._cache[k] = m._cache[k] + 1.0
        res["norm_weights_plus_1"] = run_variant()
        for k in norm_keys:
            m._cache[k] = m._cache[k] - 1.0
        checks[pname] = res
        print(pname, json.dumps(res), file=sys.stderr)

    eng = raw["engine"]
    conv_greedy = (
        "Per prompt: ids = llama.cpp tokenization (node-llama-cpp model.tokenize(text, special)), with BOS "
        "prepended when tokenizer.ggml.add_bos_token is true (bos_added); tokens = 48 greedy steps of llama.cpp "
        "(argmax of the full distribution; each chosen token is fed back, EOS/<end_of_turn> included; no "
        "penalties); step k is predicted at position len(ids)-1+k. top1_logprob/top2/top2_logprob/margin: "
        "llama.cpp natural-log probabilities (log-softmax over the full vocabulary), margin = top1 - top2 "
        "(equal to the logit margin). f64_*: the float64 reference evaluated on ids + tokens[:-1] at the same "
        "positions: its argmax, its logit margin top1-top2, and its log-prob of llama.cpp's token.")
    greedy_doc = {
        "about": f"llama.cpp greedy decoding reference for {cfg['title']}; generated by "
                 f"tools/reference/make_forward_fixtures.py --model {args.model}",
        "model": cfg["file"], "engine": eng, "steps": STEPS, "conventions": conv_greedy,
        "summary": {"prompts": len(greedy_out), "steps": n_steps, "steps_margin_ge_0_5": n_margin_05,
                    "steps_margin_ge_1_0": n_margin_1,
                    "f64_argmax_agrees": n_agree, "f64_argmax_agrees_where_margin_ge_0_5": n_agree_05,
                    "f64_argmax_agrees_where_margin_ge_1_0": n_agree_1,
                    "disagreements": disagreements},
        "f64_model": desc,
        "prompts": greedy_out,
    }
    conv_logits = (
        "At the last prompt position (index n_ids-1). llama_top: llama.cpp whole-prompt batch "
        "(n_ubatch >= prompt), [id, logprob] sorted descending; llama_top_token_by_token: the same prompt "
        "decoded one token per call. logprob = natural log of llama.cpp's full-vocabulary float32 softmax "
        "(node-llama-cpp exposes probabilities, not logits), i.e. logit - logsumexp(logits). f64_top: the "
        "float64 reference's top-40 as [id, raw_logit, logprob]; f64_logsumexp converts between the two "
        "(logprob = logit - f64_logsumexp). Compare engines in log-prob space (or subtract each engine's "
        "value at a common anchor id). figures: rms / max |diff| of log-probs over: the ids in both "
        "top-20s (shared_top20), llama.cpp's top-20 / top-40 (f64 values exist for every id), and for "
        "llama.cpp's self-spread (whole batch vs token by token) the ids in both top-40 lists.")
    figs = [e["figures"] for e in logits_out]
    summary = {
        "llama_vs_f64_shared_top20_max_abs": max(f["llama_vs_f64_shared_top20"]["max_abs"] for f in figs),
        "llama_vs_f64_shared_top20_rms_max": max(f["llama_vs_f64_shared_top20"]["rms"] for f in figs),
        "llama_self_spread_top40_max_abs": max(f["llama_self_spread_top40"]["max_abs"] for f in figs),
        "llama_self_spread_top40_rms_max": max(f["llama_self_spread_top40"]["rms"] for f in figs),
        "llama_token_by_token_vs_f64_top20_max_abs": max(
            f["llama_token_by_token_vs_f64_llama_top20"]["max_abs"] for f in figs),
        "top1_agree_llama_f64": sum(f["top1_llama"] == f["top1_f64"] for f in figs),
        "prompts": len(figs),
    }
    logits_doc = {
        "about": f"Last-prompt-position distributions: llama.cpp vs the float64 reference, {cfg['title']}; "
                 f"generated by tools/reference/make_forward_fixtures.py --model {args.model}",
        "model": cfg["file"], "engine": eng, "conventions": conv_logits,
        "summary": summary, "graph_checks": {
            "about": "f64 pass with a changed reading of the gemma3 graph vs llama.cpp's whole-batch "
                     "top-20 log-probs (rms / max |diff|); the smallest distance is the reading llama.cpp uses",
            "results": checks},
        "f64_model": desc,
        "prompts": logits_out,
    }
    for path_, doc in ((OUT_GREEDY, greedy_doc), (OUT_LOGITS, logits_doc)):
        with open(path_, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, separators=(",", ":"))
        print(path_, os.path.getsize(path_), "bytes", file=sys.stderr)
    print(json.dumps(greedy_doc["summary"]), json.dumps(summary), file=sys.stderr)


if __name__ == "__main__":
    main()
