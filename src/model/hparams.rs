//! Hyper-parameters read from GGUF metadata (`<arch>.*` keys), with the per-architecture rules
//! llama.cpp applies where the file is silent.

use crate::gguf::{Array, GgufHeader};
use crate::kv::KvShape;
use crate::limits::{MAX_DIM, MAX_HEADS, MAX_LAYERS};
use crate::ops::RopeMode;

use super::ModelError;

/// The architectures this engine runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Qwen2,
    Qwen3,
    Gemma3,
}

impl Arch {
    pub fn from_name(name: &str) -> Option<Arch> {
        Some(match name {
            "llama" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            "gemma3" => Arch::Gemma3,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Gemma3 => "gemma3",
        }
    }

    /// ggml's rope layout for the architecture (llama.cpp `llama_model_rope_type`).
    pub fn rope_mode(self) -> RopeMode {
        match self {
            Arch::Llama => RopeMode::Normal,
            Arch::Qwen2 | Arch::Qwen3 | Arch::Gemma3 => RopeMode::Neox,
        }
    }
}

/// RoPE frequency scaling from `<arch>.rope.scaling.*`.
#[derive(Clone, Debug, PartialEq)]
pub enum RopeScaling {
    None,
    /// Positions divided by `factor` (`freq_scale = 1 / factor`).
    Linear { factor: f32 },
    /// Llama 3 band-wise scaling, when the file gives its parameters as metadata (converted
    /// models usually store the resulting `rope_freqs.weight` tensor instead, which wins).
    Llama3 { factor: f32, low_freq_factor: f32, high_freq_factor: f32, original_context: f32 },
}

#[derive(Clone, Debug, PartialEq)]
pub struct HParams {
    pub arch: Arch,
    pub n_vocab: usize,
    /// Training context length (`<arch>.context_length`).
    pub n_ctx_train: usize,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_ff: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
    /// Rotated dimensions per head.
    pub n_rot: usize,
    pub rms_eps: f32,
    pub rope_base: f32,
    pub rope_scaling: RopeScaling,
    /// RoPE base of sliding-window layers (gemma3: 10000), `None` = same as global.
    pub rope_base_swa: Option<f32>,
    /// Sliding-window size, for the layers `swa_layers` marks.
    pub sliding_window: Option<usize>,
    /// Per layer: does it use the sliding window?
    pub swa_layers: Vec<bool>,
    /// Multiplier of `q·k`.
    pub attn_scale: f32,
    /// `tanh` soft-capping of the final logits (`<arch>.final_logit_softcapping`).
    pub final_logit_softcap: Option<f32>,
}

impl HParams {
    /// Reads the hyper-parameters of `h`; `n_vocab` comes from the token embedding's shape.
    pub fn from_header(h: &GgufHeader, n_vocab: usize) -> Result<HParams, ModelError> {
        let arch_name = h.architecture().ok_or_else(|| ModelError::BadMetadata {
            key: "general.architecture".into(),
            reason: "missing".into(),
        })?;
        let arch = Arch::from_name(arch_name).ok_or_else(|| {
            ModelError::UnsupportedModel(format!(
                "architecture {arch_name:?} (supported: llama, qwen2, qwen3, gemma3)"
            ))
        })?;
        let m = Meta { h, prefix: arch_name };
        if m.opt_u64("expert_count")?.unwrap_or(0) > 0 {
            return Err(ModelError::UnsupportedModel(format!("{arch_name} with experts (MoE)")));
        }
        // Experts used per token without any experts: a broken file (llama.cpp refuses it too),
        // not a dense model.
        if let Some(used @ 1..) = m.opt_u64("expert_used_count")? {
            return Err(m.bad("expert_used_count", &format!("{used}, but the model has no experts (no expert_count)")));
        }
        let n_embd = m.req_usize("embedding_length")?;
        let n_layer = m.req_usize("block_count")?;
        let n_ff = m.per_layer_uniform("feed_forward_length", n_layer)?.ok_or_else(|| m.missing("feed_forward_length"))?;
        let n_head = m.per_layer_uniform("attention.head_count", n_layer)?.ok_or_else(|| m.missing("attention.head_count"))?;
        let n_head_kv = m.per_layer_uniform("attention.head_count_kv", n_layer)?.unwrap_or(n_head);
        // Caps before anything is sized by these values (`swa_layers` below, every estimate).
        for (key, v, max) in [
            ("embedding_length", n_embd, MAX_DIM),
            ("block_count", n_layer, MAX_LAYERS),
            ("feed_forward_length", n_ff, MAX_DIM),
            ("attention.head_count", n_head, MAX_HEADS),
            ("attention.head_count_kv", n_head_kv, MAX_HEADS),
        ] {
            if v == 0 || v > max {
                return Err(m.bad(key, &format!("{v} (1 to {max} supported)")));
            }
        }
        if n_head % n_head_kv != 0 {
            return Err(m.bad("attention.head_count_kv", &format!("{n_head} heads not a multiple of {n_head_kv} kv heads")));
        }
        let head_dim_k = m.opt_usize("attention.key_length")?.unwrap_or(n_embd / n_head);
        let head_dim_v = m.opt_usize("attention.value_length")?.unwrap_or(n_embd / n_head);
        for (key, v, heads) in [("attention.key_length", head_dim_k, n_head), ("attention.value_length", head_dim_v, n_head)] {
            // The widest row any buffer gets is `heads × head dim`: it must fit a dimension.
            if v == 0 || v.saturating_mul(heads) > MAX_DIM {
                return Err(m.bad(key, &format!("{v} per head × {heads} heads (1 to {MAX_DIM} values per row supported)")));
            }
        }
        let n_rot = m.opt_usize("rope.dimension_count")?.unwrap_or(head_dim_k);
        if n_rot == 0 || n_rot % 2 != 0 || n_rot > head_dim_k {
            return Err(m.bad("rope.dimension_count", &format!("{n_rot} (head dim {head_dim_k})")));
        }
        // Values that reach the arithmetic: each in the range where every layer stays finite
        // (a zero or negative epsilon, a zero RoPE base or an f64 too large for f32 made every
        // logit NaN, and generation silently stopped at its first token).
        let eps_key = "attention.layer_norm_rms_epsilon";
        let rms_eps = m.opt_f32(eps_key, Range::Positive)?.ok_or_else(|| m.missing(eps_key))?;
        if rms_eps > 1.0 {
            return Err(m.bad(eps_key, &format!("{rms_eps} (an RMSNorm epsilon is small: at most 1)")));
        }
        let rope_base = m.opt_f32("rope.freq_base", Range::Positive)?.unwrap_or(10000.0);
        // At most u32::MAX on every target (llama.cpp keeps it in 32 bits): a larger value was
        // refused only where usize is 32 bits, so a file loaded natively failed in the browser.
        let n_ctx_train = match m.opt_u64("context_length")? {
            Some(v) if v > u64::from(u32::MAX) => return Err(m.bad("context_length", &format!("{v} tokens (at most {})", u32::MAX))),
            v => v.unwrap_or(0) as usize,
        };

        let rope_scaling = read_rope_scaling(&m)?;

        let (mut sliding_window, mut swa_layers, mut rope_base_swa) = (None, vec![false; n_layer], None);
        // `attention.scale` is not read: llama.cpp reads it only for the granite family, never
        // for these four (a file that sets it runs with the usual scale there).
        let mut attn_scale = 1.0 / (head_dim_k as f32).sqrt();
        // Logit soft-capping is Gemma's: llama.cpp reads the key for gemma2/3 only.
        let mut final_logit_softcap = None;
        match arch {
            Arch::Gemma3 => {
                // llama.cpp: every 6th layer (il % 6 == 5) is global, the rest slide (a
                // `sliding_window_pattern` period or per-layer bool array overrides); local
                // layers use RoPE base 10000 (`rope.freq_base_swa` overrides) and no scaling.
                let w = m.opt_usize("attention.sliding_window")?;
                if let Some(w) = w.filter(|&w| w > 0) {
                    sliding_window = Some(w);
                    swa_layers = match m.h.get_array(&m.key("attention.sliding_window_pattern")) {
                        Some(Array::Bool(v)) if v.len() == n_layer => v.clone(),
                        _ => {
                            let period = m.opt_usize("attention.sliding_window_pattern")?.unwrap_or(6);
                            (0..n_layer).map(|il| period == 0 || il % period < period - 1).collect()
                        }
                    };
                    rope_base_swa = Some(m.opt_f32("rope.freq_base_swa", Range::Positive)?.unwrap_or(10000.0));
                }
                // gemma 3 27B scales queries by 1/sqrt(n_embd / n_head) (query_pre_attn_scalar).
                if n_layer == 62 {
                    // More heads than embedding dimensions make that 1/sqrt(0): every attention
                    // score infinite. A broken file, refused here rather than at the first request.
                    if n_embd < n_head {
                        return Err(m.bad("attention.head_count", &format!("{n_head} (more heads than embedding_length {n_embd}, with the 62-layer query scale 1/sqrt(embedding_length / head_count))")));
                    }
                    attn_scale = 1.0 / ((n_embd / n_head) as f32).sqrt();
                }
                // Zero or less means none (llama.cpp's convention); a cap must be finite as f32.
                final_logit_softcap = m.opt_f32("final_logit_softcapping", Range::Any)?.filter(|&v| v > 0.0);
            }
            Arch::Llama | Arch::Qwen2 | Arch::Qwen3 => {
                if let Some(w) = m.opt_usize("attention.sliding_window")?.filter(|&w| w > 0) {
                    return Err(ModelError::UnsupportedModel(format!(
                        "{arch_name} with a sliding window ({w}) is not supported"
                    )));
                }
            }
        }
        Ok(HParams {
            arch,
            n_vocab,
            n_ctx_train,
            n_embd,
            n_layer,
            n_ff,
            n_head,
            n_head_kv,
            head_dim_k,
            head_dim_v,
            n_rot,
            rms_eps,
            rope_base,
            rope_scaling,
            rope_base_swa,
            sliding_window,
            swa_layers,
            attn_scale,
            final_logit_softcap,
        })
    }

