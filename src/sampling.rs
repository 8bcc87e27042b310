//! Token sampling: greedy; repetition / presence / frequency penalties, top-k, top-p, min-p,
//! temperature, then a draw from a seeded RNG of our own (xoshiro256**), so the same seed gives
//! the same tokens on every target for the same logits.
//!
//! The stages run in llama.cpp's default order: penalties → top-k → top-p → min-p →
//! temperature → draw. (Stop sequences are the engine's concern: they need text.) Pure
//! temperature sampling (no top-k, top-p or min-p) draws by Gumbel-max (`gumbel`), which the
//! screened output head can serve; the other draws are by the inverse CDF over the kept set.

pub mod gumbel;

pub use crate::ops::screen::Need;
use crate::ops::math::{exp_f64, ln_f32};

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
    /// OpenAI's `logit_bias`: `(token, bias)` added to that token's logit before every other
    /// stage (llama.cpp's order), ids ascending and each once ([`SamplerConfig::with_logit_bias`]).
    pub logit_bias: Vec<(u32, f32)>,
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
            logit_bias: Vec::new(),
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

    /// These settings with `bias` as the logit bias (sorted by id; a repeated id keeps its
    /// last bias).
    pub fn with_logit_bias(mut self, bias: impl IntoIterator<Item = (u32, f32)>) -> Self {
        let mut b: Vec<(u32, f32)> = bias.into_iter().collect();
        b.reverse();
        b.sort_by_key(|x| x.0);
        b.dedup_by_key(|x| x.0);
        self.logit_bias = b;
        self
    }

    fn has_penalties(&self) -> bool {
        self.penalty_last_n > 0
            && (self.repeat_penalty != 1.0 || self.presence_penalty != 0.0 || self.frequency_penalty != 0.0)
    }

    /// Temperature sampling over the whole vocabulary (`n_vocab` tokens): no top-k, top-p or
    /// min-p stage cuts the set. Drawn by Gumbel-max.
    fn is_pure_temperature(&self, n_vocab: usize) -> bool {
        !self.is_greedy() && (self.top_k == 0 || self.top_k >= n_vocab) && self.top_p >= 1.0 && self.min_p <= 0.0
    }

    /// A logit under the penalties, for a token seen `count` times in the recent window. Kept
    /// finite: a tiny repeat penalty (1e-40 is a valid f32) would make it infinite, and an
    /// infinite logit turns the draw's `l - max` into NaN; at most `f32::MAX`, such tokens win
    /// as the penalty asks, ties going to the lowest id.
    fn penalize(&self, l: f32, count: f32) -> f32 {
        let l = if l <= 0.0 { l * self.repeat_penalty } else { l / self.repeat_penalty };
        (l - (count * self.frequency_penalty + self.presence_penalty)).clamp(-f32::MAX, f32::MAX)
    }

    /// A logit with its token's `bias` added, then the penalties when the token was seen
    /// (`count > 0`) and penalties are on.
    fn adjust(&self, l: f32, bias: f32, count: u32) -> f32 {
        let l = l + bias;
        if count > 0 && self.has_penalties() {
            self.penalize(l, count as f32)
        } else {
            l
        }
    }
}

/// splitmix64's finalizer: a bijective mix of 64 bits (the RNG's seeding, choice seeds, call
/// ids and the server's request ids all step through it).
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
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
            mix64(x)
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
    /// The tokens whose logit is changed at this step (ascending, each once): penalized or
    /// biased; their counts in the recent window (0: only biased) and their biases.
    adjusted: Vec<u32>,
    counts: Vec<u32>,
    biases: Vec<f32>,
    /// Gumbel-max's candidate indices into `cand`.
    gumbel_rows: Vec<u32>,
}

impl Sampler {
    pub fn new(cfg: SamplerConfig) -> Sampler {
        let rng = Rng::new(cfg.seed);
        Sampler { cfg, rng, cand: Vec::new(), recent: Vec::new(), adjusted: Vec::new(), counts: Vec::new(), biases: Vec::new(), gumbel_rows: Vec::new() }
    }

    pub fn config(&self) -> &SamplerConfig {
        &self.cfg
    }

