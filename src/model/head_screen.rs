//! Load-time set-up of the screened output head (`ops::screen`): the outlier dimensions of the
//! head's input are calibrated on a fixed text, then the Q8_0 head is re-laid out in place.
//!
//! Calibration: the fixed text below (prose, code, numbers, chat, French) runs through the
//! model once, on one thread; the energy Σ_t xn_t[i]² of each dimension of the final normalized
//! hidden rows ranks the dimensions, and the top [`outlier_count`] (ties: lower dimension) are
//! the ones whose `l` nibbles pass 1 reads. Deterministic: the same file gives the same
//! dimensions on every target (the forward pass is bit-identical across tiers and threads).

use crate::exec::Exec;
use crate::gguf::GgmlType;
use crate::ops::screen::outlier_count;
use crate::tokenizer::Tokenizer;

use super::{ForwardScratch, HeadOut, LogitRows, Model, ModelError};

const CALIBRATION_TEXT: &str = "The old lighthouse keeper climbed the stairs each evening. \
fn main() { let v: Vec<u32> = (1..=10).collect(); println!(\"{:?}\", v); } \
In 2023, revenue rose 4.7% to $1,284 million. User: What is the capital of France? \
Assistant: Paris. Le chat dort sur le canapé depuis ce matin.";

/// Token ids of the calibration text (the file's tokenizer), or a fixed spread of ids when the
/// file has no usable tokenizer.
fn calibration_ids(m: &Model) -> Vec<u32> {
    let n_vocab = m.n_vocab() as u32;
    let ids = Tokenizer::from_gguf(m.header()).map(|t| t.encode(CALIBRATION_TEXT, true, false)).unwrap_or_default();
    let ids: Vec<u32> = ids.into_iter().filter(|&id| id < n_vocab).take(CALIBRATION_TOKENS).collect();
    if ids.len() >= 8 {
        return ids;
    }
    (0..48u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 7) % n_vocab).collect()
}

/// Most calibration tokens, and how many go through one forward pass. The memory ledger counts
/// the calibration's KV cache in the runtime term (`memory::estimate`, part `calibration`).
pub const CALIBRATION_TOKENS: usize = 96;
const CALIBRATION_BATCH: usize = 16;

/// The top `k` dimensions of the head's input by energy over the calibration text.
fn calibrate(m: &Model, k: usize) -> Result<Vec<usize>, ModelError> {
    let ids = calibration_ids(m);
    let mut kv = m.new_kv_cache(ids.len());
    let mut s = ForwardScratch::new(Exec::Serial);
    let mut hidden = Vec::new();
    let d = m.hparams().n_embd;
    let mut energy = vec![0f64; d];
    // In batches of CALIBRATION_BATCH: the same hidden rows as one batch (every row is computed
    // independently of the batch it is in), with a pass scratch a fraction of the size. Wasm
    // memory never shrinks, so a load-time pass over all the tokens at once would leave its
    // scratch in the heap for good (measured in Chromium: runtime after load 21.65 MB in one batch,
    // 19.49 MB in batches of 16, against the ledger's 19.38 MB).
    for chunk in ids.chunks(CALIBRATION_BATCH) {
        m.run(chunk, &mut kv, &mut s, LogitRows::All, HeadOut::Hidden(&mut hidden))?;
        for row in hidden.chunks_exact(d) {
            for (e, &v) in energy.iter_mut().zip(row) {
                *e += v as f64 * v as f64;
            }
        }
    }
    let mut dims: Vec<usize> = (0..d).collect();
    dims.sort_by(|&a, &b| energy[b].total_cmp(&energy[a]).then(a.cmp(&b)));
    dims.truncate(k);
    Ok(dims)
}

/// Whether an output head of type `ty` on a model with these hyper-parameters gets the
/// screened head: Q8_0 (the planes' layout) and no soft-capping (the screen's threshold is on
/// the raw dot). The model and the memory ledger both ask this.
pub fn applies(ty: GgmlType, hp: &crate::model::HParams) -> bool {
    ty == GgmlType::Q8_0 && hp.final_logit_softcap.is_none()
}

/// Calibrates and re-lays out `m`'s output head when [`applies`] says so.
pub(super) fn prepare(m: &mut Model) -> Result<(), ModelError> {
    if !applies(m.head().ty, &m.hparams) {
        return Ok(());
    }
    let outliers = calibrate(m, outlier_count(m.hparams.n_embd))?;
    let head = match &mut m.output {
        Some(w) => w,
        None => &mut m.tok_embd,
    };
    head.split_planes(&outliers);
    // A NaN or infinite row scale: that row's logit is NaN, which the screen's bounds cannot
    // rank (and the full head would report at run time).
    if head.planes().is_some_and(|(l, _)| !l.finite_scales()) {
        let name = if m.output.is_some() { "output.weight" } else { "token_embd.weight" };
        return Err(ModelError::BadTensorData { name: name.into(), reason: "a block scale is NaN or infinite".into() });
    }
    Ok(())
}
