//! The OpenAI-compatible HTTP server (native only): `edgellm serve`, and in-process for tests.
//!
//! The same engine as the browser build, driven by the same step-wise [`Host`] calls, so a
//! greedy request gives the CLI's text. Layout:
//!
//! * [`routes`]: dispatch, handlers, `/health` and `/v1/models` bodies;
//! * [`openai`]: request parsing/validation and response shapes;
//! * [`sse`]: the streamed response body;
//! * [`queue`]: the bounded queue and the one inference thread;
//! * [`access`]: Host and Origin checks, bearer token and CORS;
//! * `conns`: open connections, the oldest idle one evicted when all slots are taken;
//! * [`errors`]: OpenAI-shaped errors with stable codes.
//!
//! Threads: one for I/O (a current-thread tokio runtime: parsing and relaying only) and one for
//! inference. A connection limit bounds accepted sockets; the queue bounds waiting requests;
//! the body limit bounds what each may hold, so memory stays bounded under any load.

mod access;
mod conns;
pub mod errors;
pub mod openai;
pub mod queue;
mod routes;
mod send_timeout;
mod sse;

use std::fs::File;
use std::io::Read;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::oneshot;

use crate::host::Host;
use crate::metrics::native_clock;
pub use errors::ApiError;
pub use routes::RequestStats;
use queue::Queue;
pub use queue::QueueStats;

/// How the server runs. [`ServerConfig::new`] gives the defaults.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub model_path: PathBuf,
    /// Interface to listen on (default 127.0.0.1: only this machine).
    pub host: String,
    /// 0 picks a free port (see [`ServerHandle::addr`]).
    pub port: u16,
    /// When set, `/v1/*` requires `Authorization: Bearer <api_key>`.
    pub api_key: Option<String>,
    /// Browser origins allowed by CORS (`*` for any); empty: no CORS headers.
    pub cors_origins: Vec<String>,
    /// Requests that may wait for the inference thread (the running one not counted).
    pub queue: usize,
    /// Largest request body, bytes.
    pub max_body_bytes: usize,
    /// Largest `max_tokens` a request may ask for; also the default.
    pub max_tokens: usize,
    /// Largest prompt, tokens (default and upper bound: the session's context − 1).
    pub max_prompt_tokens: Option<usize>,
    /// The model id in responses and `/v1/models` (default: the GGUF's `general.name`).
    pub model_id: Option<String>,
    /// Most connections open at once; a new one evicts the oldest idle connection (see
    /// `conns`), so slow clients cannot hold them all.
    pub max_connections: usize,
    /// `Host` names accepted besides IP addresses and `localhost` (`*`: any), against DNS
    /// rebinding (see `access`).
    pub allowed_hosts: Vec<String>,
    /// Time a client has to send a request's headers.
    pub header_timeout: Duration,
    /// Time a client has to send a request's body once its headers are in.
    pub body_timeout: Duration,
    /// Longest a response write may stay blocked (a client that stopped reading) before the
    /// connection is dropped (see `send_timeout`).
    pub send_timeout: Duration,
    /// Longest prefill of one request: past it the request fails (`prefill_timeout`) and the
    /// queue moves on.
    pub max_prefill: Option<Duration>,
    /// Longest decoding of one request (all its `n` choices): past it every choice ends with
    /// finish_reason "length" (`Host::generate_cut`), so `n` × `max_tokens` cannot hold the one
    /// inference thread for long. The default lets a whole `max_tokens` answer finish on a
    /// slow machine (1,024 tokens at 5 tok/s).
    pub max_decode: Option<Duration>,
    /// The power model of `usage.compute.energy_j` (default `work::DEFAULT_WATTS_PER_BUSY_CORE`).
    pub power: crate::work::PowerModel,
    /// Threads the inference thread splits each forward pass over (1: just itself).
    pub threads: usize,
    /// The KV cache's budget, storage and policy (`None`: the plain context), as the
    /// worker's `kv` option: with `window-sinks` a conversation goes on past the budget.
    pub kv: Option<crate::kv::KvOptions>,
}

impl ServerConfig {
    pub fn new(model_path: impl Into<PathBuf>) -> ServerConfig {
        ServerConfig {
            model_path: model_path.into(),
            host: "127.0.0.1".into(),
            port: 8080,
            api_key: None,
            cors_origins: Vec::new(),
            queue: 16,
            max_body_bytes: crate::limits::DEFAULT_MAX_REQUEST_BYTES,
            max_tokens: 1024,
            max_prompt_tokens: None,
            model_id: None,
            max_connections: 256,
            allowed_hosts: Vec::new(),
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            send_timeout: Duration::from_secs(30),
            max_prefill: Some(Duration::from_secs(120)),
            max_decode: Some(Duration::from_secs(300)),
            power: crate::work::PowerModel::default(),
            threads: 1,
            kv: None,
        }
    }
}

