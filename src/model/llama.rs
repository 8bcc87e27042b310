//! The llama family as llama.cpp runs it: pre-norm blocks, RMSNorm → Q, K, V (+ biases when
//! present: qwen2) → per-head Q/K RMSNorm (qwen3) → RoPE (normal for llama, NEOX for qwen2/3)
//! → attention scaled by 1/√head_dim → output projection (+ bias when present: llama) →
//! residual; RMSNorm → SiLU(gate) × up → down (+ their biases when present: llama) → residual;
//! final RMSNorm, output projection (tied to the token embedding when `output.weight` is
//! absent).
//!
//! Llama 3 RoPE scaling: the per-pair frequency divisors come from `rope_freqs.weight` (what
//! llama.cpp's converter stores), or are computed from `rope.scaling.*` metadata when the file
//! gives the Llama 3 parameters instead; linear scaling from `rope.scaling.factor` (or
//! `rope.scale_linear`), the type linear unless the file says otherwise.

use crate::ops::rope::llama3_freq_factors;
use crate::ops::Rope;

use super::{Activation, Arch, GraphConfig, HParams, Layer, ModelError, RopeScaling, Tensors};

pub(super) fn load(hp: &HParams, t: &mut Tensors) -> Result<(GraphConfig, Vec<Layer>), ModelError> {
    let (d, hk, hv) = (hp.n_embd, hp.head_dim_k, hp.head_dim_v);
    let mut rope = Rope::new(hp.arch.rope_mode(), hp.n_rot, hp.rope_base);
    rope.freq_scale = hp.rope_freq_scale();
    rope.freq_factors = match t.vector_opt("rope_freqs.weight", hp.n_rot / 2)? {
        Some(f) => Some(f),
        None => match hp.rope_scaling {
            RopeScaling::Llama3 { factor, low_freq_factor, high_freq_factor, original_context } => Some(
                llama3_freq_factors(hp.n_rot, hp.rope_base, factor, low_freq_factor, high_freq_factor, original_context),
            ),
            _ => None,
        },
    };
    let qk_norm = hp.arch == Arch::Qwen3;
    // The output and FFN biases: llama.cpp's llama graph takes them when present, qwen2/3 have
    // none (a file holding them is refused as holding unused tensors).
    let llama = hp.arch == Arch::Llama;
    let llama_only = |t: &mut Tensors, name: &str, len: usize| if llama { t.vector_opt(name, len) } else { Ok(None) };
    let mut layers = Vec::with_capacity(hp.n_layer);
    for il in 0..hp.n_layer {
        let n = |s: &str| format!("blk.{il}.{s}");
        let (q_norm, k_norm) = if qk_norm {
            (Some(t.vector(&n("attn_q_norm.weight"), hk)?), Some(t.vector(&n("attn_k_norm.weight"), hk)?))
        } else {
            (None, None)
        };
        let [bq, bk, bv] = t.qkv_biases(il, hp)?;
        layers.push(Layer {
            attn_norm: t.vector(&n("attn_norm.weight"), d)?,
            wq: t.weight(&n("attn_q.weight"), d, hp.n_head * hk)?,
            wk: t.weight(&n("attn_k.weight"), d, hp.n_head_kv * hk)?,
            wv: t.weight(&n("attn_v.weight"), d, hp.n_head_kv * hv)?,
            wo: t.weight(&n("attn_output.weight"), hp.n_head * hv, d)?,
            bq,
            bk,
            bv,
            bo: llama_only(t, &n("attn_output.bias"), d)?,
            q_norm,
            k_norm,
            post_attn_norm: None,
            ffn_norm: t.vector(&n("ffn_norm.weight"), d)?,
            ffn_gate: t.weight(&n("ffn_gate.weight"), d, hp.n_ff)?,
            ffn_up: t.weight(&n("ffn_up.weight"), d, hp.n_ff)?,
            ffn_down: t.weight(&n("ffn_down.weight"), hp.n_ff, d)?,
            ffn_gate_b: llama_only(t, &n("ffn_gate.bias"), hp.n_ff)?,
            ffn_up_b: llama_only(t, &n("ffn_up.bias"), hp.n_ff)?,
            ffn_down_b: llama_only(t, &n("ffn_down.bias"), d)?,
            post_ffn_norm: None,
            rope: rope.clone(),
            window: hp.layer_window(il),
        });
    }
    Ok((GraphConfig { embd_scale: None, act: Activation::Silu, scale_queries: false }, layers))
}
