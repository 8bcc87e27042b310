//! Models that cannot be run are refused with typed errors, never a panic.

mod engine_common;

use edgellm::gguf::{load_bytes, load_file, GgmlType, GgufWriter, Value};
use edgellm::model::{ForwardScratch, LogitRows, Model};

/// tiny_llama.gguf re-encoded through `edit(name, dims, type, bytes) -> Option<replacement>`
/// (None drops the tensor) and with metadata `md` overridden.
fn rebuilt(
    md: &[(&str, Value)],
    edit: impl Fn(&str, &[u64], GgmlType, &[u8]) -> Option<(Vec<u64>, GgmlType, Vec<u8>)>,
) -> Result<Model, edgellm::model::ModelError> {
    let store = load_file(engine_common::data("tiny_llama.gguf")).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in &store.header.metadata {
        let v = md.iter().find(|(mk, _)| mk == k).map_or(v.clone(), |(_, mv)| mv.clone());
        w.metadata(k.clone(), v);
    }
    for (info, bytes) in store.iter() {
        if let Some((dims, ty, data)) = edit(&info.name, &info.dims, info.ggml_type, bytes) {
            w.tensor(info.name.clone(), &dims, ty, data);
        }
    }
    Model::from_store(load_bytes(&w.to_bytes().unwrap()).unwrap())
}

/// tiny_llama.gguf with tensors `extra` (name, dims, f32 values) added.
fn with_tensors(extra: &[(&str, Vec<u64>, Vec<f32>)]) -> Result<Model, edgellm::model::ModelError> {
    let store = load_file(engine_common::data("tiny_llama.gguf")).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in &store.header.metadata {
        w.metadata(k.clone(), v.clone());
    }
    for (info, bytes) in store.iter() {
        w.tensor(info.name.clone(), &info.dims, info.ggml_type, bytes.to_vec());
    }
    for (name, dims, vals) in extra {
        w.tensor(name.to_string(), dims, GgmlType::F32, vals.iter().flat_map(|v| v.to_le_bytes()).collect());
    }
    Model::from_store(load_bytes(&w.to_bytes().unwrap()).unwrap())
}

fn last_logits(m: &Model, ids: &[u32]) -> Vec<f32> {
    let mut kv = m.new_kv_cache(ids.len());
    let mut out = Vec::new();
    m.forward(ids, &mut kv, &mut ForwardScratch::default(), LogitRows::Last, &mut out).unwrap();
    out
}

#[test]
fn a_tensor_the_graph_does_not_use_is_refused_not_ignored() {
    // llama.cpp refuses these files too ("wrong number of tensors"); ignoring one gave silently
    // different numbers (an output bias, a bias of a graph without one).
    let plain = with_tensors(&[]).unwrap();
    let (d, v) = (plain.hparams().n_embd as u64, plain.n_vocab() as u64);
    for (name, dims) in [("output.bias", vec![v]), ("blk.0.ffn_norm.bias", vec![d]), ("blk.0.something.weight", vec![d])] {
        let e = with_tensors(&[(name, dims.clone(), vec![0.5; dims[0] as usize])]).unwrap_err();
        assert_eq!(e.code(), "UNSUPPORTED_MODEL", "{name}: {e}");
        assert!(e.to_string().contains(name), "{e}");
    }
}

#[test]
fn llama_ffn_biases_are_added() {
    let plain = with_tensors(&[]).unwrap();
    let (d, f) = (plain.hparams().n_embd, plain.hparams().n_ff);
    let biases = |x: f32| -> Vec<(&'static str, Vec<u64>, Vec<f32>)> {
        vec![
            ("blk.0.ffn_gate.bias", vec![f as u64], vec![x; f]),
            ("blk.0.ffn_up.bias", vec![f as u64], vec![x; f]),
            ("blk.1.ffn_down.bias", vec![d as u64], vec![x; d]),
        ]
    };
    let ids = [1, 5, 9, 2];
    // Zero biases change nothing, bit for bit; others change the logits.
    assert_eq!(last_logits(&with_tensors(&biases(0.0)).unwrap(), &ids), last_logits(&plain, &ids));
    assert_ne!(last_logits(&with_tensors(&biases(0.25)).unwrap(), &ids), last_logits(&plain, &ids));
}

fn same(_: &str, d: &[u64], t: GgmlType, b: &[u8]) -> Option<(Vec<u64>, GgmlType, Vec<u8>)> {
    Some((d.to_vec(), t, b.to_vec()))
}

