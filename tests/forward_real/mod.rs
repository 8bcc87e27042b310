//! A real model against llama.cpp and the float64 reference, from the fixtures
//! `tests/data/fwd_<name>_greedy.json` and `fwd_<name>_logits.json` made by
//! `tools/reference/make_forward_fixtures.py --model <name>` (used by forward_gemma.rs and
//! forward_smollm2.rs; the checks are described there).

use std::collections::HashSet;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use crate::common;

use edgellm::model::{ForwardScratch, LogitRows, Model};
use serde_json::Value;

const MARGIN: f64 = 0.5;
const SHORT_IDS: usize = 64;

fn log_softmax(row: &[f32]) -> Vec<f64> {
    let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v)) as f64;
    let lse = max + row.iter().map(|&v| (v as f64 - max).exp()).sum::<f64>().ln();
    row.iter().map(|&v| v as f64 - lse).collect()
}

fn ids_of(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

fn top_ids(row: &[f32], k: usize) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..row.len()).collect();
    idx.select_nth_unstable_by(k - 1, |&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
    idx.truncate(k);
    idx.sort_by(|&a, &b| row[b].total_cmp(&row[a]).then(a.cmp(&b)));
    idx
}

fn dist(d: &[f64]) -> (f64, f64) {
    let max = d.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    let rms = (d.iter().map(|x| x * x).sum::<f64>() / d.len().max(1) as f64).sqrt();
    (rms, max)
}

/// What one prompt's forward pass yields.
struct PromptResult {
    name: String,
    /// Greedy steps: (step, llama.cpp margin, llama.cpp token, our argmax, f64 argmax).
    steps: Vec<(usize, f64, u32, u32, u32)>,
    /// Log-softmax at the last prompt position (when the logits fixture covers the prompt).
    last: Option<Vec<f64>>,
    seconds: f64,
    n_tokens: usize,
}

/// How many prompts a model's fixtures must contribute (so a shrunken fixture cannot pass).
pub struct Expect {
    pub min_prompts: usize,
    pub min_logit_prompts: usize,
}

