//! The screened output head (`ops::screen`) picks exactly the tokens the full head picks.
//!
//! - Tiny fixture models (their Q8_0 heads, tied and untied): generations in
//!   `HeadMode::Checked` (every step also computes the full head and asserts that each candidate's
//!   logit is bit-equal and every other logit below the threshold) equal, token for token, the
//!   same model loaded without the re-layout (`ModelOptions { screened_head: false }`, today's
//!   Q8_0 kernels) on the full head, for greedy, seeded top-k, seeded min-p, the default chain,
//!   pure temperature (Gumbel-max: the full head's run is the unscreened Gumbel-max reference)
//!   and repetition penalties (the penalized rows computed exactly); top-p without top-k, which
//!   needs every logit, runs the full head.
//! - The real model (Gemma 3 270M, tied Q8_0 head): a few prompts, greedy and seeded, checked.
//! - `cargo test --release --test head_screen -- --ignored --nocapture`: the long campaign
//!   (≥ 2,000 greedy tokens over many prompts, checked on every step), with the candidate
//!   counts and the bytes read per token.

mod common;
mod engine_common;

use std::sync::Arc;

use edgellm::engine::{GenerateOptions, HeadMode, Session, SessionOptions};
use edgellm::exec::Exec;
use edgellm::gguf::load_file;
use edgellm::model::{Model, ModelOptions};
use edgellm::sampling::SamplerConfig;
use edgellm::tokenizer::Tokenizer;

fn load(path: &std::path::Path, screened_head: bool) -> (Arc<Model>, Tokenizer) {
    let store = load_file(path).unwrap();
    let tok = Tokenizer::from_gguf(&store.header).unwrap();
    (Arc::new(Model::from_store_with(store, &ModelOptions { screened_head }).unwrap()), tok)
}

struct Run {
    ids: Vec<u32>,
    /// Candidates per screened step.
    candidates: Vec<usize>,
    metrics: edgellm::metrics::GenerationMetrics,
}

fn run(model: &Arc<Model>, tok: &Tokenizer, prompt: &str, sampler: SamplerConfig, mode: HeadMode, n: usize, exec: Exec) -> Run {
    let opts = SessionOptions { sampler, exec, ..SessionOptions::for_model(model) };
    let mut s = Session::new(model.clone(), opts);
    s.set_head_mode(mode);
    let ids = tok.encode(prompt, true, false);
    let gen_opts = GenerateOptions { max_tokens: n, stop: Vec::new(), stop_on_eog: false };
    let mut candidates = Vec::new();
    let g = s
        .generate_observed(&ids, tok, &gen_opts, &mut |_| true, &mut |s, _| {
            if let Some(sc) = s.screened() {
                candidates.push(sc.ids.len());
            }
        })
        .unwrap();
    Run { ids: g.ids, candidates, metrics: g.metrics }
}

fn samplers() -> Vec<(&'static str, SamplerConfig, bool)> {
    let min_p = SamplerConfig { temperature: 0.9, top_k: 0, top_p: 1.0, min_p: 0.1, seed: 7, ..SamplerConfig::default() };
    let top_k = SamplerConfig { temperature: 1.2, top_k: 20, top_p: 1.0, min_p: 0.0, seed: 3, ..SamplerConfig::default() };
    let chain = SamplerConfig { seed: 11, ..SamplerConfig::default() };
    let penalties = SamplerConfig { repeat_penalty: 1.3, ..SamplerConfig::greedy() };
    let pure_temp = SamplerConfig { temperature: 1.0, top_k: 0, top_p: 1.0, min_p: 0.0, seed: 5, ..SamplerConfig::default() };
    let cold = SamplerConfig { temperature: 0.35, seed: 9, ..pure_temp.clone() };
    let hot_penalized = SamplerConfig { temperature: 1.6, repeat_penalty: 1.2, presence_penalty: 0.3, frequency_penalty: 0.2, seed: 13, ..pure_temp.clone() };
    // The demo page's defaults for a base model (www/catalog.js): the default top-k 40 with a
    // repetition penalty.
    let demo = SamplerConfig { temperature: 0.7, top_p: 0.95, min_p: 0.05, repeat_penalty: 1.1, seed: 17, ..SamplerConfig::default() };
    let top_p_only = SamplerConfig { temperature: 0.8, top_k: 0, top_p: 0.9, min_p: 0.0, seed: 19, ..SamplerConfig::default() };
    // OpenAI's logit_bias: a band of ids pushed up (some then win, so the screen must rank
    // them exactly), bans, and small shifts; greedy, and Gumbel-max with penalties too.
    let bias: Vec<(u32, f32)> = (40..80).map(|i| (i, 6.0)).chain((0..40).map(|i| (i, -100.0))).chain([(200, 1.5), (300, -2.0)]).collect();
    let greedy_bias = SamplerConfig::greedy().with_logit_bias(bias.clone());
    let hot_bias = hot_penalized.clone().with_logit_bias(bias.clone());
    let min_p_bias = min_p.clone().with_logit_bias(bias);
    vec![
        ("greedy", SamplerConfig::greedy(), true),
        ("min-p", min_p, true),
        ("top-k", top_k, true),
        ("default chain", chain, true),
        ("penalties", penalties, true),
        ("pure temperature", pure_temp, true),
        ("pure temperature 0.35", cold, true),
        ("pure temperature 1.6 with penalties", hot_penalized, true),
        ("demo defaults", demo, true),
        ("greedy with logit_bias", greedy_bias, true),
        ("pure temperature with penalties and logit_bias", hot_bias, true),
        ("min-p with logit_bias", min_p_bias, true),
        ("top-p without top-k", top_p_only, false),
    ]
}

