#!/usr/bin/env python3
"""Generate the quant test fixtures in tests/data/ from gguf-py (the PyPI `gguf` package).

Outputs (all in the EQFX container described below):

  tests/data/quant_real_rows.bin     rows of the real Gemma 3 270M Q4_K_M model, one or more
                                     tensors per type it holds (F32, Q8_0, Q5_0, Q4_K, Q6_K);
                                     the bytes stay in the model: each case records the absolute
                                     file offset, element count and an FNV-1a hash of the bytes,
                                     plus gguf-py's dequantized values.
  tests/data/quant_synth_blocks.bin  synthetic blocks of every supported weight type: random
                                     quant bytes with sane f16 scales, plus edge cases (zero,
                                     max, min-normal, subnormal, negative, Inf/NaN scales;
                                     all-zero / all-one / patterned quant bytes); all 65536 F16
                                     bit patterns; BF16 specials + random patterns.
  tests/data/quant_activations.bin   f32 rows and their activation encodings: F16 (numpy
                                     astype, RNE), BF16 and Q8_0 (gguf-py's quantizers, which
                                     follow ggml's reference bit for bit), Q8_1 and Q8_K
                                     (written here in numpy from ggml's reference quantizer
                                     arithmetic, since gguf-py has none).

Usage:  python3 tools/gen_quant_fixtures.py [path/to/gemma-3-270m-q4_k_m.gguf]
The script is deterministic (fixed seeds); rerunning it must reproduce the files byte for byte.

EQFX container (little endian):
  magic b"EQFX", u32 version (1), u32 case count, then per case:
    u8  kind      0 = dequantize (input: raw bytes of `type`, output: f32 values)
                  1 = quantize activation (input: f32 values, output: bytes of `type`)
    u16 label length, label (utf-8)
    u32 ggml type id
    u32 element count
    u64 absolute file offset of the input in the model, or 2^64-1 when the input is inline
    u64 FNV-1a 64 of the input bytes
    u32 inline input length, input bytes (empty when the input lives in the model)
    u32 output length, output bytes (f32 values are their little-endian bit patterns)
"""

import struct
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
NO_OFFSET = (1 << 64) - 1
F32 = np.float32


def fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def write_cases(path: Path, cases):
    out = bytearray(b"EQFX")
    out += struct.pack("<II", 1, len(cases))
    for c in cases:
        label = c["label"].encode()
        inline = c.get("input", b"")
        out += struct.pack("<BH", c["kind"], len(label)) + label
        out += struct.pack("<IIQQ", c["type"], c["n"], c.get("offset", NO_OFFSET), c["hash"])
        out += struct.pack("<I", len(inline)) + inline
        out += struct.pack("<I", len(c["output"])) + c["output"]
    path.write_bytes(bytes(out))
    print(f"wrote {path.relative_to(ROOT)}: {len(cases)} cases, {len(out)} bytes")


def dequant(raw: bytes, ty: T) -> np.ndarray:
    vals = gguf.quants.dequantize(np.frombuffer(raw, dtype=np.uint8).copy(), ty)
    vals = np.asarray(vals, dtype=np.float32).reshape(-1)
    assert vals.dtype == np.float32
    return vals


def dequant_case(label, ty: T, raw: bytes, offset=None):
    vals = dequant(raw, ty)
    case = {
        "kind": 0,
        "label": label,
        "type": int(ty),
        "n": int(vals.size),
        "hash": fnv1a64(raw),
        "output": vals.astype("<f4").tobytes(),
    }
    if offset is None:
        case["input"] = raw
    else:
        case["offset"] = offset
    return case


# ---------------------------------------------------------------- real model rows

# (tensor, rows) per type; rows include the first and last so an off-by-one-row offset shows.
REAL_PICKS = [
    ("output_norm.weight", [0]),
    ("blk.0.attn_k_norm.weight", [0]),
    ("blk.7.ffn_norm.weight", [0]),
    ("blk.17.post_ffw_norm.weight", [0]),
    ("token_embd.weight", [0, 2, 106, 131072, 262143]),
    ("blk.0.attn_v.weight", [0, 255]),
    ("blk.17.attn_v.weight", [128]),
    ("blk.0.attn_k.weight", [0, 255]),
    ("blk.0.attn_q.weight", [517]),
    ("blk.3.ffn_gate.weight", [2047]),
    ("blk.9.ffn_up.weight", [1000]),
    ("blk.0.attn_output.weight", [0, 639]),
    ("blk.2.ffn_down.weight", [0, 320]),
    ("blk.17.attn_output.weight", [411]),
    ("blk.14.ffn_down.weight", [639]),
    ("blk.0.ffn_down.weight", [0, 333, 639]),
    ("blk.1.ffn_down.weight", [100]),
    ("blk.17.ffn_down.weight", [1, 500]),
]


