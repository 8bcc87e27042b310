//! `edgellm generate --model M (--prompt TEXT | --ids 2,818,5279) [--max-tokens N]
//! [--temperature T] [--top-k K] [--top-p P] [--min-p P] [--repeat-penalty R] [--seed S]
//! [--stop STR] [--chat] [--json]`
//!
//! `--prompt` is tokenized with BOS as the metadata asks and special tokens parsed (`--chat`
//! first wraps it as one user turn in the model's chat template); `--ids` are used as given.
//! `--temperature 0` is greedy decoding with no penalties. Without `--json` the text streams
//! to stdout and a metrics line goes to stderr.

use std::io::Write;
use std::sync::Arc;

use edgellm::engine::{GenerateOptions, Session, SessionOptions};
use edgellm::metrics::native_clock;
use edgellm::model::Model;
use edgellm::sampling::SamplerConfig;
use edgellm::tokenizer::{ChatMessage, Tokenizer};
use serde_json::json;

use crate::args::Args;

pub fn run(argv: &[String]) -> Result<(), String> {
    let args = Args::parse(
        argv,
        &["model", "prompt", "ids", "max-tokens", "temperature", "top-k", "top-p", "min-p", "repeat-penalty", "seed", "stop"],
        &["chat", "json"],
    )?;
    let path = args.required("model")?;
    let model = Model::load_file(path).map_err(|e| format!("{path}: {e} [{}]", e.code()))?;
    let tok = Tokenizer::from_gguf(model.header()).map_err(|e| format!("{path}: tokenizer: {e} [{}]", e.code()))?;

    let prompt_ids: Vec<u32> = match (args.value("prompt"), args.ids("ids")?) {
        (Some(_), Some(_)) => return Err("give --prompt or --ids, not both".into()),
        (None, None) => return Err("--prompt or --ids is required".into()),
        (None, Some(ids)) => ids,
        (Some(text), None) => {
            if args.flag("chat") {
                tok.encode_chat(&[ChatMessage::new("user", text)], true).map_err(|e| format!("chat template: {e} [{}]", e.code()))?
            } else {
                tok.encode(text, true, true)
            }
        }
    };
    if prompt_ids.is_empty() {
        return Err("the prompt has no tokens".into());
    }

    let max_tokens: usize = args.parsed("max-tokens")?.unwrap_or(128);
    let defaults = SamplerConfig::default();
    let temperature: f32 = args.parsed("temperature")?.unwrap_or(defaults.temperature);
    let sampler = if temperature <= 0.0 {
        SamplerConfig::greedy()
    } else {
        SamplerConfig {
            temperature,
            top_k: args.parsed("top-k")?.unwrap_or(defaults.top_k),
            top_p: args.parsed("top-p")?.unwrap_or(defaults.top_p),
            min_p: args.parsed("min-p")?.unwrap_or(defaults.min_p),
            repeat_penalty: args.parsed("repeat-penalty")?.unwrap_or(defaults.repeat_penalty),
            seed: args.parsed("seed")?.unwrap_or(defaults.seed),
            ..defaults
        }
    };

    let hp = model.hparams();
    let want_ctx = prompt_ids.len() + max_tokens;
    let max_context = if hp.n_ctx_train > 0 { want_ctx.min(hp.n_ctx_train) } else { want_ctx };
    let model = Arc::new(model);
    let mut session = Session::new(
        model.clone(),
        SessionOptions { max_context, max_batch: 512, sampler, clock: native_clock },
    );
    let opts = GenerateOptions { max_tokens, stop: args.value("stop").map(|s| vec![s.to_string()]).unwrap_or_default(), stop_on_eog: true };

    let json_out = args.flag("json");
    let mut stdout = std::io::stdout();
    let mut on_text = |t: &str| {
        if !json_out {
            let _ = stdout.write_all(t.as_bytes());
            let _ = stdout.flush();
        }
        true
    };
    let g = session.generate(&prompt_ids, &tok, &opts, &mut on_text).map_err(|e| format!("{e} [{}]", e.code()))?;
    let m = &g.metrics;
    if json_out {
        println!(
            "{}",
            json!({
                "prompt_ids": g.prompt_ids,
                "ids": g.ids,
                "text": g.text,
                "finish_reason": g.finish_reason.as_str(),
                "ttft_ms": m.ttft_ms,
                "tpot_ms": m.tpot_ms(),
                "prefill_tok_s": m.prefill_tok_s(),
                "decode_tok_s": m.decode_tok_s(),
            })
        );
    } else {
        println!();
        eprintln!("[{}] {}", g.finish_reason.as_str(), m.summary());
    }
    Ok(())
}
