//! Hyper-parameters and model construction from a header: the geometry and estimate at
//! caller sizes taken from the input, the tokenizer from the metadata, and the model itself
//! when the file loads.
#![no_main]

use edgellm::memory::{Estimate, EstimateOptions, HeaderStats, KvElem, ModelGeometry};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Caller sizes from the last bytes (trailing bytes leave a seed GGUF valid).
    let file = data;
    let knobs = &data[data.len().saturating_sub(8)..];
    let knob = |i: usize| knobs.get(i).copied().unwrap_or(0) as usize;
    let Ok(edgellm::gguf::HeaderStatus::Complete(h)) = edgellm::gguf::parse_header(file) else { return };
    let _ = edgellm::tokenizer::Tokenizer::from_gguf(&h);
    if let Ok(g) = ModelGeometry::from_header(&h) {
        let o = EstimateOptions {
            kv_tokens: 1 + (knob(0) << (knob(1) % 23)),
            batch: 1 + knob(2) * knob(3),
            kv_dtype: if knob(4) & 1 == 0 { KvElem::F16 } else { KvElem::Q8 },
            ..EstimateOptions::default()
        };
        if o.check().is_ok() {
            let _ = Estimate::new(&g, &HeaderStats::of(&h, h.data_offset), &o);
        }
    }
    if let Ok(store) = edgellm::gguf::load_bytes(file) {
        if let Ok(m) = edgellm::model::Model::from_store(store) {
            let kv = edgellm::kv::KvOptions { tokens: Some(1 + knob(5)), ..Default::default() };
            if let Ok(cfg) = kv.to_config(16) {
                let _ = m.new_kv_cache_with(&cfg);
            }
        }
    }
});