#[test]
fn tiny_models_pick_the_full_heads_tokens() {
    let mut screened_models = 0;
    for name in ["tiny_llama.gguf", "tiny_qwen2.gguf", "tiny_qwen3.gguf", "tiny_gemma3.gguf"] {
        let path = engine_common::data(name);
        let (screened, tok) = load(&path, true);
        let (plain, _) = load(&path, false);
        assert!(!plain.has_screened_head());
        if !screened.has_screened_head() {
            continue;
        }
        screened_models += 1;
        for (what, sampler, screens) in samplers() {
            for (i, prompt) in ["hello world, this is a test", "1, 2, 3, 4,"].into_iter().enumerate() {
                let want = run(&plain, &tok, prompt, sampler.clone(), HeadMode::Full, 24, Exec::Serial);
                let got = run(&screened, &tok, prompt, sampler.clone(), HeadMode::Checked, 24, Exec::Serial);
                assert_eq!(got.ids, want.ids, "{name} {what} prompt {i}");
                let m = &got.metrics;
                assert_eq!(m.head_screened_steps > 0, screens, "{name} {what}: {}", m.summary());
                assert_eq!(m.head_screened_steps + m.head_full_steps, got.ids.len() - 1);
                let threads = run(&screened, &tok, prompt, sampler.clone(), HeadMode::Auto, 24, Exec::with_threads(2).unwrap());
                assert_eq!(threads.ids, want.ids, "{name} {what} prompt {i}: 2 threads");
                assert_eq!(threads.candidates, got.candidates, "{name} {what}: the same candidates on 2 threads");
            }
        }
    }
    assert!(screened_models >= 2, "the fixtures have Q8_0 heads, tied and untied");
}

const PROMPTS: [&str; 12] = [
    "The history of the printing press begins",
    "def quicksort(xs):\n    \"\"\"Sort a list.\"\"\"\n",
    "User: How do I boil an egg?\nAssistant:",
    "The prime numbers below 100 are 2, 3, 5,",
    "La Révolution française commence en 1789 quand",
    "Once upon a time, in a small village by the sea,",
    "SELECT name, COUNT(*) FROM orders WHERE",
    "Photosynthesis converts light energy into",
    "Dear hiring manager, I am writing to apply for",
    "The quarterly report shows revenue of $4.2 million,",
    "fn main() {\n    let mut total = 0;\n",
    "Die Hauptstadt von Deutschland ist",
];

fn real_exec() -> Exec {
    Exec::with_threads(edgellm::exec::available_threads().clamp(1, 4)).unwrap()
}

#[test]
fn real_model_picks_the_full_heads_tokens() {
    let Some(path) = common::real_model() else { return };
    let (screened, tok) = load(&path, true);
    let (plain, _) = load(&path, false);
    assert!(screened.has_screened_head(), "Gemma 3's tied head is Q8_0");
    assert_eq!(screened.weight_bytes(), plain.weight_bytes(), "same bytes, re-laid out");
    for (i, prompt) in PROMPTS.iter().take(2).enumerate() {
        let want = run(&plain, &tok, prompt, SamplerConfig::greedy(), HeadMode::Full, 20, real_exec());
        let got = run(&screened, &tok, prompt, SamplerConfig::greedy(), HeadMode::Checked, 20, real_exec());
        assert_eq!(got.ids, want.ids, "greedy, prompt {i}");
        assert_eq!(got.metrics.head_screened_steps, 19);
    }
    for (what, sampler, _) in samplers().into_iter().filter(|s| s.2 && s.0 != "greedy") {
        let want = run(&plain, &tok, PROMPTS[5], sampler.clone(), HeadMode::Full, 10, real_exec());
        let got = run(&screened, &tok, PROMPTS[5], sampler.clone(), HeadMode::Checked, 10, real_exec());
        assert_eq!(got.ids, want.ids, "{what}");
        // The screen pays: fewer weight bytes per step than the full head (a step that falls
        // back reads pass 1 and the whole head: more).
        let auto = run(&screened, &tok, PROMPTS[5], sampler, HeadMode::Auto, 10, real_exec());
        assert_eq!(auto.ids, want.ids, "{what}");
        let m = &auto.metrics;
        assert!(m.decode_weight_bytes_per_token < plain.decode_weight_bytes() * 3 / 4, "{what}: {}", m.summary());
    }
}

