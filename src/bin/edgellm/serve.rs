//! `edgellm serve --model M [--port 8080] [--host 127.0.0.1] [--api-key K]
//! [--cors-origin ORIGIN]... [--queue 16] [--max-tokens 1024] [--max-prompt-tokens N]
//! [--max-body-bytes 1048576] [--max-connections 256] [--model-id NAME]
//! [--allowed-host NAME,...] [--body-timeout-ms 30000] [--send-timeout-ms 30000]
//! [--max-prefill-ms 120000] [--watts-per-busy-core 1.33] [--threads N] [--kv-tokens N | --kv-bytes B]
//! [--kv-dtype f16|q8] [--kv-sinks K] [--kv-policy window-sinks|error]`
//!
//! The OpenAI-compatible server (see `edgellm::server`). Prints one line
//! `edgellm serve: listening on http://HOST:PORT ...` once it accepts requests (`--port 0`
//! picks a free port), then serves until the process is stopped. `--api-key` may also come from
//! the `EDGELLM_API_KEY` environment variable (not visible in the process list).

use edgellm::server::{start, ServerConfig};

use crate::args::{range, KvArgs};
use crate::threads::ThreadsArg;

/// The server's defaults, shown by `--help` (one place: `ServerConfig::new`).
fn d() -> ServerConfig {
    ServerConfig::new("")
}

fn ms(t: std::time::Duration) -> u64 {
    t.as_millis() as u64
}

/// OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions, /v1/models, /health)
#[derive(clap::Args, Debug)]
pub struct ServeArgs {
    /// The GGUF model file
    #[arg(long, value_name = "M")]
    model: String,
    /// TCP port; 0 picks a free one
    #[arg(long, default_value_t = d().port)]
    port: u16,
    /// Address to listen on
    #[arg(long, default_value_t = d().host)]
    host: String,
    /// Bearer token every request must carry (or the EDGELLM_API_KEY environment variable)
    #[arg(long, value_name = "K")]
    api_key: Option<String>,
    /// A browser origin allowed by CORS (may repeat)
    #[arg(long, value_name = "ORIGIN")]
    cors_origin: Vec<String>,
    /// Requests waiting for the model at most
    #[arg(long, value_name = "N", default_value_t = d().queue)]
    queue: usize,
    /// Largest max_tokens a request may ask
    #[arg(long, value_name = "N", default_value_t = d().max_tokens as u64)]
    max_tokens: u64,
    /// Longest prompt in tokens (default: the context)
    #[arg(long, value_name = "N")]
    max_prompt_tokens: Option<usize>,
    /// Largest request body
    #[arg(long, value_name = "B", default_value_t = d().max_body_bytes)]
    max_body_bytes: usize,
    /// Open connections at most
    #[arg(long, value_name = "N", default_value_t = d().max_connections)]
    max_connections: usize,
    /// The model's name in /v1/models and responses (default: from the file)
    #[arg(long, value_name = "NAME")]
    model_id: Option<String>,
    /// Host header values accepted, comma-separated (default: the listening address's)
    #[arg(long, value_name = "NAME,...")]
    allowed_host: Option<String>,
    /// Time a request body may take to arrive
    #[arg(long, value_name = "MS", default_value_t = ms(d().body_timeout))]
    body_timeout_ms: u64,
    /// Time a response write may block
    #[arg(long, value_name = "MS", default_value_t = ms(d().send_timeout))]
    send_timeout_ms: u64,
    /// Longest prefill before a request is cut; 0: no limit
    #[arg(long, value_name = "MS", default_value_t = d().max_prefill.map_or(0, ms))]
    max_prefill_ms: u64,
    /// Longest decoding of one request, all its choices; past it each ends with
    /// finish_reason "length". 0: no limit
    #[arg(long, value_name = "MS", default_value_t = d().max_decode.map_or(0, ms))]
    max_decode_ms: u64,
    /// Power model of usage.compute.energy_j (watts per busy core)
    #[arg(long, value_name = "W", default_value_t = d().power.watts_per_busy_core)]
    watts_per_busy_core: f64,
    #[command(flatten)]
    threads: ThreadsArg,
    #[command(flatten)]
    kv: KvArgs,
}

pub fn run(args: ServeArgs) -> Result<(), String> {
    let mut cfg = ServerConfig::new(&args.model);
    cfg.cors_origins = args.cors_origin;
    cfg.port = args.port;
    cfg.host = args.host;
    cfg.api_key = args.api_key.or_else(|| std::env::var("EDGELLM_API_KEY").ok().filter(|k| !k.is_empty()));
    if args.queue == 0 {
        return Err("--queue must be at least 1".into());
    }
    cfg.queue = args.queue;
    cfg.max_tokens = range("max-tokens", args.max_tokens, 1, edgellm::limits::MAX_NEW_TOKENS)?;
    cfg.max_prompt_tokens = args.max_prompt_tokens;
    cfg.max_body_bytes = args.max_body_bytes;
    cfg.max_connections = args.max_connections;
    cfg.model_id = args.model_id;
    if let Some(v) = args.allowed_host {
        cfg.allowed_hosts = v.split(',').map(|h| h.trim().to_string()).filter(|h| !h.is_empty()).collect();
    }
    let millis = |name, v, min, max| range(name, v, min, max).map(|ms| std::time::Duration::from_millis(ms as u64));
    cfg.body_timeout = millis("body-timeout-ms", args.body_timeout_ms, 1, 3_600_000)?;
    cfg.send_timeout = millis("send-timeout-ms", args.send_timeout_ms, 1, 3_600_000)?;
    // 0 = no limit on a prefill's duration.
    let prefill = millis("max-prefill-ms", args.max_prefill_ms, 0, 86_400_000)?;
    cfg.max_prefill = (!prefill.is_zero()).then_some(prefill);
    let decode = millis("max-decode-ms", args.max_decode_ms, 0, 86_400_000)?;
    cfg.max_decode = (!decode.is_zero()).then_some(decode);
    // The power model of usage.compute.energy_j (src/work.rs states the default's source).
    cfg.power = edgellm::work::PowerModel::new(args.watts_per_busy_core).map_err(|e| format!("--watts-per-busy-core: {}", e.message))?;
    cfg.threads = args.threads.count()?;
    cfg.kv = args.kv.options()?;
    let auth = if cfg.api_key.is_some() { "bearer token required" } else { "no auth" };
    let handle = start(cfg).map_err(|e| e.to_string())?;
    let m = handle.model();
    println!(
        "edgellm serve: listening on {} (model {}, sha256 {}, context {}, {auth})",
        handle.url(),
        m.id,
        m.sha256,
        m.max_context
    );
    if !m.has_chat_template {
        eprintln!(
            "edgellm serve: {} has no chat template: /v1/chat/completions writes turns in the built-in format for its vocabulary; \
             a base model continues such text rather than answering (/v1/completions serves raw text)",
            m.id
        );
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
    handle.wait();
    Ok(())
}
