//! `edgellm generate --model M (--prompt TEXT | --ids 2,818,5279) [--max-tokens N]
//! [--temperature T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R] [--seed S]
//! [--stop STR] [--chat] [--ignore-eos] [--json] [--trace N] [--threads N]
//! [--kv-tokens N | --kv-bytes B] [--kv-dtype f16|q8] [--kv-sinks K] [--kv-policy window-sinks|error]
//! [--head auto|full|checked|off]`
//!
//! `--head`: the output head of decode steps (`engine::HeadMode`): `auto` (default) screens it
//! where the model and sampler allow exactly, `full` computes every logit, `checked` screens
//! and asserts the screen against the full head on every step; `off` loads the model without
//! the head's re-layout (`ModelOptions::screened_head`: the file's Q8_0 layout, full head). The `head` object of `--json`
//! says which ran and the candidate counts.
//!
//! `--prompt` is tokenized with BOS as the metadata asks and special tokens parsed (`--chat`
//! first wraps it as one user turn in the model's chat template); `--ids` are used as given.
//! `--temperature 0` is greedy decoding with no penalties. Without `--json` the text streams
//! to stdout and a metrics line goes to stderr.
//!
//! Decode memory traffic (both outputs): `decode_weight_bytes_per_token` (weights one decode
//! step reads), `decode_kv_bytes_last_token` (K/V the last step's attention read),
//! `decode_bytes_per_token` (weights + mean K/V per step) and `decode_gb_s` =
//! `decode_bytes_per_token × decode_tok_s / 1e9` (see `GenerationMetrics`).
//!
//! KV cache: without `--kv-*` options the cache is a plain context of prompt + max tokens
//! (capped at the training context). Any `--kv-*` option makes it a bounded cache: budget
//! `--kv-tokens` (default: that same context) or `--kv-bytes`, storage `--kv-dtype` (f16, or
//! q8 = int8 with an f16 scale per 32 values), `--kv-policy window-sinks` (default: keep
//! `--kv-sinks` first tokens, default 4, and the most recent ones) or `error` (refuse past the
//! budget). `--json` output carries a `kv` object (`tokens_held`, `evicted`, `bytes`,
//! `budget_bytes`, and per layer kind); `--trace N` prints one JSON line to stderr every N
//! generated tokens: KV occupancy, allocated bytes, process RSS and decode speed over the last N.

use std::io::Write;
use std::sync::Arc;

use edgellm::engine::{GenerateOptions, HeadMode, Session, SessionOptions};
use edgellm::kv::KvOptions;
use edgellm::limits::{MAX_CONTEXT_TOKENS, MAX_NEW_TOKENS};
use edgellm::metrics::native_clock;
use edgellm::model::{Model, ModelOptions};
use edgellm::sampling::SamplerConfig;
use edgellm::tokenizer::{ChatMessage, Tokenizer};
use serde_json::json;

use crate::args::{range, KvArgs, TokenIds};
use crate::threads::ThreadsArg;

/// The output head of decode steps.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Head {
    /// Screen the head where the model and sampler allow it exactly
    #[default]
    Auto,
    /// Compute every logit
    Full,
    /// Screen, and assert the screen against the full head on every step
    Checked,
    /// Load the model without the head's re-layout (the file's layout, full head)
    Off,
}

