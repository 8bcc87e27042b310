//! The support policy: what this engine can run, decided from a GGUF header alone.

use crate::gguf::GgufHeader;
use crate::model::Arch;

use super::HostError;

/// Refuses, from the header alone, a model this engine cannot run: before any download of the
/// weights, rather than after.
pub fn check_supported(header: &GgufHeader) -> Result<(), HostError> {
    let arch = header.architecture().unwrap_or("");
    if Arch::from_name(arch).is_none() {
        return Err(HostError::new(
            "UNSUPPORTED_MODEL",
            format!("architecture {arch:?} is not supported (supported: llama, qwen2, qwen3, gemma3)"),
        ));
    }
    for t in &header.tensors {
        if !crate::quant::is_supported(t.ggml_type) {
            return Err(HostError::new(
                "UNSUPPORTED_TENSOR_TYPE",
                format!("tensor {} has type {}, which this engine cannot compute with", t.name, t.ggml_type),
            ));
        }
    }
    Ok(())
}
