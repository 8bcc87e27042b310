//! `edgellm serve --model M [--port 8080] [--host 127.0.0.1] [--api-key K]
//! [--cors-origin ORIGIN]... [--queue 16] [--max-tokens 1024] [--max-prompt-tokens N]
//! [--max-body-bytes 1048576] [--max-connections 256] [--model-id NAME]
//! [--allowed-host NAME,...] [--body-timeout-ms 30000] [--send-timeout-ms 30000]
//! [--max-prefill-ms 120000] [--watts-per-busy-core 1.33] [--threads N]`
//!
//! The OpenAI-compatible server (see `edgellm::server`). Prints one line
//! `edgellm serve: listening on http://HOST:PORT ...` once it accepts requests (`--port 0`
//! picks a free port), then serves until the process is stopped. `--api-key` may also come from
//! the `EDGELLM_API_KEY` environment variable (not visible in the process list).

use edgellm::server::{start, ServerConfig};

use crate::args::Args;

pub fn run(argv: &[String]) -> Result<(), String> {
    // --cors-origin may repeat; the shared parser keeps one value per name, so take them first.
    let mut origins = Vec::new();
    let mut rest = Vec::new();
    let mut i = 0;
    while i < argv.len() {
        let a = &argv[i];
        if a == "--cors-origin" {
            origins.push(argv.get(i + 1).cloned().ok_or("--cors-origin needs a value")?);
            i += 2;
            continue;
        }
        if let Some(v) = a.strip_prefix("--cors-origin=") {
            origins.push(v.to_string());
        } else {
            rest.push(a.clone());
        }
        i += 1;
    }
    let args = Args::parse(
        &rest,
        &["model", "port", "host", "api-key", "queue", "max-tokens", "max-prompt-tokens", "max-body-bytes", "max-connections", "model-id", "allowed-host", "body-timeout-ms", "send-timeout-ms", "max-prefill-ms", "watts-per-busy-core", crate::threads::OPTION],
        &[],
    )?;
    let mut cfg = ServerConfig::new(args.required("model")?);
    cfg.cors_origins = origins;
    if let Some(v) = args.parsed("port")? {
        cfg.port = v;
    }
    if let Some(v) = args.value("host") {
        cfg.host = v.to_string();
    }
    cfg.api_key = args.value("api-key").map(str::to_string).or_else(|| std::env::var("EDGELLM_API_KEY").ok().filter(|k| !k.is_empty()));
    if let Some(v) = args.parsed::<usize>("queue")? {
        if v == 0 {
            return Err("--queue must be at least 1".into());
        }
        cfg.queue = v;
    }
    if let Some(v) = args.count("max-tokens", 1, edgellm::limits::MAX_NEW_TOKENS)? {
        cfg.max_tokens = v;
    }
    cfg.max_prompt_tokens = args.parsed("max-prompt-tokens")?;
    if let Some(v) = args.parsed("max-body-bytes")? {
        cfg.max_body_bytes = v;
    }
    if let Some(v) = args.parsed("max-connections")? {
        cfg.max_connections = v;
    }
    cfg.model_id = args.value("model-id").map(str::to_string);
    if let Some(v) = args.value("allowed-host") {
        cfg.allowed_hosts = v.split(',').map(|h| h.trim().to_string()).filter(|h| !h.is_empty()).collect();
    }
    if let Some(ms) = args.count("body-timeout-ms", 1, 3_600_000)? {
        cfg.body_timeout = std::time::Duration::from_millis(ms as u64);
    }
    if let Some(ms) = args.count("send-timeout-ms", 1, 3_600_000)? {
        cfg.send_timeout = std::time::Duration::from_millis(ms as u64);
    }
    // 0 = no limit on a prefill's duration.
    if let Some(ms) = args.count("max-prefill-ms", 0, 86_400_000)? {
        cfg.max_prefill = (ms > 0).then(|| std::time::Duration::from_millis(ms as u64));
    }
    // The power model of usage.compute.energy_j (src/work.rs states the default's source).
    if let Some(w) = args.parsed::<f64>("watts-per-busy-core")? {
        cfg.power = edgellm::work::PowerModel::new(w).map_err(|e| format!("--watts-per-busy-core: {}", e.message))?;
    }
    cfg.threads = crate::threads::count(&args)?;
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
    use std::io::Write;
    let _ = std::io::stdout().flush();
    handle.wait();
    Ok(())
}
