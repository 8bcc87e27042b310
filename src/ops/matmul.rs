//! `out = x · Wᵀ` for a batch of activation rows against a weight matrix kept in its GGUF block
//! format.
//!
//! Each activation row is quantized once per matmul to the format llama.cpp pairs with the
//! weight type (`quant::vec_dot_type`: Q8_0 for Q4_0/Q5_0/Q8_0, Q8_K for k-quants, ...), then
//! every weight row is dotted with every token row of a tile: weight rows outer, tokens inner,
//! so a weight row is read from memory once per tile of [`TOKEN_TILE`] tokens, not once per token.

use crate::exec::{Exec, SharedMut};
use crate::gguf::GgmlType;
use crate::quant::planes::{self, PlaneLayout, PlanesAct};
use crate::quant::{self, QuantError, VecDotKernel};

/// Tokens whose quantized activations stay hot in cache while the weight matrix streams by.
pub const TOKEN_TILE: usize = 32;

/// A 2-D weight `[n_out rows × n_in columns]` (ggml dims `[n_in, n_out]`), bytes as stored.
pub struct Weight {
    pub ty: GgmlType,
    pub n_in: usize,
    pub n_out: usize,
    data: Vec<u8>,
    row_bytes: usize,
    act_ty: GgmlType,
    act_row_bytes: usize,
    kernel: VecDotKernel,
    /// Set when the Q8_0 bytes were re-laid out as two 4-bit planes (`quant::planes`) for the
    /// screened output head; every result stays bit-identical to the Q8_0 layout's.
    planes: Option<Box<PlaneLayout>>,
    /// Every block scale is finite (`quant::block_scales_finite`): decode takes the four-row
    /// kernel's `dot_finite`.
    finite_scales: bool,
}

impl std::fmt::Debug for Weight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Weight({} [{} x {}])", self.ty, self.n_out, self.n_in)
    }
}

impl Weight {
    /// Takes ownership of `data` (exactly `n_out` rows of `n_in` elements of `ty`); refuses
    /// types without a dot kernel (`UNSUPPORTED_TENSOR_TYPE`) and wrong lengths.
    pub fn new(ty: GgmlType, n_in: usize, n_out: usize, data: Vec<u8>) -> Result<Weight, QuantError> {
        let kernel = quant::vec_dot_kernel(ty)?;
        let row_bytes = quant::row_bytes(ty, n_in)?;
        let act_ty = quant::vec_dot_type(ty);
        let act_row_bytes = quant::row_bytes(act_ty, n_in)?;
        let want = row_bytes.saturating_mul(n_out);
        if data.len() != want {
            return Err(QuantError::BadLength { ty, what: "weight bytes", expected: want, got: data.len() });
        }
        quant::check_vec_dot(ty, row_bytes, act_row_bytes, n_in)?;
        let finite_scales = quant::block_scales_finite(ty, &data);
        Ok(Weight { ty, n_in, n_out, data, row_bytes, act_ty, act_row_bytes, kernel, planes: None, finite_scales })
    }

    /// The stored bytes of row `r` in the file's layout. A weight re-laid out by
    /// [`split_planes`](Self::split_planes) has no such rows: calling this on one is a bug.
    pub fn row(&self, r: usize) -> &[u8] {
        assert!(self.planes.is_none(), "row() of a plane-layout weight");
        &self.data[r * self.row_bytes..(r + 1) * self.row_bytes]
    }

    /// Dequantizes row `r` into `dst` (`n_in` values): an embedding lookup.
    pub fn dequantize_row(&self, r: usize, dst: &mut [f32]) -> Result<(), QuantError> {
        match &self.planes {
            Some(p) => {
                if dst.len() != self.n_in {
                    return Err(QuantError::BadLength { ty: self.ty, what: "row elements", expected: self.n_in, got: dst.len() });
                }
                p.dequantize_row(&self.data, r, dst);
                Ok(())
            }
            None => quant::dequantize(self.ty, self.row(r), dst),
        }
    }

