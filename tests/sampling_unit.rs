//! The sampler on hand-made logits: each stage alone, their order, penalties, seeding.

use edgellm::sampling::{argmax, gumbel, Rng, Sampler, SamplerConfig};

fn cfg() -> SamplerConfig {
    // Everything off, temperature 1: a plain draw from softmax(logits).
    SamplerConfig { temperature: 1.0, top_k: 0, top_p: 1.0, min_p: 0.0, ..SamplerConfig::default() }
}

fn ln(p: &[f32]) -> Vec<f32> {
    p.iter().map(|v| v.ln()).collect()
}

/// Frequencies of each id over `n` draws with seeds 0..n (a fresh sampler per seed).
fn freqs(c: &SamplerConfig, logits: &[f32], history: &[u32], n: usize) -> Vec<f64> {
    let mut counts = vec![0usize; logits.len()];
    let mut s = Sampler::new(c.clone());
    for _ in 0..n {
        counts[s.sample(logits, history) as usize] += 1;
    }
    counts.iter().map(|&c| c as f64 / n as f64).collect()
}

#[test]
fn greedy_is_argmax_first_on_ties() {
    let logits = [0.5f32, 3.0, -1.0, 3.0];
    assert_eq!(argmax(&logits), 1);
    let mut s = Sampler::new(SamplerConfig::greedy());
    for _ in 0..5 {
        assert_eq!(s.sample(&logits, &[1, 1, 1]), 1);
    }
}

#[test]
fn plain_draw_follows_softmax() {
    let logits = ln(&[0.6, 0.3, 0.1]);
    let f = freqs(&cfg(), &logits, &[], 20000);
    for (got, want) in f.iter().zip([0.6, 0.3, 0.1]) {
        assert!((got - want).abs() < 0.015, "{f:?}");
    }
}

#[test]
fn temperature_sharpens_and_flattens() {
    let logits = ln(&[0.6, 0.3, 0.1]);
    // T = 0.5 squares the probabilities: 0.36 : 0.09 : 0.01.
    let f = freqs(&SamplerConfig { temperature: 0.5, ..cfg() }, &logits, &[], 20000);
    let z = 0.36 + 0.09 + 0.01;
    assert!((f[0] - 0.36 / z).abs() < 0.015, "{f:?}");
    assert!((f[2] - 0.01 / z).abs() < 0.01, "{f:?}");
    // A huge temperature approaches uniform.
    let f = freqs(&SamplerConfig { temperature: 1000.0, ..cfg() }, &logits, &[], 20000);
    assert!(f.iter().all(|&p| (p - 1.0 / 3.0).abs() < 0.02), "{f:?}");
}

#[test]
fn top_k_keeps_only_the_k_best() {
    let logits = [1.0f32, 5.0, 4.0, 4.5, 0.0, 3.0];
    let f = freqs(&SamplerConfig { top_k: 3, temperature: 5.0, ..cfg() }, &logits, &[], 5000);
    for id in [0, 4, 5] {
        assert_eq!(f[id], 0.0, "id {id} outside the top 3: {f:?}");
    }
    for id in [1, 2, 3] {
        assert!(f[id] > 0.2, "{f:?}");
    }
    // top-k 1 is greedy whatever the seed.
    for seed in 0..20 {
        let mut s = Sampler::new(SamplerConfig { top_k: 1, seed, ..cfg() });
        assert_eq!(s.sample(&logits, &[]), 1);
    }
}

#[test]
fn top_p_keeps_the_smallest_sufficient_prefix() {
    let logits = ln(&[0.05, 0.5, 0.15, 0.3]);
    // 0.5 + 0.3 = 0.8 reaches 0.7 and 0.8: two tokens; 0.81 needs a third.
    for (p, kept) in [(0.7f32, vec![1, 3]), (0.79, vec![1, 3]), (0.81, vec![1, 2, 3]), (0.4, vec![1])] {
        let f = freqs(&SamplerConfig { top_p: p, ..cfg() }, &logits, &[], 4000);
        for id in 0..4 {
            assert_eq!(f[id] > 0.0, kept.contains(&id), "top_p {p}: {f:?}");
        }
    }
    // Renormalised among the kept: 0.5 / 0.8.
    let f = freqs(&SamplerConfig { top_p: 0.7, ..cfg() }, &logits, &[], 20000);
    assert!((f[1] - 0.625).abs() < 0.015, "{f:?}");
}

