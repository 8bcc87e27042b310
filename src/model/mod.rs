//! Models: hyper-parameters from GGUF metadata (`hparams`), weights taken out of a
//! [`TensorStore`](crate::gguf::TensorStore) in their block formats, and the forward pass.
//!
//! The four supported architectures are pre-norm decoder-only transformers that differ in a
//! handful of switches, so one forward pass (`forward.rs`) runs them all and each
//! architecture's file says which tensors it has and how its graph is configured:
//! - `llama.rs`: llama (normal RoPE, optional Llama 3 frequency factors), qwen2 (NEOX RoPE,
//!   Q/K/V biases), qwen3 (NEOX RoPE, per-head Q/K RMSNorm); SwiGLU FFN.
//! - `gemma3.rs`: embeddings × √d_model, per-head Q/K norms, post-attention and post-FFN norms,
//!   GELU-tanh gated FFN, sliding-window layers with their own RoPE base, tied output.

mod forward;
mod gemma3;
pub mod head_screen;
pub mod hparams;
mod llama;
pub mod scratch;
mod tensors;
pub mod validate;

pub use forward::{ForwardScratch, LogitRows};
pub(crate) use forward::HeadOut;
pub use hparams::{Arch, HParams, RopeScaling};

use crate::gguf::{GgmlType, GgufError, GgufHeader, TensorStore};
use crate::kv::{KvCache, KvConfig, KvError, KvLayout};
use crate::ops::{Rope, Weight};
use crate::quant::QuantError;

use tensors::Tensors;

/// Why a model could not be built or run. `code()` is stable.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelError {
    /// An architecture or feature this engine does not implement.
    UnsupportedModel(String),
    /// A tensor in a format there is no kernel for.
    UnsupportedTensorType { tensor: String, ty: GgmlType, detail: String },
    MissingTensor(String),
    BadTensorShape { name: String, expected: Vec<u64>, got: Vec<u64> },
    BadMetadata { key: String, reason: String },
    /// Tensor values no model has (a NaN or infinite norm weight, bias, RoPE factor or scale):
    /// refused at load.
    BadTensorData { name: String, reason: String },
    /// A forward pass produced a NaN or infinite value in the head's input or the logits: the
    /// weights hold values that overflow on this input (found at run time; nothing is kept).
    NonFinite(String),
    /// A token id outside the vocabulary.
    BadTokenId { id: u32, n_vocab: usize },
    /// The KV cache cannot take the batch (`CONTEXT_FULL`, `KV_FULL`, ...: the cache's code).
    Kv(KvError),
    Quant(QuantError),
    Gguf(GgufError),
    /// An empty batch, or logits asked for rows the batch does not have.
    BadRequest(String),
}

impl ModelError {
    pub fn code(&self) -> &'static str {
        match self {
            ModelError::UnsupportedModel(_) => "UNSUPPORTED_MODEL",
            ModelError::UnsupportedTensorType { .. } => "UNSUPPORTED_TENSOR_TYPE",
            ModelError::MissingTensor(_) => "MISSING_TENSOR",
            ModelError::BadTensorShape { .. } => "BAD_TENSOR_SHAPE",
            ModelError::BadMetadata { .. } => "BAD_METADATA",
            ModelError::BadTensorData { .. } => "BAD_TENSOR_DATA",
            ModelError::NonFinite(_) => "MODEL_NON_FINITE",
            ModelError::BadTokenId { .. } => "BAD_TOKEN_ID",
            ModelError::Kv(e) => e.code(),
            ModelError::Quant(e) => e.code(),
            ModelError::Gguf(e) => e.code(),
            ModelError::BadRequest(_) => "BAD_REQUEST",
        }
    }

    fn tensor_type(name: &str, ty: GgmlType, e: QuantError) -> ModelError {
        match e {
            QuantError::UnsupportedType { .. } => {
                ModelError::UnsupportedTensorType { tensor: name.to_string(), ty, detail: e.to_string() }
            }
            other => ModelError::Quant(other),
        }
    }
}

impl std::fmt::Display for ModelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelError::UnsupportedModel(s) => write!(f, "unsupported model: {s}"),
            ModelError::UnsupportedTensorType { tensor, ty, detail } => {
                write!(f, "tensor {tensor} has type {ty}, which this engine cannot compute with ({detail})")
            }
            ModelError::MissingTensor(n) => write!(f, "tensor {n} is missing"),
            ModelError::BadTensorShape { name, expected, got } => {
                write!(f, "tensor {name} has shape {got:?}, expected {expected:?}")
            }
            ModelError::BadMetadata { key, reason } => write!(f, "metadata {key}: {reason}"),
            ModelError::BadTensorData { name, reason } => write!(f, "tensor {name}: {reason}"),
            ModelError::NonFinite(what) => {
                write!(f, "the model computed a NaN or infinite value ({what}): its weights are corrupt or out of range")
            }
            ModelError::BadTokenId { id, n_vocab } => {
                write!(f, "token id {id} is outside the vocabulary (0..{n_vocab})")
            }
            ModelError::Kv(e) => e.fmt(f),
            ModelError::Quant(e) => e.fmt(f),
            ModelError::Gguf(e) => e.fmt(f),
            ModelError::BadRequest(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for ModelError {}

impl From<KvError> for ModelError {
    fn from(e: KvError) -> Self {
        ModelError::Kv(e)
    }
}

impl From<QuantError> for ModelError {
    fn from(e: QuantError) -> Self {
        ModelError::Quant(e)
    }
}

impl From<GgufError> for ModelError {
    fn from(e: GgufError) -> Self {
        ModelError::Gguf(e)
    }
}

/// Feed-forward activation of the gated FFN: `act(gate) * up`. GELU is llama.cpp's f16-table
/// GELU ([`crate::ops::gelu_tanh_f16`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Activation {
    Silu,
    GeluTanh,
}

