//! `edgellm perplexity --model M --file F [--max-tokens N] [--chunk C] [--tail-from N] [--json] [--threads N]
//! [--kv-tokens N | --kv-bytes B] [--kv-dtype f16|q8] [--kv-sinks K] [--kv-policy window-sinks|error]`
//!
//! Teacher-forced perplexity of a text file: the text is tokenized (BOS as the metadata asks,
//! no special-token parsing), cut to `--max-tokens`, and fed through one session in chunks of
//! `--chunk` tokens (default 32); after each chunk the logits of every position score the
//! token that follows it (log-softmax over the whole vocabulary, in f64), so every token but
//! the first is scored once. With a bounded KV cache (`--kv-*`, as for `generate`) the cache
//! evicts as it goes, so each token is predicted from what the cache holds at that point;
//! without, the cache holds the whole text. Reports the perplexity over all scored tokens and
//! over the "tail": tokens at positions past `--tail-from` (default: the KV budget, where
//! eviction matters; give the same value to an unbounded run to compare), tokens/s, and the KV
//! figures.

use std::sync::Arc;
use std::time::Instant;

use edgellm::engine::SessionOptions;
use edgellm::metrics::native_clock;
use edgellm::model::Model;
use edgellm::sampling::SamplerConfig;
use edgellm::tokenizer::Tokenizer;
use serde_json::json;

use crate::args::KvArgs;
use crate::generate::{make_session, rss_kib};
use crate::threads::ThreadsArg;

/// Teacher-forced perplexity of a text file
///
/// Every token but the first is scored once, fed in chunks through one session; with --kv-*
/// options the cache evicts as it goes.
#[derive(clap::Args, Debug)]
pub struct PerplexityArgs {
    /// The GGUF model file
    #[arg(long, value_name = "M")]
    model: String,
    /// The text file to score
    #[arg(long, value_name = "F")]
    file: String,
    /// Score only the first N tokens of the text
    #[arg(long, value_name = "N")]
    max_tokens: Option<usize>,
    /// Tokens fed per forward pass
    #[arg(long, value_name = "C", default_value_t = 32)]
    chunk: usize,
    /// The tail: tokens at positions past N (default: the KV budget)
    #[arg(long, value_name = "N")]
    tail_from: Option<usize>,
    /// One JSON object on stdout
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    threads: ThreadsArg,
    #[command(flatten)]
    kv: KvArgs,
}

pub fn run(args: PerplexityArgs) -> Result<(), String> {
    let kv = args.kv.options()?;
    let exec = args.threads.exec()?;
    let path = args.model.as_str();
    let file = args.file.as_str();
    let text = std::fs::read_to_string(file).map_err(|e| format!("{file}: {e}"))?;
    let model = Model::load_file(path).map_err(|e| format!("{path}: {e} [{}]", e.code()))?;
    let tok = Tokenizer::from_gguf(model.header()).map_err(|e| format!("{path}: tokenizer: {e} [{}]", e.code()))?;
    let mut ids = tok.encode(&text, true, false);
    if let Some(n) = args.max_tokens {
        ids.truncate(n);
    }
    if ids.len() < 2 {
        return Err(format!("{file}: fewer than 2 tokens to score"));
    }
    let chunk: usize = args.chunk.max(1);

    let model = Arc::new(model);
    let opts = SessionOptions { max_context: ids.len(), max_batch: chunk, sampler: SamplerConfig::greedy(), clock: native_clock, exec };
    let mut session = make_session(&model, opts, kv.as_ref())?;
    let tail_from: usize = args.tail_from.unwrap_or(session.kv().max_tokens());
    let n_vocab = model.n_vocab();

    let t0 = Instant::now();
    let (mut nll, mut n_scored) = (0.0f64, 0usize);
    let (mut nll_after, mut n_after) = (0.0f64, 0usize);
    let mut start = 0;
    while start < ids.len() {
        let end = (start + chunk).min(ids.len());
        let logits = session.prefill_scored(&ids[start..end]).map_err(|e| format!("{e} [{}]", e.code()))?;
        for (i, row) in logits.chunks_exact(n_vocab).enumerate() {
            let pos = start + i;
            let Some(&next) = ids.get(pos + 1) else { break };
            let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
            let lse = max + row.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln();
            let l = lse - row[next as usize] as f64;
            nll += l;
            n_scored += 1;
            // The tail: predicted with more than `tail_from` tokens before it (with a bounded
            // cache of that budget, from a full, evicting cache).
            if pos + 1 > tail_from {
                nll_after += l;
                n_after += 1;
            }
        }
        start = end;
    }
    let secs = t0.elapsed().as_secs_f64();
    let ppl = (nll / n_scored as f64).exp();
    let ppl_after = (n_after > 0).then(|| (nll_after / n_after as f64).exp());
    let kv_stats = session.kv_stats();
    if args.json {
        println!(
            "{}",
            json!({
                "file": file,
                "tokens": ids.len(),
                "scored": n_scored,
                "chunk": chunk,
                "perplexity": ppl,
                "mean_nll": nll / n_scored as f64,
                "tail_from": tail_from,
                "tail_scored": n_after,
                "tail_perplexity": ppl_after,
                "seconds": secs,
                "tokens_per_s": ids.len() as f64 / secs,
                "kv": kv_stats,
                "rss_kib": rss_kib(),
            })
        );
    } else {
        println!("perplexity {ppl:.4} over {n_scored} tokens (chunks of {chunk}), {:.1} tok/s", ids.len() as f64 / secs);
        if let Some(p) = ppl_after {
            println!("perplexity {p:.4} over the {n_after} tokens at positions past {tail_from}");
        }
        println!(
            "kv: {} {} sinks {} | {} tokens held, {} evicted, {} / {} bytes",
            kv_stats.dtype, kv_stats.policy, kv_stats.sinks, kv_stats.tokens_held, kv_stats.evicted, kv_stats.bytes, kv_stats.budget_bytes
        );
    }
    Ok(())
}
