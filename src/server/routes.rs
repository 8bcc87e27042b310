//! The routes: one `handle` for every request, dispatching on method and path.
//!
//! ```text
//! GET  /health                 liveness + queue and request counters (no token needed)
//! GET  /v1/models              the model: id, sha256 of the GGUF, context limits
//!                              (HEAD on either: the headers of the GET)
//! POST /v1/chat/completions    OpenAI chat completions (JSON, or SSE with stream: true)
//! POST /v1/completions         OpenAI text completions (raw prompt, no chat template)
//! OPTIONS                      CORS preflight of any of those paths (or `*`)
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};

use super::conns::RequestMark;
use super::access::{allowed_origin, check_bearer, check_host, check_origin, check_target_host, cors_headers, preflight_headers};
use super::errors::ApiError;
use super::openai::{self, Envelope, Kind, Limits};
use super::queue::{self, Event, Job, Queue};
use super::sse::SseBody;
use super::{ModelCard, ServerConfig};

pub type ResBody = Either<Full<Bytes>, SseBody>;

/// Requests received, by route (every request counts, `/health` included, before any check).
#[derive(Debug, Default)]
pub struct RequestStats {
    pub total: AtomicU64,
    pub health: AtomicU64,
    pub models: AtomicU64,
    pub chat: AtomicU64,
    pub completions: AtomicU64,
    pub preflight: AtomicU64,
    pub other: AtomicU64,
    pub unauthorized: AtomicU64,
}

pub struct State {
    pub cfg: ServerConfig,
    pub card: ModelCard,
    pub queue: Queue,
    pub requests: Arc<RequestStats>,
    pub started: Instant,
    pub max_prompt_tokens: usize,
}

pub async fn handle(st: Arc<State>, req: Request<Incoming>) -> Response<ResBody> {
    let origin = allowed_origin(req.headers(), &st.cfg.cors_origins);
    let mut resp = match route(&st, req).await {
        Ok(r) => r,
        Err(e) => {
            if e.status == 401 {
                st.requests.unauthorized.fetch_add(1, Ordering::Relaxed);
            }
            error_response(&e)
        }
    };
    if let Some(o) = origin {
        cors_headers(resp.headers_mut(), o);
    }
    resp
}

/// The paths [`route`] answers (a preflight of any other is a 404).
fn is_route(path: &str) -> bool {
    matches!(path, "/health" | "/v1/models" | "/v1/chat/completions" | "/v1/completions") || path.starts_with("/v1/models/")
}

