//! Generation timings: TTFT, TPOT, prefill and decode tokens per second.
//!
//! Library code never reads a clock itself (`std::time::Instant` panics on
//! wasm32-unknown-unknown): whoever drives a session passes a [`Clock`], milliseconds from any
//! fixed origin — `performance.now()` in the browser, [`native_clock`] natively.

/// Milliseconds since an arbitrary fixed origin.
pub type Clock = fn() -> f64;

/// A monotonic clock for native builds (milliseconds since its first call).
#[cfg(not(target_arch = "wasm32"))]
pub fn native_clock() -> f64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_secs_f64() * 1000.0
}

/// A clock that always says 0 (for tests and callers that do not want timings).
pub fn no_clock() -> f64 {
    0.0
}

/// Timings of one generation.
///
/// * `prefill_ms`: the prompt's forward pass (all prompt tokens, batched).
/// * `ttft_ms`: request start to the first generated token (prefill + first sampling).
/// * `decode_ms`: everything after the first token: one forward pass and one sampling per
///   further token.
/// * `tpot_ms` = `decode_ms / (generated − 1)`: time per output token after the first.
///
/// And the memory traffic of decoding, to compare with the machine's memory bandwidth (decode
/// of a small model is a matrix-vector product per weight matrix: memory-bound). A *decode
/// step* is one of the `generated − 1` tokens after the first: one single-token forward pass
/// and one sampling.
/// * `decode_weight_bytes_per_token`: weight bytes one decode step reads: the mean over this
///   generation's decode steps (`decode_weight_bytes_total / steps`), which is less than
///   [`Model::decode_weight_bytes`](crate::model::Model::decode_weight_bytes) when steps used
///   the screened output head; before any decode step, the full figure (set for every
///   generation).
/// * `decode_weight_bytes_total`: weight bytes of all decode steps (each step's own count: the
///   screened head's pass 1 and the rows it computed in full, or the whole head).
/// * `head_screened_steps` / `head_full_steps`: decode steps whose logits came from the
///   screened head (`ops::screen`) / the full head; `head_fallback_steps`: screened steps that
///   had too many candidates and computed every row; `head_candidates`: the rows each
///   screened step computed exactly (fallbacks excluded), step by step (its mean, median and
///   maximum go to the usage report: `head_report`).
/// * `decode_kv_bytes_last_token`: K/V bytes the last decode step's attention read: every row
///   of every layer the cache held once it stored that step's token (its `bytes` occupancy).
/// * `decode_kv_bytes_total`: the same summed over all decode steps.
/// * [`decode_gb_s`](Self::decode_gb_s): achieved bandwidth, bytes read per decode step ×
///   decode steps per second.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GenerationMetrics {
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    pub prefill_ms: f64,
    pub ttft_ms: f64,
    pub decode_ms: f64,
    pub decode_weight_bytes_per_token: usize,
    pub decode_kv_bytes_last_token: usize,
    pub decode_kv_bytes_total: u64,
    pub decode_weight_bytes_total: u64,
    pub head_screened_steps: usize,
    pub head_full_steps: usize,
    pub head_fallback_steps: usize,
    pub head_candidates: Vec<u32>,
}

/// Which output head a generation's decode steps used, for usage reports.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct HeadReport {
    /// "screened", "full" or "mixed".
    pub path: &'static str,
    pub screened_steps: usize,
    pub full_steps: usize,
    pub fallback_steps: usize,
    /// Candidate rows per screened step that did not fall back: mean, median (the mean of the
    /// two middle steps for an even count) and maximum; 0 without such a step.
    pub candidates_mean: f64,
    pub candidates_median: f64,
    pub candidates_max: usize,
}

/// Which output head a decode step used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeadUse {
    Full,
    /// Screened, with this many candidate rows computed exactly (`fell_back`: every row).
    Screened { candidates: usize, fell_back: bool },
}

impl GenerationMetrics {
    /// Mean time per output token after the first; 0 when fewer than two tokens.
    pub fn tpot_ms(&self) -> f64 {
        if self.generated_tokens > 1 {
            self.decode_ms / (self.generated_tokens - 1) as f64
        } else {
            0.0
        }
    }