    /// Values per position in the KV cache (all kv heads): keys, values.
    pub fn kv_widths(&self) -> (usize, usize) {
        (self.n_head_kv * self.head_dim_k, self.n_head_kv * self.head_dim_v)
    }

    /// Layer `il`'s attention window: `sliding_window` on the layers `swa_layers` marks, `None`
    /// (global attention) elsewhere.
    pub fn layer_window(&self, il: usize) -> Option<usize> {
        if self.swa_layers.get(il).copied().unwrap_or(false) {
            self.sliding_window
        } else {
            None
        }
    }

    /// The KV cache's sizes for this model: what the cache allocates by and the memory ledger
    /// estimates by.
    pub fn kv_shape(&self) -> KvShape {
        let (k_width, v_width) = self.kv_widths();
        KvShape { k_width, v_width, windows: (0..self.n_layer).map(|il| self.layer_window(il)).collect() }
    }

    /// Linear RoPE position scale for global layers (1.0 = none).
    pub fn rope_freq_scale(&self) -> f32 {
        match self.rope_scaling {
            RopeScaling::Linear { factor } => 1.0 / factor,
            _ => 1.0,
        }
    }
}

fn read_rope_scaling(m: &Meta) -> Result<RopeScaling, ModelError> {
    // Present but not a string is a broken file (llama.cpp refuses it), never linear by default.
    let ty = match m.h.get(&m.key("rope.scaling.type")) {
        None => None,
        Some(v) => Some(v.as_str().ok_or_else(|| m.bad("rope.scaling.type", "not a string"))?.to_owned()),
    };
    let factor = m.opt_f32("rope.scaling.factor", Range::Any)?;
    let legacy = m.opt_f32("rope.scale_linear", Range::Any)?;
    // The positions are divided by the factor: its reciprocal must be finite too.
    let positive = |f: f32, key: &str| if f > 0.0 && (1.0 / f).is_finite() { Ok(f) } else { Err(m.bad(key, &format!("{f} (a positive factor)"))) };
    match ty.as_deref() {
        // llama.cpp: the type defaults to linear, its factor is `rope.scaling.factor` or else
        // the older `rope.scale_linear`, and a factor of 0 means none.
        None | Some("linear") => match (factor, legacy) {
            (Some(f), _) if f != 1.0 && f != 0.0 => Ok(RopeScaling::Linear { factor: positive(f, "rope.scaling.factor")? }),
            (None, Some(f)) if f != 1.0 && f != 0.0 => Ok(RopeScaling::Linear { factor: positive(f, "rope.scale_linear")? }),
            _ => Ok(RopeScaling::None),
        },
        Some("none") => Ok(RopeScaling::None),
        Some("llama3") => {
            let get = |k: &str| -> Result<f32, ModelError> { m.opt_f32(k, Range::Positive)?.ok_or_else(|| m.missing(k)) };
            let (low, high) = (get("rope.scaling.low_freq_factor")?, get("rope.scaling.high_freq_factor")?);
            // The smoothing between the two divides by their difference.
            if high <= low {
                return Err(m.bad("rope.scaling.high_freq_factor", &format!("{high} (must exceed low_freq_factor {low})")));
            }
            Ok(RopeScaling::Llama3 {
                factor: positive(factor.ok_or_else(|| m.missing("rope.scaling.factor"))?, "rope.scaling.factor")?,
                low_freq_factor: low,
                high_freq_factor: high,
                original_context: get("rope.scaling.original_context_length")?,
            })
        }
        Some(other) => Err(ModelError::UnsupportedModel(format!("rope scaling type {other:?}"))),
    }
}

/// The values a float hyper-parameter may take ([`Meta::opt_f32`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Range {
    Any,
    Positive,
}