    /// Re-lays out a Q8_0 weight in place as two 4-bit planes whose pass 1 also reads the `l`
    /// nibbles of `outliers` (see `quant::planes`). Returns false (and changes nothing) for
    /// other types or a weight already re-laid out.
    pub fn split_planes(&mut self, outliers: &[usize]) -> bool {
        if self.ty != GgmlType::Q8_0 || self.planes.is_some() {
            return false;
        }
        let mut layout = PlaneLayout::new(self.n_in, self.n_out, outliers);
        layout.relayout_in_place(&mut self.data, self.finite_scales);
        self.planes = Some(Box::new(layout));
        true
    }

    /// The plane layout and bytes when [`split_planes`](Self::split_planes) ran.
    pub fn planes(&self) -> Option<(&PlaneLayout, &[u8])> {
        self.planes.as_deref().map(|p| (p, &self.data[..]))
    }

    /// Bytes of weight data.
    pub fn bytes(&self) -> usize {
        self.data.len()
    }

    /// The activation format this weight's rows are dotted with.
    pub fn activation_type(&self) -> GgmlType {
        self.act_ty
    }
}

/// Reusable buffers for [`matmul`] (quantized activation rows).
#[derive(Default, Debug)]
pub struct MatmulScratch {
    act: Vec<u8>,
    /// The activation rows' scales as f32 for the toks kernels (`quant::activation_scales4`).
    act_d: Vec<f32>,
    /// The activation row as the decode kernel reads it (`quant::Rows4Kernel::prepare`).
    prep: Vec<u8>,
    /// Activation rows prepared for a plane-layout weight, one per token.
    planes: Vec<PlanesAct>,
}

impl MatmulScratch {
    pub fn bytes(&self) -> usize {
        let planes: usize = self.planes.iter().map(PlanesAct::bytes).sum();
        self.act.capacity() + 4 * self.act_d.capacity() + self.prep.capacity() + planes
    }
}

/// `out[t][r] = dot(W[r], x[t])` for `x` of `n_tok = x.len() / n_in` rows; `out` holds
/// `n_tok * n_out` values. On the calling thread.
pub fn matmul(w: &Weight, x: &[f32], out: &mut [f32], s: &mut MatmulScratch) -> Result<(), QuantError> {
    matmul_on(&Exec::Serial, w, x, out, s)
}

