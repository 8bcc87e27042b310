//! Helpers for engine tests: the tiny fixture models (random weights, real tokenizers), and
//! rebuilt variants of them with edited metadata.
#![allow(dead_code)]

use std::sync::Arc;

use edgellm::gguf::{load_bytes, load_file, GgufWriter, Value};
use edgellm::model::Model;
use edgellm::tokenizer::Tokenizer;

pub fn data(name: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

/// A model and its tokenizer from a file in tests/data.
pub fn load(name: &str) -> (Arc<Model>, Tokenizer) {
    let store = load_file(data(name)).unwrap();
    let tok = Tokenizer::from_gguf(&store.header).unwrap();
    (Arc::new(Model::from_store(store).unwrap()), tok)
}

/// The same file with metadata `key` set to `value` (added if absent), re-encoded.
pub fn load_with(name: &str, key: &str, value: Value) -> (Arc<Model>, Tokenizer) {
    let store = load_file(data(name)).unwrap();
    let mut w = GgufWriter::new();
    let mut seen = false;
    for (k, v) in &store.header.metadata {
        if k == key {
            w.metadata(k.clone(), value.clone());
            seen = true;
        } else {
            w.metadata(k.clone(), v.clone());
        }
    }
    if !seen {
        w.metadata(key, value);
    }
    for (info, bytes) in store.iter() {
        w.tensor(info.name.clone(), &info.dims, info.ggml_type, bytes.to_vec());
    }
    let store = load_bytes(&w.to_bytes().unwrap()).unwrap();
    let tok = Tokenizer::from_gguf(&store.header).unwrap();
    (Arc::new(Model::from_store(store).unwrap()), tok)
}

/// Deterministic pseudo-text ids (no special tokens: 10 .. n_vocab − 10) from `seed`.
pub fn text_ids(n_vocab: usize, seed: u32, n: usize) -> Vec<u32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            10 + s % (n_vocab as u32 - 20)
        })
        .collect()
}