/// What `/v1/models` says about the model.
#[derive(Clone, Debug)]
pub struct ModelCard {
    pub id: String,
    pub sha256: String,
    pub file_size: u64,
    pub architecture: String,
    pub quantization: Option<String>,
    /// The training context from the GGUF.
    pub context_length: Option<u64>,
    /// Positions the server's session holds (prompt + generated).
    pub max_context: usize,
    pub created: u64,
    /// Whether the file has its own chat template (else chat turns take the built-in format
    /// for its vocabulary; a base model then continues the text rather than answering).
    pub has_chat_template: bool,
}

/// Why the server could not start. `code`: `MODEL_LOAD_FAILED`, `BAD_CONFIG`, `THREADS_FAILED`,
/// `BIND_FAILED`, `IO`.
#[derive(Clone, Debug, PartialEq)]
pub struct ServerError {
    pub code: &'static str,
    pub message: String,
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} [{}]", self.message, self.code)
    }
}

impl std::error::Error for ServerError {}

/// A running server. Dropping it stops the server (as [`ServerHandle::stop`]).
pub struct ServerHandle {
    addr: SocketAddr,
    card: ModelCard,
    shutdown: Option<oneshot::Sender<()>>,
    io_thread: Option<JoinHandle<()>>,
    inference_thread: Option<JoinHandle<()>>,
    queue_stats: Arc<QueueStats>,
    request_stats: Arc<RequestStats>,
}

impl ServerHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://host:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn model(&self) -> &ModelCard {
        &self.card
    }

    pub fn queue_stats(&self) -> &QueueStats {
        &self.queue_stats
    }

    pub fn request_stats(&self) -> &RequestStats {
        &self.request_stats
    }

    /// Blocks until the server stops (it runs until the process ends, for `edgellm serve`).
    pub fn wait(mut self) {
        if let Some(t) = self.io_thread.take() {
            let _ = t.join();
        }
    }

    /// Stops accepting, drops every connection (their generations stop at the next step) and
    /// joins both threads.
    pub fn stop(mut self) {
        self.shutdown_now();
    }

    fn shutdown_now(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.io_thread.take() {
            let _ = t.join();
        }
        if let Some(t) = self.inference_thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.shutdown_now();
    }
}

/// Loads the model through the same streaming path as the browser (SHA-256 computed on the way).
pub fn load_host(path: &std::path::Path) -> Result<Host, ServerError> {
    let fail = |code: &str, m: String| ServerError { code: "MODEL_LOAD_FAILED", message: format!("{}: {m} [{code}]", path.display()) };
    let mut f = File::open(path).map_err(|e| fail("IO", e.to_string()))?;
    let len = f.metadata().map_err(|e| fail("IO", e.to_string()))?.len();
    let mut host = Host::with_clock(native_clock);
    host.load_begin(len, None);
    let mut buf = vec![0u8; 4 << 20];
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(fail("IO", e.to_string())),
        };
        host.load_push(&buf[..n]).map_err(|e| fail(&e.code, e.message))?;
    }
    host.load_finish().map_err(|e| fail(&e.code, e.message))?;
    Ok(host)
}

