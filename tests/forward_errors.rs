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
