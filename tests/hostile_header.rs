//! Headers whose values would size something absurd (issue 17's classes, found by mutation
//! fuzzing): each is refused with a typed error, by model construction and by the memory
//! estimate that runs before any download — never a panic, a huge allocation or a long loop.

mod engine_common;

use edgellm::gguf::{load_bytes, load_file, GgmlType, GgufWriter, Value};
use edgellm::host::{EstimateRequest, Host};
use edgellm::kv::KvOptions;
use edgellm::model::Model;

/// tiny_llama.gguf re-encoded with metadata `md` overridden (added when absent) and tensors
/// passed through `edit` (None drops one).
fn crafted(md: &[(&str, Value)], edit: impl Fn(&str, &[u64], GgmlType, &[u8]) -> Option<(Vec<u64>, GgmlType, Vec<u8>)>) -> Vec<u8> {
    let store = load_file(engine_common::data("tiny_llama.gguf")).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in &store.header.metadata {
        let v = md.iter().find(|(mk, _)| mk == k).map_or(v.clone(), |(_, mv)| mv.clone());
        w.metadata(k.clone(), v);
    }
    for (k, v) in md {
        if !store.header.metadata.iter().any(|(mk, _)| mk == k) {
            w.metadata(*k, v.clone());
        }
    }
    for (info, bytes) in store.iter() {
        if let Some((dims, ty, data)) = edit(&info.name, &info.dims, info.ggml_type, bytes) {
            w.tensor(info.name.clone(), &dims, ty, data);
        }
    }
    w.to_bytes().unwrap()
}

fn same(_: &str, d: &[u64], t: GgmlType, b: &[u8]) -> Option<(Vec<u64>, GgmlType, Vec<u8>)> {
    Some((d.to_vec(), t, b.to_vec()))
}

/// The code of the model build and of the streamed estimate (both must refuse alike).
fn codes(bytes: &[u8]) -> (String, String) {
    let model = match Model::from_store(load_bytes(bytes).unwrap()) {
        Ok(_) => "OK".to_string(),
        Err(e) => e.code().to_string(),
    };
    let mut h = Host::new();
    h.estimate_begin();
    h.estimate_push(bytes).unwrap();
    let est = match h.estimate_finish(Some(bytes.len() as u64), &EstimateRequest::default()) {
        Ok(_) => "OK".to_string(),
        Err(e) => e.code,
    };
    (model, est)
}

fn both(bytes: &[u8], code: &str) {
    assert_eq!(codes(bytes), (code.to_string(), code.to_string()));
}

#[test]
fn the_unchanged_copy_passes_both() {
    both(&crafted(&[], same), "OK");
}

#[test]
fn an_empty_vocabulary_is_refused() {
    // token_embd with dims[1] = 0 used to divide by zero (model/mod.rs) and kill the engine.
    let bytes = crafted(&[], |n, d, t, b| {
        if n == "token_embd.weight" || n == "output.weight" {
            Some((vec![d[0], 0], t, Vec::new()))
        } else {
            Some((d.to_vec(), t, b.to_vec()))
        }
    });
    both(&bytes, "BAD_METADATA");
}

#[test]
fn a_block_count_the_tensors_do_not_back_is_refused() {
    // 2^40 blocks: `vec![false; n_layer]` and per-layer estimate vectors used to abort.
    for v in [Value::U64(1 << 40), Value::U32(u32::MAX), Value::U64(u64::MAX)] {
        both(&crafted(&[("llama.block_count", v)], same), "BAD_METADATA");
    }
    // Within the cap but one block more than the file has, or one fewer.
    let (h, _) = edgellm::gguf::read_header_file(engine_common::data("tiny_llama.gguf")).unwrap();
    let n = h.get("llama.block_count").and_then(|v| v.as_u64()).unwrap();
    both(&crafted(&[("llama.block_count", Value::U32(n as u32 + 1))], same), "BAD_METADATA");
    both(&crafted(&[("llama.block_count", Value::U32(n as u32 - 1))], same), "BAD_METADATA");
}

#[test]
fn zero_or_inconsistent_head_sizes_are_refused() {
    // value_length = 0 used to panic in kv/mod.rs ("chunk size must be non-zero").
    both(&crafted(&[("llama.attention.value_length", Value::U32(0))], same), "BAD_METADATA");
    both(&crafted(&[("llama.attention.key_length", Value::U32(0))], same), "BAD_METADATA");
    // Huge: the row width would wrap on wasm32.
    both(&crafted(&[("llama.attention.value_length", Value::U64(1 << 40))], same), "BAD_METADATA");
    // Plausible but not what the tensors hold: refused by shape before the estimate sizes
    // buffers with it.
    let (h, _) = edgellm::gguf::read_header_file(engine_common::data("tiny_llama.gguf")).unwrap();
    let v = h.get("llama.attention.value_length").and_then(|v| v.as_u64()).unwrap_or(16);
    both(&crafted(&[("llama.attention.value_length", Value::U32(2 * v as u32))], same), "BAD_TENSOR_SHAPE");
    both(&crafted(&[("llama.feed_forward_length", Value::U32(3))], same), "BAD_TENSOR_SHAPE");
    both(&crafted(&[("llama.embedding_length", Value::U32(0))], same), "BAD_METADATA");
    both(&crafted(&[("llama.attention.head_count", Value::U32(1 << 20))], same), "BAD_METADATA");
}