/// Runs the greedy and last-position checks of `tests/data/fwd_<name>_{greedy,logits}.json`
/// against the model at `path`; panics with every failure.
pub fn check(path: &Path, name: &str, expect: Expect) {
    let greedy: Value = serde_json::from_str(&std::fs::read_to_string(common::data(&format!("fwd_{name}_greedy.json"))).unwrap()).unwrap();
    let logits: Value = serde_json::from_str(&std::fs::read_to_string(common::data(&format!("fwd_{name}_logits.json"))).unwrap()).unwrap();
    let all = std::env::var("EDGELLM_FORWARD_ALL").as_deref() == Ok("1");
    let logit_names: HashSet<String> = logits["prompts"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap().to_string()).collect();

    let t_load = Instant::now();
    let model = Model::load_file(path).unwrap();
    let load_s = t_load.elapsed().as_secs_f64();
    let n_vocab = model.n_vocab();

    let prompts: Vec<&Value> = greedy["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| all || p["ids"].as_array().unwrap().len() <= SHORT_IDS)
        .collect();
    assert!(prompts.len() >= expect.min_prompts, "{} prompts", prompts.len());

    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).min(4);
    let t_all = Instant::now();
    std::thread::scope(|sc| {
        for _ in 0..workers {
            sc.spawn(|| {
                let mut scratch = ForwardScratch::default();
                let mut out = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(p) = prompts.get(i) else { break };
                    let t0 = Instant::now();
                    let name = p["name"].as_str().unwrap().to_string();
                    let ids = ids_of(&p["ids"]);
                    let tokens = ids_of(&p["tokens"]);
                    let margins: Vec<f64> = p["margin"].as_array().unwrap().iter().map(|m| m.as_f64().unwrap()).collect();
                    let f64_arg = ids_of(&p["f64_argmax"]);
                    let mut seq = ids.clone();
                    seq.extend_from_slice(&tokens[..tokens.len() - 1]);
                    // Rows: the last prompt position (step 0) always, then every checked step.
                    let checked: Vec<usize> = (0..tokens.len()).filter(|&k| k == 0 || margins[k] >= MARGIN).collect();
                    let rows: Vec<usize> = checked.iter().map(|&k| ids.len() - 1 + k).collect();
                    let mut kv = model.new_kv_cache(seq.len());
                    model.forward(&seq, &mut kv, &mut scratch, LogitRows::Rows(&rows), &mut out).unwrap();
                    let mut steps = Vec::new();
                    for (r, &k) in checked.iter().enumerate() {
                        let row = &out[r * n_vocab..(r + 1) * n_vocab];
                        steps.push((k, margins[k], tokens[k], edgellm::sampling::argmax(row), f64_arg[k]));
                    }
                    let last = logit_names.contains(&name).then(|| log_softmax(&out[..n_vocab]));
                    let res = PromptResult { name, steps, last, seconds: t0.elapsed().as_secs_f64(), n_tokens: seq.len() };
                    results.lock().unwrap().push(res);
                }
            });
        }
    });
    let wall = t_all.elapsed().as_secs_f64();
    let mut results = results.into_inner().unwrap();
    results.sort_by(|a, b| a.name.cmp(&b.name));

    // ---- Greedy agreement.
    let (mut n_checked, mut n_agree, mut n_agree_f64, mut n_f64_llama) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    let mut llama_off_f64 = Vec::new();
    let mut cpu = 0.0;
    let mut tokens_run = 0;
    for r in &results {
        cpu += r.seconds;
        tokens_run += r.n_tokens;
        let mut agree = 0;
        let mut checked = 0;
        for &(k, margin, want, got, f64_arg) in &r.steps {
            if margin < MARGIN {
                continue;
            }
            checked += 1;
            agree += (got == want) as usize;
            n_agree_f64 += (got == f64_arg) as usize;
            n_f64_llama += (f64_arg == want) as usize;
            if want != f64_arg {
                llama_off_f64.push(format!("{} step {k}: llama.cpp {want} (margin {margin:.3}), float64 {f64_arg}, ours {got}", r.name));
                if got != want && got != f64_arg {
                    failures.push(format!("{} step {k}: llama.cpp {want}, float64 {f64_arg}, ours {got}", r.name));
                }
            } else if got != want {
                failures.push(format!("{} step {k}: llama.cpp {want} (margin {margin:.3}, float64 agrees), ours {got}", r.name));
            }
        }
        n_checked += checked;
        n_agree += agree;
        eprintln!("{:<20} {:>4} tokens {:>6.1} s  agree {agree}/{checked} (margin >= {MARGIN})", r.name, r.n_tokens, r.seconds);
    }
    eprintln!(
        "greedy: {} prompts, {n_agree}/{n_checked} steps agree with llama.cpp where its margin >= {MARGIN}; \
         ours = float64 argmax at {n_agree_f64}/{n_checked}, llama.cpp = float64 at {n_f64_llama}/{n_checked}",
        results.len()
    );
    for l in &llama_off_f64 {
        eprintln!("  llama.cpp differs from float64: {l}");
    }
    eprintln!(
        "time: load {load_s:.1} s, forward {wall:.1} s wall on {workers} threads ({cpu:.1} s summed, {tokens_run} tokens, {:.1} tok/s per thread)",
        tokens_run as f64 / cpu
    );

    // ---- Last-prompt-position distributions.
    let by_name: std::collections::HashMap<&str, &PromptResult> = results.iter().map(|r| (r.name.as_str(), r)).collect();
    let mut n_logit_prompts = 0;
    for p in logits["prompts"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        let Some(r) = by_name.get(name) else { continue };
        let ours = r.last.as_ref().unwrap();
        n_logit_prompts += 1;
        let llama: Vec<(usize, f64)> = p["llama_top"].as_array().unwrap().iter().map(|e| (e[0].as_u64().unwrap() as usize, e[1].as_f64().unwrap())).collect();
        let f64_top: Vec<(usize, f64)> = p["f64_top"].as_array().unwrap().iter().map(|e| (e[0].as_u64().unwrap() as usize, e[2].as_f64().unwrap())).collect();
        let ours_f32: Vec<f32> = ours.iter().map(|&v| v as f32).collect();
        let our_top20 = top_ids(&ours_f32, 20);
        let our_set: HashSet<usize> = our_top20.iter().copied().collect();
        let shared_l: Vec<usize> = llama[..20].iter().map(|e| e.0).filter(|id| our_set.contains(id)).collect();
        let shared_f: Vec<usize> = f64_top[..20].iter().map(|e| e.0).filter(|id| our_set.contains(id)).collect();
        let lmap: std::collections::HashMap<usize, f64> = llama.iter().copied().collect();
        let fmap: std::collections::HashMap<usize, f64> = f64_top.iter().copied().collect();
        let (l_rms, l_max) = dist(&shared_l.iter().map(|&id| ours[id] - lmap[&id]).collect::<Vec<_>>());
        let (f_rms, f_max) = dist(&shared_f.iter().map(|&id| ours[id] - fmap[&id]).collect::<Vec<_>>());
        let lf = &p["figures"]["llama_vs_f64_shared_top20"];
        eprintln!(
            "{name:<20} top1 ours {} llama.cpp {} f64 {} | top-20 shared with llama.cpp {}/20: rms {l_rms:.3} max {l_max:.3} | \
             with f64 {}/20: rms {f_rms:.3} max {f_max:.3} | llama.cpp vs f64: rms {} max {}",
            our_top20[0], llama[0].0, f64_top[0].0, shared_l.len(), shared_f.len(), lf["rms"], lf["max_abs"]
        );
        // Top-1 as in the greedy check: identical where llama.cpp's top-2 margin is clear; in a
        // near-tie where llama.cpp and float64 pick different ids, ours must be one of them.
        let l_margin = llama[0].1 - llama[1].1;
        if our_top20[0] != llama[0].0 && (l_margin >= MARGIN || llama[0].0 == f64_top[0].0 || our_top20[0] != f64_top[0].0) {
            failures.push(format!("{name}: top-1 {} vs llama.cpp {} (margin {l_margin:.3}), float64 {}", our_top20[0], llama[0].0, f64_top[0].0));
        }
        if shared_l.len() < 15 {
            failures.push(format!("{name}: top-20 overlap {} < 15", shared_l.len()));
        }
        if l_rms > 0.5 || l_max > 1.0 {
            failures.push(format!("{name}: log-probs vs llama.cpp rms {l_rms:.3} max {l_max:.3}"));
        }
    }
    assert!(n_logit_prompts >= expect.min_logit_prompts, "only {n_logit_prompts} logits prompts ran");
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
