//! Activation quantizers, byte-exact against the fixture tests/data/quant_activations.bin:
//! F16 from numpy's astype (RNE), BF16 and Q8_0 from gguf-py's quantizers (which follow ggml's
//! reference bit for bit), Q8_1 and Q8_K from the generator's numpy transcription of ggml's
//! reference arithmetic (`quantize_row_q8_1_ref`, `quantize_row_q8_K_ref`).

mod common;
mod quant_fixture;

use edgellm::gguf::GgmlType;
use edgellm::quant::{dequantize, quantize_activation};
use quant_fixture::{f32s, fnv1a64, load, Rng, Tally};

#[test]
fn activation_quantizers_match_fixture_bytes() {
    let cases = load(&common::data("quant_activations.bin"));
    let mut tally = Tally::default();
    let mut out = Vec::new();
    for c in &cases {
        assert_eq!(c.kind, 1, "{}", c.label);
        assert_eq!(
            fnv1a64(&c.input),
            c.input_hash,
            "{}: fixture corrupted",
            c.label
        );
        let x = f32s(&c.input);
        assert_eq!(x.len(), c.n);
        quantize_activation(c.ty, &x, &mut out).unwrap_or_else(|e| panic!("{}: {e}", c.label));
        assert_eq!(out.len(), c.output.len(), "{}: length", c.label);
        if out != c.output {
            let i = out
                .iter()
                .zip(c.output.iter())
                .position(|(a, b)| a != b)
                .unwrap();
            let bs = c.ty.type_size() as usize;
            panic!(
                "{}: first differing byte {i} (block {}, byte {} of {bs}): got {:#04x} want {:#04x}",
                c.label,
                i / bs,
                i % bs,
                out[i],
                c.output[i]
            );
        }
        tally.add(c.ty, c.n);
    }
    tally.print("activations");
    for ty in [
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::Q8_0,
        GgmlType::Q8_1,
        GgmlType::Q8_K,
    ] {
        let (cases, _) = tally.0.get(ty.name()).copied().unwrap_or_default();
        assert!(cases >= 10, "{ty}: only {cases} activation cases");
    }
}

/// Q8_1 carries the same `d` and quants as Q8_0 (plus `s`), and `s` is f16(d * Σq) with the
/// unrounded d: checked on random rows independently of the fixture.
#[test]
fn q8_1_agrees_with_q8_0_and_its_sum() {
    let mut rng = Rng(11);
    let x: Vec<f32> = (0..4096).map(|_| rng.normal() * 3.0).collect();
    let (mut a0, mut a1) = (Vec::new(), Vec::new());
    quantize_activation(GgmlType::Q8_0, &x, &mut a0).unwrap();
    quantize_activation(GgmlType::Q8_1, &x, &mut a1).unwrap();
    for ((b0, b1), xb) in a0
        .chunks_exact(34)
        .zip(a1.chunks_exact(36))
        .zip(x.chunks_exact(32))
    {
        assert_eq!(b0[0..2], b1[0..2]);
        assert_eq!(b0[2..34], b1[4..36]);
        let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
        let sum: i32 = b1[4..36].iter().map(|&q| q as i8 as i32).sum();
        let s = edgellm::quant::f32_to_f16(sum as f32 * (amax / 127.0));
        assert_eq!(u16::from_le_bytes([b1[2], b1[3]]), s);
    }
}

/// Q8_K invariants on random rows: bsums are the sums of their 16 quants, quants within
/// [-127, 127], the largest-magnitude element maps to -127 (d carries the sign), and
/// dequantization is within d/2 of the input.
#[test]
fn q8_k_invariants() {
    let mut rng = Rng(12);
    let x: Vec<f32> = (0..256 * 16)
        .map(|i| rng.normal() * (1 + i % 7) as f32)
        .collect();
    let mut a = Vec::new();
    quantize_activation(GgmlType::Q8_K, &x, &mut a).unwrap();
    let mut back = vec![0f32; x.len()];
    dequantize(GgmlType::Q8_K, &a, &mut back).unwrap();
    for (bi, (b, xb)) in a.chunks_exact(292).zip(x.chunks_exact(256)).enumerate() {
        let d = f32::from_le_bytes(b[0..4].try_into().unwrap());
        let qs: Vec<i32> = b[4..260].iter().map(|&q| q as i8 as i32).collect();
        for j in 0..16 {
            let bsum = i16::from_le_bytes([b[260 + 2 * j], b[261 + 2 * j]]) as i32;
            assert_eq!(bsum, qs[16 * j..16 * j + 16].iter().sum::<i32>());
        }
        assert!(qs.iter().all(|&q| (-127..=127).contains(&q)));
        let imax = (0..256).fold(0, |m, i| if xb[i].abs() > xb[m].abs() { i } else { m });
        assert_eq!(qs[imax], -127);
        assert_eq!(d.is_sign_negative(), xb[imax] > 0.0);
        for i in 0..256 {
            let err = (back[bi * 256 + i] - xb[i]).abs();
            assert!(
                err <= d.abs() * 0.5 * (1.0 + 1e-5),
                "block {bi} [{i}] err {err} d {d}"
            );
        }
    }
}
