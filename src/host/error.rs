//! The host's error: a stable machine-readable `code` and a message, and how the core's typed
//! errors become one.

use crate::engine::EngineError;
use crate::gguf::GgufError;
use crate::model::ModelError;
use crate::tokenizer::TokenizerError;

/// An error with a stable machine-readable `code` (passed on to JS as `Error.code`).
#[derive(Clone, Debug, PartialEq)]
pub struct HostError {
    pub code: String,
    pub message: String,
    /// The request parameter at fault, when one is (OpenAI's `error.param`).
    pub param: Option<String>,
}

impl HostError {
    pub fn new(code: &str, message: impl Into<String>) -> HostError {
        HostError { code: code.to_string(), message: message.into(), param: None }
    }

    /// This error, naming `param` as the request parameter at fault.
    pub fn with_param(mut self, param: &str) -> HostError {
        self.param = Some(param.to_string());
        self
    }
}

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for HostError {}

impl From<GgufError> for HostError {
    fn from(e: GgufError) -> Self {
        HostError::new(e.code(), e.to_string())
    }
}

impl From<ModelError> for HostError {
    fn from(e: ModelError) -> Self {
        HostError::new(e.code(), e.to_string())
    }
}

impl From<EngineError> for HostError {
    fn from(e: EngineError) -> Self {
        HostError::new(e.code(), e.to_string())
    }
}

impl From<TokenizerError> for HostError {
    fn from(e: TokenizerError) -> Self {
        HostError::new(e.code(), e.to_string())
    }
}
