//! Rotary position embeddings, in ggml's two layouts.
//!
//! Angles follow ggml's `rope_ext` without YaRN extrapolation: for pair `i` of a head,
//! `theta_i = freq_scale * pos * base^(-2i/n_rot) / freq_factor_i`, where `base^(-2i/n_rot)` is
//! built by repeated f32 multiplication as ggml does (so angles agree with llama.cpp to the
//! last bit that matters at long positions). Dimensions past `n_rot` pass through unchanged.

use super::math::{cos_f32, pow_f32, pow_f64, sin_f32};

/// Which dimensions of a head are rotated together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeMode {
    /// Adjacent pairs `(x[2i], x[2i+1])` (ggml mode 0: llama).
    Normal,
    /// Halves `(x[i], x[i + n_rot/2])` (ggml `GGML_ROPE_TYPE_NEOX`: qwen2/3, gemma).
    Neox,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Rope {
    pub mode: RopeMode,
    /// Rotated dimensions per head (even, ≤ head_dim).
    pub n_rot: usize,
    pub freq_base: f32,
    /// Linear position scaling: `1 / rope.scaling.factor` (1.0 = none).
    pub freq_scale: f32,
    /// Per-pair divisors of the frequency (`rope_freqs.weight`, Llama 3 scaling), `n_rot / 2`.
    pub freq_factors: Option<Vec<f32>>,
}

impl Rope {
    pub fn new(mode: RopeMode, n_rot: usize, freq_base: f32) -> Rope {
        Rope { mode, n_rot, freq_base, freq_scale: 1.0, freq_factors: None }
    }

    /// Fills `cs` (length `n_rot`) with interleaved `(cos, sin)` of every pair at `pos`.
    pub fn angles(&self, pos: usize, cs: &mut [f32]) {
        let half = self.n_rot / 2;
        debug_assert!(cs.len() >= 2 * half);
        let theta_scale = pow_f32(self.freq_base, -2.0 / self.n_rot as f32);
        let mut theta = pos as f32;
        for i in 0..half {
            let ff = self.freq_factors.as_ref().map_or(1.0, |f| f[i]);
            let t = self.freq_scale * (theta / ff);
            cs[2 * i] = cos_f32(t);
            cs[2 * i + 1] = sin_f32(t);
            theta *= theta_scale;
        }
    }

    /// Rotates every head (length `head_dim`) of one token's `x` by precomputed `cs`.
    pub fn apply(&self, x: &mut [f32], head_dim: usize, cs: &[f32]) {
        let half = self.n_rot / 2;
        for head in x.chunks_exact_mut(head_dim) {
            match self.mode {
                RopeMode::Normal => {
                    for i in 0..half {
                        let (c, s) = (cs[2 * i], cs[2 * i + 1]);
                        let (x0, x1) = (head[2 * i], head[2 * i + 1]);
                        head[2 * i] = x0 * c - x1 * s;
                        head[2 * i + 1] = x0 * s + x1 * c;
                    }
                }
                RopeMode::Neox => {
                    for i in 0..half {
                        let (c, s) = (cs[2 * i], cs[2 * i + 1]);
                        let (x0, x1) = (head[i], head[i + half]);
                        head[i] = x0 * c - x1 * s;
                        head[i + half] = x0 * s + x1 * c;
                    }
                }
            }
        }
    }
}