/// Generate text (streams to stdout; metrics on stderr)
///
/// The sampling options apply when --temperature is above 0.
#[derive(clap::Args, Debug)]
#[command(group = clap::ArgGroup::new("input").required(true).args(["prompt", "ids"]))]
pub struct GenerateArgs {
    /// The GGUF model file
    #[arg(long, value_name = "M")]
    model: String,
    /// Prompt text (BOS as the metadata asks, special tokens parsed)
    #[arg(long, value_name = "TEXT")]
    prompt: Option<String>,
    /// Prompt token ids, used as given
    #[arg(long, value_name = "2,818,...")]
    ids: Option<TokenIds>,
    /// Tokens to generate at most (fewer when the model's training context leaves less room
    /// after the prompt: the run then ends with finish reason "length")
    #[arg(long, value_name = "N", default_value_t = 128)]
    max_tokens: u64,
    /// Sampling temperature; 0 is greedy decoding with no penalties
    #[arg(long, value_name = "T")]
    temperature: Option<f32>,
    /// Sample among the K most likely tokens (default, as every unset sampling option:
    /// llama.cpp's, `SamplerConfig::default`)
    #[arg(long, value_name = "K")]
    top_k: Option<usize>,
    /// Nucleus sampling: the smallest set of tokens with probability mass P
    #[arg(long, value_name = "P")]
    top_p: Option<f32>,
    /// Drop tokens less likely than P times the most likely one
    #[arg(long, value_name = "P")]
    min_p: Option<f32>,
    /// Penalty on tokens already in the context
    #[arg(long, value_name = "R")]
    repeat_penalty: Option<f32>,
    /// Sampling seed
    #[arg(long, value_name = "S")]
    seed: Option<u64>,
    /// Stop when the text contains STR
    #[arg(long, value_name = "STR")]
    stop: Option<String>,
    /// Wrap --prompt as one user turn in the model's chat template
    #[arg(long)]
    chat: bool,
    /// Do not stop at end-of-generation tokens
    #[arg(long)]
    ignore_eos: bool,
    /// One JSON object on stdout (text, ids, metrics, KV, head) instead of streamed text
    #[arg(long)]
    json: bool,
    /// Print one JSON line to stderr every N generated tokens (KV, RSS, decode speed)
    #[arg(long, value_name = "N")]
    trace: Option<usize>,
    /// The output head of decode steps
    #[arg(long, value_enum, default_value_t = Head::Auto)]
    head: Head,
    #[command(flatten)]
    threads: ThreadsArg,
    #[command(flatten)]
    kv: KvArgs,
}

/// A session with the KV options (or the plain context of `default_tokens`).
pub fn make_session(model: &Arc<Model>, opts: SessionOptions, kv: Option<&KvOptions>) -> Result<Session, String> {
    match kv {
        None => Ok(Session::new(model.clone(), opts)),
        Some(o) => {
            let cfg = o.to_config(opts.max_context).map_err(|e| format!("{e} [{}]", e.code()))?;
            Session::with_kv(model.clone(), opts, &cfg).map_err(|e| format!("{e} [{}]", e.code()))
        }
    }
}

/// Resident set size of this process in KiB (Linux), for memory traces.
pub fn rss_kib() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