def real_cases(model: Path):
    reader = gguf.GGUFReader(str(model))
    by_name = {t.name: t for t in reader.tensors}
    cases = []
    seen_types = set()
    with open(model, "rb") as f:
        for name, rows in REAL_PICKS:
            t = by_name[name]
            ty = T(t.tensor_type)
            n = int(t.shape[0])  # ggml order: shape[0] is the row length
            block, tsize = gguf.GGML_QUANT_SIZES[ty]
            row_bytes = n // block * tsize
            for r in rows:
                off = int(t.data_offset) + r * row_bytes
                f.seek(off)
                raw = f.read(row_bytes)
                cases.append(dequant_case(f"{name}[{r}] {ty.name}", ty, raw, offset=off))
            seen_types.add(ty.name)
    # Every type the model holds must be covered.
    model_types = {T(t.tensor_type).name for t in reader.tensors}
    assert model_types <= seen_types, (model_types, seen_types)
    return cases


# ---------------------------------------------------------------- synthetic blocks

# Byte offsets of the f16 scale fields in each block (d first, then dmin / m where present).
SCALE_FIELDS = {
    T.Q4_0: [0],
    T.Q4_1: [0, 2],
    T.Q5_0: [0],
    T.Q5_1: [0, 2],
    T.Q8_0: [0],
    T.Q2_K: [80, 82],
    T.Q3_K: [108],
    T.Q4_K: [0, 2],
    T.Q5_K: [0, 2],
    T.Q6_K: [208],
}


def sane_f16(rng, count) -> np.ndarray:
    """Log-uniform magnitudes 1e-4..1e-1 with random sign, as f16 bit patterns."""
    mag = np.exp(rng.uniform(np.log(1e-4), np.log(1e-1), count)).astype(np.float16)
    sign = rng.integers(0, 2, count).astype(np.uint16) << 15
    return mag.view(np.uint16) | sign


def set_fields(blocks: np.ndarray, ty: T, values) -> None:
    """Write f16 bit patterns (one per field, or one array per field) into every block."""
    for field, v in zip(SCALE_FIELDS[ty], values):
        v = np.broadcast_to(np.asarray(v, dtype=np.uint16), (blocks.shape[0],))
        blocks[:, field : field + 2] = v.astype("<u2").view(np.uint8).reshape(-1, 2)


def fill_non_scale(blocks: np.ndarray, ty: T, byte: int) -> None:
    mask = np.ones(blocks.shape[1], dtype=bool)
    for field in SCALE_FIELDS[ty]:
        mask[field : field + 2] = False
    blocks[:, mask] = byte


