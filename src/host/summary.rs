//! The model summary the client shows (`ModelInfo`'s name, architecture, parameter count,
//! quantization, ...), from the header.

use crate::gguf::{file_type_name, GgmlType, GgufHeader};

pub(super) struct Summary {
    pub(super) name: String,
    pub(super) architecture: String,
    pub(super) tensor_count: usize,
    pub(super) n_params: u64,
    pub(super) context_length: Option<u64>,
    pub(super) quantization: Option<String>,
    pub(super) has_chat_template: bool,
}

pub(super) fn summarize(h: &GgufHeader) -> Summary {
    let architecture = h.architecture().unwrap_or("unknown").to_string();
    let name = h.get_str("general.name").map(str::to_string).unwrap_or_else(|| architecture.clone());
    let mut by_type: Vec<(GgmlType, u64)> = Vec::new();
    let mut n_params = 0u64;
    for t in &h.tensors {
        n_params += t.n_elements();
        match by_type.iter_mut().find(|(ty, _)| *ty == t.ggml_type) {
            Some(e) => e.1 += t.n_bytes(),
            None => by_type.push((t.ggml_type, t.n_bytes())),
        }
    }
    let quantization = h
        .get_u64("general.file_type")
        .and_then(file_type_name)
        .map(str::to_string)
        .or_else(|| by_type.iter().max_by_key(|(_, b)| *b).map(|(ty, _)| ty.name().to_string()));
    Summary {
        name,
        context_length: h.get_u64(&format!("{architecture}.context_length")),
        architecture,
        tensor_count: h.tensors.len(),
        n_params,
        quantization,
        has_chat_template: h.get_str("tokenizer.chat_template").is_some(),
    }
}