#[test]
fn unchanged_copy_loads_and_runs() {
    let m = rebuilt(&[], same).unwrap();
    let mut kv = m.new_kv_cache(4);
    let mut out = Vec::new();
    m.forward(&[1, 2, 3], &mut kv, &mut ForwardScratch::default(), LogitRows::Last, &mut out).unwrap();
    assert_eq!(out.len(), m.n_vocab());
    assert!(out.iter().all(|v| v.is_finite()));
}

#[test]
fn unsupported_architecture() {
    let e = rebuilt(&[("general.architecture", Value::String("mamba".into()))], same).unwrap_err();
    assert_eq!(e.code(), "UNSUPPORTED_MODEL");
}

#[test]
fn missing_tensor() {
    let e = rebuilt(&[], |n, d, t, b| (n != "blk.1.ffn_up.weight").then(|| (d.to_vec(), t, b.to_vec()))).unwrap_err();
    assert_eq!(e.code(), "MISSING_TENSOR");
    assert!(e.to_string().contains("blk.1.ffn_up.weight"), "{e}");
}

#[test]
fn wrong_shape() {
    // attn_q as [64, 128] instead of [64, 256] (bytes cut to match, so the file is valid).
    let e = rebuilt(&[], |n, d, t, b| {
        if n == "blk.0.attn_q.weight" {
            Some((vec![d[0], d[1] / 2], t, b[..b.len() / 2].to_vec()))
        } else {
            Some((d.to_vec(), t, b.to_vec()))
        }
    })
    .unwrap_err();
    assert_eq!(e.code(), "BAD_TENSOR_SHAPE");
}

#[test]
fn unsupported_tensor_type() {
    // IQ4_NL blocks have Q4_0's size (32 elements, 18 bytes): a valid file this engine cannot run.
    let e = rebuilt(&[], |n, d, t, b| {
        let t = if n == "blk.0.attn_q.weight" { GgmlType::IQ4_NL } else { t };
        Some((d.to_vec(), t, b.to_vec()))
    })
    .unwrap_err();
    assert_eq!(e.code(), "UNSUPPORTED_TENSOR_TYPE");
    assert!(e.to_string().contains("blk.0.attn_q.weight"), "{e}");
}

#[test]
fn missing_hyper_parameter() {
    let store = load_file(engine_common::data("tiny_llama.gguf")).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in store.header.metadata.iter().filter(|(k, _)| k != "llama.attention.layer_norm_rms_epsilon") {
        w.metadata(k.clone(), v.clone());
    }
    for (info, bytes) in store.iter() {
        w.tensor(info.name.clone(), &info.dims, info.ggml_type, bytes.to_vec());
    }
    let e = Model::from_store(load_bytes(&w.to_bytes().unwrap()).unwrap()).unwrap_err();
    assert_eq!(e.code(), "BAD_METADATA");
}

#[test]
fn forward_refuses_bad_requests() {
    let m = rebuilt(&[], same).unwrap();
    let mut kv = m.new_kv_cache(4);
    let mut s = ForwardScratch::default();
    let mut out = Vec::new();
    let e = m.forward(&[1, 384], &mut kv, &mut s, LogitRows::Last, &mut out).unwrap_err();
    assert_eq!(e.code(), "BAD_TOKEN_ID");
    assert_eq!(m.forward(&[], &mut kv, &mut s, LogitRows::Last, &mut out).unwrap_err().code(), "BAD_REQUEST");
    assert_eq!(m.forward(&[1, 2], &mut kv, &mut s, LogitRows::Rows(&[2]), &mut out).unwrap_err().code(), "BAD_REQUEST");
    assert_eq!(m.forward(&[1; 5], &mut kv, &mut s, LogitRows::Last, &mut out).unwrap_err().code(), "CONTEXT_FULL");
    assert_eq!(kv.len(), 0);
    // A cache shaped for another model is refused.
    let (other, _) = engine_common::load("tiny_gemma3.gguf");
    let mut wrong = other.new_kv_cache(4);
    assert_eq!(m.forward(&[1], &mut wrong, &mut s, LogitRows::Last, &mut out).unwrap_err().code(), "BAD_REQUEST");
}

/// `bytes` with the f16 at `at` set to NaN.
fn nan_f16_at(bytes: &[u8], at: usize) -> Vec<u8> {
    let mut b = bytes.to_vec();
    b[at..at + 2].copy_from_slice(&0x7e00u16.to_le_bytes());
    b
}

#[test]
fn nan_in_a_norm_or_rope_factor_is_refused_at_load() {
    for name in ["output_norm.weight", "blk.1.ffn_norm.weight", "rope_freqs.weight"] {
        let e = rebuilt(&[], |n, d, t, b| {
            let mut b = b.to_vec();
            if n == name {
                b[8..12].copy_from_slice(&f32::NAN.to_le_bytes());
            }
            Some((d.to_vec(), t, b))
        })
        .unwrap_err();
        assert_eq!(e.code(), "BAD_TENSOR_DATA", "{name}: {e}");
        assert!(e.to_string().contains(name), "{e}");
    }
}

