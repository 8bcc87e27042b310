//! `edgellm logits --model M --ids 2,818,5279 [--all-positions] [--top K] [--json] [--threads N]`:
//! teacher-forced scoring of a token sequence in one batched forward pass; prints the top-K
//! next-token logits at the last position (or at every position).

use edgellm::model::{ForwardScratch, LogitRows, Model};
use serde_json::json;

use crate::args::TokenIds;
use crate::threads::ThreadsArg;

/// Teacher-forced next-token logits (one batched pass)
#[derive(clap::Args, Debug)]
pub struct LogitsArgs {
    /// The GGUF model file
    #[arg(long, value_name = "M")]
    model: String,
    /// The token ids to score
    #[arg(long, value_name = "2,818,...")]
    ids: TokenIds,
    /// Logits shown per position
    #[arg(long, value_name = "K", default_value_t = 10)]
    top: usize,
    /// Every position, not only the last
    #[arg(long)]
    all_positions: bool,
    /// JSON on stdout
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    threads: ThreadsArg,
}

pub fn run(args: LogitsArgs) -> Result<(), String> {
    let path = args.model.as_str();
    let TokenIds(ids) = args.ids;
    if ids.is_empty() {
        return Err("--ids: no token ids".into());
    }
    let top = args.top;
    let all = args.all_positions;

    let exec = args.threads.exec()?;
    let model = Model::load_file(path).map_err(|e| format!("{path}: {e} [{}]", e.code()))?;
    let mut kv = model.new_kv_cache(ids.len());
    let mut scratch = ForwardScratch::new(exec);
    let mut logits = Vec::new();
    let rows = if all { LogitRows::All } else { LogitRows::Last };
    model.forward(&ids, &mut kv, &mut scratch, rows, &mut logits).map_err(|e| format!("{e} [{}]", e.code()))?;

    let n_vocab = model.n_vocab();
    let first = if all { 0 } else { ids.len() - 1 };
    let positions: Vec<(usize, Vec<(u32, f32)>)> = logits
        .chunks_exact(n_vocab)
        .enumerate()
        .map(|(i, row)| (first + i, top_k(row, top)))
        .collect();

    if args.json {
        let arr: Vec<_> = positions
            .iter()
            .map(|(pos, t)| json!({ "pos": pos, "top": t.iter().map(|&(id, l)| json!([id, l])).collect::<Vec<_>>() }))
            .collect();
        println!("{}", json!({ "positions": arr }));
    } else {
        for (pos, t) in &positions {
            let items: Vec<String> = t.iter().map(|(id, l)| format!("{id}:{l:.4}")).collect();
            println!("pos {pos} (after id {}): {}", ids[*pos], items.join(" "));
        }
    }
    Ok(())
}

/// The `k` largest logits, best first (ties: lower id first).
fn top_k(row: &[f32], k: usize) -> Vec<(u32, f32)> {
    let mut v: Vec<(u32, f32)> = row.iter().enumerate().map(|(i, &l)| (i as u32, l)).collect();
    let cmp = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    let k = k.min(v.len());
    if k > 0 && k < v.len() {
        v.select_nth_unstable_by(k - 1, cmp);
    }
    v.truncate(k);
    v.sort_by(cmp);
    v
}