    pub fn prefill_tok_s(&self) -> f64 {
        rate(self.prompt_tokens, self.prefill_ms)
    }

    /// Tokens after the first, per second of decoding.
    pub fn decode_tok_s(&self) -> f64 {
        rate(self.generated_tokens.saturating_sub(1), self.decode_ms)
    }

    /// Records a decode step whose attention read `kv_bytes` of K/V.
    pub fn record_decode_kv(&mut self, kv_bytes: usize) {
        self.decode_kv_bytes_last_token = kv_bytes;
        self.decode_kv_bytes_total += kv_bytes as u64;
    }

    /// Records a decode step's weight bytes and the head it used (after its
    /// [`record_decode_kv`](Self::record_decode_kv)).
    pub fn record_decode_weights(&mut self, weight_bytes: usize, head: HeadUse) {
        self.decode_weight_bytes_total += weight_bytes as u64;
        match head {
            HeadUse::Full => self.head_full_steps += 1,
            HeadUse::Screened { candidates, fell_back } => {
                self.head_screened_steps += 1;
                if fell_back {
                    self.head_fallback_steps += 1;
                } else {
                    // At most the head's rows, which a u32 holds (the vocabulary is u32 ids).
                    self.head_candidates.push(candidates as u32);
                }
            }
        }
        let steps = (self.head_full_steps + self.head_screened_steps) as u64;
        self.decode_weight_bytes_per_token = (self.decode_weight_bytes_total / steps) as usize;
    }

    /// "screened", "full" or "mixed": which output head the decode steps used ("full" before
    /// any decode step).
    pub fn head_path(&self) -> &'static str {
        match (self.head_screened_steps, self.head_full_steps) {
            (0, _) => "full",
            (_, 0) => "screened",
            _ => "mixed",
        }
    }

    pub fn head_report(&self) -> HeadReport {
        HeadReport {
            path: self.head_path(),
            screened_steps: self.head_screened_steps,
            full_steps: self.head_full_steps,
            fallback_steps: self.head_fallback_steps,
            candidates_mean: self.head_candidates_mean(),
            candidates_median: self.head_candidates_median(),
            candidates_max: self.head_candidates.iter().max().map_or(0, |&m| m as usize),
        }
    }

    /// Mean candidates per screened step that did not fall back (0 without one).
    pub fn head_candidates_mean(&self) -> f64 {
        match self.head_candidates.len() {
            0 => 0.0,
            n => self.head_candidates.iter().map(|&c| c as f64).sum::<f64>() / n as f64,
        }
    }

    /// Median candidates per screened step that did not fall back (0 without one).
    pub fn head_candidates_median(&self) -> f64 {
        let mut c = self.head_candidates.clone();
        c.sort_unstable();
        match c.len() {
            0 => 0.0,
            n if n % 2 == 1 => c[n / 2] as f64,
            n => (c[n / 2 - 1] as f64 + c[n / 2] as f64) / 2.0,
        }
    }

    /// Mean K/V bytes read per decode step: `decode_kv_bytes_total / (generated − 1)`; 0 when
    /// fewer than two tokens.
    pub fn decode_kv_bytes_mean(&self) -> f64 {
        match self.generated_tokens {
            0 | 1 => 0.0,
            n => self.decode_kv_bytes_total as f64 / (n - 1) as f64,
        }
    }

    /// Mean bytes read per decode step: weights + mean K/V.
    pub fn decode_bytes_per_token(&self) -> f64 {
        self.decode_weight_bytes_per_token as f64 + self.decode_kv_bytes_mean()
    }

    /// Achieved decode bandwidth in GB/s (10⁹ bytes):
    /// `(decode_weight_bytes_per_token + decode_kv_bytes_mean) × decode_tok_s / 1e9`, i.e. all
    /// weight and K/V bytes the decode steps read over `decode_ms` (sampling time included, as
    /// in `decode_tok_s`). Activations, scratch and logits are not counted. 0 when fewer than
    /// two tokens.
    pub fn decode_gb_s(&self) -> f64 {
        self.decode_bytes_per_token() * self.decode_tok_s() / 1e9
    }

    /// One human-readable line.
    pub fn summary(&self) -> String {
        let h = self.head_report();
        format!(
            "prompt {} tok, prefill {:.1} ms ({:.1} tok/s), ttft {:.1} ms, generated {} tok, tpot {:.1} ms ({:.1} tok/s), decode {:.1} MB/tok ({:.2} GB/s), head {} ({} screened, {} fell back, candidates mean {:.0} median {:.0} max {})",
            self.prompt_tokens,
            self.prefill_ms,
            self.prefill_tok_s(),
            self.ttft_ms,
            self.generated_tokens,
            self.tpot_ms(),
            self.decode_tok_s(),
            self.decode_bytes_per_token() / 1e6,
            self.decode_gb_s(),
            h.path,
            h.screened_steps,
            h.fallback_steps,
            h.candidates_mean,
            h.candidates_median,
            h.candidates_max
        )
    }
}