#[test]
fn min_p_drops_tokens_below_a_fraction_of_the_best() {
    let logits = ln(&[0.4, 0.25, 0.19, 0.16]);
    // 0.5 * 0.4 = 0.2: keeps 0.4 and 0.25 only.
    let f = freqs(&SamplerConfig { min_p: 0.5, ..cfg() }, &logits, &[], 4000);
    assert!(f[0] > 0.0 && f[1] > 0.0 && f[2] == 0.0 && f[3] == 0.0, "{f:?}");
    let f = freqs(&SamplerConfig { min_p: 0.45, ..cfg() }, &logits, &[], 4000);
    assert!(f[2] > 0.0 && f[3] == 0.0, "{f:?}");
}

#[test]
fn stages_compose_in_llama_cpp_order() {
    // top-k 3 leaves {0,1,2}; top-p 0.6 over *their* renormalised probabilities
    // (0.4/0.85 = 0.47, +0.3/0.85 = 0.82) keeps {0,1}.
    let logits = ln(&[0.4, 0.3, 0.15, 0.1, 0.05]);
    let f = freqs(&SamplerConfig { top_k: 3, top_p: 0.6, ..cfg() }, &logits, &[], 4000);
    assert!(f[0] > 0.0 && f[1] > 0.0 && f[2] == 0.0 && f[3] == 0.0 && f[4] == 0.0, "{f:?}");
}

#[test]
fn repeat_penalty_divides_positive_and_multiplies_negative() {
    let mut c = SamplerConfig::greedy();
    c.repeat_penalty = 2.0;
    let mut s = Sampler::new(c.clone());
    // 4.0 -> 2.0 < 3.0: the repeated favourite loses.
    assert_eq!(s.sample(&[4.0, 3.0, 0.0], &[0]), 1);
    // Negative logits get more negative: -1 -> -2 < -1.5.
    assert_eq!(s.sample(&[-1.0, -1.5, -9.0], &[0]), 1);
    // Without history nothing changes.
    assert_eq!(s.sample(&[4.0, 3.0, 0.0], &[]), 0);
    // Only the last `penalty_last_n` tokens count.
    c.penalty_last_n = 2;
    let mut s = Sampler::new(c);
    assert_eq!(s.sample(&[4.0, 3.0, 0.0], &[0, 2, 2]), 0);
    assert_eq!(s.sample(&[4.0, 3.0, 0.0], &[2, 0]), 1);
}

/// A penalty that is a valid f32 but tiny (1e-40, subnormal) makes a seen token's logit huge,
/// never infinite: every sampling chain still draws it (the penalty rewards repetition), with
/// no NaN on the way, and two such tokens tie to the lower id under greedy.
#[test]
fn a_tiny_repeat_penalty_keeps_logits_finite() {
    let logits = [1.0f32, 5.0, 2.0, 0.5];
    let history = [0, 2];
    for mut c in [SamplerConfig::greedy(), cfg(), SamplerConfig::default(), SamplerConfig { top_k: 0, ..SamplerConfig::default() }] {
        c.repeat_penalty = 1e-40;
        let mut drawn = std::collections::BTreeSet::new();
        for seed in 0..40 {
            c.seed = seed;
            drawn.insert(Sampler::new(c.clone()).sample(&logits, &history));
        }
        // Both seen tokens reach f32::MAX: greedy takes the lower id, and so does Gumbel-max
        // (pure temperature: the noise vanishes beside 3.4e38, a tie); a chain's draw either.
        let gumbel = c.top_k == 0 && c.top_p >= 1.0 && c.min_p <= 0.0;
        let want: &[u32] = if c.is_greedy() || gumbel { &[0] } else { &[0, 2] };
        assert_eq!(drawn.into_iter().collect::<Vec<_>>(), want, "{c:?}");
    }
}