pub fn run(args: GenerateArgs) -> Result<(), String> {
    let kv = args.kv.options()?;
    let exec = args.threads.exec()?;
    let path = args.model.as_str();
    let head_mode = match args.head {
        Head::Auto => HeadMode::Auto,
        Head::Full | Head::Off => HeadMode::Full,
        Head::Checked => HeadMode::Checked,
    };
    let model_opts = ModelOptions { screened_head: args.head != Head::Off };
    let model = Model::load_file_with(path, &model_opts).map_err(|e| format!("{path}: {e} [{}]", e.code()))?;
    let tok = Tokenizer::from_gguf(model.header()).map_err(|e| format!("{path}: tokenizer: {e} [{}]", e.code()))?;

    // clap's group "input" admits exactly one of them.
    let prompt_ids: Vec<u32> = match (&args.prompt, args.ids) {
        (None, Some(TokenIds(ids))) => ids,
        (None, None) => return Err("--prompt or --ids is required".into()),
        (Some(text), _) => {
            if args.chat {
                tok.encode_chat(&[ChatMessage::new("user", text)], true).map_err(|e| format!("chat template: {e} [{}]", e.code()))?
            } else {
                tok.encode(text, true, true)
            }
        }
    };
    if prompt_ids.is_empty() {
        return Err("the prompt has no tokens".into());
    }

    let max_tokens = range("max-tokens", args.max_tokens, 1, MAX_NEW_TOKENS)?;
    let defaults = SamplerConfig::default();
    // The server's ranges (`protocol::check_number`): a NaN temperature or a zero repeat
    // penalty is refused here as there.
    let check = |flag: &str, param: &str, v: Option<f32>| -> Result<Option<f32>, String> {
        v.map(|x| edgellm::protocol::request::check_number(param, x as f64).map(|_| x).map_err(|e| format!("--{flag}: {}", e.message))).transpose()
    };
    let temperature: f32 = check("temperature", "temperature", args.temperature)?.unwrap_or(defaults.temperature);
    let (top_p, min_p) = (check("top-p", "top_p", args.top_p)?, check("min-p", "min_p", args.min_p)?);
    let repeat_penalty = check("repeat-penalty", "repetition_penalty", args.repeat_penalty)?;
    let sampler = if temperature <= 0.0 {
        SamplerConfig::greedy()
    } else {
        SamplerConfig {
            temperature,
            top_k: args.top_k.unwrap_or(defaults.top_k),
            top_p: top_p.unwrap_or(defaults.top_p),
            min_p: min_p.unwrap_or(defaults.min_p),
            repeat_penalty: repeat_penalty.unwrap_or(defaults.repeat_penalty),
            seed: args.seed.unwrap_or(defaults.seed),
            ..defaults
        }
    };
    let trace: Option<usize> = args.trace.filter(|&n| n > 0);

    let hp = model.hparams();
    let want_ctx = prompt_ids.len().saturating_add(max_tokens).min(MAX_CONTEXT_TOKENS);
    let max_context = if hp.n_ctx_train > 0 { want_ctx.min(hp.n_ctx_train) } else { want_ctx };
    let model = Arc::new(model);
    let mut session = make_session(&model, SessionOptions { max_context, max_batch: 512, sampler, clock: native_clock, exec }, kv.as_ref())?;
    session.set_head_mode(head_mode);
    // The room the prompt leaves, by the rule the worker and the server apply.
    let budget = kv.as_ref().map(|_| session.kv().policy());
    let max_tokens = match edgellm::generate::room_after(session.kv().max_tokens(), budget, prompt_ids.len()) {
        Ok(room) => room.map_or(max_tokens, |room| max_tokens.min(room)),
        Err(e) => return Err(format!("{} [{}]", e.message, e.code)),
    };
    let opts = GenerateOptions {
        max_tokens,
        stop: args.stop.into_iter().collect(),
        stop_on_eog: !args.ignore_eos,
    };

    let json_out = args.json;
    let mut stdout = std::io::stdout();
    let mut on_text = |t: &str| {
        if !json_out {
            let _ = stdout.write_all(t.as_bytes());
            let _ = stdout.flush();
        }
        true
    };
    let mut steps = 0usize;
    let mut last = (0.0f64, 0.0f64); // (decode ms, generated) at the last trace line
    let mut on_step = |s: &Session, _id: u32| {
        steps += 1;
        let Some(every) = trace else { return };
        if !steps.is_multiple_of(every) {
            return;
        }
        let m = s.metrics();
        // The first step's time is TTFT (prefill), not decode.
        let decoded = m.generated_tokens.saturating_sub(1) as f64;
        let window_tok_s = if m.decode_ms > last.0 { 1000.0 * (decoded - last.1) / (m.decode_ms - last.0) } else { 0.0 };
        last = (m.decode_ms, decoded);
        let kv = s.kv_stats();
        eprintln!(
            "{}",
            json!({
                "step": steps,
                "tokens_held": kv.tokens_held,
                "evicted": kv.evicted,
                "kv_bytes": kv.bytes,
                "kv_budget_bytes": kv.budget_bytes,
                "kv_allocated_bytes": kv.allocated_bytes,
                "session_bytes": s.bytes(),
                "rss_kib": rss_kib(),
                "decode_tok_s": window_tok_s,
            })
        );
    };
    let rss_before = rss_kib();
    let g = session
        .generate_observed(&prompt_ids, &tok, &opts, &mut on_text, &mut on_step)
        .map_err(|e| format!("{e} [{}]", e.code()))?;
    let m = &g.metrics;
    let kv_stats = session.kv_stats();
    if json_out {
        println!(
            "{}",
            json!({
                "prompt_ids": g.prompt_ids,
                "cached_tokens": g.cached_tokens,
                "ids": g.ids,
                "text": g.text,
                "finish_reason": g.finish_reason.as_str(),
                "ttft_ms": m.ttft_ms,
                "tpot_ms": m.tpot_ms(),
                "prefill_tok_s": m.prefill_tok_s(),
                "decode_tok_s": m.decode_tok_s(),
                "decode_weight_bytes_per_token": m.decode_weight_bytes_per_token,
                "decode_kv_bytes_last_token": m.decode_kv_bytes_last_token,
                "decode_bytes_per_token": m.decode_bytes_per_token(),
                "decode_gb_s": m.decode_gb_s(),
                "head": m.head_report(),
                "kv": kv_stats,
                "rss_kib_before": rss_before,
                "rss_kib_after": rss_kib(),
            })
        );
    } else {
        println!();
        eprintln!(
            "[{}] {} | kv {} tokens held, {} evicted, {} / {} bytes",
            g.finish_reason.as_str(),
            m.summary(),
            kv_stats.tokens_held,
            kv_stats.evicted,
            kv_stats.bytes,
            kv_stats.budget_bytes
        );
    }
    Ok(())
}