/// Llama 3 frequency factors (what `convert_hf_to_gguf.py` stores as `rope_freqs.weight`):
/// long wavelengths are divided by `factor`, short ones kept, the band between interpolated.
pub fn llama3_freq_factors(
    n_rot: usize,
    base: f32,
    factor: f32,
    low_freq_factor: f32,
    high_freq_factor: f32,
    original_context: f32,
) -> Vec<f32> {
    let low_wavelen = original_context as f64 / low_freq_factor as f64;
    let high_wavelen = original_context as f64 / high_freq_factor as f64;
    (0..n_rot / 2)
        .map(|i| {
            let freq = 1.0 / pow_f64(base as f64, 2.0 * i as f64 / n_rot as f64);
            let wavelen = 2.0 * std::f64::consts::PI / freq;
            let f = if wavelen < high_wavelen {
                1.0
            } else if wavelen > low_wavelen {
                factor as f64
            } else {
                let smooth = (original_context as f64 / wavelen - low_freq_factor as f64)
                    / (high_freq_factor as f64 - low_freq_factor as f64);
                1.0 / ((1.0 - smooth) / factor as f64 + smooth)
            };
            f as f32
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rotate_ref(x: &[f64], pos: f64, base: f64, n_rot: usize, neox: bool) -> Vec<f64> {
        let mut y = x.to_vec();
        let half = n_rot / 2;
        for i in 0..half {
            let th = pos * base.powf(-2.0 * i as f64 / n_rot as f64);
            let (a, b) = if neox { (i, i + half) } else { (2 * i, 2 * i + 1) };
            y[a] = x[a] * th.cos() - x[b] * th.sin();
            y[b] = x[a] * th.sin() + x[b] * th.cos();
        }
        y
    }

    #[test]
    fn both_modes_match_reference_and_keep_tail() {
        let head_dim = 12;
        let n_rot = 8;
        let x: Vec<f32> = (0..2 * head_dim).map(|i| ((i * 7 % 11) as f32 - 5.0) / 3.0).collect();
        for (mode, neox) in [(RopeMode::Normal, false), (RopeMode::Neox, true)] {
            let rope = Rope::new(mode, n_rot, 10000.0);
            let mut cs = vec![0.0; n_rot];
            rope.angles(37, &mut cs);
            let mut y = x.clone();
            rope.apply(&mut y, head_dim, &cs);
            for h in 0..2 {
                let xs: Vec<f64> = x[h * head_dim..(h + 1) * head_dim].iter().map(|&v| v as f64).collect();
                let want = rotate_ref(&xs, 37.0, 10000.0, n_rot, neox);
                for d in 0..head_dim {
                    let got = y[h * head_dim + d] as f64;
                    assert!((got - want[d]).abs() < 1e-4, "{mode:?} h{h} d{d}: {got} vs {}", want[d]);
                }
                // Past n_rot: untouched.
                assert_eq!(y[h * head_dim + 10], x[h * head_dim + 10]);
            }
        }
    }

    #[test]
    fn position_zero_is_identity_and_norm_is_kept() {
        let rope = Rope::new(RopeMode::Neox, 4, 1e6);
        let mut cs = [0.0; 4];
        rope.angles(0, &mut cs);
        let mut x = [1.0f32, 2.0, 3.0, 4.0];
        rope.apply(&mut x, 4, &cs);
        assert_eq!(x, [1.0, 2.0, 3.0, 4.0]);
        rope.angles(1234, &mut cs);
        rope.apply(&mut x, 4, &cs);
        let n: f32 = x.iter().map(|v| v * v).sum();
        assert!((n - 30.0).abs() < 1e-3);
    }

    #[test]
    fn freq_scale_and_factors_slow_the_rotation() {
        // Linear scaling by 4 at position 8 == no scaling at position 2.
        let mut a = Rope::new(RopeMode::Normal, 4, 10000.0);
        a.freq_scale = 0.25;
        let b = Rope::new(RopeMode::Normal, 4, 10000.0);
        let (mut ca, mut cb) = ([0.0; 4], [0.0; 4]);
        a.angles(8, &mut ca);
        b.angles(2, &mut cb);
        for i in 0..4 {
            assert!((ca[i] - cb[i]).abs() < 1e-6);
        }
        // A factor of 2 on the second pair halves its angle.
        let mut c = Rope::new(RopeMode::Normal, 4, 10000.0);
        c.freq_factors = Some(vec![1.0, 2.0]);
        let mut cc = [0.0; 4];
        c.angles(1000, &mut cc);
        let th1 = 1000.0f64 * 10000f64.powf(-0.5) / 2.0;
        assert!((cc[2] as f64 - th1.cos()).abs() < 1e-4);
    }

    #[test]
    fn llama3_factors_bands() {
        // Llama 3.1 settings: factor 8, low 1, high 4, original context 8192, base 500000.
        let f = llama3_freq_factors(128, 500000.0, 8.0, 1.0, 4.0, 8192.0);
        assert_eq!(f.len(), 64);
        assert_eq!(f[0], 1.0); // highest frequency: untouched
        assert_eq!(f[63], 8.0); // lowest frequency: divided by the factor
        // Monotone non-decreasing in between.
        assert!(f.windows(2).all(|w| w[1] >= w[0]));
        assert!(f.iter().any(|&v| v > 1.0 && v < 8.0));
    }
}