async fn route(st: &State, req: Request<Incoming>) -> Result<Response<ResBody>, ApiError> {
    let r = &st.requests;
    r.total.fetch_add(1, Ordering::Relaxed);
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    check_host(req.headers(), &st.cfg.allowed_hosts)?;
    check_target_host(req.uri().host(), &st.cfg.allowed_hosts)?;
    check_origin(req.headers(), &method, &st.cfg.cors_origins)?;
    if method == Method::OPTIONS {
        // A preflight of a route this server has (or of the server itself, `OPTIONS *`).
        if !(is_route(&path) || path == "*") {
            return Err(ApiError::not_found(&path));
        }
        r.preflight.fetch_add(1, Ordering::Relaxed);
        let mut resp = empty(StatusCode::NO_CONTENT);
        if allowed_origin(req.headers(), &st.cfg.cors_origins).is_some() {
            preflight_headers(resp.headers_mut(), req.headers().get("access-control-request-headers"));
        }
        return Ok(resp);
    }
    let counter = match path.as_str() {
        "/health" => &r.health,
        p if p == "/v1/models" || p.starts_with("/v1/models/") => &r.models,
        "/v1/chat/completions" => &r.chat,
        "/v1/completions" => &r.completions,
        _ => &r.other,
    };
    counter.fetch_add(1, Ordering::Relaxed);
    // HEAD is GET without the body (RFC 9110; hyper sends the headers only).
    let get = method == Method::GET || method == Method::HEAD;
    match (path.as_str(), &method) {
        ("/health", _) if get => Ok(json_response(StatusCode::OK, &health(st))),
        ("/v1/models", _) if get => {
            check_bearer(req.headers(), st.cfg.api_key.as_deref())?;
            Ok(json_response(StatusCode::OK, &models(st)))
        }
        ("/v1/chat/completions", &Method::POST) => {
            check_bearer(req.headers(), st.cfg.api_key.as_deref())?;
            completion(st, Kind::Chat, req).await
        }
        ("/v1/completions", &Method::POST) => {
            check_bearer(req.headers(), st.cfg.api_key.as_deref())?;
            completion(st, Kind::Completion, req).await
        }
        // OpenAI's "retrieve model": this server's one model by its id (percent-encoded in the
        // path), else 404 model_not_found.
        (p, _) if get && p.starts_with("/v1/models/") => {
            check_bearer(req.headers(), st.cfg.api_key.as_deref())?;
            let id = crate::percent::decode(&p["/v1/models/".len()..]);
            if id == st.card.id {
                Ok(json_response(StatusCode::OK, &model_object(st)))
            } else {
                Err(ApiError::new(404, "invalid_request_error", "model_not_found", format!("the model {id:?} does not exist; this server serves {:?}", st.card.id)))
            }
        }
        ("/health" | "/v1/models", m) => Err(ApiError::method_not_allowed(m.as_str(), &path, "GET, HEAD, OPTIONS")),
        ("/v1/chat/completions" | "/v1/completions", m) => Err(ApiError::method_not_allowed(m.as_str(), &path, "POST, OPTIONS")),
        (p, m) if p.starts_with("/v1/models/") => Err(ApiError::method_not_allowed(m.as_str(), &path, "GET, HEAD, OPTIONS")),
        _ => Err(ApiError::not_found(&path)),
    }
}

fn health(st: &State) -> Value {
    let q = &st.queue.stats;
    let r = &st.requests;
    let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
    json!({
        "status": "ok",
        "model": st.card.id,
        "sha256": st.card.sha256,
        "uptime_s": st.started.elapsed().as_secs_f64(),
        "queue": {
            "capacity": st.queue.capacity(),
            "waiting": q.waiting.load(Ordering::Relaxed),
            "running": q.running.load(Ordering::Relaxed),
            "mean_job_ms": q.mean_job_ms(),
        },
        "generations": {
            "completed": n(&q.completed),
            "cancelled": n(&q.cancelled),
            "failed": n(&q.failed),
            "rejected_queue_full": n(&q.rejected_full),
            "panics": n(&q.panics),
        },
        "requests": {
            "total": n(&r.total),
            "health": n(&r.health),
            "models": n(&r.models),
            "chat_completions": n(&r.chat),
            "completions": n(&r.completions),
            "preflight": n(&r.preflight),
            "other": n(&r.other),
            "unauthorized": n(&r.unauthorized),
        },
    })
}

fn models(st: &State) -> Value {
    json!({ "object": "list", "data": [model_object(st)] })
}

/// The model as OpenAI's model object, with the engine's facts about it.
fn model_object(st: &State) -> Value {
    let c = &st.card;
    json!({
            "id": c.id,
            "object": "model",
            "created": c.created,
            "owned_by": "edgellm",
            "sha256": c.sha256,
            "file_size": c.file_size,
            "architecture": c.architecture,
            "quantization": c.quantization,
            "context_length": c.context_length,
            "max_context": c.max_context,
            "max_prompt_tokens": st.max_prompt_tokens,
            "max_tokens": st.cfg.max_tokens,
            // "file": the GGUF's own template; "built-in": the engine's format for the
            // vocabulary (a model without one is often a base model: use /v1/completions).
            "chat_template": if c.has_chat_template { "file" } else { "built-in" },
    })
}