#[test]
fn nan_scale_in_the_screened_head_is_refused_at_load() {
    // output.weight is Q8_0 (34-byte blocks), re-laid out for the screen at load.
    let e = rebuilt(&[], |n, d, t, b| Some((d.to_vec(), t, if n == "output.weight" { nan_f16_at(b, 34 * 5) } else { b.to_vec() }))).unwrap_err();
    assert_eq!(e.code(), "BAD_TENSOR_DATA", "{e}");
}

/// A NaN scale in one token's embedding row: the model loads, a batch with that token fails
/// with a typed error, and the cache is as before it (the next batches run as on a clean model).
#[test]
fn nan_reached_at_run_time_is_typed_and_loses_nothing() {
    let bad_token = 383u32;
    // token_embd is Q4_0: 64 values per row = two 18-byte blocks.
    let m = rebuilt(&[], |n, d, t, b| Some((d.to_vec(), t, if n == "token_embd.weight" { nan_f16_at(b, 36 * bad_token as usize) } else { b.to_vec() }))).unwrap();
    let clean = rebuilt(&[], same).unwrap();
    let mut s = ForwardScratch::default();
    let (mut kv, mut kv_clean) = (m.new_kv_cache(8), clean.new_kv_cache(8));
    let (mut out, mut want) = (Vec::new(), Vec::new());
    m.forward(&[1, 2, 3], &mut kv, &mut s, LogitRows::Last, &mut out).unwrap();
    let e = m.forward(&[4, bad_token], &mut kv, &mut s, LogitRows::Last, &mut out).unwrap_err();
    assert_eq!(e.code(), "MODEL_NON_FINITE", "{e}");
    assert_eq!(kv.len(), 3, "the failed batch left nothing in the cache");
    m.forward(&[4, 5], &mut kv, &mut s, LogitRows::Last, &mut out).unwrap();
    clean.forward(&[1, 2, 3], &mut kv_clean, &mut s, LogitRows::Last, &mut want).unwrap();
    clean.forward(&[4, 5], &mut kv_clean, &mut s, LogitRows::Last, &mut want).unwrap();
    assert_eq!(out, want);
}

/// A NaN inside a layer's weights (one block scale of a quantized matrix, or one element of a
/// float one) makes that matmul's output NaN; the next matmul quantizes its input, and a NaN
/// dropped there would vanish (the model ran on, answering finite but wrong logits). It reaches
/// the residual stream instead: the load's calibration pass or the first forward pass fails
/// with MODEL_NON_FINITE.
#[test]
fn a_nan_inside_a_layer_cannot_hide_behind_the_activation_quantizer() {
    let store = load_file(engine_common::data("tiny_llama.gguf")).unwrap();
    let mut poisoned = 0;
    for (info, _) in store.iter() {
        let name = info.name.clone();
        let inner = name.starts_with("blk.") && name.ends_with(".weight") && !name.contains("norm");
        if !inner {
            continue;
        }
        let m = rebuilt(&[], |n, d, t, b| {
            let mut b = b.to_vec();
            if n == name {
                let nan16 = 0x7e00u16.to_le_bytes();
                match t {
                    GgmlType::F32 => b[4..8].copy_from_slice(&f32::NAN.to_le_bytes()),
                    // Q6_K's block ends with its f16 scale (ql 128, qh 64, scales 16, d).
                    GgmlType::Q6_K => b[208..210].copy_from_slice(&nan16),
                    // F16 and the other block types here start with an f16 (value or scale).
                    _ => b[0..2].copy_from_slice(&nan16),
                }
            }
            Some((d.to_vec(), t, b))
        });
        // The load's own pass (the screened head's calibration text) may meet it first.
        let code = match m {
            Err(e) => e.code().to_string(),
            Ok(m) => {
                let mut kv = m.new_kv_cache(8);
                let mut out = Vec::new();
                m.forward(&[1, 2, 3, 4, 5, 6], &mut kv, &mut ForwardScratch::default(), LogitRows::Last, &mut out).map_or_else(|e| e.code().to_string(), |_| format!("ran: {:?}", &out[..3]))
            }
        };
        assert_eq!(code, "MODEL_NON_FINITE", "{name} ({:?})", info.ggml_type);
        poisoned += 1;
    }
    assert!(poisoned >= 7, "every layer matrix of the tiny model was tried: {poisoned}");
}
