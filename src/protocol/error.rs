//! A request that breaks a rule of the protocol: which parameter, which rule, in words.

/// A broken rule. `code` is OpenAI-style and stable (clients branch on it); `param` names the
/// parameter (`messages[2].tool_calls`, `stop`), empty when the body as a whole is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProtocolError {
    pub code: &'static str,
    pub param: String,
    pub message: String,
}

impl ProtocolError {
    pub fn new(code: &'static str, param: impl Into<String>, message: impl Into<String>) -> ProtocolError {
        ProtocolError { code, param: param.into(), message: message.into() }
    }

    /// A value of the wrong type or outside its range.
    pub fn invalid(param: impl Into<String>, message: impl Into<String>) -> ProtocolError {
        ProtocolError::new("invalid_value", param, message)
    }

    /// A parameter OpenAI defines that this engine does not implement: refused, never ignored.
    pub fn unsupported(param: impl Into<String>, message: impl Into<String>) -> ProtocolError {
        ProtocolError::new("unsupported_parameter", param, message)
    }
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ProtocolError {}

/// The hosts' code for every protocol error is `INVALID_REQUEST` (the rule's code is the detail).
impl From<ProtocolError> for crate::host::HostError {
    fn from(e: ProtocolError) -> Self {
        crate::host::HostError::new("INVALID_REQUEST", e.message)
    }
}