/// Typed access to `<arch>.<name>` keys.
struct Meta<'a> {
    h: &'a GgufHeader,
    prefix: &'a str,
}

impl Meta<'_> {
    fn key(&self, name: &str) -> String {
        format!("{}.{}", self.prefix, name)
    }

    fn missing(&self, name: &str) -> ModelError {
        ModelError::BadMetadata { key: self.key(name), reason: "missing".into() }
    }

    fn bad(&self, name: &str, why: &str) -> ModelError {
        ModelError::BadMetadata { key: self.key(name), reason: why.into() }
    }

    fn opt_u64(&self, name: &str) -> Result<Option<u64>, ModelError> {
        match self.h.get(&self.key(name)) {
            None => Ok(None),
            Some(v) => v.as_u64().map(Some).ok_or_else(|| self.bad(name, "not a non-negative integer")),
        }
    }

    fn opt_usize(&self, name: &str) -> Result<Option<usize>, ModelError> {
        match self.opt_u64(name)? {
            None => Ok(None),
            Some(v) => usize::try_from(v).map(Some).map_err(|_| self.bad(name, "too large")),
        }
    }

    fn req_usize(&self, name: &str) -> Result<usize, ModelError> {
        self.opt_usize(name)?.ok_or_else(|| self.missing(name))
    }

    fn opt_f64(&self, name: &str) -> Result<Option<f64>, ModelError> {
        match self.h.get(&self.key(name)) {
            None => Ok(None),
            Some(v) => v.as_f64().filter(|x| x.is_finite()).map(Some).ok_or_else(|| self.bad(name, "not a finite number")),
        }
    }

    /// A number as the f32 the arithmetic uses: finite as f32 (an f64 beyond f32's range is
    /// infinite once cast), and in `range`.
    fn opt_f32(&self, name: &str, range: Range) -> Result<Option<f32>, ModelError> {
        let Some(v) = self.opt_f64(name)? else { return Ok(None) };
        let f = v as f32;
        if !f.is_finite() {
            return Err(self.bad(name, &format!("{v} is beyond f32's range")));
        }
        if range == Range::Positive && f <= 0.0 {
            return Err(self.bad(name, &format!("{v} (must be positive)")));
        }
        Ok(Some(f))
    }

    /// A value that may be given per layer (an array): it must then be the same for all.
    fn per_layer_uniform(&self, name: &str, n_layer: usize) -> Result<Option<usize>, ModelError> {
        let Some(v) = self.h.get(&self.key(name)) else { return Ok(None) };
        if let Some(a) = v.as_array() {
            let vals: Vec<u64> = match a {
                Array::U32(x) => x.iter().map(|&v| v as u64).collect(),
                Array::I32(x) => x.iter().map(|&v| v.max(0) as u64).collect(),
                Array::U64(x) => x.clone(),
                Array::I64(x) => x.iter().map(|&v| v.max(0) as u64).collect(),
                _ => return Err(self.bad(name, "array of a non-integer type")),
            };
            if vals.len() != n_layer || vals.windows(2).any(|w| w[0] != w[1]) {
                return Err(ModelError::UnsupportedModel(format!("{} varies per layer", self.key(name))));
            }
            return Ok(vals.first().map(|&v| usize::try_from(v).unwrap_or(usize::MAX)));
        }
        self.opt_usize(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::Value;

    fn header(arch: &str, extra: &[(&str, Value)]) -> GgufHeader {
        let mut md: Vec<(String, Value)> = vec![("general.architecture".into(), Value::String(arch.into()))];
        let base = [
            ("embedding_length", Value::U32(64)),
            ("block_count", Value::U32(12)),
            ("feed_forward_length", Value::U32(128)),
            ("attention.head_count", Value::U32(4)),
            ("attention.head_count_kv", Value::U32(2)),
            ("attention.layer_norm_rms_epsilon", Value::F32(1e-6)),
        ];
        for (k, v) in base.into_iter().chain(extra.iter().cloned()) {
            let key = format!("{arch}.{k}");
            md.retain(|(k2, _)| *k2 != key);
            md.push((key, v));
        }
        GgufHeader { version: 3, metadata: md, tensors: vec![], alignment: 32, data_offset: 0 }
    }

    #[test]
    fn llama_defaults() {
        let h = HParams::from_header(&header("llama", &[]), 100).unwrap();
        assert_eq!((h.n_embd, h.n_layer, h.n_head, h.n_head_kv, h.head_dim_k, h.n_rot), (64, 12, 4, 2, 16, 16));
        assert_eq!(h.rope_base, 10000.0);
        assert_eq!(h.attn_scale, 0.25);
        assert_eq!(h.rope_scaling, RopeScaling::None);
        assert!(h.swa_layers.iter().all(|&s| !s) && h.sliding_window.is_none());
        assert_eq!(h.kv_widths(), (32, 32));
        assert_eq!(h.arch.rope_mode(), RopeMode::Normal);
    }

    #[test]
    fn gemma3_sliding_pattern_and_bases() {
        let h = HParams::from_header(&header("gemma3", &[("attention.sliding_window", Value::U32(512)), ("rope.freq_base", Value::F32(1e6))]), 100).unwrap();
        let globals: Vec<usize> = (0..12).filter(|&i| !h.swa_layers[i]).collect();
        assert_eq!(globals, [5, 11]);
        assert_eq!((h.sliding_window, h.rope_base, h.rope_base_swa), (Some(512), 1e6, Some(10000.0)));
        assert_eq!(h.arch.rope_mode(), RopeMode::Neox);
        // Period override and explicit local base.
        let h = HParams::from_header(
            &header("gemma3", &[
                ("attention.sliding_window", Value::U32(8)),
                ("attention.sliding_window_pattern", Value::U32(3)),
                ("rope.freq_base_swa", Value::F32(500.0)),
            ]),
            100,
        )
        .unwrap();
        assert_eq!((0..12).filter(|&i| !h.swa_layers[i]).collect::<Vec<_>>(), [2, 5, 8, 11]);
        assert_eq!(h.rope_base_swa, Some(500.0));
        // The 27B rule: 62 layers scale queries by 1/sqrt(d_model / n_head).
        let h = HParams::from_header(&header("gemma3", &[("block_count", Value::U32(62)), ("attention.key_length", Value::U32(64))]), 100).unwrap();
        assert_eq!(h.attn_scale, 1.0 / 16f32.sqrt());
        // More heads than dimensions would make that scale infinite: refused.
        let e = HParams::from_header(&header("gemma3", &[("block_count", Value::U32(62)), ("embedding_length", Value::U32(4)), ("attention.head_count", Value::U32(8)), ("attention.head_count_kv", Value::U32(8)), ("attention.key_length", Value::U32(4)), ("attention.value_length", Value::U32(4))]), 100).unwrap_err();
        assert!(e.code() == "BAD_METADATA" && e.to_string().contains("more heads"), "{e}");
    }

    #[test]
    fn rope_scaling_keys() {
        let lin = [("rope.scaling.type", Value::String("linear".into())), ("rope.scaling.factor", Value::F32(4.0))];
        let h = HParams::from_header(&header("llama", &lin), 100).unwrap();
        assert_eq!(h.rope_freq_scale(), 0.25);
        let yarn = [("rope.scaling.type", Value::String("yarn".into())), ("rope.scaling.factor", Value::F32(4.0))];
        assert_eq!(HParams::from_header(&header("llama", &yarn), 100).unwrap_err().code(), "UNSUPPORTED_MODEL");
        let l3 = [
            ("rope.scaling.type", Value::String("llama3".into())),
            ("rope.scaling.factor", Value::F32(8.0)),
            ("rope.scaling.low_freq_factor", Value::F32(1.0)),
            ("rope.scaling.high_freq_factor", Value::F32(4.0)),
            ("rope.scaling.original_context_length", Value::U32(8192)),
        ];
        assert!(matches!(HParams::from_header(&header("llama", &l3), 100).unwrap().rope_scaling, RopeScaling::Llama3 { .. }));
        // A type that is not a string is a broken file, not linear by default (llama.cpp too).
        for ty in [Value::U32(1), Value::Array(crate::gguf::Array::String(vec!["yarn".into()]))] {
            let bad = [("rope.scaling.type", ty), ("rope.scaling.factor", Value::F32(4.0))];
            let e = HParams::from_header(&header("llama", &bad), 100).unwrap_err();
            assert_eq!(e.code(), "BAD_METADATA", "{e}");
        }
    }

    #[test]
    fn refusals_are_typed() {
        assert_eq!(HParams::from_header(&header("mamba", &[]), 10).unwrap_err().code(), "UNSUPPORTED_MODEL");
        assert_eq!(HParams::from_header(&header("llama", &[("expert_count", Value::U32(8))]), 10).unwrap_err().code(), "UNSUPPORTED_MODEL");
        assert_eq!(HParams::from_header(&header("llama", &[("expert_used_count", Value::U32(2))]), 10).unwrap_err().code(), "BAD_METADATA");
        assert!(HParams::from_header(&header("llama", &[("expert_used_count", Value::U32(0))]), 10).is_ok());
        // The training context: the same rule on every target (usize is 32 bits in wasm).
        let ctx = |v: u64| HParams::from_header(&header("llama", &[("context_length", Value::U64(v))]), 10);
        assert_eq!(ctx(u64::from(u32::MAX)).unwrap().n_ctx_train, u32::MAX as usize);
        assert_eq!(ctx(1 << 32).unwrap_err().code(), "BAD_METADATA");
        let mut h = header("llama", &[]);
        h.metadata.retain(|(k, _)| k != "llama.embedding_length");
        assert_eq!(HParams::from_header(&h, 10).unwrap_err().code(), "BAD_METADATA");
        let h = header("llama", &[("attention.head_count_kv", Value::U32(3))]);
        assert_eq!(HParams::from_header(&h, 10).unwrap_err().code(), "BAD_METADATA");
        let h = header("llama", &[("attention.layer_norm_rms_epsilon", Value::String("x".into()))]);
        assert_eq!(HParams::from_header(&h, 10).unwrap_err().code(), "BAD_METADATA");
        let h = header("qwen2", &[("attention.head_count", Value::Array(crate::gguf::Array::U32(vec![4; 11])))]);
        assert_eq!(HParams::from_header(&h, 10).unwrap_err().code(), "UNSUPPORTED_MODEL");
        let h = header("qwen2", &[("attention.head_count", Value::Array(crate::gguf::Array::U32(vec![4; 12])))]);
        assert_eq!(HParams::from_header(&h, 10).unwrap().n_head, 4);
    }

    /// Float values that made every logit NaN (or the positions infinite) are refused.
    #[test]
    fn float_values_out_of_range_are_refused() {
        let bad: [(&str, Value); 7] = [
            ("attention.layer_norm_rms_epsilon", Value::F32(0.0)),
            ("attention.layer_norm_rms_epsilon", Value::F32(-1.0)),
            ("attention.layer_norm_rms_epsilon", Value::F64(1e300)),
            ("rope.freq_base", Value::F32(0.0)),
            ("rope.freq_base", Value::F32(-100.0)),
            ("rope.scale_linear", Value::F32(1e-45)),
            ("rope.scaling.factor", Value::F32(-2.0)),
        ];
        for (k, v) in bad {
            let e = HParams::from_header(&header("llama", &[(k, v.clone())]), 10).unwrap_err();
            assert_eq!(e.code(), "BAD_METADATA", "{k} = {v:?}: {e}");
        }
        let e = HParams::from_header(&header("gemma3", &[("final_logit_softcapping", Value::F64(1e300))]), 10).unwrap_err();
        assert_eq!(e.code(), "BAD_METADATA");
        let lin = [("rope.scaling.type", Value::String("linear".into())), ("rope.scaling.factor", Value::F32(1e-45))];
        assert_eq!(HParams::from_header(&header("llama", &lin), 10).unwrap_err().code(), "BAD_METADATA");
        let l3 = [
            ("rope.scaling.type", Value::String("llama3".into())),
            ("rope.scaling.factor", Value::F32(8.0)),
            ("rope.scaling.low_freq_factor", Value::F32(4.0)),
            ("rope.scaling.high_freq_factor", Value::F32(4.0)),
            ("rope.scaling.original_context_length", Value::F32(8192.0)),
        ];
        assert_eq!(HParams::from_header(&header("llama", &l3), 10).unwrap_err().code(), "BAD_METADATA");
        let swa = [("attention.sliding_window", Value::U32(512)), ("rope.freq_base_swa", Value::F32(0.0))];
        assert_eq!(HParams::from_header(&header("gemma3", &swa), 100).unwrap_err().code(), "BAD_METADATA");
        // Softcapping zero or negative means none, as in llama.cpp.
        assert_eq!(HParams::from_header(&header("gemma3", &[("final_logit_softcapping", Value::F32(0.0))]), 10).unwrap().final_logit_softcap, None);
    }

    /// Keys are read as llama.cpp reads them for each architecture (a random-model differential
    /// against llama.cpp found each of these read differently).
    #[test]
    fn keys_are_read_as_llama_cpp_reads_them() {
        let hp = |arch: &str, extra: &[(&str, Value)]| HParams::from_header(&header(arch, extra), 100).unwrap();
        // `attention.scale` is granite's: the four architectures here keep 1/sqrt(head_dim).
        for arch in ["llama", "qwen2", "qwen3", "gemma3"] {
            assert_eq!(hp(arch, &[("attention.scale", Value::F32(0.5))]).attn_scale, 0.25, "{arch}");
            assert_eq!(hp(arch, &[("attention.scale", Value::F64(1e300))]).attn_scale, 0.25, "{arch}");
        }
        // Final-logit soft-capping is Gemma's alone.
        for arch in ["llama", "qwen2", "qwen3"] {
            assert_eq!(hp(arch, &[("final_logit_softcapping", Value::F32(2.0))]).final_logit_softcap, None, "{arch}");
        }
        assert_eq!(hp("gemma3", &[("final_logit_softcapping", Value::F32(30.0))]).final_logit_softcap, Some(30.0));
        // RoPE scaling: the type defaults to linear; the factor is `rope.scaling.factor`, else
        // `rope.scale_linear`; 0 and 1 mean none, and so does the type "none".
        let scale = |extra: &[(&str, Value)]| hp("qwen2", extra).rope_freq_scale();
        assert_eq!(scale(&[("rope.scaling.factor", Value::F32(4.0))]), 0.25);
        assert_eq!(scale(&[("rope.scale_linear", Value::F32(2.0))]), 0.5);
        assert_eq!(scale(&[("rope.scaling.type", Value::String("linear".into())), ("rope.scale_linear", Value::F32(2.0))]), 0.5);
        assert_eq!(scale(&[("rope.scaling.factor", Value::F32(4.0)), ("rope.scale_linear", Value::F32(2.0))]), 0.25);
        assert_eq!(scale(&[("rope.scaling.factor", Value::F32(0.0)), ("rope.scale_linear", Value::F32(2.0))]), 1.0);
        assert_eq!(scale(&[("rope.scaling.type", Value::String("none".into())), ("rope.scaling.factor", Value::F32(4.0))]), 1.0);
    }
}