/// One campaign: every prompt, `per` tokens each, with `sampler` (seeded per prompt), the
/// screened model checked on every step against the full head and its tokens equal to the
/// plain model's on the full head. Prints and returns the tokens compared.
fn campaign(what: &str, sampler: &SamplerConfig, per: usize) -> usize {
    let Some(path) = common::real_model() else { return 0 };
    let (screened, tok) = load(&path, true);
    let (plain, _) = load(&path, false);
    let mut all = Vec::new();
    let (mut tokens, mut fallbacks, mut steps, mut full_steps, mut bytes) = (0usize, 0usize, 0usize, 0usize, 0u64);
    for (i, prompt) in PROMPTS.iter().enumerate() {
        let sampler = SamplerConfig { seed: sampler.seed + i as u64, ..sampler.clone() };
        let want = run(&plain, &tok, prompt, sampler.clone(), HeadMode::Full, per, real_exec());
        let got = run(&screened, &tok, prompt, sampler, HeadMode::Checked, per, real_exec());
        assert_eq!(got.ids, want.ids, "{what}: prompt {i}");
        tokens += got.ids.len();
        fallbacks += got.metrics.head_fallback_steps;
        steps += got.metrics.head_screened_steps;
        full_steps += got.metrics.head_full_steps;
        bytes += got.metrics.decode_weight_bytes_total;
        all.extend(got.candidates);
        eprintln!("{what}, prompt {i}: {} tokens identical; {}", got.ids.len(), got.metrics.summary());
    }
    all.sort_unstable();
    eprintln!(
        "campaign ({what}): {tokens} tokens identical over {} prompts; {steps} screened steps ({fallbacks} fell back), {full_steps} on the full head after a fallback; candidates median {} p90 {} p99 {} max {}; weights {:.1} MB per decode step (full head: {:.1} MB)",
        PROMPTS.len(),
        all[all.len() / 2],
        all[all.len() * 9 / 10],
        all[all.len() * 99 / 100],
        all[all.len() - 1],
        bytes as f64 / (steps + full_steps) as f64 / 1e6,
        plain.decode_weight_bytes() as f64 / 1e6
    );
    tokens
}

fn tokens_per_prompt(default: usize) -> usize {
    std::env::var("EDGELLM_SCREEN_TOKENS_PER_PROMPT").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The long greedy campaign (run once, by hand; prints its figures).
#[test]
#[ignore]
fn real_model_long_campaign() {
    if common::real_model().is_none() {
        return;
    }
    assert!(campaign("greedy", &SamplerConfig::greedy(), tokens_per_prompt(200)) >= 2000);
}

/// The sampled campaign (by hand): pure temperature (Gumbel-max) at three temperatures, and
/// penalized sampling, each seeded, each step checked.
#[test]
#[ignore]
fn real_model_sampled_campaign() {
    if common::real_model().is_none() {
        return;
    }
    let per = tokens_per_prompt(100);
    let pure = SamplerConfig { top_k: 0, top_p: 1.0, min_p: 0.0, seed: 100, ..SamplerConfig::default() };
    let demo = SamplerConfig { temperature: 0.7, top_p: 0.95, min_p: 0.05, repeat_penalty: 1.1, seed: 200, ..SamplerConfig::default() };
    let mut total = 0;
    for (what, sampler) in [
        ("pure temperature 1.0", SamplerConfig { temperature: 1.0, ..pure.clone() }),
        ("pure temperature 0.7", SamplerConfig { temperature: 0.7, ..pure.clone() }),
        ("pure temperature 1.5", SamplerConfig { temperature: 1.5, ..pure.clone() }),
        ("demo defaults (top-k 40, top-p 0.95, min-p 0.05, T 0.7, repetition penalty 1.1)", demo),
        ("greedy, repetition penalty 1.3", SamplerConfig { repeat_penalty: 1.3, ..SamplerConfig::greedy() }),
    ] {
        // EDGELLM_SCREEN_ONLY=text: only the samplers whose name contains it.
        if std::env::var("EDGELLM_SCREEN_ONLY").is_ok_and(|only| !what.contains(&only)) {
            continue;
        }
        total += campaign(what, &sampler, per);
    }
    assert!(total >= PROMPTS.len() * per / 2);
}
