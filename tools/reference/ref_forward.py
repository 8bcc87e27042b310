#!/usr/bin/env python3
"""Exact float64 forward pass for GGUF decoder-only LLMs (reference for edgellm's tests).

Produces: logits (float64) at requested positions for a token id sequence, computed in float64
numpy over gguf-py's dequantized weights (the dequantized values are exactly what the GGUF blocks
encode; ggml and gguf-py both evaluate d*q(-m) in float32).  No activation quantization, no f16
KV cache: this is the "ideal" answer for the quantized weights that llama.cpp and the Rust engine
approximate.

Architectures: gemma3, llama, qwen2, qwen3.  The graph follows llama.cpp's conventions for how a
GGUF is to be read (see README.md next to this file for the facts and where they come from):

  gemma3  x = E[id] * sqrt(d_model); per layer: RMSNorm(attn_norm) -> Q,K,V; per-head RMSNorm of
          Q and K (attn_q_norm / attn_k_norm); RoPE NEOX (pairs i, i+D/2); Q *= 1/sqrt(head_dim)
          (1/sqrt(d_model/n_head) if n_layer == 62, the 27B rule); causal attention, on
          sliding-window layers additionally masked when q_pos - k_pos >= sliding_window;
          out proj -> RMSNorm(post_attention_norm) -> residual; RMSNorm(ffn_norm) ->
          down(gelu_tanh(gate(h)) * up(h)) -> RMSNorm(post_ffw_norm) -> residual.
          Layer il is sliding-window iff il % 6 < 5 (llama.cpp set_swa_pattern(6): layers
          5, 11, 17, ... are global; `gemma3.attention.sliding_window_pattern` overrides the 6).
          Sliding layers use RoPE base 10000 (or `gemma3.rope.freq_base_swa`) with no scaling,
          global layers use rope.freq_base with the file's rope scaling (linear factor) if any.
          Norm weights are used AS STORED: llama.cpp's converter already added Gemma's +1.
          Final RMSNorm(output_norm), tied output (token_embd) unless output.weight exists,
          final tanh soft-capping only if `<arch>.final_logit_softcapping` is in the metadata.
  llama   RMSNorm -> Q,K,V -> RoPE NORMAL (pairs 2i, 2i+1; the converter permuted Q/K for this)
          with optional per-dimension frequency divisors (rope_freqs.weight, which is how
          llama.cpp's converter stores Llama 3 rope scaling; if that tensor is absent but the
          metadata carries rope.scaling.type == "llama3" the divisors are computed from the
          metadata) -> GQA attention, scale 1/sqrt(head_dim) -> residual; RMSNorm ->
          down(silu(gate) * up) -> residual.
  qwen2   as llama, plus Q/K/V biases, RoPE NEOX.
  qwen3   as llama, plus per-head RMSNorm of Q and K before RoPE, RoPE NEOX.

Usage (CLI):
  python3 tools/reference/ref_forward.py MODEL.gguf --ids 2,9259,1902 [--positions -1] [--top 10]
  python3 tools/reference/ref_forward.py MODEL.gguf --ids-file ids.json --all --out logits.npy
As a library: `from ref_forward import RefModel; m = RefModel(path); m.forward(ids, positions)`.
"""
from __future__ import annotations

import argparse
import json
import math
import sys

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader
from gguf.quants import dequantize

ROPE_NORM = "norm"
ROPE_NEOX = "neox"


