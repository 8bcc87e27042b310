//! The OpenAI protocol, defined once for every host: the request rules ([`request`]), the
//! errors they raise ([`error`]) and the response shapes the hosts share ([`response`]). `edgellm serve` (src/server) and the JS engine (the wasm
//! export `parse_openai_request`, called by the worker for the JS client and its router) use
//! the same code, so a request gets the same answer wherever it runs.

pub mod deep_json;
pub mod error;
pub mod request;
pub mod response;
pub mod tools;

pub use error::ProtocolError;
pub use response::{logprobs_json, usage, ChunkStream, Envelope, StepChunk, TextOffset};
pub use request::{parse_request, parse_request_json, Kind, OpenAiRequest, Param, RequestLimits, Rule, On, MAX_CHOICES, MAX_STOP, PARAMETERS};
