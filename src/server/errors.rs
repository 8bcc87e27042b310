//! Errors the server sends, in OpenAI's shape: `{"error": {"message", "type", "code"}}` with an
//! HTTP status. `code` is stable (clients branch on it); `type` is OpenAI's coarse class.

use serde_json::json;

use crate::host::HostError;

/// An error response. Build one with the constructors below so codes stay consistent.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub status: u16,
    /// OpenAI's class: `invalid_request_error`, `authentication_error`, `rate_limit_error`,
    /// `server_error`, `not_found_error`.
    pub kind: &'static str,
    /// Stable machine-readable code.
    pub code: String,
    pub message: String,
    /// Seconds, sent as `Retry-After` (429 `queue_full`, 503 `too_many_connections`).
    pub retry_after: Option<u64>,
    /// The request parameter at fault (OpenAI's `param`), when one is.
    pub param: Option<String>,
    /// The methods the path allows, sent as `Allow` (405 only).
    pub allow: Option<&'static str>,
}

impl ApiError {
    pub fn new(status: u16, kind: &'static str, code: &str, message: impl Into<String>) -> ApiError {
        ApiError { status, kind, code: code.to_string(), message: message.into(), retry_after: None, param: None, allow: None }
    }

    /// 400: a malformed or out-of-range request (`code` says which rule).
    pub fn invalid(code: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_request_error", code, message)
    }

    pub fn unauthorized() -> ApiError {
        ApiError::new(401, "authentication_error", "invalid_api_key", "missing or incorrect API key (send `Authorization: Bearer <key>`)")
    }

    pub fn not_found(path: &str) -> ApiError {
        ApiError::new(404, "not_found_error", "not_found", format!("no route for {path}"))
    }

    /// 405, with the methods `path` allows (`Allow`, as RFC 9110 asks).
    pub fn method_not_allowed(method: &str, path: &str, allow: &'static str) -> ApiError {
        ApiError { allow: Some(allow), ..ApiError::new(405, "invalid_request_error", "method_not_allowed", format!("{method} is not allowed on {path} (allowed: {allow})")) }
    }

    pub fn body_too_large(limit: usize) -> ApiError {
        ApiError::new(413, "invalid_request_error", "body_too_large", format!("the request body exceeds {limit} bytes"))
    }

    pub fn queue_full(capacity: usize, retry_after: u64) -> ApiError {
        ApiError {
            retry_after: Some(retry_after),
            ..ApiError::new(429, "rate_limit_error", "queue_full", format!("the request queue is full ({capacity} waiting); retry after {retry_after} s"))
        }
    }

    /// 503 to a connection refused because every connection slot is busy (see `conns`).
    pub fn too_many_connections(max: usize) -> ApiError {
        let secs = 1;
        ApiError {
            retry_after: Some(secs),
            ..ApiError::new(503, "server_error", "too_many_connections", format!("all {max} connections are busy with requests; retry after {secs} s"))
        }
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "server_error", "internal_error", message)
    }

    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(503, "server_error", "unavailable", message)
    }

    /// An engine error: request problems are 400 (the prompt does not fit: OpenAI's
    /// `context_length_exceeded`; contents that cannot be kept literal), anything else 500.
    pub fn from_host(e: &HostError) -> ApiError {
        match e.code.as_str() {
            "PROMPT_TOO_LONG" | "CONTEXT_FULL" | "PROMPT_OVER_KV_BUDGET" => ApiError { param: e.param.clone(), ..ApiError::invalid("context_length_exceeded", e.message.clone()) },
            "INVALID_REQUEST" => ApiError { param: e.param.clone(), ..ApiError::invalid("invalid_request", e.message.clone()) },
            // The template cannot render this conversation: it refused it, or went past its
            // work or output budget (the output's grows with the messages). 400, as llama.cpp's
            // server answers any template failure.
            "CHAT_TEMPLATE_ERROR" | "CHAT_TEMPLATE_TOO_COSTLY" | "CHAT_TEMPLATE_OUTPUT_TOO_LARGE" => {
                ApiError::invalid("chat_template_error", format!("{} [{}]", e.message, e.code))
            }
            // The request's contents hold more distinct special-token texts than can be kept
            // literal: the client's input, not the engine.
            "CHAT_TEMPLATE_TOO_MANY_LITERALS" => ApiError::invalid("invalid_request", e.message.clone()),
            _ => ApiError::new(500, "server_error", "engine_error", format!("{} [{}]", e.message, e.code)),
        }
    }

    /// The JSON body: `{"error": {"message", "type", "code", "param"}}` (`param` null when no one
    /// parameter is at fault).
    pub fn body(&self) -> serde_json::Value {
        json!({ "error": { "message": self.message, "type": self.kind, "code": self.code, "param": self.param } })
    }
}

/// A broken protocol rule: 400, its code, naming the parameter.
impl From<crate::protocol::ProtocolError> for ApiError {
    fn from(e: crate::protocol::ProtocolError) -> Self {
        let param = if e.param.is_empty() { None } else { Some(e.param) };
        ApiError { param, ..ApiError::invalid(e.code, e.message) }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.status, self.code, self.message)
    }
}

impl std::error::Error for ApiError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_failure_is_a_400_chat_template_error() {
        for code in ["CHAT_TEMPLATE_ERROR", "CHAT_TEMPLATE_TOO_COSTLY", "CHAT_TEMPLATE_OUTPUT_TOO_LARGE"] {
            let e = ApiError::from_host(&HostError::new(code, "the template failed"));
            assert_eq!((e.status, e.code.as_str()), (400, "chat_template_error"), "{code}");
            assert!(e.message.contains(code), "{}", e.message);
        }
        assert_eq!(ApiError::from_host(&HostError::new("CHAT_TEMPLATE_TOO_MANY_LITERALS", "x")).code, "invalid_request");
        assert_eq!(ApiError::from_host(&HostError::new("MODEL_NON_FINITE", "x")).status, 500);
    }
}