/// [`matmul`] with the weight rows split over `exec`'s threads: each thread streams its own
/// rows (in groups of four, as the decode kernel takes them) against every token, so each
/// output is computed exactly as on one thread.
pub fn matmul_on(exec: &Exec, w: &Weight, x: &[f32], out: &mut [f32], s: &mut MatmulScratch) -> Result<(), QuantError> {
    let n_in = w.n_in;
    let n_out = w.n_out;
    debug_assert_eq!(x.len() % n_in, 0);
    let n_tok = x.len() / n_in;
    debug_assert_eq!(out.len(), n_tok * n_out);
    let ab = w.act_row_bytes;
    s.act.resize(n_tok * ab, 0);
    for t in 0..n_tok {
        quant::quantize_activation_into(w.act_ty, &x[t * n_in..(t + 1) * n_in], &mut s.act[t * ab..(t + 1) * ab])?;
    }
    if let Some(layout) = &w.planes {
        planes_matmul(exec, layout, &w.data, &s.act, ab, n_tok, out, &mut s.planes);
        return Ok(());
    }
    let kernel = w.kernel;
    let rb = w.row_bytes;
    let toks4 = quant::vec_dot_toks4_kernel(w.ty);
    let toks8 = quant::vec_dot_toks8_kernel(w.ty);
    if let (Some(rows4), 1) = (quant::vec_dot_rows4_kernel(w.ty), n_tok) {
        // Decode: four weight rows per call share the activation's unpacking, which is
        // prepared once here where the kernel wants it. The calls take each thread's rows in
        // `streams::STREAMS` streams, a row of each per call (one stream: four consecutive
        // rows); each call gets the matrix from its first row to the end, so where its rows
        // are consecutive it can prefetch the next call's (`VecDotRows4`).
        let act = rows4.prepare(&s.act[..ab], n_in, &mut s.prep);
        let act1 = &s.act[..ab];
        let dot = if w.finite_scales { rows4.dot_finite } else { rows4.dot };
        let shared = SharedMut::new(out);
        exec.for_ranges(n_out, 4, |_, rows| {
            // Safety: the ranges are disjoint.
            let out = unsafe { shared.slice(rows.clone()) };
            let (sets, tail) = quant::streams::ordered::<4>(rows.clone());
            for set in sets {
                // One row per stream (or four consecutive rows): equally spaced.
                let stride = set[1] - set[0];
                debug_assert!(set.windows(2).all(|p| p[1] - p[0] == stride));
                let v = dot(&w.data[set[0] * rb..n_out * rb], stride * rb, act, n_in);
                for (r, v) in set.into_iter().zip(v) {
                    out[r - rows.start] = v;
                }
            }
            for r in tail {
                out[r - rows.start] = kernel(&w.data[r * rb..(r + 1) * rb], act1, n_in);
            }
        });
        return Ok(());
    }
    if toks4.is_some() || toks8.is_some() {
        quant::activation_scales4(w.act_ty, &s.act, ab, n_tok, n_in, &mut s.act_d);
    }
    let (act, act_d) = (&s.act, &s.act_d);
    let dy = |t: usize| quant::activation_scales4_at(act_d, t, n_in);
    let shared = SharedMut::new(out);
    // Safety (every `set` below): each part writes only the columns of its own rows.
    let put = |i: usize, v: f32| unsafe { shared.set(i, v) };
    exec.for_ranges(n_out, 4, |_, rows| {
        let mut t0 = 0;
        while t0 < n_tok {
            let t1 = (t0 + TOKEN_TILE).min(n_tok);
            // The rows in `streams::STREAMS` streams, as decode's four-row calls take them
            // (one-row kernels: decode of types without a four-row kernel, Q4_K and Q6_K).
            let (sets, tail) = quant::streams::ordered::<4>(rows.clone());
            for r in sets.flatten().chain(tail) {
                let wr = &w.data[r * rb..(r + 1) * rb];
                let mut t = t0;
                if let Some(toks8) = toks8 {
                    // Prefill: each weight block unpacked once for eight tokens.
                    while t + 8 <= t1 {
                        let v = toks8(wr, &act[t * ab..(t + 8) * ab], ab, dy(t), n_in);
                        for (k, &o) in v.iter().enumerate() {
                            put((t + k) * n_out + r, o);
                        }
                        t += 8;
                    }
                }
                if let Some(toks4) = toks4 {
                    // Prefill: each weight block unpacked once for four tokens.
                    while t + 4 <= t1 {
                        let v = toks4(wr, &act[t * ab..(t + 4) * ab], ab, dy(t), n_in);
                        for (k, &o) in v.iter().enumerate() {
                            put((t + k) * n_out + r, o);
                        }
                        t += 4;
                    }
                }
                for t in t..t1 {
                    put(t * n_out + r, kernel(wr, &act[t * ab..(t + 1) * ab], n_in));
                }
            }
            t0 = t1;
        }
    });
    Ok(())
}

