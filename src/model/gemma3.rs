//! Gemma 3 (text), as llama.cpp's `gemma3` graph runs it:
//! - input embeddings × √d_model;
//! - per layer: RMSNorm → Q, K, V (+ biases when the file has them) → per-head RMSNorm of Q
//!   and K → NEOX RoPE (base 10000 on sliding-window layers, `rope.freq_base` and any linear
//!   scaling on global ones) → attention
//!   with queries scaled by 1/√head_dim (1/√(d_model/n_head) for the 27B) → output
//!   projection → post-attention RMSNorm → residual; RMSNorm → GELU-tanh(gate) × up (ggml's
//!   f16-table GELU) → down → post-FFN RMSNorm → residual;
//! - final RMSNorm, output projection (tied to the token embedding when `output.weight` is
//!   absent), `tanh` soft-capping only if the file sets `final_logit_softcapping`.
//!
//! Every 6th layer (il % 6 == 5) attends globally, the others within `attention.sliding_window`
//! positions. The norm weights are used as stored: llama.cpp's converter already wrote
//! Gemma's `1 + w` into the file.

use crate::ops::Rope;

use super::{Activation, GraphConfig, HParams, Layer, ModelError, Tensors};

pub(super) fn load(hp: &HParams, t: &mut Tensors) -> Result<(GraphConfig, Vec<Layer>), ModelError> {
    let (d, hk, hv) = (hp.n_embd, hp.head_dim_k, hp.head_dim_v);
    let mut layers = Vec::with_capacity(hp.n_layer);
    for il in 0..hp.n_layer {
        let n = |s: &str| format!("blk.{il}.{s}");
        let swa = hp.swa_layers[il];
        let rope = if swa {
            Rope::new(hp.arch.rope_mode(), hp.n_rot, hp.rope_base_swa.unwrap_or(hp.rope_base))
        } else {
            let mut r = Rope::new(hp.arch.rope_mode(), hp.n_rot, hp.rope_base);
            r.freq_scale = hp.rope_freq_scale();
            r
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
            bo: None,
            q_norm: Some(t.vector(&n("attn_q_norm.weight"), hk)?),
            k_norm: Some(t.vector(&n("attn_k_norm.weight"), hk)?),
            post_attn_norm: Some(t.vector(&n("post_attention_norm.weight"), d)?),
            ffn_norm: t.vector(&n("ffn_norm.weight"), d)?,
            ffn_gate: t.weight(&n("ffn_gate.weight"), d, hp.n_ff)?,
            ffn_up: t.weight(&n("ffn_up.weight"), d, hp.n_ff)?,
            ffn_down: t.weight(&n("ffn_down.weight"), hp.n_ff, d)?,
            ffn_gate_b: None,
            ffn_up_b: None,
            ffn_down_b: None,
            post_ffn_norm: Some(t.vector(&n("post_ffw_norm.weight"), d)?),
            rope,
            window: hp.layer_window(il),
        });
    }
    let cfg = GraphConfig { embd_scale: Some((d as f32).sqrt()), act: Activation::GeluTanh, scale_queries: true };
    Ok((cfg, layers))
}
