//! Dequantization of real rows of the default model (Gemma 3 270M Q4_K_M: F32, Q8_0, Q5_0,
//! Q4_K, Q6_K), bit-exact against gguf-py. The fixture (tests/data/quant_real_rows.bin) holds
//! each row's absolute file offset, element count, an FNV-1a hash of its bytes and gguf-py's
//! values; the bytes themselves are read from the model, so the test skips when it is absent.

mod common;
mod quant_fixture;

use edgellm::gguf::GgmlType;
use edgellm::quant::{dequantize, quantize_activation, vec_dot, vec_dot_type};
use quant_fixture::{assert_bits_eq, f32s, fnv1a64, load, Rng, Tally};
use std::io::{Read, Seek, SeekFrom};

fn read_at(f: &mut std::fs::File, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    f.seek(SeekFrom::Start(offset)).unwrap();
    f.read_exact(&mut buf).unwrap();
    buf
}

/// (case label, type, row bytes, gguf-py values).
type RealRow = (String, GgmlType, Vec<u8>, Vec<f32>);

/// Every fixture row, read from the model (None when the model is absent).
fn real_rows() -> Option<Vec<RealRow>> {
    let model = common::real_model()?;
    let mut f = std::fs::File::open(&model).unwrap();
    let mut rows = Vec::new();
    for c in load(&common::data("quant_real_rows.bin")) {
        let offset = c
            .offset
            .unwrap_or_else(|| panic!("{}: real case without offset", c.label));
        let len = c.ty.bytes_for(c.n as u64).unwrap() as usize;
        let raw = read_at(&mut f, offset, len);
        assert_eq!(
            fnv1a64(&raw),
            c.input_hash,
            "{}: bytes at offset {offset} differ from the fixture's (different model file?)",
            c.label
        );
        rows.push((c.label, c.ty, raw, f32s(&c.output)));
    }
    Some(rows)
}

#[test]
fn real_model_rows_dequantize_bit_exactly_like_gguf_py() {
    let Some(rows) = real_rows() else { return };
    let mut tally = Tally::default();
    for (label, ty, raw, want) in &rows {
        let mut got = vec![0f32; want.len()];
        dequantize(*ty, raw, &mut got).unwrap_or_else(|e| panic!("{label}: {e}"));
        tally.add(*ty, assert_bits_eq(label, &got, want));
    }
    tally.print("real model");
    for ty in [
        GgmlType::F32,
        GgmlType::Q8_0,
        GgmlType::Q5_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
    ] {
        let (cases, values) = tally.0.get(ty.name()).copied().unwrap_or_default();
        assert!(
            cases >= 3 && values >= 640,
            "{ty}: only {cases} rows / {values} values"
        );
    }
}

/// vec_dot on real weights against a random activation agrees with the f64 dot of the
/// dequantized weights and the dequantized (quantized) activation. Tolerance: a few f32
/// roundings per term plus one per block accumulation, `(8 + blocks) * 2^-23 * Σ|w_i a_i|`
/// (`2^-23 * Σ|w_i a_i|` for F32 rows, which are summed in f64; the model has no Q4_1/Q5_1,
/// whose f16 `s` term would need more).
#[test]
fn real_model_rows_vec_dot_matches_dequantized_dot() {
    let Some(rows) = real_rows() else { return };
    let mut rng = Rng(7);
    for (label, ty, raw, w) in &rows {
        let n = w.len();
        let x: Vec<f32> = (0..n).map(|_| rng.normal()).collect();
        let a_ty = vec_dot_type(*ty);
        let mut act = Vec::new();
        quantize_activation(a_ty, &x, &mut act).unwrap();
        let mut a = vec![0f32; n];
        dequantize(a_ty, &act, &mut a).unwrap();
        let got = vec_dot(*ty, raw, &act, n).unwrap() as f64;
        let (mut want, mut abs) = (0f64, 0f64);
        for (wi, ai) in w.iter().zip(a.iter()) {
            want += *wi as f64 * *ai as f64;
            abs += (*wi as f64 * *ai as f64).abs();
        }
        let blocks = if ty.block_size() == 1 {
            0.0
        } else {
            (n as u64 / ty.block_size()) as f64
        };
        let tol = (if blocks == 0.0 { 1.0 } else { 8.0 + blocks }) * f32::EPSILON as f64 * abs;
        assert!(
            (got - want).abs() <= tol,
            "{label}: vec_dot {got} vs {want} (tol {tol:e})"
        );
    }
}
