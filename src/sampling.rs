//! Token sampling: greedy; repetition / presence / frequency penalties, top-k, top-p, min-p,
//! temperature, then a draw from a seeded RNG of our own (xoshiro256**), so the same seed gives
//! the same tokens on every target for the same logits.
//!
//! The stages run in llama.cpp's default order: penalties → top-k → top-p → min-p →
//! temperature → draw. (Stop sequences are the engine's concern: they need text.)

pub use crate::ops::screen::Need;

/// Sampling settings. `Default` is llama.cpp's default chain (temperature 0.8, top-k 40,
/// top-p 0.95, min-p 0.05, no penalties); [`SamplerConfig::greedy`] is argmax.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerConfig {
    /// ≤ 0: greedy (argmax of the penalized logits; no randomness).
    pub temperature: f32,
    /// Keep the `top_k` most likely tokens; 0 = off.
    pub top_k: usize,
    /// Keep the smallest set whose probability reaches `top_p`; ≥ 1 = off.
    pub top_p: f32,
    /// Drop tokens less likely than `min_p` × the most likely; ≤ 0 = off.
    pub min_p: f32,
    /// Divides positive / multiplies negative logits of recent tokens; 1 = off.
    pub repeat_penalty: f32,
    /// Subtracted once from the logit of every recent token; 0 = off.
    pub presence_penalty: f32,
    /// Subtracted per occurrence from the logit of recent tokens; 0 = off.
    pub frequency_penalty: f32,
    /// How many of the latest tokens the penalties look at.
    pub penalty_last_n: usize,
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            penalty_last_n: 64,
            seed: 0,
        }
    }
}

impl SamplerConfig {
    /// Argmax, no penalties.
    pub fn greedy() -> Self {
        SamplerConfig { temperature: 0.0, top_k: 0, top_p: 1.0, min_p: 0.0, ..Default::default() }
    }

    pub fn is_greedy(&self) -> bool {
        self.temperature <= 0.0
    }

    fn has_penalties(&self) -> bool {
        self.penalty_last_n > 0
            && (self.repeat_penalty != 1.0 || self.presence_penalty != 0.0 || self.frequency_penalty != 0.0)
    }
}

/// xoshiro256** seeded through splitmix64: small, fast, identical on every target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rng {
    s: [u64; 4],
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut x = seed;
        let mut next = || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        Rng { s: [next(), next(), next(), next()] }
    }

    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// Index of the largest logit (the first one on ties); 0 for an empty slice.
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0usize;
    let mut bv = f32::NEG_INFINITY;
    for (i, &v) in logits.iter().enumerate() {
        if v > bv {
            bv = v;
            best = i;
        }
    }
    best as u32
}

/// A sampler: the settings, its RNG and reusable candidate buffers.
#[derive(Clone, Debug)]
pub struct Sampler {
    cfg: SamplerConfig,
    rng: Rng,
    cand: Vec<(u32, f32)>,
    recent: Vec<u32>,
}

impl Sampler {
    pub fn new(cfg: SamplerConfig) -> Sampler {
        let rng = Rng::new(cfg.seed);
        Sampler { cfg, rng, cand: Vec::new(), recent: Vec::new() }
    }

    pub fn config(&self) -> &SamplerConfig {
        &self.cfg
    }

    /// Bytes of the reusable buffers (the candidate list, recent tokens for the penalties).
    pub fn bytes(&self) -> usize {
        self.cand.capacity() * std::mem::size_of::<(u32, f32)>() + 4 * self.recent.capacity()
    }

    /// Restarts the RNG from `seed` (a fresh run with the same seed repeats its draws).
    pub fn reseed(&mut self, seed: u64) {
        self.cfg.seed = seed;
        self.rng = Rng::new(seed);
    }

    /// What the screened head must deliver for [`sample_candidates`](Self::sample_candidates)
    /// to pick exactly the token [`sample`](Self::sample) would from all `n_vocab` logits, or
    /// `None` when this configuration needs every logit: penalties, pure temperature sampling
    /// (its draw sums over the whole vocabulary) and top-p without top-k.
    pub fn screen_need(&self, history: &[u32], n_vocab: usize) -> Option<Need> {
        if self.cfg.has_penalties() && !history.is_empty() {
            return None;
        }
        if self.cfg.is_greedy() {
            return Some(Need::Max);
        }
        if self.cfg.top_k > 0 && self.cfg.top_k < n_vocab {
            // top-p, min-p and the draw then only see the top-k set.
            return Some(Need::TopK(self.cfg.top_k));
        }
        if self.cfg.top_p >= 1.0 && self.cfg.min_p > 0.0 {
            return Some(Need::Floor(self.cfg.min_p.ln()));
        }
        None
    }

    /// Picks the next token from a subset of the logits (`ids` ascending, `logits` theirs)
    /// that holds every token [`screen_need`](Self::screen_need) asked for: the same token,
    /// and the same RNG draws, as [`sample`](Self::sample) on all logits.
    pub fn sample_candidates(&mut self, ids: &[u32], logits: &[f32], history: &[u32]) -> u32 {
        debug_assert!(self.screen_need(history, usize::MAX).is_some());
        debug_assert!(ids.windows(2).all(|w| w[0] < w[1]));
        if ids.is_empty() {
            return 0;
        }
        if self.cfg.is_greedy() {
            // `ids` ascend, so the first best here is the first best in id order, as `sample`.
            return ids[argmax(logits) as usize];
        }
        self.cand.clear();
        self.cand.extend(ids.iter().copied().zip(logits.iter().copied()));
        self.filter_and_draw()
    }

