#!/usr/bin/env python3
"""Writes tiny random-weight GGUF models and their forward-pass fixtures.

Produces:
  tests/data/tiny_llama.gguf, tiny_qwen2.gguf, tiny_qwen3.gguf, tiny_gemma3.gguf  (each < 300 KB)
  tests/data/fwd_tiny.json   (per model: ids, float64 reference logits, llama.cpp log-probs)

Rerun (from the repository root; ~1 minute):
  (cd tools && npm ci)    # node-llama-cpp 3.21.1 for the llama.cpp side
  python3 tools/reference/make_tiny_models.py [--no-llama]

Everything is seeded (numpy default_rng(seed per model)), so a rerun rewrites identical files
as long as gguf-py's writer and quantizers do not change.  Weight types are mixed on purpose
(F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K).  32-element-block
types are made with gguf.quants.quantize from random float weights; K-quant blocks (256 elements
per block, so only tensors whose rows have 256 elements) are random valid blocks with sane f16
scales (gguf-py has no K-quantizer), scaled so the weights have the intended spread.
Tokenizers: llama and gemma3 carry an SPM ("llama") vocab with byte-fallback tokens; qwen2 and
qwen3 carry a byte-level BPE ("gpt2", pre "qwen2") vocab with merges.  llama.cpp loads all four.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import subprocess
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as QT
from gguf.constants import GGML_QUANT_SIZES
from gguf.quants import dequantize, quantize

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
from ref_forward import (RefModel, gelu_tanh, gelu_tanh_ggml_f16, llama3_rope_divisors,  # noqa: E402
                         log_softmax)

DATA = os.path.join(ROOT, "tests", "data")
RAW_DIR = os.path.join(ROOT, "out", "ref")
N_IDS = 32
TOP = 16
FULL_LAST = 4

WORDS = ("the of and to in is was that for it with as on be at by this had not are but from or have an "
         "they which one you were all we her she there would their will when who him been has more if no "
         "out so said what up its about into than them can only other new some time could these two may "
         "first then do any like my now over such our man me even most made after also did many before "
         "must through back years where much your way well down should because each just those people").split()


# ------------------------------------------------------------------------------------- tokenizers
def spm_vocab(specials: list[str], n_total: int):
    """SentencePiece-style vocab: specials (CONTROL) + <unk> handling + 256 byte tokens + pieces."""
    tokens, scores, types = [], [], []
    for s in specials:
        tokens.append(s)
        scores.append(0.0)
        types.append(2 if s == "<unk>" else 3)  # UNKNOWN / CONTROL
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        scores.append(0.0)
        types.append(6)  # BYTE
    pieces = ["▁"] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + ["▁" + w for w in WORDS]
    pieces += [w for w in WORDS if w not in pieces]
    i = 0
    while len(tokens) < n_total:
        p = pieces[i]
        i += 1
        if p in tokens:
            continue
        tokens.append(p)
        scores.append(-float(len(tokens)))
        types.append(1)  # NORMAL
    return tokens, scores, types


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def bpe_vocab(specials: list[str], n_total: int):
    """Byte-level BPE vocab (gpt2 style): 256 byte symbols + merged words + specials (CONTROL)."""
    b2u = bytes_to_unicode()
    tokens = [b2u[b] for b in range(256)]
    merges = []
    n_normal = n_total - len(specials)
    for w in WORDS:
        word = "".join(b2u[b] for b in (" " + w).encode())
        cur = word[0]
        for ch in word[1:]:
            if len(tokens) >= n_normal:
                break
            nxt = cur + ch
            if nxt not in tokens:
                tokens.append(nxt)
                merges.append(f"{cur} {ch}")
            cur = nxt
        if len(tokens) >= n_normal:
            break
    types = [1] * len(tokens)
    for s in specials:
        tokens.append(s)
        types.append(3)
    return tokens, types, merges


# ------------------------------------------------------------------------------------- weights
def kquant_random(rng, n_rows: int, n_cols: int, qt: QT, sigma: float) -> np.ndarray:
    """Random valid K-quant blocks (uint8 array (n_rows, bytes_per_row)) with weight std ~ sigma."""
    block, tbytes = GGML_QUANT_SIZES[qt]
    assert n_cols % block == 0, (qt, n_cols)
    nb = n_rows * n_cols // block
    raw = rng.integers(0, 256, size=(nb, tbytes), dtype=np.uint8)
    if qt == QT.Q6_K:
        # int8 scales: keep them positive-ish and moderate so blocks are not degenerate
        raw[:, 192:208] = rng.integers(-40, 60, size=(nb, 16)).astype(np.int8).view(np.uint8)
    # offsets of f16 d (and dmin) in each block
    offs = {QT.Q2_K: (80, 82), QT.Q3_K: (108, None), QT.Q4_K: (0, 2), QT.Q5_K: (0, 2), QT.Q6_K: (208, None)}[qt]

    def set_f16(col, vals):
        raw[:, col:col + 2] = np.asarray(vals, dtype=np.float16).reshape(-1, 1).view(np.uint8).reshape(nb, 2)

    d_off, m_off = offs
    # measure the spread for d=1 (and the mean contributed by the mins for dmin=1)
    set_f16(d_off, np.ones(nb))
    if m_off is not None:
        set_f16(m_off, np.zeros(nb))
    v1 = dequantize(raw, qt).reshape(nb, block)
    ratio = 0.0
    if m_off is not None:
        set_f16(d_off, np.zeros(nb))
        set_f16(m_off, np.ones(nb))
        v2 = dequantize(raw, qt).reshape(nb, block)
        ratio = float(v1.mean() / -v2.mean())  # dmin/d that centres the weights
        set_f16(d_off, np.ones(nb))
        set_f16(m_off, np.full(nb, ratio))
        v1 = dequantize(raw, qt).reshape(nb, block)
    s = float(v1.std())
    per_block = rng.uniform(0.5, 1.5, size=nb)
    d = sigma / s * per_block
    set_f16(d_off, d)
    if m_off is not None:
        set_f16(m_off, d * ratio)
    return raw.reshape(n_rows, -1)


def make_tensor(rng, shape_ne, qt: QT, sigma: float, mean: float = 0.0):
    """shape_ne = (ne0, ne1) or (ne0,); returns the array to hand to GGUFWriter.add_tensor."""
    ne = list(shape_ne)
    np_shape = list(reversed(ne))
    if qt in (QT.Q2_K, QT.Q3_K, QT.Q4_K, QT.Q5_K, QT.Q6_K):
        return kquant_random(rng, int(np.prod(np_shape[:-1])), np_shape[-1], qt, sigma)
    w = (mean + sigma * rng.standard_normal(np_shape)).astype(np.float32)
    if qt == QT.F32:
        return w
    if qt == QT.F16:
        return w.astype(np.float16)
    return quantize(w, qt)


# ------------------------------------------------------------------------------------- models
SPECS = {
    "llama": dict(
        seed=101, d=64, n_layer=2, n_head=4, n_head_kv=2, head_dim=64, n_ff=256, vocab=384,
        rope_base=500000.0, eps=1e-5, tied=False,
        # original_context_length is tiny so that the scaling changes angles within 32 positions
        llama3_rope=dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_context_length=32),
        types={"token_embd": QT.Q4_0, "output": QT.Q8_0,
               0: dict(q=QT.Q4_0, k=QT.Q4_1, v=QT.Q5_0, o=QT.Q4_K, gate=QT.Q5_1, up=QT.Q8_0, down=QT.Q6_K),
               1: dict(q=QT.F16, k=QT.Q8_0, v=QT.F32, o=QT.Q5_K, gate=QT.Q4_0, up=QT.Q4_1, down=QT.Q4_K)}),
    "qwen2": dict(
        seed=202, d=64, n_layer=2, n_head=4, n_head_kv=1, head_dim=16, n_ff=256, vocab=384,
        rope_base=1000000.0, eps=1e-6, tied=True,
        types={"token_embd": QT.Q8_0,
               0: dict(q=QT.Q8_0, k=QT.Q5_0, v=QT.Q4_0, o=QT.F16, gate=QT.Q5_1, up=QT.Q4_0, down=QT.Q5_K),
               1: dict(q=QT.Q4_1, k=QT.F16, v=QT.Q8_0, o=QT.Q5_0, gate=QT.Q8_0, up=QT.Q5_0, down=QT.Q3_K)}),
    "qwen3": dict(
        seed=303, d=64, n_layer=2, n_head=4, n_head_kv=2, head_dim=64, n_ff=256, vocab=384,
        rope_base=1000000.0, eps=1e-6, tied=True,
        types={"token_embd": QT.F16,
               0: dict(q=QT.Q8_0, k=QT.Q8_0, v=QT.Q4_0, o=QT.Q6_K, gate=QT.Q4_0, up=QT.BF16, down=QT.Q2_K),
               1: dict(q=QT.Q5_1, k=QT.Q4_1, v=QT.Q5_0, o=QT.Q3_K, gate=QT.Q8_0, up=QT.Q5_1, down=QT.Q4_K)}),
    "gemma3": dict(
        seed=404, d=32, n_layer=6, n_head=2, n_head_kv=1, head_dim=32, n_ff=256, vocab=384,
        rope_base=1000000.0, eps=1e-6, tied=True, sliding_window=8,
        types={"token_embd": QT.Q8_0,
               **{il: dict(q=[QT.Q5_0, QT.Q8_0, QT.Q4_0][il % 3], k=QT.Q5_0, v=QT.Q8_0,
                           o=[QT.Q4_0, QT.F16][il % 2], gate=QT.Q5_0, up=[QT.Q5_0, QT.Q4_1][il % 2],
                           down=[QT.Q6_K, QT.Q4_K, QT.Q5_K][il % 3]) for il in range(6)}}),
}


def build(arch: str, spec: dict, path: str, all_f32: bool = False) -> dict:
    rng = np.random.default_rng(spec["seed"])
    d, L, H, Hkv, D, F, V = (spec[k] for k in ("d", "n_layer", "n_head", "n_head_kv", "head_dim", "n_ff", "vocab"))
    w = gguf.GGUFWriter(path, arch)
    w.add_name(f"edgellm tiny {arch} (random weights, test only)")
    w.add_context_length(256)
    w.add_embedding_length(d)
    w.add_block_count(L)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(Hkv)
    w.add_key_length(D)
    w.add_value_length(D)
    w.add_rope_dimension_count(D)
    w.add_rope_freq_base(spec["rope_base"])
    w.add_layer_norm_rms_eps(spec["eps"])
    if arch == "gemma3":
        w.add_sliding_window(spec["sliding_window"])

    if arch in ("llama", "gemma3"):
        specials = ["<unk>", "<s>", "</s>"] if arch == "llama" else ["<pad>", "<eos>", "<bos>", "<unk>"]
        tokens, scores, types = spm_vocab(specials, V)
        if arch == "gemma3":
            # Gemma's chat markers as CONTROL tokens at the end of the vocab
            tokens[-2:] = ["<start_of_turn>", "<end_of_turn>"]
            types[-2:] = [3, 3]
            scores[-2:] = [0.0, 0.0]
        w.add_tokenizer_model("llama")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_scores(scores)
        w.add_token_types(types)
        ids = {s: tokens.index(s) for s in specials}
        if arch == "llama":
            w.add_unk_token_id(ids["<unk>"]); w.add_bos_token_id(ids["<s>"]); w.add_eos_token_id(ids["</s>"])
            bos = ids["<s>"]
        else:
            w.add_pad_token_id(ids["<pad>"]); w.add_eos_token_id(ids["<eos>"]); w.add_bos_token_id(ids["<bos>"])
            w.add_unk_token_id(ids["<unk>"])
            w.add_add_space_prefix(False)
            bos = ids["<bos>"]
        w.add_add_bos_token(True)
        w.add_add_eos_token(False)
        first_normal = 256 + len(specials)
    else:
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
        tokens, types, merges = bpe_vocab(specials, V)
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("qwen2")
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(merges)
        eot = tokens.index("<|endoftext|>")
        w.add_bos_token_id(eot)
        w.add_eos_token_id(tokens.index("<|im_end|>"))
        w.add_pad_token_id(eot)
        w.add_add_bos_token(False)
        bos = None
        first_normal = 0
    assert len(tokens) == V

    tinfo = {}

    def put(name, ne, qt, sigma, mean=0.0):
        if all_f32:
            qt = QT.F32
        arr = make_tensor(rng, ne, qt, sigma, mean)
        w.add_tensor(name, arr, raw_dtype=qt if qt not in (QT.F32, QT.F16) else None)
        tinfo[name] = qt.name

    T = spec["types"]
    put("token_embd.weight", (d, V), T["token_embd"], 0.5)
    if not spec["tied"]:
        put("output.weight", (d, V), T["output"], 0.5)
    put("output_norm.weight", (d,), QT.F32, 0.1, 1.0)
    if "llama3_rope" in spec:
        r = spec["llama3_rope"]
        div = llama3_rope_divisors(D, spec["rope_base"], r["factor"], r["low_freq_factor"],
                                   r["high_freq_factor"], r["original_context_length"])
        w.add_tensor("rope_freqs.weight", div.astype(np.float32))
        tinfo["rope_freqs.weight"] = "F32"
    for il in range(L):
        t = T[il]
        p = f"blk.{il}."
        put(p + "attn_norm.weight", (d,), QT.F32, 0.1, 1.0)
        put(p + "attn_q.weight", (d, H * D), t["q"], 1.0 / math.sqrt(d))
        put(p + "attn_k.weight", (d, Hkv * D), t["k"], 1.0 / math.sqrt(d))
        put(p + "attn_v.weight", (d, Hkv * D), t["v"], 1.0 / math.sqrt(d))
        if arch == "qwen2":
            put(p + "attn_q.bias", (H * D,), QT.F32, 0.5)
            put(p + "attn_k.bias", (Hkv * D,), QT.F32, 0.5)
            put(p + "attn_v.bias", (Hkv * D,), QT.F32, 0.2)
        if arch in ("qwen3", "gemma3"):
            put(p + "attn_q_norm.weight", (D,), QT.F32, 0.2, 1.0)
            put(p + "attn_k_norm.weight", (D,), QT.F32, 0.2, 1.0)
        put(p + "attn_output.weight", (H * D, d), t["o"], 1.0 / math.sqrt(H * D))
        if arch == "gemma3":
            put(p + "post_attention_norm.weight", (d,), QT.F32, 0.2, 1.0)
        put(p + "ffn_norm.weight", (d,), QT.F32, 0.1, 1.0)
        put(p + "ffn_gate.weight", (d, F), t["gate"], 1.0 / math.sqrt(d))
        put(p + "ffn_up.weight", (d, F), t["up"], 1.0 / math.sqrt(d))
        put(p + "ffn_down.weight", (F, d), t["down"], 1.0 / math.sqrt(F))
        if arch == "gemma3":
            put(p + "post_ffw_norm.weight", (d,), QT.F32, 0.2, 1.0)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    # the fixed id sequence: BOS (if the model adds one) + random normal tokens
    n = N_IDS - (1 if bos is not None else 0)
    seq = [int(x) for x in rng.integers(first_normal, V - (2 if arch == "gemma3" else 0) -
                                        (len(specials) if arch in ("qwen2", "qwen3") else 0), size=n)]
    ids = ([bos] if bos is not None else []) + seq
    return {"tensor_types": tinfo, "ids": ids, "bos": bos}


def r6(x):
    return float(round(float(x), 6))


def run_llama(path, ids, tag, kv=None):
    ids_file = os.path.join(RAW_DIR, f"tiny_{tag}_ids.json")
    raw_file = os.path.join(RAW_DIR, f"llama_tiny_{tag}.json")
    json.dump(ids, open(ids_file, "w"))
    cmd = ["node", os.path.join(HERE, "llama_ref.mjs"), "--model", path, "--ids-file", ids_file,
           "--out", raw_file, "--ctx", "256", "--batch", "256"]
    if kv:
        cmd += ["--kv", kv]
    subprocess.run(cmd, check=True)
    raw = json.load(open(raw_file))
    return (np.array(raw["logprobs_whole"], dtype=np.float64),
            np.array(raw["logprobs_token_by_token"], dtype=np.float64), raw["engine"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-llama", action="store_true", help="skip the llama.cpp side")
    args = ap.parse_args()
    os.makedirs(RAW_DIR, exist_ok=True)
    doc = {
        "about": "Tiny random-weight models (tests/data/tiny_<arch>.gguf) and their logits; generated by "
                 "tools/reference/make_tiny_models.py",
        "conventions": (
            "ids: the fixed input sequence (BOS first for llama/gemma3, which set add_bos_token; none for "
            "qwen2/qwen3). Position p predicts the token after ids[p]. f64_top[p]: float64 reference top-"
            f"{TOP} at position p as [id, raw_logit, logprob]; f64_logsumexp[p] converts (logprob = logit - "
            "lse). f64_full_logits: raw logits over the whole vocab for the last "
            f"{FULL_LAST} positions (full_positions). llama_top[p]: llama.cpp (node-llama-cpp 3.21.1, CPU, whole "
            "sequence in one batch) top as [id, logprob]; llama_full_logprobs: llama.cpp log-probs over the "
            "whole vocab at full_positions. logprob = natural-log full-vocabulary softmax. figures: "
            "max/rms |llama.cpp - f64| of log-probs over all positions x f64 top ids and over the full "
            "vectors at full_positions; llama.cpp self-spread = whole batch vs one token per decode call, "
            "max |diff| of log-probs over all positions and all ids."),
        "models": {},
    }
    for arch, spec in SPECS.items():
        path = os.path.join(DATA, f"tiny_{arch}.gguf")
        info = build(arch, spec, path)
        ids = info["ids"]
        m = RefModel(path)
        logits = m.forward(ids)  # all positions
        lsm = log_softmax(logits)
        lse = logits - lsm
        T = len(ids)
        full_pos = list(range(T - FULL_LAST, T))
        entry = {
            "file": os.path.basename(path), "bytes": os.path.getsize(path),
            "sha256": hashlib.sha256(open(path, "rb").read()).hexdigest(),
            "hparams": m.describe(), "tensor_types": info["tensor_types"], "ids": ids,
            "f64_top": [[[int(i), r6(row[i]), r6(lrow[i])] for i in np.argsort(-row)[:TOP]]
                        for row, lrow in zip(logits, lsm)],
            "f64_logsumexp": [r6(x[0]) for x in lse],
            "full_positions": full_pos,
            "f64_full_logits": [[r6(x) for x in logits[p]] for p in full_pos],
        }
        if not args.no_llama:
            lw, lt, engine = run_llama(path, ids, arch)
            entry["engine"] = engine
            entry["llama_top"] = [[[int(i), r6(row[i])] for i in np.argsort(-row)[:TOP]] for row in lw]
            entry["llama_full_logprobs"] = [[r6(x) for x in lw[p]] for p in full_pos]
            top_ids = [np.argsort(-row)[:TOP] for row in logits]
            d_top = np.concatenate([lw[p][top_ids[p]] - lsm[p][top_ids[p]] for p in range(T)])
            d_full = np.concatenate([lw[p] - lsm[p] for p in full_pos])
            d_self = (lw - lt).ravel()
            entry["figures"] = {
                "llama_vs_f64_top_all_positions": {"max_abs": r6(np.abs(d_top).max()),
                                                   "rms": r6(np.sqrt(np.mean(d_top ** 2)))},
                "llama_vs_f64_full_vocab_full_positions": {"max_abs": r6(np.abs(d_full).max()),
                                                           "rms": r6(np.sqrt(np.mean(d_full ** 2)))},
                "llama_self_spread_all": {"max_abs": r6(np.abs(d_self).max()),
                                          "rms": r6(np.sqrt(np.mean(d_self ** 2)))},
                "argmax_agree_positions": int(sum(int(np.argmax(lw[p]) == np.argmax(logits[p])) for p in range(T))),
                "positions": T,
            }
            # graph check without quantization noise: the same architecture with every tensor F32 and
            # an F32 KV cache (model in out/ref, not committed); llama.cpp should then agree closely
            f32_path = os.path.join(RAW_DIR, f"tiny_{arch}_f32.gguf")
            build(arch, spec, f32_path, all_f32=True)
            mf = RefModel(f32_path)
            lf = log_softmax(mf.forward(ids))
            lwf, _, _ = run_llama(f32_path, ids, arch + "_f32", kv="F32")

            def dist(lv):
                dd = (lwf - lv).ravel()
                return {"max_abs": float(f"{np.abs(dd).max():.3g}"), "rms": float(f"{np.sqrt(np.mean(dd ** 2)):.3g}")}

            entry["figures"]["f32_weights_f32_kv_llama_vs_f64_all"] = dist(lf)
            # sensitivity on that F32 model: distance to llama.cpp when one graph detail is changed
            checks = {"as_implemented": dist(lf)}
            variant = lambda: dist(log_softmax(mf.forward(ids)))  # noqa: E731
            mode = mf.rope_mode
            mf.rope_mode = "norm" if mode == "neox" else "neox"
            checks["other_rope_mode"] = variant()
            mf.rope_mode = mode
            if mf.rope_divisors is not None:
                dv = mf.rope_divisors
                mf.rope_divisors = None
                checks["no_rope_freq_divisors"] = variant()
                mf.rope_divisors = dv
            if arch == "gemma3":
                sw = mf.swa_layers
                mf.swa_layers = [False] * mf.n_layer
                checks["no_sliding_window"] = variant()
                mf.swa_layers = [True] * mf.n_layer
                checks["all_layers_sliding"] = variant()
                mf.swa_layers = sw
                mf.local_rope_base = mf.rope_base
                checks["local_layers_global_rope_base"] = variant()
                mf.local_rope_base = 10000.0
                # llama.cpp's CPU GELU goes through an f16 table; emulating it should close the gap
                mf.gelu = gelu_tanh_ggml_f16
                checks["emulate_llama_cpp_f16_gelu_table"] = variant()
                mf.gelu = gelu_tanh
            entry["graph_checks_f32"] = checks
            print(arch, json.dumps(entry["figures"]), json.dumps(checks), file=sys.stderr)
        doc["models"][arch] = entry
        print(f"{arch}: {entry['bytes']} bytes", file=sys.stderr)
    out = os.path.join(DATA, "fwd_tiny.json")
    with open(out, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    print(out, os.path.getsize(out), "bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
