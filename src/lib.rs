//! edgellm: run quantized LLMs (GGUF) privately, in a browser tab (wasm32) or natively.
//!
//! See ARCHITECTURE.md for the map. Layers, bottom up:
//! `gguf` (container) → `quant` (block formats) → `ops` (kernels) → `model` (architectures)
//! → `engine` (sessions, sampling, metrics); `tokenizer` beside them; `wasm` is the JS surface.

// The threaded wasm build (nightly only) sleeps its pool workers on memory.atomic.wait32.
#![cfg_attr(all(target_arch = "wasm32", feature = "threads"), feature(stdarch_wasm_atomic_wait))]

pub mod engine;
pub mod exec;
pub mod generate;
pub mod gguf;
pub mod grammar_depth;
pub mod host;
pub mod kv;
pub mod limits;
pub mod memory;
pub mod metrics;
pub mod model;
pub mod protocol;
pub mod ops;
pub mod percent;
pub mod quant;
pub mod sampling;
pub mod schema_patterns;
#[cfg(not(target_arch = "wasm32"))]
pub mod server;
pub mod sha256;
pub mod snapshot;
pub mod structured;
pub mod tokenizer;
pub mod tools;
pub mod work;

#[cfg(target_arch = "wasm32")]
pub mod wasm;
