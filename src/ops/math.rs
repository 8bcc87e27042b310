//! The transcendental functions of the forward pass, sampling and logprobs, from the `libm`
//! crate on every target, so the native build and the wasm build compute the same bits.
//!
//! std's `f32::exp`, `cos`, `powf`… are the platform's libm natively (glibc) and a compiled-in
//! port on wasm32; they differ in the last bit for some inputs. Through SiLU, softmax and RoPE
//! those bits grew, on SmolLM2 past about 30 positions, into logprobs 0.1 nats apart and other
//! greedy tokens in the browser than from `edgellm serve` on the same GGUF. `libm` is plain Rust
//! (no FMA contraction, no platform code for these functions): one result everywhere. The hot
//! f32 ones go through f64 and round once (nearly always the correctly rounded value, which
//! glibc's also nearly always give), the others are `libm`'s f32 routines, within an ulp.

/// Through f64 and rounded once, as [`cos_f32`]: nearly always the correctly rounded f32, and
/// so the same as glibc's `expf` (< 0.502 ulp) where `libm::expf` was a last bit off (that
/// moved SmolLM2's top-1 in a three-way near-tie of the llama.cpp comparison). SiLU and the
/// softmaxes call it.
#[inline]
pub fn exp_f32(x: f32) -> f32 {
    libm::exp(x as f64) as f32
}

#[inline]
pub fn ln_f32(x: f32) -> f32 {
    libm::logf(x)
}

/// RoPE's cosine: through f64 and rounded once, so nearly always the correctly rounded f32
/// (the f32 routines of glibc and of `libm` are different algorithms, each within an ulp);
/// cheap, as RoPE takes `n_rot / 2` per position, not per head.
#[inline]
pub fn cos_f32(x: f32) -> f32 {
    libm::cos(x as f64) as f32
}

/// RoPE's sine, as [`cos_f32`].
#[inline]
pub fn sin_f32(x: f32) -> f32 {
    libm::sin(x as f64) as f32
}

#[inline]
pub fn pow_f32(x: f32, y: f32) -> f32 {
    libm::powf(x, y)
}

#[inline]
pub fn tanh_f32(x: f32) -> f32 {
    libm::tanhf(x)
}

#[inline]
pub fn exp_f64(x: f64) -> f64 {
    libm::exp(x)
}

#[inline]
pub fn ln_f64(x: f64) -> f64 {
    libm::log(x)
}

#[inline]
pub fn pow_f64(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within an ulp or two of std's (the platform's) on a spread of inputs: the same
    /// functions, only their last bit may differ.
    #[test]
    fn close_to_std() {
        let close = |a: f32, b: f32| (a - b).abs() <= 2.0 * f32::EPSILON * b.abs().max(f32::MIN_POSITIVE);
        for i in -2000..2000 {
            let x = i as f32 * 0.0173;
            assert!(close(exp_f32(x.min(80.0)), x.min(80.0).exp()), "exp {x}");
            assert!(close(cos_f32(x * 50.0), (x * 50.0).cos()) || (cos_f32(x * 50.0) - (x * 50.0).cos()).abs() < 1e-7, "cos {x}");
            assert!(close(sin_f32(x * 50.0), (x * 50.0).sin()) || (sin_f32(x * 50.0) - (x * 50.0).sin()).abs() < 1e-7, "sin {x}");
            assert!(close(tanh_f32(x), x.tanh()), "tanh {x}");
        }
        assert_eq!(pow_f32(2.0, 10.0), 1024.0);
        assert_eq!(ln_f64(1.0), 0.0);
    }
}