#[test]
fn caller_sizes_are_bounded_with_typed_errors() {
    let bytes = crafted(&[], same);
    let estimate = |req: EstimateRequest| {
        let mut h = Host::new();
        h.estimate_begin();
        h.estimate_push(&bytes).unwrap();
        h.estimate_finish(None, &req).map(|r| r.estimate.peak).map_err(|e| e.code)
    };
    // ctx 10^10 used to loop for seconds; 2^64-1 tokens or bytes wrapped.
    assert_eq!(estimate(EstimateRequest { ctx: Some(10_000_000_000), ..Default::default() }), Err("INVALID_REQUEST".into()));
    assert_eq!(estimate(EstimateRequest { batch: Some(usize::MAX), ..Default::default() }), Err("INVALID_REQUEST".into()));
    let kv = |o: KvOptions| EstimateRequest { kv: Some(o), ..Default::default() };
    assert_eq!(estimate(kv(KvOptions { tokens: Some(usize::MAX), ..Default::default() })), Err("BAD_KV_CONFIG".into()));
    assert_eq!(estimate(kv(KvOptions { bytes: Some(usize::MAX), ..Default::default() })), Err("BAD_KV_CONFIG".into()));
    // Too few bytes for one token past the sinks: the cache's own code (it said "kv tokens is
    // 0", naming an option the caller never gave), however few.
    for b in [1, 10] {
        assert_eq!(estimate(kv(KvOptions { bytes: Some(b), ..Default::default() })), Err("KV_BUDGET_TOO_SMALL".into()), "{b} bytes");
    }
    // The largest accepted context gives a finite, unwrapped figure.
    let max = estimate(EstimateRequest { ctx: Some(edgellm::limits::MAX_CONTEXT_TOKENS), batch: Some(1), ..Default::default() }).unwrap();
    let small = estimate(EstimateRequest { ctx: Some(256), ..Default::default() }).unwrap();
    assert!(max > small && max < u64::MAX, "{max} vs {small}");
    // The engine's own KV options.
    let mut h = Host::new();
    for o in [KvOptions { tokens: Some(usize::MAX), ..Default::default() }, KvOptions { bytes: Some(usize::MAX), ..Default::default() }] {
        assert_eq!(h.set_kv_options(Some(o)).unwrap_err().code, "BAD_KV_CONFIG");
    }
}

#[test]
fn the_cli_refuses_out_of_range_counts() {
    let model = engine_common::data("tiny_llama.gguf");
    for args in [
        vec!["generate", "--model", "M", "--max-tokens", "18446744073709551615", "--prompt", "hi"],
        vec!["generate", "--model", "M", "--kv-tokens", "18446744073709551615", "--prompt", "hi"],
        vec!["generate", "--model", "M", "--kv-bytes", "18446744073709551615", "--prompt", "hi"],
        vec!["inspect", "M", "--estimate", "--ctx", "10000000000"],
        vec!["inspect", "M", "--estimate", "--batch", "0"],
    ] {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_edgellm"));
        c.args(args.iter().map(|a| if *a == "M" { model.as_os_str() } else { std::ffi::OsStr::new(a) }));
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains("INVALID_REQUEST") && err.contains("must be between"), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn a_vocabulary_the_embedding_does_not_match_is_refused() {
    // More embedding rows than tokens: a grammar's token mask (sized by the tokenizer) was
    // indexed by every logit row and panicked; fewer: a sampled id had no row. llama.cpp
    // refuses both by the embedding's shape.
    let (h, _) = edgellm::gguf::read_header_file(engine_common::data("tiny_llama.gguf")).unwrap();
    let Some(Value::Array(edgellm::gguf::Array::String(tokens))) = h.get("tokenizer.ggml.tokens").cloned() else { panic!("a token list") };
    let fewer = tokens[..tokens.len() - 16].to_vec();
    let mut more = tokens.clone();
    more.extend((0..16).map(|i| format!("<extra_{i}>")));
    for list in [fewer, more] {
        both(&crafted(&[("tokenizer.ggml.tokens", Value::Array(edgellm::gguf::Array::String(list)))], same), "BAD_METADATA");
    }
}