#[test]
fn presence_and_frequency_penalties_subtract() {
    let mut c = SamplerConfig::greedy();
    c.frequency_penalty = 0.4;
    let mut s = Sampler::new(c.clone());
    // Token 0 seen 3 times: 4.0 - 1.2 = 2.8 < 3.0.
    assert_eq!(s.sample(&[4.0, 3.0], &[0, 0, 0]), 1);
    // Seen twice: 3.2 > 3.0.
    assert_eq!(s.sample(&[4.0, 3.0], &[0, 0]), 0);
    c.frequency_penalty = 0.0;
    c.presence_penalty = 1.5;
    let mut s = Sampler::new(c);
    // Presence counts once however often: 4.0 - 1.5 = 2.5 < 3.0, and it also hits token 1.
    assert_eq!(s.sample(&[4.0, 3.0, 2.9], &[0, 0, 0, 0]), 1);
    assert_eq!(s.sample(&[4.0, 3.0, 2.9], &[0, 1]), 2);
}

#[test]
fn same_seed_same_tokens_different_seed_different_tokens() {
    let logits: Vec<f32> = (0..50).map(|i| ((i * 37 % 17) as f32) * 0.2).collect();
    let run = |seed| {
        let mut s = Sampler::new(SamplerConfig { seed, ..SamplerConfig::default() });
        (0..64).map(|_| s.sample(&logits, &[])).collect::<Vec<u32>>()
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
    // Reseeding restarts the sequence.
    let mut s = Sampler::new(SamplerConfig { seed: 7, ..SamplerConfig::default() });
    let a: Vec<u32> = (0..10).map(|_| s.sample(&logits, &[])).collect();
    s.reseed(7);
    let b: Vec<u32> = (0..10).map(|_| s.sample(&logits, &[])).collect();
    assert_eq!(a, b);
}

#[test]
fn rng_reference_values() {
    // xoshiro256** seeded with four splitmix64 outputs from 0; values from an independent
    // Python implementation. Fixed on every target.
    let mut r = Rng::new(0);
    let got: Vec<u64> = (0..3).map(|_| r.next_u64()).collect();
    assert_eq!(got, [0x99ec_5f36_cb75_f2b4, 0xbf6e_1f78_4956_452a, 0x1a5f_849d_4933_e6e0]);
}

#[test]
fn degenerate_inputs_do_not_panic() {
    let mut s = Sampler::new(SamplerConfig::default());
    assert_eq!(s.sample(&[], &[]), 0);
    assert_eq!(s.sample(&[1.0], &[0, 0]), 0);
    // All -inf but one.
    assert_eq!(s.sample(&[f32::NEG_INFINITY, 2.0, f32::NEG_INFINITY], &[]), 1);
    // History ids beyond the vocabulary are ignored.
    let mut c = cfg();
    c.repeat_penalty = 1.3;
    let mut s = Sampler::new(c);
    let id = s.sample(&[1.0, 2.0], &[99, 5000]);
    assert!(id < 2);
}

#[test]
fn gumbel_noise_reference_values() {
    // splitmix64 output id + 1 from seed key, top 52 bits, u = (bits + ½) / 2^52, -ln(-ln u);
    // values from an independent Python implementation.
    for (key, id, want) in [(0u64, 0u32, 2.0868436769674386f64), (12345, 7, 0.17365865474946762), (u64::MAX, 262_143, 1.7376712688329976)] {
        let got = gumbel::noise(key, id);
        assert!((got - want).abs() < 1e-12, "noise({key}, {id}) = {got}, want {want}");
    }
}

#[test]
fn pure_temperature_is_gumbel_max_over_every_logit() {
    // The reference, written out: each step's key is the next RNG draw, the token the argmax of
    // z / T + noise(key, id) (the first on ties); penalties first.
    let logits: Vec<f32> = (0..3000).map(|i| ((i * 7919 % 1013) as f32 / 1013.0 - 0.5) * 9.0).collect();
    for (t, repeat, seed) in [(1.0f32, 1.0f32, 1u64), (0.4, 1.0, 2), (2.5, 1.3, 3)] {
        let c = SamplerConfig { temperature: t, repeat_penalty: repeat, seed, ..cfg() };
        let mut s = Sampler::new(c);
        let mut rng = Rng::new(seed);
        let mut history = vec![5u32, 17, 17];
        for step in 0..40 {
            let key = rng.next_u64();
            let mut z = logits.clone();
            if repeat != 1.0 {
                for &id in &[5u32, 17] {
                    let l = &mut z[id as usize];
                    *l = if *l <= 0.0 { *l * repeat } else { *l / repeat };
                }
            }
            let mut best = (0u32, f64::NEG_INFINITY);
            for (id, &l) in z.iter().enumerate() {
                let score = l as f64 / t as f64 + gumbel::noise(key, id as u32);
                if score > best.1 {
                    best = (id as u32, score);
                }
            }
            assert_eq!(s.sample(&logits, &history), best.0, "T {t} step {step}");
            history.truncate(3);
        }
    }
}

#[test]
fn logit_bias_is_added_before_every_stage() {
    let logits = [1.0f32, 3.0, 0.5, 2.9];
    // -100 bans the best (greedy takes the next), +100 makes a weak token the choice.
    let mut s = Sampler::new(SamplerConfig::greedy().with_logit_bias([(1, -100.0)]));
    assert_eq!(s.sample(&logits, &[]), 3);
    let mut s = Sampler::new(SamplerConfig::greedy().with_logit_bias([(2, 100.0)]));
    assert_eq!(s.sample(&logits, &[]), 2);
    // A small bias shifts the odds of a draw exactly as adding it to the logit does.
    let biased = freqs(&cfg().with_logit_bias([(0, 1.0), (3, -0.5)]), &logits, &[], 40_000);
    let shifted = freqs(&cfg(), &[2.0, 3.0, 0.5, 2.4], &[], 40_000);
    for (a, b) in biased.iter().zip(&shifted) {
        assert!((a - b).abs() < 1e-12, "{biased:?} vs {shifted:?}");
    }
    // Before the penalties (llama.cpp's order): 3 + 1 = 4, then divided by 2 = 2 < 2.9.
    let c = SamplerConfig { repeat_penalty: 2.0, ..SamplerConfig::greedy() }.with_logit_bias([(1, 1.0)]);
    assert_eq!(Sampler::new(c).sample(&logits, &[1]), 3);
    // A repeated id keeps its last bias; the ids come out sorted.
    let c = SamplerConfig::greedy().with_logit_bias([(3, 5.0), (0, 1.0), (3, -5.0)]);
    assert_eq!(c.logit_bias, vec![(0, 1.0), (3, -5.0)]);
}

#[test]
fn adjusted_rows_are_the_union_of_penalized_and_biased() {
    let c = SamplerConfig { frequency_penalty: 0.5, ..SamplerConfig::greedy() }.with_logit_bias([(2, 1.0), (9, -3.0)]);
    let mut s = Sampler::new(c);
    s.prepare_adjusted(&[4, 2, 4, 7], 12);
    assert_eq!(s.adjusted(), &[2, 4, 7, 9]);
    // 2: seen once and biased; 4: seen twice; 9: only biased.
    assert_eq!(s.adjusted_logit(0, 1.0), 1.0 + 1.0 - 0.5);
    assert_eq!(s.adjusted_logit(1, 1.0), 1.0 - 1.0);
    assert_eq!(s.adjusted_logit(3, 1.0), 1.0 - 3.0);
    // Candidates holding every adjusted row and the unadjusted best pick what all logits pick.
    let logits: Vec<f32> = (0..12).map(|i| ((i * 7) % 5) as f32 * 0.4).collect();
    let full = s.clone().sample(&logits, &[4, 2, 4, 7]);
    let ids = [1u32, 2, 3, 4, 7, 8, 9];
    let sub: Vec<f32> = ids.iter().map(|&i| logits[i as usize]).collect();
    assert_eq!(s.sample_candidates(&ids, &sub, &[4, 2, 4, 7], logits.len()), full);
    // An id past the vocabulary is no row: left out.
    s.prepare_adjusted(&[4, 2, 4, 7], 9);
    assert_eq!(s.adjusted(), &[2, 4, 7]);
}