/// Graph switches shared by all layers.
#[derive(Clone, Debug)]
pub(crate) struct GraphConfig {
    /// Token embeddings are multiplied by this (gemma: √d_model).
    pub embd_scale: Option<f32>,
    pub act: Activation,
    /// Multiply the queries by the attention scale before attention (gemma) rather than the
    /// scores inside it (llama family), as llama.cpp's graphs do.
    pub scale_queries: bool,
}

/// One transformer block's weights and per-layer settings.
pub(crate) struct Layer {
    pub attn_norm: Vec<f32>,
    pub wq: Weight,
    pub wk: Weight,
    pub wv: Weight,
    pub wo: Weight,
    pub bq: Option<Vec<f32>>,
    pub bk: Option<Vec<f32>>,
    pub bv: Option<Vec<f32>>,
    pub bo: Option<Vec<f32>>,
    /// Per-head RMSNorm of queries and keys (length head_dim_k).
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    /// RMSNorm of the attention output before the residual add (gemma).
    pub post_attn_norm: Option<Vec<f32>>,
    pub ffn_norm: Vec<f32>,
    pub ffn_gate: Weight,
    pub ffn_up: Weight,
    pub ffn_down: Weight,
    /// Feed-forward biases (llama, when the file has them: llama.cpp adds them).
    pub ffn_gate_b: Option<Vec<f32>>,
    pub ffn_up_b: Option<Vec<f32>>,
    pub ffn_down_b: Option<Vec<f32>>,
    pub post_ffn_norm: Option<Vec<f32>>,
    pub rope: Rope,
    pub window: Option<usize>,
}

/// A loaded model, ready to run. Immutable: any number of sessions can share it.
pub struct Model {
    header: GgufHeader,
    hparams: HParams,
    tok_embd: Weight,
    /// `None`: the output projection is the token embedding (tied).
    output: Option<Weight>,
    output_norm: Vec<f32>,
    layers: Vec<Layer>,
    cfg: GraphConfig,
    weight_bytes: usize,
    decode_weight_bytes: usize,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model").field("hparams", &self.hparams).field("weight_bytes", &self.weight_bytes).finish()
    }
}

/// How a model is built from its file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelOptions {
    /// Re-lay out a Q8_0 output projection (tied or not) as two 4-bit planes for the screened
    /// head (`ops::screen`), after calibrating its outlier dimensions on a fixed text. The
    /// full head on that layout gives the same logits, bit for bit.
    pub screened_head: bool,
}

impl Default for ModelOptions {
    fn default() -> Self {
        ModelOptions { screened_head: true }
    }
}

impl Model {
    /// Builds the model from a loaded file, taking ownership of every tensor's bytes (with the
    /// default [`ModelOptions`]).
    pub fn from_store(store: TensorStore) -> Result<Model, ModelError> {
        Model::from_store_with(store, &ModelOptions::default())
    }

    /// [`from_store`](Self::from_store) with `opts`.
    pub fn from_store_with(store: TensorStore, opts: &ModelOptions) -> Result<Model, ModelError> {
        let mut m = Model::build(store)?;
        if opts.screened_head {
            head_screen::prepare(&mut m)?;
        }
        Ok(m)
    }

    fn build(store: TensorStore) -> Result<Model, ModelError> {
        let (header, mut t) = Tensors::from_store(store);
        let hp = validate::hparams_of(&header)?;
        let n_vocab = hp.n_vocab;
        let tok_embd = t.weight("token_embd.weight", hp.n_embd, n_vocab)?;
        let output = t.weight_opt("output.weight", hp.n_embd, n_vocab)?;
        let output_norm = t.vector("output_norm.weight", hp.n_embd)?;
        let (cfg, layers) = match hp.arch {
            Arch::Gemma3 => gemma3::load(&hp, &mut t)?,
            Arch::Llama | Arch::Qwen2 | Arch::Qwen3 => llama::load(&hp, &mut t)?,
        };
        // A tensor the graph does not use would be silently ignored (an FFN bias, an output
        // bias): llama.cpp refuses such files ("wrong number of tensors"), and so do we.
        if let Some(name) = t.first_unused() {
            return Err(ModelError::UnsupportedModel(format!("tensor {name:?} is not part of the {} graph", hp.arch.name())));
        }
        let mut weight_bytes = tok_embd.bytes() + output.as_ref().map_or(0, Weight::bytes) + 4 * output_norm.len();
        for l in &layers {
            weight_bytes += l.bytes();
        }
        // One decode step reads everything held but the embedding matrix, of which it reads
        // one row, and all of it again as the output projection when tied.
        let embd_row = tok_embd.bytes() / n_vocab;
        let decode_weight_bytes =
            if output.is_some() { weight_bytes - tok_embd.bytes() + embd_row } else { weight_bytes + embd_row };
        Ok(Model { header, hparams: hp, tok_embd, output, output_norm, layers, cfg, weight_bytes, decode_weight_bytes })
    }