/// The full product on a plane-layout weight: every row's exact dot with every token (rows
/// outer, split over `exec`), bit-identical to the Q8_0 layout's.
#[allow(clippy::too_many_arguments)]
fn planes_matmul(exec: &Exec, layout: &PlaneLayout, data: &[u8], act: &[u8], ab: usize, n_tok: usize, out: &mut [f32], prep: &mut Vec<PlanesAct>) {
    prep.resize_with(n_tok, PlanesAct::default);
    for (t, p) in prep.iter_mut().enumerate() {
        p.prepare(layout, &act[t * ab..(t + 1) * ab]);
    }
    let (_, _, full) = planes::kernels();
    let full4 = planes::full_rows4_kernel();
    let n_out = layout.n_out;
    let prep = &prep[..];
    let shared = SharedMut::new(out);
    // Safety (every `set`): each part writes only the columns of its own rows.
    let put = |i: usize, v: f32| unsafe { shared.set(i, v) };
    exec.for_ranges(n_out, 4, |_, rows| {
        let ra = layout.pass1_row_bytes();
        let (a_part, b_part) = (|r: usize| &data[layout.a_at(r)..layout.a_at(r) + ra], |r: usize| &data[layout.b_at(r)..]);
        // Four rows a call, from `streams::STREAMS` streams (as decode's other matmuls), then
        // the tail.
        let (sets, tail) = quant::streams::ordered::<4>(rows.clone());
        for set in sets {
            let (a, b) = (set.map(a_part), set.map(b_part));
            for (t, x) in prep.iter().enumerate() {
                for (&r, v) in set.iter().zip(full4(a, b, x)) {
                    put(t * n_out + r, v);
                }
            }
        }
        for r in tail {
            for (t, x) in prep.iter().enumerate() {
                put(t * n_out + r, full(a_part(r), b_part(r), x));
            }
        }
    });
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Deterministic values in [-1, 1] from `seed`.
    pub(crate) fn pseudo(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2654435761).wrapping_add(99);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 2001) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    fn f32_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    #[test]
    fn f32_weights_give_the_plain_product() {
        let (n_in, n_out, n_tok) = (64, 5, 40); // 40 tokens: crosses a tile boundary
        let wv = pseudo(n_in * n_out, 1);
        let x = pseudo(n_in * n_tok, 2);
        let w = Weight::new(GgmlType::F32, n_in, n_out, f32_bytes(&wv)).unwrap();
        let mut out = vec![0.0; n_tok * n_out];
        matmul(&w, &x, &mut out, &mut MatmulScratch::default()).unwrap();
        for t in 0..n_tok {
            for r in 0..n_out {
                let want: f64 = (0..n_in).map(|i| wv[r * n_in + i] as f64 * x[t * n_in + i] as f64).sum();
                assert!((out[t * n_out + r] as f64 - want).abs() < 1e-4);
            }
        }
    }

    #[test]
    fn quantized_rows_match_per_row_vec_dot() {
        // Q8_0 weights built by the activation quantizer (same block layout).
        let (n_in, n_out, n_tok) = (64, 3, 2);
        let wv = pseudo(n_in * n_out, 3);
        let mut data = Vec::new();
        let mut row = Vec::new();
        for r in 0..n_out {
            quant::quantize_activation(GgmlType::Q8_0, &wv[r * n_in..(r + 1) * n_in], &mut row).unwrap();
            data.extend_from_slice(&row);
        }
        let w = Weight::new(GgmlType::Q8_0, n_in, n_out, data).unwrap();
        let x = pseudo(n_in * n_tok, 4);
        let mut out = vec![0.0; n_tok * n_out];
        matmul(&w, &x, &mut out, &mut MatmulScratch::default()).unwrap();
        for t in 0..n_tok {
            quant::quantize_activation(GgmlType::Q8_0, &x[t * n_in..(t + 1) * n_in], &mut row).unwrap();
            for r in 0..n_out {
                let want = quant::vec_dot(GgmlType::Q8_0, w.row(r), &row, n_in).unwrap();
                assert_eq!(out[t * n_out + r], want);
                let exact: f32 = (0..n_in).map(|i| wv[r * n_in + i] * x[t * n_in + i]).sum();
                assert!((want - exact).abs() < 0.05 * (1.0 + exact.abs()));
            }
        }
    }

    #[test]
    fn bad_inputs_are_typed_errors() {
        let e = Weight::new(GgmlType::IQ2_XXS, 256, 1, vec![0; 66]).unwrap_err();
        assert_eq!(e.code(), "UNSUPPORTED_TENSOR_TYPE");
        let e = Weight::new(GgmlType::Q8_0, 64, 2, vec![0; 67]).unwrap_err();
        assert_eq!(e.code(), "QUANT_BAD_LENGTH");
        let e = Weight::new(GgmlType::Q4_K, 100, 1, vec![0; 144]).unwrap_err();
        assert_eq!(e.code(), "QUANT_PARTIAL_BLOCK");
    }
}