    /// Bytes of the reusable buffers (the candidate list, recent tokens for the penalties).
    pub fn bytes(&self) -> usize {
        self.cand.capacity() * std::mem::size_of::<(u32, f32)>()
            + 4 * (self.recent.capacity() + self.adjusted.capacity() + self.counts.capacity() + self.biases.capacity() + self.gumbel_rows.capacity())
    }

    /// Restarts the RNG from `seed` (a fresh run with the same seed repeats its draws).
    pub fn reseed(&mut self, seed: u64) {
        self.cfg.seed = seed;
        self.rng = Rng::new(seed);
    }

    /// What the screened head must deliver for [`sample_candidates`](Self::sample_candidates)
    /// to pick exactly the token [`sample`](Self::sample) would from all `n_vocab` logits, or
    /// `None` when this configuration needs every logit: top-p without top-k (its cut sums
    /// over the whole vocabulary). The logits it is about are the adjusted ones: the tokens
    /// the penalties or the logit bias change ([`adjusted`](Self::adjusted)) are computed
    /// exactly by the screen and ranked by [`adjusted_logit`](Self::adjusted_logit). Pure temperature sampling
    /// asks for Gumbel-max's candidates under the key its next draw will use.
    pub fn screen_need(&self, n_vocab: usize) -> Option<Need> {
        if self.cfg.is_greedy() {
            return Some(Need::Max);
        }
        if self.cfg.top_k > 0 && self.cfg.top_k < n_vocab {
            // top-p, min-p and the draw then only see the top-k set.
            return Some(Need::TopK(self.cfg.top_k));
        }
        if self.cfg.top_p < 1.0 {
            return None;
        }
        if self.cfg.min_p > 0.0 {
            return Some(Need::Floor(ln_f32(self.cfg.min_p)));
        }
        Some(Need::Gumbel { t: self.cfg.temperature, key: self.rng.clone().next_u64() })
    }

    /// Finds the tokens whose logit changes at the next sample after `history` (ascending, each
    /// once): the ones the penalties change (seen in the last `penalty_last_n`) and the biased
    /// ones below `n_vocab` (a bias on an id the model does not have changes nothing; requests
    /// are refused for one before this), read by [`adjusted`](Self::adjusted): the screened
    /// head computes these rows exactly.
    pub fn prepare_adjusted(&mut self, history: &[u32], n_vocab: usize) {
        self.adjusted.clear();
        self.counts.clear();
        self.biases.clear();
        self.recent.clear();
        if self.cfg.has_penalties() {
            self.recent.extend_from_slice(&history[history.len().saturating_sub(self.cfg.penalty_last_n)..]);
            self.recent.sort_unstable();
        }
        // Merge the seen tokens (with their counts) and the biased ones, both ascending.
        let in_vocab = self.cfg.logit_bias.partition_point(|b| (b.0 as usize) < n_vocab);
        let (mut seen, mut biased) = (self.recent.chunk_by(|a, b| a == b).peekable(), self.cfg.logit_bias[..in_vocab].iter().peekable());
        loop {
            let next_seen = seen.peek().map(|c| c[0]);
            let next_biased = biased.peek().map(|b| b.0);
            let id = match (next_seen, next_biased) {
                (None, None) => break,
                (Some(a), Some(b)) => a.min(b),
                (Some(a), None) => a,
                (None, Some(b)) => b,
            };
            let count = if next_seen == Some(id) { seen.next().map_or(0, |c| c.len() as u32) } else { 0 };
            let bias = if next_biased == Some(id) { biased.next().map_or(0.0, |b| b.1) } else { 0.0 };
            self.adjusted.push(id);
            self.counts.push(count);
            self.biases.push(bias);
        }
    }

    /// The tokens of the last [`prepare_adjusted`](Self::prepare_adjusted).
    pub fn adjusted(&self) -> &[u32] {
        &self.adjusted
    }

    /// The value the sampler ranks token `adjusted()[i]` by, given its logit `z`.
    pub fn adjusted_logit(&self, i: usize, z: f32) -> f32 {
        self.cfg.adjust(z, self.biases[i], self.counts[i])
    }

