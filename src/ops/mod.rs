//! Kernels the architectures are written over: batched matmul against weights kept in their
//! GGUF block format (`matmul`), RMSNorm (`norm`), rotary embeddings (`rope`), activations and
//! softmax (`act`), causal attention with GQA and an optional sliding window (`attention`).
//!
//! Everything here is scalar, allocation-free in the hot path (callers pass scratch buffers)
//! and compiles for wasm32. Shapes are row-major: a batch of `n` tokens × `d` features is one
//! `&[f32]` of length `n * d`.

pub mod act;
pub mod attention;
pub mod math;
pub mod matmul;
pub mod norm;
pub mod rope;
pub mod screen;

pub use act::{gelu_mul_in_place, gelu_tanh, gelu_tanh_f16, silu, softmax_in_place};
pub use attention::{attention, attention_on, AttentionParams, AttentionScratch};
pub use matmul::{matmul, matmul_on, MatmulScratch, Weight};
pub use norm::{rms_norm_in_place, rms_norm_into};
pub use rope::{Rope, RopeMode};