fn rate(n: usize, ms: f64) -> f64 {
    if n == 0 || ms <= 0.0 {
        0.0
    } else {
        n as f64 * 1000.0 / ms
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_rates() {
        let mut m = GenerationMetrics {
            prompt_tokens: 10,
            generated_tokens: 5,
            prefill_ms: 200.0,
            ttft_ms: 210.0,
            decode_ms: 80.0,
            decode_weight_bytes_per_token: 1_000_000,
            ..Default::default()
        };
        for kv in [1000, 2000, 3000, 6000] {
            m.record_decode_kv(kv);
        }
        assert_eq!(m.tpot_ms(), 20.0);
        assert_eq!(m.prefill_tok_s(), 50.0);
        assert_eq!(m.decode_tok_s(), 50.0);
        assert_eq!(m.decode_kv_bytes_last_token, 6000);
        assert_eq!(m.decode_kv_bytes_mean(), 3000.0);
        assert_eq!(m.decode_bytes_per_token(), 1_003_000.0);
        // 1.003 MB × 50 tok/s
        assert!((m.decode_gb_s() - 0.05015).abs() < 1e-12);
        let z = GenerationMetrics { generated_tokens: 1, decode_weight_bytes_per_token: 7, ..Default::default() };
        assert_eq!(z.tpot_ms(), 0.0);
        assert_eq!(z.decode_tok_s(), 0.0);
        assert_eq!(z.prefill_tok_s(), 0.0);
        assert_eq!(z.decode_kv_bytes_mean(), 0.0);
        assert_eq!(z.decode_gb_s(), 0.0);
    }

    /// The head report counts each kind of step and takes the candidate statistics over the
    /// screened steps that did not fall back only.
    #[test]
    fn head_report_counts_steps_and_candidates() {
        let mut m = GenerationMetrics::default();
        let r = m.head_report();
        assert_eq!((r.path, r.screened_steps, r.candidates_mean, r.candidates_median, r.candidates_max), ("full", 0, 0.0, 0.0, 0));
        for c in [40, 10, 7000, 30] {
            m.record_decode_weights(100, HeadUse::Screened { candidates: c, fell_back: false });
        }
        m.record_decode_weights(300, HeadUse::Screened { candidates: 262_144, fell_back: true });
        let r = m.head_report();
        assert_eq!((r.path, r.screened_steps, r.full_steps, r.fallback_steps), ("screened", 5, 0, 1));
        assert_eq!((r.candidates_mean, r.candidates_median, r.candidates_max), (1770.0, 35.0, 7000));
        m.record_decode_weights(400, HeadUse::Screened { candidates: 20, fell_back: false });
        m.record_decode_weights(500, HeadUse::Full);
        let r = m.head_report();
        assert_eq!((r.path, r.screened_steps, r.full_steps, r.candidates_median, r.candidates_max), ("mixed", 6, 1, 30.0, 7000));
        assert_eq!(m.decode_weight_bytes_per_token, 1600 / 7);
        assert!(m.summary().contains("candidates mean 1420 median 30 max 7000"), "{}", m.summary());
    }

    #[cfg(not(target_arch = "wasm32"))]
    #[test]
    fn native_clock_is_monotonic() {
        let a = native_clock();
        let b = native_clock();
        assert!(b >= a);
    }
}