def _field(reader: GGUFReader, key: str, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    v = f.contents()
    return v


def rms_norm(x: np.ndarray, w: np.ndarray | None, eps: float) -> np.ndarray:
    """RMSNorm over the last axis: x / sqrt(mean(x^2) + eps) * w."""
    ms = np.mean(x * x, axis=-1, keepdims=True)
    y = x / np.sqrt(ms + eps)
    return y * w if w is not None else y


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def gelu_tanh_ggml_f16(x: np.ndarray) -> np.ndarray:
    """llama.cpp CPU's GELU (GGML_GELU_FP16): f16(gelu(f16(x))) from a table, x<=-10 -> 0, x>=10 -> x.
    Diagnostic only (to explain llama.cpp-vs-reference gaps); the reference uses gelu_tanh."""
    xh = x.astype(np.float16).astype(np.float64)
    y = gelu_tanh(xh).astype(np.float32).astype(np.float16).astype(np.float64)
    return np.where(x <= -10.0, 0.0, np.where(x >= 10.0, x, y))


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def llama3_rope_divisors(n_rot: int, base: float, factor: float, low_freq_factor: float,
                         high_freq_factor: float, orig_ctx: int) -> np.ndarray:
    """Per-frequency divisors d_i (theta_i = pos * base^(-2i/n_rot) / d_i) for Llama 3 scaling."""
    i = np.arange(n_rot // 2, dtype=np.float64)
    freqs = base ** (-2.0 * i / n_rot)
    wavelen = 2.0 * math.pi / freqs
    low_wavelen = orig_ctx / low_freq_factor
    high_wavelen = orig_ctx / high_freq_factor
    div = np.ones_like(freqs)
    for j, wl in enumerate(wavelen):
        if wl < high_wavelen:
            div[j] = 1.0
        elif wl > low_wavelen:
            div[j] = factor
        else:
            smooth = (orig_ctx / wl - low_freq_factor) / (high_freq_factor - low_freq_factor)
            div[j] = 1.0 / ((1.0 - smooth) / factor + smooth)
    return div


def apply_rope(x: np.ndarray, pos: np.ndarray, n_rot: int, base: float, freq_scale: float,
               mode: str, divisors: np.ndarray | None = None) -> np.ndarray:
    """Rotary embedding on x of shape (T, H, D); only the first n_rot dims of each head rotate."""
    T, H, D = x.shape
    half = n_rot // 2
    i = np.arange(half, dtype=np.float64)
    inv = base ** (-2.0 * i / n_rot)
    if divisors is not None:
        inv = inv / divisors
    theta = (pos.astype(np.float64)[:, None] * freq_scale) * inv[None, :]  # (T, half)
    c = np.cos(theta)[:, None, :]
    s = np.sin(theta)[:, None, :]
    out = x.copy()
    if mode == ROPE_NEOX:
        a = x[:, :, :half]
        b = x[:, :, half:n_rot]
    else:
        a = x[:, :, 0:n_rot:2]
        b = x[:, :, 1:n_rot:2]
    ra = a * c - b * s
    rb = a * s + b * c
    if mode == ROPE_NEOX:
        out[:, :, :half] = ra
        out[:, :, half:n_rot] = rb
    else:
        out[:, :, 0:n_rot:2] = ra
        out[:, :, 1:n_rot:2] = rb
    return out


class RefModel:
    """A GGUF model with weights dequantized once (lazily) and cached as float64."""

    def __init__(self, path: str):
        self.path = path
        self.reader = r = GGUFReader(path)
        self.arch = a = _field(r, "general.architecture")
        if a not in ("gemma3", "llama", "qwen2", "qwen3"):
            raise ValueError(f"unsupported architecture {a!r}")
        self.tensors = {t.name: t for t in r.tensors}
        self._cache: dict[str, np.ndarray] = {}

        g = lambda k, d=None: _field(r, f"{a}.{k}", d)  # noqa: E731
        self.n_layer = int(g("block_count"))
        self.d_model = int(g("embedding_length"))
        self.n_ff = int(g("feed_forward_length"))
        self.n_head = int(g("attention.head_count"))
        self.n_head_kv = int(g("attention.head_count_kv", self.n_head))
        self.head_dim = int(g("attention.key_length", self.d_model // self.n_head))
        self.head_dim_v = int(g("attention.value_length", self.head_dim))
        self.n_rot = int(g("rope.dimension_count", self.head_dim))
        self.eps = float(g("attention.layer_norm_rms_epsilon", 1e-5))
        self.rope_base = float(g("rope.freq_base", 10000.0))
        self.rope_scaling_type = g("rope.scaling.type")
        self.rope_freq_scale = 1.0
        if self.rope_scaling_type == "linear":
            self.rope_freq_scale = 1.0 / float(g("rope.scaling.factor", 1.0))
        elif self.rope_scaling_type not in (None, "none", "llama3"):
            raise ValueError(f"rope scaling {self.rope_scaling_type!r} not implemented")
        self.final_softcap = g("final_logit_softcapping")
        sw = g("attention.sliding_window")
        self.sliding_window = int(sw) if sw else None
        self.rope_mode = ROPE_NORM if a == "llama" else ROPE_NEOX

        # rope frequency divisors (llama 3 scaling): the tensor wins, metadata is the fallback
        self.rope_divisors = None
        if "rope_freqs.weight" in self.tensors:
            self.rope_divisors = self.w("rope_freqs.weight").reshape(-1)
        elif self.rope_scaling_type == "llama3":
            self.rope_divisors = llama3_rope_divisors(
                self.n_rot, self.rope_base, float(g("rope.scaling.factor")),
                float(g("rope.scaling.low_freq_factor", 1.0)),
                float(g("rope.scaling.high_freq_factor", 4.0)),
                int(g("rope.scaling.original_context_length")))

        # gemma3 local (sliding) layers: rope base 10000 and no scaling unless the file says otherwise
        self.local_rope_base = float(g("rope.freq_base_swa", 10000.0))
        self.gelu = gelu_tanh
        if a == "gemma3":
            pat = g("attention.sliding_window_pattern", 6)
            if not self.sliding_window:
                self.swa_layers = [False] * self.n_layer
            elif isinstance(pat, (list, tuple)):  # per-layer flags
                self.swa_layers = [bool(x) for x in pat]
            else:  # period N: layers il % N == N-1 are global (llama.cpp set_swa_pattern(N))
                pat = int(pat)
                self.swa_layers = [pat == 0 or il % pat < pat - 1 for il in range(self.n_layer)]
            self.attn_scale = (1.0 / math.sqrt(self.d_model / self.n_head) if self.n_layer == 62
                               else 1.0 / math.sqrt(self.head_dim))
        else:
            self.swa_layers = [False] * self.n_layer
            self.attn_scale = 1.0 / math.sqrt(self.head_dim)
        self.vocab = int(self.tensors["token_embd.weight"].shape[1])

    # -------------------------------------------------------------------------------- weights
    def w(self, name: str, dtype=np.float64) -> np.ndarray:
        """Dequantized tensor as a numpy array in (rows = ne1, cols = ne0) order."""
        key = f"{name}:{np.dtype(dtype).name}"
        if key in self._cache:
            return self._cache[key]
        t = self.tensors[name]
        qt = GGMLQuantizationType(t.tensor_type)
        if qt in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
            arr = np.asarray(t.data)
        else:
            arr = dequantize(np.asarray(t.data), qt)
        ne = [int(x) for x in t.shape]  # ne0 first
        arr = np.asarray(arr, dtype=dtype).reshape(list(reversed(ne)) if len(ne) > 1 else ne)
        self._cache[key] = arr
        return arr

    def has(self, name: str) -> bool:
        return name in self.tensors

    def embed_rows(self, ids) -> np.ndarray:
        e = self.w("token_embd.weight", np.float32)  # exact: dequantized values are f32 values
        return e[np.asarray(ids, dtype=np.int64)].astype(np.float64)

    def output_logits(self, h: np.ndarray, chunk: int = 32768) -> np.ndarray:
        """h (P, d) float64 -> logits (P, vocab) float64 (tied or separate output matrix)."""
        name = "output.weight" if self.has("output.weight") else "token_embd.weight"
        W = self.w(name, np.float32)
        out = np.empty((h.shape[0], W.shape[0]), dtype=np.float64)
        for s in range(0, W.shape[0], chunk):
            out[:, s:s + chunk] = h @ W[s:s + chunk].astype(np.float64).T
        if self.final_softcap:
            c = float(self.final_softcap)
            out = np.tanh(out / c) * c
        return out

    # -------------------------------------------------------------------------------- forward
    def _attention(self, q, k, v, pos, swa: bool):
        """q (T,H,D) already scaled, k (T,Hkv,D), v (T,Hkv,Dv) -> (T, H*Dv)."""
        T, H, D = q.shape
        Hkv = k.shape[1]
        group = H // Hkv
        qp = pos[:, None]
        kp = pos[None, :]
        mask = kp > qp
        if swa:
            mask = mask | (qp - kp >= int(self.sliding_window))
        out = np.empty((T, H, v.shape[2]), dtype=np.float64)
        for h in range(H):
            kh = k[:, h // group, :]
            vh = v[:, h // group, :]
            s = q[:, h, :] @ kh.T  # (T, T)
            s = np.where(mask, -np.inf, s)
            s = s - s.max(axis=1, keepdims=True)
            p = np.exp(s)
            p /= p.sum(axis=1, keepdims=True)
            out[:, h, :] = p @ vh
        return out.reshape(T, H * v.shape[2])

    def hidden(self, ids) -> np.ndarray:
        """Final-normed hidden states (T, d_model) float64 for the whole sequence."""
        ids = list(ids)
        T = len(ids)
        pos = np.arange(T)
        a = self.arch
        x = self.embed_rows(ids)
        if a == "gemma3":
            x = x * math.sqrt(self.d_model)
        H, Hkv, D, Dv = self.n_head, self.n_head_kv, self.head_dim, self.head_dim_v
        for il in range(self.n_layer):
            p = f"blk.{il}."
            h = rms_norm(x, self.w(p + "attn_norm.weight"), self.eps)
            q = h @ self.w(p + "attn_q.weight").T
            k = h @ self.w(p + "attn_k.weight").T
            v = h @ self.w(p + "attn_v.weight").T
            if self.has(p + "attn_q.bias"):
                q = q + self.w(p + "attn_q.bias")
            if self.has(p + "attn_k.bias"):
                k = k + self.w(p + "attn_k.bias")
            if self.has(p + "attn_v.bias"):
                v = v + self.w(p + "attn_v.bias")
            q = q.reshape(T, H, D)
            k = k.reshape(T, Hkv, D)
            v = v.reshape(T, Hkv, Dv)
            if self.has(p + "attn_q_norm.weight"):
                q = rms_norm(q, self.w(p + "attn_q_norm.weight"), self.eps)
            if self.has(p + "attn_k_norm.weight"):
                k = rms_norm(k, self.w(p + "attn_k_norm.weight"), self.eps)
            swa = self.swa_layers[il]
            if a == "gemma3" and swa:
                base, fscale = self.local_rope_base, 1.0
            else:
                base, fscale = self.rope_base, self.rope_freq_scale
            q = apply_rope(q, pos, self.n_rot, base, fscale, self.rope_mode, self.rope_divisors)
            k = apply_rope(k, pos, self.n_rot, base, fscale, self.rope_mode, self.rope_divisors)
            q = q * self.attn_scale
            att = self._attention(q, k, v, pos, swa)
            o = att @ self.w(p + "attn_output.weight").T
            if self.has(p + "attn_output.bias"):
                o = o + self.w(p + "attn_output.bias")
            if a == "gemma3":
                o = rms_norm(o, self.w(p + "post_attention_norm.weight"), self.eps)
            x = x + o
            h = rms_norm(x, self.w(p + "ffn_norm.weight"), self.eps)
            gate = h @ self.w(p + "ffn_gate.weight").T
            up = h @ self.w(p + "ffn_up.weight").T
            act = self.gelu(gate) if a == "gemma3" else silu(gate)
            f = (act * up) @ self.w(p + "ffn_down.weight").T
            if a == "gemma3":
                f = rms_norm(f, self.w(p + "post_ffw_norm.weight"), self.eps)
            x = x + f
        return rms_norm(x, self.w("output_norm.weight"), self.eps)

    def forward(self, ids, positions=None) -> np.ndarray:
        """Logits (len(positions), vocab) float64.  positions: list of ints (negative = from end);
        None = all positions."""
        hs = self.hidden(ids)
        T = hs.shape[0]
        if positions is None:
            positions = list(range(T))
        positions = [p % T for p in positions]
        return self.output_logits(hs[positions])

    def describe(self) -> dict:
        return {
            "arch": self.arch, "n_layer": self.n_layer, "d_model": self.d_model, "n_ff": self.n_ff,
            "n_head": self.n_head, "n_head_kv": self.n_head_kv, "head_dim": self.head_dim,
            "n_rot": self.n_rot, "eps": self.eps, "rope_base": self.rope_base,
            "rope_freq_scale": self.rope_freq_scale, "rope_mode": self.rope_mode,
            "rope_divisors": None if self.rope_divisors is None else "present",
            "sliding_window": self.sliding_window,
            "swa_layers": [i for i, s in enumerate(self.swa_layers) if s],
            "attn_scale": self.attn_scale, "final_softcap": self.final_softcap,
            "vocab": self.vocab,
        }


def log_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("--ids", help="comma-separated token ids (include BOS yourself)")
    ap.add_argument("--ids-file", help="JSON file with a list of token ids")
    ap.add_argument("--positions", default="-1", help="comma-separated positions (negative from end)")
    ap.add_argument("--all", action="store_true", help="all positions")
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--out", help="write the logits matrix to this .npy file")
    args = ap.parse_args(argv)
    if args.ids_file:
        ids = json.load(open(args.ids_file))
    else:
        ids = [int(s) for s in args.ids.split(",")]
    m = RefModel(args.model)
    print(json.dumps(m.describe()), file=sys.stderr)
    positions = None if args.all else [int(s) for s in args.positions.split(",")]
    logits = m.forward(ids, positions)
    if args.out:
        np.save(args.out, logits)
    T = len(ids)
    pl = list(range(T)) if positions is None else [p % T for p in positions]
    for row, p in zip(logits, pl):
        top = np.argsort(-row)[: args.top]
        print(json.dumps({"pos": p, "top": [[int(i), float(row[i])] for i in top]}))


if __name__ == "__main__":
    main()