async fn read_body(req: Request<Incoming>, limit: usize, timeout: std::time::Duration) -> Result<Bytes, ApiError> {
    let declared = req.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(ApiError::body_too_large(limit));
    }
    let mark = req.extensions().get::<Arc<RequestMark>>().cloned();
    let read = tokio::time::timeout(timeout, Limited::new(req.into_body(), limit).collect()).await.map_err(|_| {
        ApiError::new(408, "invalid_request_error", "body_timeout", format!("the request body did not arrive within {} s", timeout.as_secs_f64()))
    })?;
    if let Some(m) = mark {
        m.read();
    }
    match read {
        Ok(b) => Ok(b.to_bytes()),
        Err(e) if e.downcast_ref::<http_body_util::LengthLimitError>().is_some() => Err(ApiError::body_too_large(limit)),
        Err(e) => Err(ApiError::invalid("body_read_error", format!("could not read the request body: {e}"))),
    }
}

async fn completion(st: &State, kind: Kind, req: Request<Incoming>) -> Result<Response<ResBody>, ApiError> {
    let body = read_body(req, st.cfg.max_body_bytes, st.cfg.body_timeout).await?;
    let parsed = openai::parse(kind, &body, Limits { max_tokens: st.cfg.max_tokens })?;
    let mut request = parsed.gen;
    let prompt_chars = request.prompt.as_deref().map_or(0, |p| p.chars().count());
    if request.seed.is_none() {
        request.seed = Some(random_u64());
    }
    let (tx, mut rx) = queue::events();
    st.queue.try_submit(Job { request, max_prompt_tokens: st.max_prompt_tokens, max_prefill: st.cfg.max_prefill, max_decode: st.cfg.max_decode, events: tx, enqueued: Instant::now() })?;
    let env = Envelope { kind, id: random_id(kind.id_prefix()), created: unix_now(), model: st.card.id.clone(), prompt_chars };
    // Wait for the inference thread to take the request: until then, an error is a plain JSON
    // error response (status and all), also for a streamed request.
    match rx.recv().await {
        Some(Event::Started { .. }) => {}
        Some(Event::Failed(e)) => return Err(e),
        _ => return Err(ApiError::internal("the generation ended before it started")),
    }
    if parsed.stream {
        let mut resp = Response::new(Either::Right(SseBody::new(rx, env, parsed.include_usage)));
        let h = resp.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
        h.insert("cache-control", HeaderValue::from_static("no-cache"));
        h.insert("x-accel-buffering", HeaderValue::from_static("no"));
        return Ok(resp);
    }
    loop {
        match rx.recv().await {
            Some(Event::Started { .. }) | Some(Event::Text { .. }) => {}
            Some(Event::Done { result, queue_ms }) => {
                let usage = openai::usage(&result, queue_ms);
                return Ok(json_response(StatusCode::OK, &env.completion(&openai::result_json(&result), usage)));
            }
            Some(Event::Failed(e)) => return Err(e),
            None => return Err(ApiError::internal("the generation ended without a result")),
        }
    }
}

// ── responses ──────────────────────────────────────────────────────────────────────────────

fn empty(status: StatusCode) -> Response<ResBody> {
    let mut r = Response::new(Either::Left(Full::new(Bytes::new())));
    *r.status_mut() = status;
    r
}

pub fn json_response(status: StatusCode, v: &Value) -> Response<ResBody> {
    let mut r = Response::new(Either::Left(Full::new(Bytes::from(v.to_string()))));
    *r.status_mut() = status;
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

pub fn error_response(e: &ApiError) -> Response<ResBody> {
    let status = StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = json_response(status, &e.body());
    if let Some(s) = e.retry_after {
        r.headers_mut().insert("retry-after", HeaderValue::from(s));
    }
    if let Some(a) = e.allow {
        r.headers_mut().insert("allow", HeaderValue::from_static(a));
    }
    if e.status == 401 {
        r.headers_mut().insert("www-authenticate", HeaderValue::from_static("Bearer"));
    }
    r
}

// ── ids ────────────────────────────────────────────────────────────────────────────────────

fn unix_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Not cryptographic: distinct ids and seeds (splitmix64 over time and a counter).
fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let t = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    crate::sampling::mix64(t ^ COUNTER.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed))
}

fn random_id(prefix: &str) -> String {
    format!("{prefix}{:016x}{:08x}", random_u64(), random_u64() as u32)
}