    /// Loads a GGUF file from disk (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load_file(path: impl AsRef<std::path::Path>) -> Result<Model, ModelError> {
        Model::from_store(crate::gguf::load_file(path)?)
    }

    /// [`load_file`](Self::load_file) with `opts`.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load_file_with(path: impl AsRef<std::path::Path>, opts: &ModelOptions) -> Result<Model, ModelError> {
        Model::from_store_with(crate::gguf::load_file(path)?, opts)
    }

    /// The output projection (the token embedding when tied).
    pub(crate) fn head(&self) -> &Weight {
        self.output.as_ref().unwrap_or(&self.tok_embd)
    }

    /// Whether decode steps can use the screened head: the output projection was re-laid out
    /// (Q8_0, [`ModelOptions::screened_head`]) and the logits are not soft-capped.
    pub fn has_screened_head(&self) -> bool {
        self.head().planes().is_some() && head_screen::applies(self.head().ty, &self.hparams)
    }

    /// The outlier dimensions the screened head's pass 1 reads exactly (empty without one).
    pub fn head_outliers(&self) -> &[usize] {
        self.head().planes().map_or(&[], |(p, _)| p.outliers())
    }

    /// Bytes of the output projection (what the full head reads per decode step).
    pub fn head_bytes(&self) -> usize {
        self.head().bytes()
    }

    pub fn hparams(&self) -> &HParams {
        &self.hparams
    }

    /// The file's header (metadata for the tokenizer and chat template; tensor index).
    pub fn header(&self) -> &GgufHeader {
        &self.header
    }

    pub fn n_vocab(&self) -> usize {
        self.hparams.n_vocab
    }

    /// Bytes of weights held.
    pub fn weight_bytes(&self) -> usize {
        self.weight_bytes
    }

    /// Bytes of weights one decode step (a single token's forward pass, with logits) reads, as
    /// stored: every layer's matrices, biases and norm vectors (f32), the final norm, the output
    /// projection (the token embedding once more when tied) and one token-embedding row (the
    /// lookup). Not counted: the RoPE frequency factors (`rope_freqs.weight`, a few hundred
    /// bytes kept in each layer's RoPE), activations, and the KV cache (see
    /// [`GenerationMetrics`](crate::metrics::GenerationMetrics)).
    pub fn decode_weight_bytes(&self) -> usize {
        self.decode_weight_bytes
    }

    /// What the KV cache needs to know of this model: K/V widths, and per layer its attention
    /// window and the RoPE its keys are rotated with.
    pub fn kv_layout(&self) -> KvLayout {
        KvLayout {
            shape: self.hparams.kv_shape(),
            head_dim_k: self.hparams.head_dim_k,
            ropes: self.layers.iter().map(|l| l.rope.clone()).collect(),
        }
    }

    /// An empty KV cache for this model: a plain context of at most `max_tokens` positions
    /// (f16, no eviction, `CONTEXT_FULL` beyond). Memory is allocated as positions arrive.
    pub fn new_kv_cache(&self, max_tokens: usize) -> KvCache {
        KvCache::context(self.kv_layout(), max_tokens)
    }

    /// An empty KV cache with `cfg`'s budget, storage and eviction policy.
    pub fn new_kv_cache_with(&self, cfg: &KvConfig) -> Result<KvCache, KvError> {
        KvCache::new(self.kv_layout(), cfg)
    }
}

impl Layer {
    fn bytes(&self) -> usize {
        let vecs = [
            &self.bq,
            &self.bk,
            &self.bv,
            &self.bo,
            &self.q_norm,
            &self.k_norm,
            &self.post_attn_norm,
            &self.ffn_gate_b,
            &self.ffn_up_b,
            &self.ffn_down_b,
            &self.post_ffn_norm,
        ];
        [&self.wq, &self.wk, &self.wv, &self.wo, &self.ffn_gate, &self.ffn_up, &self.ffn_down].iter().map(|w| w.bytes()).sum::<usize>()
            + 4 * (self.attn_norm.len() + self.ffn_norm.len())
            + vecs.iter().map(|v| v.as_ref().map_or(0, |v| 4 * v.len())).sum::<usize>()
    }
}
