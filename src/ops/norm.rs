//! RMSNorm, computed the way ggml does: the mean of squares is accumulated in f64, the scale
//! `1/sqrt(mean + eps)` in f32, then `(x * scale) * w`.

/// Normalizes each row of length `w.len()` of `x` in place.
pub fn rms_norm_in_place(x: &mut [f32], w: &[f32], eps: f32) {
    let n = w.len();
    debug_assert!(n > 0 && x.len().is_multiple_of(n));
    for row in x.chunks_exact_mut(n) {
        let scale = inv_rms(row, eps);
        for (v, &g) in row.iter_mut().zip(w) {
            *v = (*v * scale) * g;
        }
    }
}

/// `dst = rmsnorm(src) * w`, row by row (`src` and `dst` have the same shape).
pub fn rms_norm_into(src: &[f32], dst: &mut [f32], w: &[f32], eps: f32) {
    let n = w.len();
    debug_assert!(n > 0 && src.len().is_multiple_of(n) && src.len() == dst.len());
    for (s, d) in src.chunks_exact(n).zip(dst.chunks_exact_mut(n)) {
        let scale = inv_rms(s, eps);
        for ((o, &v), &g) in d.iter_mut().zip(s).zip(w) {
            *o = (v * scale) * g;
        }
    }
}

#[inline]
fn inv_rms(row: &[f32], eps: f32) -> f32 {
    let mut sum = 0.0f64;
    for &v in row {
        sum += (v * v) as f64;
    }
    let mean = (sum / row.len() as f64) as f32;
    1.0 / (mean + eps).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_weight_gives_unit_rms() {
        let mut x = vec![1.0f32, -2.0, 3.0, -4.0, 0.5, 0.25, -8.0, 2.0];
        rms_norm_in_place(&mut x, &[1.0; 4], 0.0);
        for row in x.chunks(4) {
            let ms: f32 = row.iter().map(|v| v * v).sum::<f32>() / 4.0;
            assert!((ms - 1.0).abs() < 1e-5, "{ms}");
        }
        // Direction kept.
        assert!(x[0] > 0.0 && x[1] < 0.0);
    }

    #[test]
    fn weight_and_eps_applied() {
        let src = [3.0f32, 4.0];
        let mut dst = [0.0f32; 2];
        // mean square = 12.5; with eps 0.5 -> 13, scale 1/sqrt(13)
        rms_norm_into(&src, &mut dst, &[2.0, -1.0], 0.5);
        let s = 1.0 / 13f32.sqrt();
        assert!((dst[0] - 6.0 * s).abs() < 1e-6);
        assert!((dst[1] + 4.0 * s).abs() < 1e-6);
    }
}
