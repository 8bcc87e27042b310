//! A header's hyper-parameters checked against the tensors it indexes, before anything is
//! sized by them.
//!
//! The metadata says how many blocks and how wide; the tensor index says what exists. Both the
//! memory estimate (from the skimmed header, before any download) and model construction read
//! the hyper-parameters through [`hparams_of`], so a file whose `block_count` is 2^40, whose
//! vocabulary is empty or whose `value_length` is 0 is refused here with a typed error instead
//! of sizing a vector, a loop or a division by it.

use std::collections::HashMap;

use crate::gguf::{GgufHeader, TensorInfo};
use crate::limits::MAX_VOCAB;

use super::{HParams, ModelError};

const TOKEN_EMBD: &str = "token_embd.weight";

/// The hyper-parameters of the model in `h` (`n_vocab` from the token embedding's shape), checked
/// against its tensor index: one block of tensors per declared layer and no more, the token
/// embedding and the first block's attention and FFN matrices as wide as the metadata says.
pub fn hparams_of(h: &GgufHeader) -> Result<HParams, ModelError> {
    let embd = h.tensor(TOKEN_EMBD).ok_or_else(|| ModelError::MissingTensor(TOKEN_EMBD.into()))?;
    if embd.dims.len() != 2 {
        return Err(ModelError::BadTensorShape { name: TOKEN_EMBD.into(), expected: vec![0, 0], got: embd.dims.clone() });
    }
    let n_vocab = usize::try_from(embd.dims[1]).unwrap_or(usize::MAX);
    if n_vocab == 0 || n_vocab > MAX_VOCAB {
        return Err(ModelError::BadMetadata {
            key: TOKEN_EMBD.into(),
            reason: format!("a vocabulary of {} tokens (1 to {MAX_VOCAB} supported)", embd.dims[1]),
        });
    }
    // The tokenizer's vocabulary must be the embedding's rows (llama.cpp refuses the tensor's
    // shape otherwise): a logit row with no token, or a token with no row, would reach code that
    // indexes one by the other (a grammar's token mask, detokenizing a sampled id).
    // A header skimmed for the memory estimate keeps a long array as an empty one (its
    // elements dropped as they stream by, `gguf::stream::Keep`): only a kept list is compared
    // (the load, which keeps every value, always compares; an empty list is the tokenizer's
    // own error).
    if let Some(tokens) = h.get_array(crate::tokenizer::KEY_TOKENS).filter(|t| !t.is_empty()) {
        if tokens.len() != n_vocab {
            return Err(ModelError::BadMetadata {
                key: crate::tokenizer::KEY_TOKENS.into(),
                reason: format!("{} tokens, but {TOKEN_EMBD} has {n_vocab} rows: the vocabulary and the model must agree", tokens.len()),
            });
        }
    }
    let hp = HParams::from_header(h, n_vocab)?;
    check_tensors(h, &hp)?;
    Ok(hp)
}

/// The tensor index by name (headers are searched linearly otherwise, which a header with
/// hundreds of thousands of tensors turns into billions of comparisons).
pub fn tensor_index(h: &GgufHeader) -> HashMap<&str, &TensorInfo> {
    h.tensors.iter().map(|t| (t.name.as_str(), t)).collect()
}

fn check_tensors(h: &GgufHeader, hp: &HParams) -> Result<(), ModelError> {
    let index = tensor_index(h);
    // Blocks present: every `blk.N.` up to the declared count, none beyond it.
    let mut present = vec![false; hp.n_layer];
    for t in &h.tensors {
        let Some(rest) = t.name.strip_prefix("blk.") else { continue };
        let Some(il) = rest.split('.').next().and_then(|s| s.parse::<u64>().ok()) else { continue };
        match usize::try_from(il).ok().and_then(|il| present.get_mut(il)) {
            Some(p) => *p = true,
            None => {
                return Err(block_count(hp, format!("the file has a tensor {} beyond its {} blocks", t.name, hp.n_layer)));
            }
        }
    }
    if let Some(missing) = present.iter().position(|&p| !p) {
        let found = present.iter().filter(|&&p| p).count();
        return Err(block_count(hp, format!("declares {} blocks, the file has tensors for {found} (none for block {missing})", hp.n_layer)));
    }
    let (q, k, v) = (hp.n_head * hp.head_dim_k, hp.n_head_kv * hp.head_dim_k, hp.n_head_kv * hp.head_dim_v);
    let d = hp.n_embd as u64;
    let want: [(&str, [u64; 2]); 5] = [
        (TOKEN_EMBD, [d, hp.n_vocab as u64]),
        ("blk.0.attn_q.weight", [d, q as u64]),
        ("blk.0.attn_k.weight", [d, k as u64]),
        ("blk.0.attn_v.weight", [d, v as u64]),
        ("blk.0.ffn_up.weight", [d, hp.n_ff as u64]),
    ];
    for (name, dims) in want {
        // Absent tensors are reported by model construction (MISSING_TENSOR); here only the
        // widths the estimate sizes buffers with matter.
        if let Some(t) = index.get(name) {
            if t.dims != dims {
                return Err(ModelError::BadTensorShape { name: name.into(), expected: dims.to_vec(), got: t.dims.clone() });
            }
        }
    }
    Ok(())
}

fn block_count(hp: &HParams, reason: String) -> ModelError {
    ModelError::BadMetadata { key: format!("{}.block_count", hp.arch.name()), reason }
}