def synth_cases():
    rng = np.random.default_rng(20240601)
    cases = []
    for ty in SCALE_FIELDS:
        block, tsize = gguf.GGML_QUANT_SIZES[ty]
        nf = len(SCALE_FIELDS[ty])
        n_rand = max(8, 2048 // block)  # 2048 values for 32-blocks, 8 super-blocks for k-quants

        def rand_blocks(k):
            return rng.integers(0, 256, (k, tsize), dtype=np.uint8)

        def add(label, blocks):
            cases.append(dequant_case(f"{ty.name} {label}", ty, blocks.tobytes()))

        b = rand_blocks(n_rand)
        set_fields(b, ty, [sane_f16(rng, n_rand) for _ in range(nf)])
        add("random quants, sane scales", b)

        # Scale edge cases: the same pattern in every scale field, random quants.
        edges = [
            ("zero scales", [0x0000]),
            ("negative zero scales", [0x8000]),
            ("max scales +65504", [0x7BFF]),
            ("max scales -65504", [0xFBFF]),
            ("min-normal scales", [0x0400, 0x8400]),
            ("subnormal scales", [0x0001, 0x03FF, 0x8001, 0x83FF, 0x0200]),
            ("one and minus one", [0x3C00, 0xBC00]),
            ("inf scales", [0x7C00, 0xFC00]),
            ("nan scales", [0x7E00, 0xFE00, 0x7C01]),
        ]
        for label, pats in edges:
            for p in pats:
                b = rand_blocks(2)
                set_fields(b, ty, [p] * nf)
                add(f"{label} ({p:#06x})", b)
        if nf == 2:
            # d and dmin/m set independently: a zero d with a live offset and vice versa,
            # and opposite signs.
            for dv, mv in [(0x0000, 0x2E66), (0x2E66, 0x0000), (0x2E66, 0xAE66), (0xFBFF, 0x7BFF)]:
                b = rand_blocks(2)
                set_fields(b, ty, [dv, mv])
                add(f"d={dv:#06x} dmin={mv:#06x}", b)

        # Quant-byte patterns (for k-quants this includes the packed sub-block scales).
        for byte in (0x00, 0xFF, 0xAA, 0x55, 0x0F, 0xF0):
            b = rand_blocks(2)
            fill_non_scale(b, ty, byte)
            set_fields(b, ty, [sane_f16(rng, 2) for _ in range(nf)])
            add(f"all quant bytes {byte:#04x}", b)

    # F16: every bit pattern, in order.
    all16 = np.arange(65536, dtype=np.uint32).astype("<u2")
    cases.append(dequant_case("F16 all 65536 bit patterns", T.F16, all16.tobytes()))
    # BF16: specials plus random patterns.
    specials = [0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x3F80, 0xBF80, 0x7F7F, 0xFF7F,
                0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0x7FFF]
    bf = np.concatenate([np.array(specials, dtype=np.uint16),
                         rng.integers(0, 65536, 4096 - len(specials), dtype=np.uint32).astype(np.uint16)])
    cases.append(dequant_case("BF16 specials and random patterns", T.BF16, bf.astype("<u2").tobytes()))
    # F32: identity, including NaN payloads and subnormals.
    f32bits = np.concatenate([
        np.array([0, 0x80000000, 1, 0x807FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001,
                  0xFFFFFFFF, 0x3F800000], dtype=np.uint32),
        rng.integers(0, 1 << 32, 246, dtype=np.uint64).astype(np.uint32)])
    cases.append(dequant_case("F32 specials and random patterns", T.F32, f32bits.astype("<u4").tobytes()))
    return cases


# ---------------------------------------------------------------- activations


def q8_1_ref(x: np.ndarray) -> bytes:
    """ggml quantize_row_q8_1_ref in numpy f32 arithmetic (d, qs as Q8_0; s = f16(sum * d))."""
    out = bytearray()
    for blk in x.reshape(-1, 32):
        amax = F32(0)
        for v in blk:
            a = F32(abs(v))
            amax = amax if amax > a else a
        d = F32(amax / F32(127))
        idv = F32(F32(1) / d) if d != 0 else F32(0)
        q = np.array([roundf(F32(v * idv)) for v in blk], dtype=np.int32)
        s = F32(F32(int(q.sum())) * d)
        out += np.array([d, s], dtype=np.float32).astype("<f2").tobytes()
        out += q.astype(np.int8).tobytes()
    return bytes(out)


def roundf(v: np.float32) -> int:
    """C roundf: half away from zero (exact for f32 inputs: the floor/compare are exact)."""
    a = abs(float(v))
    r = np.floor(a)
    if a - r >= 0.5:
        r += 1
    return int(-r if v < 0 else r)


def nearest_int(v: np.float32) -> int:
    """ggml nearest_int: add 1.5 * 2^23 in f32 and read the low mantissa bits (RNE)."""
    val = np.array([F32(v) + F32(12582912.0)], dtype=np.float32)
    i = int(val.view(np.int32)[0])
    return (i & 0x007FFFFF) - 0x00400000


def q8_k_ref(x: np.ndarray) -> bytes:
    """ggml quantize_row_q8_K_ref in numpy f32 arithmetic."""
    out = bytearray()
    for blk in x.reshape(-1, 256):
        amax = F32(0)
        mx = F32(0)
        for v in blk:
            a = F32(abs(v))
            if a > amax:
                amax, mx = a, F32(v)
        if amax == 0:
            out += bytes(292)  # d = 0, quants 0; bsums written as 0 (the reference leaves them)
            continue
        iscale = F32(F32(-127.0) / mx)
        q = np.array([min(127, nearest_int(F32(iscale * v))) for v in blk], dtype=np.int32)
        bsums = q.reshape(16, 16).sum(axis=1)
        out += struct.pack("<f", float(F32(F32(1.0) / iscale)))
        out += q.astype(np.int8).tobytes()
        out += bsums.astype("<i2").tobytes()
    return bytes(out)


def activation_rows(rng):
    """(label, f32 row of 1024 values) pairs covering the quantizers' corner cases."""
    n = 1024
    rows = [
        ("normal", rng.standard_normal(n).astype(F32)),
        ("normal with outliers", (rng.standard_normal(n) * np.where(rng.random(n) < 0.01, 60, 1)).astype(F32)),
        ("uniform small", rng.uniform(-1e-3, 1e-3, n).astype(F32)),
        ("all zero", np.zeros(n, dtype=F32)),
        ("negative zeros", np.full(n, -0.0, dtype=F32)),
        ("tiny (f16 underflow of d)", (rng.standard_normal(n) * 1e-30).astype(F32)),
        ("huge (f16 overflow of d)", (rng.standard_normal(n) * 1e30).astype(F32)),
        ("f32 subnormals", (rng.standard_normal(n) * 1e-42).astype(F32)),
        ("one nonzero per block", np.where(np.arange(n) % 256 == 7, F32(3.5), F32(0)).astype(F32)),
    ]
    # Rounding ties: with |max| = 127 per block, d = 1 and every x.5 is an exact tie.
    ties = np.tile(np.arange(-63.5, 64.5, 1.0, dtype=F32), n // 128)[:n]
    ties[::32] = 127.0  # block max for 32-blocks
    ties[::256] = -127.0  # and a negative max for the 256-blocks
    rows.append(("exact .5 ties", ties.astype(F32)))
    # Half-way f16 values around several binades, to pin RNE in f32->f16 (and bf16 likewise).
    base = rng.integers(0x3000, 0x7800, n // 2, dtype=np.uint32).astype(np.uint16).view(np.float16)
    mid16 = base.astype(F32).view(np.uint32) + (1 << 12)  # exactly half an f16 ulp above
    mid_bf = (base.astype(F32).view(np.uint32) & 0xFFFF0000) | 0x8000  # half a bf16 ulp above
    rows.append(("f16/bf16 midpoints", np.concatenate([mid16, mid_bf]).view(F32).astype(F32)))
    # Magnitudes straddling the f16 range ends.
    edge = np.concatenate([
        np.geomspace(1e-9, 1e-4, n // 4), -np.geomspace(1e-9, 1e-4, n // 4),
        np.geomspace(6e4, 7e4, n // 4), -np.geomspace(6e4, 7e4, n // 4)]).astype(F32)
    rows.append(("f16 range ends", edge))
    specials = rng.standard_normal(n).astype(F32)
    specials[:4] = [np.inf, -np.inf, np.nan, F32(3.4e38)]
    rows.append(("inf/nan/max (float types only)", specials))
    return rows


def activation_cases():
    rng = np.random.default_rng(777)
    cases = []
    for label, x in activation_rows(rng):
        x = np.ascontiguousarray(x, dtype=np.float32)
        raw = x.astype("<f4").tobytes()

        def add(ty: T, out: bytes):
            cases.append({"kind": 1, "label": f"{ty.name} {label}", "type": int(ty), "n": x.size,
                          "hash": fnv1a64(raw), "input": raw, "output": out})

        add(T.F16, x.astype(np.float16).astype("<f2").tobytes())
        add(T.BF16, gguf.quants.quantize(x.reshape(1, -1), T.BF16).tobytes())
        if "nan" in label or "subnormal" in label:
            # Integer quantizers: NaN/Inf inputs, and blocks so small that 1/d overflows to
            # Inf, end in a float->int8 conversion of Inf/NaN, undefined behaviour in ggml's C.
            continue
        add(T.Q8_0, gguf.quants.quantize(x.reshape(1, -1), T.Q8_0).tobytes())
        add(T.Q8_1, q8_1_ref(x))
        add(T.Q8_K, q8_k_ref(x))
    return cases


def main():
    model = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "models" / "gemma-3-270m-q4_k_m.gguf"
    # Inf/NaN scales and overflowing f16 casts are deliberate cases: keep numpy quiet about them.
    np.seterr(all="ignore")
    DATA.mkdir(parents=True, exist_ok=True)
    write_cases(DATA / "quant_real_rows.bin", real_cases(model))
    write_cases(DATA / "quant_synth_blocks.bin", synth_cases())
    write_cases(DATA / "quant_activations.bin", activation_cases())


if __name__ == "__main__":
    main()
