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
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GenerationMetrics {
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    pub prefill_ms: f64,
    pub ttft_ms: f64,
    pub decode_ms: f64,
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

    /// One human-readable line.
    pub fn summary(&self) -> String {
        format!(
            "prompt {} tok, prefill {:.1} ms ({:.1} tok/s), ttft {:.1} ms, generated {} tok, tpot {:.1} ms ({:.1} tok/s)",
            self.prompt_tokens,
            self.prefill_ms,
            self.prefill_tok_s(),
            self.ttft_ms,
            self.generated_tokens,
            self.tpot_ms(),
            self.decode_tok_s()
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
        let m = GenerationMetrics { prompt_tokens: 10, generated_tokens: 5, prefill_ms: 200.0, ttft_ms: 210.0, decode_ms: 80.0 };
        assert_eq!(m.tpot_ms(), 20.0);
        assert_eq!(m.prefill_tok_s(), 50.0);
        assert_eq!(m.decode_tok_s(), 50.0);
        let z = GenerationMetrics { generated_tokens: 1, ..Default::default() };
        assert_eq!(z.tpot_ms(), 0.0);
        assert_eq!(z.decode_tok_s(), 0.0);
        assert_eq!(z.prefill_tok_s(), 0.0);
    }

    #[cfg(not(target_arch = "wasm32"))]
    #[test]
    fn native_clock_is_monotonic() {
        let a = native_clock();
        let b = native_clock();
        assert!(b >= a);
    }
}