    /// Picks the next token from a subset of the `n_vocab` logits (`ids` ascending, `logits`
    /// theirs) that holds every token [`screen_need`](Self::screen_need) asked for: the same
    /// token, and the same RNG draws, as [`sample`](Self::sample) on all logits.
    pub fn sample_candidates(&mut self, ids: &[u32], logits: &[f32], history: &[u32], n_vocab: usize) -> u32 {
        debug_assert!(self.screen_need(n_vocab).is_some());
        debug_assert!(ids.windows(2).all(|w| w[0] < w[1]));
        self.cand.clear();
        self.cand.extend(ids.iter().copied().zip(logits.iter().copied()));
        self.rank(history, n_vocab)
    }

    /// Picks the next token from `logits` given the tokens so far (`history`: prompt and
    /// generated; the penalties look at its last `penalty_last_n`).
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> u32 {
        let adjust = !self.cfg.logit_bias.is_empty() || (self.cfg.has_penalties() && !history.is_empty());
        if self.cfg.is_greedy() && !adjust {
            return argmax(logits);
        }
        self.cand.clear();
        self.cand.extend(logits.iter().enumerate().map(|(i, &l)| (i as u32, l)));
        self.rank(history, logits.len())
    }

    /// Penalties, then greedy, Gumbel-max or the filters and the draw, on `cand` (ids
    /// ascending: all `n_vocab` tokens, or a subset holding every token that can be picked).
    fn rank(&mut self, history: &[u32], n_vocab: usize) -> u32 {
        if self.cand.is_empty() {
            return 0;
        }
        self.apply_adjustments(history, n_vocab);
        if self.cfg.is_greedy() {
            // Ids ascend, so the first best is the first best in id order.
            let mut best = 0;
            for i in 1..self.cand.len() {
                if self.cand[i].1 > self.cand[best].1 {
                    best = i;
                }
            }
            return self.cand[best].0;
        }
        if self.cfg.is_pure_temperature(n_vocab) {
            return self.gumbel_max();
        }
        self.filter_and_draw()
    }

    /// Gumbel-max over `cand` under the next RNG draw as its key: the largest `l / t + g` (the
    /// first in id order on ties; the first candidate when none has a finite score).
    fn gumbel_max(&mut self) -> u32 {
        let (t, key) = (self.cfg.temperature, self.rng.next_u64());
        let cand = &self.cand;
        gumbel::candidates(cand.len(), |i| (cand[i].1 as f64, cand[i].1 as f64), |i| cand[i].0, t, key, usize::MAX, &mut self.gumbel_rows);
        let mut best = (cand[0].0, f64::NEG_INFINITY);
        for &i in &self.gumbel_rows {
            let (id, l) = cand[i as usize];
            let s = gumbel::score(l as f64, t, gumbel::noise(key, id));
            if s > best.1 {
                best = (id, s);
            }
        }
        best.0
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

    /// The logit bias and the penalties on `cand` (ids ascending); an adjusted token absent
    /// from a subset is one the screen found cannot be picked.
    fn apply_adjustments(&mut self, history: &[u32], n_vocab: usize) {
        self.prepare_adjusted(history, n_vocab);
        for (k, &id) in self.adjusted.iter().enumerate() {
            if let Ok(i) = self.cand.binary_search_by_key(&id, |c| c.0) {
                self.cand[i].1 = self.cfg.adjust(self.cand[i].1, self.biases[k], self.counts[k]);
            }
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
        let z: f64 = self.cand.iter().map(|c| exp_f64((c.1 - max) as f64)).sum();
        let mut cum = 0.0f64;
        let mut keep = self.cand.len();
        for (i, c) in self.cand.iter().enumerate() {
            cum += exp_f64((c.1 - max) as f64) / z;
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
        let floor = max + ln_f32(p);
        self.cand.retain(|c| c.1 >= floor);
    }

    fn draw(&mut self) -> u32 {
        let t = self.cfg.temperature;
        let max = self.cand.iter().map(|c| c.1).fold(f32::NEG_INFINITY, f32::max);
        // Candidate order must not depend on how select/sort happened to leave it.
        self.cand.sort_unstable_by(cmp_desc);
        let z: f64 = self.cand.iter().map(|c| exp_f64(((c.1 - max) / t) as f64)).sum();
        let target = self.rng.next_f64() * z;
        let mut cum = 0.0f64;
        for c in &self.cand {
            cum += exp_f64(((c.1 - max) / t) as f64);
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