    /// Picks the next token from `logits` given the tokens so far (`history`: prompt and
    /// generated; the penalties look at its last `penalty_last_n`).
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> u32 {
        if logits.is_empty() {
            return 0;
        }
        let penalize = self.cfg.has_penalties() && !history.is_empty();
        if self.cfg.is_greedy() && !penalize {
            return argmax(logits);
        }
        self.cand.clear();
        self.cand.extend(logits.iter().enumerate().map(|(i, &l)| (i as u32, l)));
        if penalize {
            self.apply_penalties(history);
        }
        if self.cfg.is_greedy() {
            let mut best = 0;
            for i in 1..self.cand.len() {
                if self.cand[i].1 > self.cand[best].1 {
                    best = i;
                }
            }
            return self.cand[best].0;
        }
        self.filter_and_draw()
    }

    /// top-k → top-p → min-p → the draw, on `cand`. Each stage's result depends only on the
    /// set it is given (they order by `cmp_desc`, a total order), which is what lets
    /// `sample_candidates` start from a subset.
    fn filter_and_draw(&mut self) -> u32 {
        self.top_k();
        self.top_p();
        self.min_p();
        self.draw()
    }

    fn apply_penalties(&mut self, history: &[u32]) {
        let last = &history[history.len().saturating_sub(self.cfg.penalty_last_n)..];
        self.recent.clear();
        self.recent.extend_from_slice(last);
        self.recent.sort_unstable();
        let mut i = 0;
        while i < self.recent.len() {
            let id = self.recent[i];
            let mut j = i;
            while j < self.recent.len() && self.recent[j] == id {
                j += 1;
            }
            let count = (j - i) as f32;
            if let Some(c) = self.cand.get_mut(id as usize) {
                let l = &mut c.1;
                if *l <= 0.0 {
                    *l *= self.cfg.repeat_penalty;
                } else {
                    *l /= self.cfg.repeat_penalty;
                }
                *l -= count * self.cfg.frequency_penalty + self.cfg.presence_penalty;
            }
            i = j;
        }
    }

    /// Keeps the `top_k` best, sorted best first (ties: lower id first).
    fn top_k(&mut self) {
        let k = self.cfg.top_k;
        if k > 0 && k < self.cand.len() {
            self.cand.select_nth_unstable_by(k - 1, cmp_desc);
            self.cand.truncate(k);
        }
    }

    fn top_p(&mut self) {
        let p = self.cfg.top_p;
        if p >= 1.0 || self.cand.len() <= 1 {
            return;
        }
        // Tokens e^-60 below the best cannot change a cumulative sum kept in f64 short of 1.
        let max = self.cand.iter().map(|c| c.1).fold(f32::NEG_INFINITY, f32::max);
        if self.cand.len() > 1024 {
            self.cand.retain(|c| c.1 >= max - 60.0);
        }
        self.cand.sort_unstable_by(cmp_desc);
        let z: f64 = self.cand.iter().map(|c| ((c.1 - max) as f64).exp()).sum();
        let mut cum = 0.0f64;
        let mut keep = self.cand.len();
        for (i, c) in self.cand.iter().enumerate() {
            cum += ((c.1 - max) as f64).exp() / z;
            if cum >= p as f64 {
                keep = i + 1;
                break;
            }
        }
        self.cand.truncate(keep.max(1));
    }

    fn min_p(&mut self) {
        let p = self.cfg.min_p;
        if p <= 0.0 || self.cand.len() <= 1 {
            return;
        }
        let max = self.cand.iter().map(|c| c.1).fold(f32::NEG_INFINITY, f32::max);
        let floor = max + p.ln();
        self.cand.retain(|c| c.1 >= floor);
    }

    fn draw(&mut self) -> u32 {
        let t = self.cfg.temperature;
        let max = self.cand.iter().map(|c| c.1).fold(f32::NEG_INFINITY, f32::max);
        // Candidate order must not depend on how select/sort happened to leave it.
        self.cand.sort_unstable_by(cmp_desc);
        let z: f64 = self.cand.iter().map(|c| (((c.1 - max) / t) as f64).exp()).sum();
        let target = self.rng.next_f64() * z;
        let mut cum = 0.0f64;
        for c in &self.cand {
            cum += (((c.1 - max) / t) as f64).exp();
            if cum > target {
                return c.0;
            }
        }
        self.cand.last().map_or(0, |c| c.0)
    }
}

/// Logit descending, then id ascending: a total order, so results never depend on sort details.
fn cmp_desc(a: &(u32, f32), b: &(u32, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rng_is_deterministic_and_uniformish() {
        let mut a = Rng::new(42);
        let mut b = Rng::new(42);
        let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(Rng::new(43).next_u64(), xs[0]);
        let mut r = Rng::new(7);
        let mean: f64 = (0..10000).map(|_| r.next_f64()).sum::<f64>() / 10000.0;
        assert!((mean - 0.5).abs() < 0.02, "{mean}");
    }
}
