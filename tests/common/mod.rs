//! Shared helpers for integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// The repository root (where Cargo.toml is).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The real default model (Gemma 3 270M Q4_K_M, base), fetched by `./build.sh model`.
///
/// Returns `None` (and says so) when it is absent, so `cargo test` works on a machine without
/// it; `./build.sh test` sets `EDGELLM_REQUIRE_MODEL=1`, which turns absence into a failure.
pub fn real_model() -> Option<PathBuf> {
    model_file("gemma-3-270m-q4_k_m.gguf")
}

/// The catalog's chat model (SmolLM2 135M Instruct Q4_1, llama architecture, byte-level BPE),
/// fetched by `./build.sh model`; absent or required as `real_model`.
pub fn chat_model() -> Option<PathBuf> {
    model_file("SmolLM2-135M-Instruct.Q4_1.gguf")
}

fn model_file(name: &str) -> Option<PathBuf> {
    let p = root().join("models").join(name);
    if p.is_file() {
        return Some(p);
    }
    if std::env::var("EDGELLM_REQUIRE_MODEL").as_deref() == Ok("1") {
        panic!("real model missing at {} (run ./build.sh model)", p.display());
    }
    eprintln!("skipped: real model not present at {}", p.display());
    None
}

/// A file under tests/data.
pub fn data(name: &str) -> PathBuf {
    root().join("tests/data").join(name)
}

/// A host driver with the model at `path` loaded (pushed in 8 MiB chunks, as the worker does).
pub fn load_host(path: &std::path::Path) -> edgellm::host::Host {
    let bytes = std::fs::read(path).unwrap();
    let mut h = edgellm::host::Host::new();
    h.load_begin(bytes.len() as u64, None);
    for c in bytes.chunks(8 << 20) {
        h.load_push(c).unwrap();
    }
    h.load_finish().unwrap();
    h
}