/// Loads the model, binds, and starts serving on two background threads.
pub fn start(cfg: ServerConfig) -> Result<ServerHandle, ServerError> {
    let mut host = load_host(&cfg.model_path)?;
    // usage.compute: the process's CPU time (every thread) under the configured power model.
    host.set_cpu_clock(crate::work::CpuClock::process());
    host.set_power_model(cfg.power).map_err(|e| ServerError { code: "BAD_CONFIG", message: e.message })?;
    host.set_threads(cfg.threads).map_err(|e| ServerError { code: "THREADS_FAILED", message: format!("{} [{}]", e.message, e.code) })?;
    if cfg.kv.is_some() {
        // The host's own code, when more precise, leads the message ("[BAD_KV_CONFIG]" once).
        let message = |e: crate::host::HostError| if e.code == "BAD_KV_CONFIG" { e.message } else { format!("{}: {}", e.code, e.message) };
        host.set_kv_options(cfg.kv.clone()).map_err(|e| ServerError { code: "BAD_KV_CONFIG", message: message(e) })?;
    }
    let info = host.model_info().expect("a model is loaded").clone();
    let card = ModelCard {
        id: cfg.model_id.clone().unwrap_or_else(|| info.name.clone()),
        sha256: info.sha256.clone(),
        file_size: info.file_size,
        architecture: info.architecture.clone(),
        quantization: info.quantization.clone(),
        context_length: info.context_length,
        max_context: info.max_context,
        created: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()),
        has_chat_template: info.has_chat_template,
    };
    // The longest prompt that leaves room for one token, by the hosts' one rule: any length
    // under a window-sinks budget (old tokens are evicted as the prompt goes in).
    let room = match crate::generate::room_after(info.max_context, cfg.kv.as_ref().map(|k| k.policy()), 0) {
        Ok(Some(max)) => max.saturating_sub(1).max(1),
        _ => crate::limits::MAX_CONTEXT_TOKENS,
    };
    let max_prompt_tokens = cfg.max_prompt_tokens.unwrap_or(room).min(room);

    let io = |e: std::io::Error| ServerError { code: "IO", message: e.to_string() };
    let listener = TcpListener::bind((cfg.host.as_str(), cfg.port))
        .map_err(|e| ServerError { code: "BIND_FAILED", message: format!("cannot listen on {}:{}: {e}", cfg.host, cfg.port) })?;
    listener.set_nonblocking(true).map_err(io)?;
    let addr = listener.local_addr().map_err(io)?;

    let (queue, inference_thread) = Queue::start(host, cfg.queue).map_err(io)?;
    let queue_stats = queue.stats.clone();
    let request_stats = Arc::new(RequestStats::default());
    let max_connections = cfg.max_connections.max(1);
    let state = Arc::new(routes::State {
        cfg,
        card: card.clone(),
        queue,
        requests: request_stats.clone(),
        started: Instant::now(),
        max_prompt_tokens,
    });
    let (shutdown_tx, shutdown_rx) = oneshot::channel();
    let io_thread = std::thread::Builder::new()
        .name("edgellm-http".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("edgellm serve: cannot start the I/O runtime: {e}");
                    return;
                }
            };
            rt.block_on(accept_loop(listener, state, shutdown_rx, max_connections));
            // Dropping the runtime drops every connection task (and with them the event
            // receivers, which stops their generations).
            rt.shutdown_timeout(Duration::from_millis(200));
        })
        .map_err(io)?;
    Ok(ServerHandle {
        addr,
        card,
        shutdown: Some(shutdown_tx),
        io_thread: Some(io_thread),
        inference_thread: Some(inference_thread),
        queue_stats,
        request_stats,
    })
}

async fn accept_loop(listener: TcpListener, state: Arc<routes::State>, mut shutdown: oneshot::Receiver<()>, max_connections: usize) {
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("edgellm serve: {e}");
            return;
        }
    };
    let conns = conns::Conns::new(max_connections);
    let cors_origins: Arc<[String]> = Arc::from(state.cfg.cors_origins.clone());
    let refusals = Arc::new(tokio::sync::Semaphore::new(conns::MAX_REFUSALS));
    loop {
        let stream = tokio::select! {
            _ = &mut shutdown => return,
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(e) => {
                    // E.g. out of file descriptors: back off instead of spinning.
                    eprintln!("edgellm serve: accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // Every slot busy (bounded by the queue): told 503 with Retry-After, or closed at once
        // when too many refusals are already being answered.
        let Some(conn) = conns.admit() else {
            if let Ok(permit) = refusals.clone().try_acquire_owned() {
                let header_timeout = state.cfg.header_timeout;
                let cors = cors_origins.clone();
                tokio::spawn(async move {
                    conns::answer_refused(stream, max_connections, header_timeout, cors).await;
                    drop(permit);
                });
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        let st = state.clone();
        let header_timeout = st.cfg.header_timeout;
        let send_timeout = st.cfg.send_timeout;
        tokio::spawn(async move {
            let c = conn.clone();
            let svc = service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                let st = st.clone();
                let mark = conns::RequestMark::new(c.clone());
                req.extensions_mut().insert(mark.clone());
                async move { Ok::<_, std::convert::Infallible>(routes::handle(st, req).await.map(|b| conns::Tracked::new(b, mark))) }
            });
            let serve = http1::Builder::new().timer(TokioTimer::new()).header_read_timeout(header_timeout).serve_connection(TokioIo::new(send_timeout::SendTimeout::new(stream, send_timeout)), svc);
            tokio::select! {
                _ = serve => {}
                _ = conn.evicted() => {}
            }
            conn.close();
        });
    }
}
