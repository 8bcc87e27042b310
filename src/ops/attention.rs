//! Causal self-attention of a batch of queries over the KV cache, with grouped-query heads and
//! an optional sliding window, computed as llama.cpp's CPU backend does it against its f16 KV
//! cache (flash attention off):
//! - each query is rounded to f16 (the activation format ggml pairs with f16 keys);
//! - scores `q·k × scale` over the visible keys, then an exact softmax per row (max first, the
//!   sum of exponentials in f64, multiplied by the reciprocal);
//! - the probabilities are rounded to f16 (the activation format paired with f16 values) and
//!   weight the values.
//!
//! Scores are materialized for a tile of queries at a time, sized so the tile's scores fit in
//! [`SCORE_BUDGET`] floats; keys and values are read through [`KvRead`] in chunks of
//! [`KV_CHUNK`] positions, converted to f32 once per tile and shared by every query and every
//! head of their group. A tile of one query (decode) reads f16 rows in place instead
//! ([`KvRead::k_f16`], `quant::f16_rows`): converting a row and writing it out cost more than
//! its use by one query's heads (in Chromium, the conversion alone was about 5 % of a decode
//! step at 400 tokens of context). The same operations in the same order: the same bits.

use crate::exec::{Exec, SharedMut};
use crate::quant::f16_rows::{axpy_f16_heads, dot, dot_f16_heads};
use crate::quant::{f16_to_f32, f32_to_f16};

/// Positions of K/V fetched (and converted to f32) at a time.
pub const KV_CHUNK: usize = 64;

/// Most attention scores held at once (a tile has at least one query, whatever the context).
pub const SCORE_BUDGET: usize = 1 << 20;

/// Read access to one layer's cached keys and values.
pub trait KvRead: Sync {
    /// Number of positions held (`0..len()` are readable).
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Writes keys of positions `start..start + n` as f32 rows of `n_head_kv * head_dim_k`.
    fn read_k(&self, start: usize, n: usize, dst: &mut [f32]);
    /// Writes values of positions `start..start + n` as f32 rows of `n_head_kv * head_dim_v`.
    fn read_v(&self, start: usize, n: usize, dst: &mut [f32]);
    /// The key row of position `idx` as stored f16 halves, where `read_k` would only convert
    /// them (decode then reads it in place: `quant::f16_rows`); `None` otherwise.
    fn k_f16(&self, _idx: usize) -> Option<&[u8]> {
        None
    }
    /// The value row of position `idx` as stored f16 halves, as [`KvRead::k_f16`].
    fn v_f16(&self, _idx: usize) -> Option<&[u8]> {
        None
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionParams {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
    /// Multiplies `q·k` (1.0 when the queries are already scaled).
    pub scale: f32,
    /// Sliding window: a query at position `p` sees keys at `p - window < j <= p`.
    pub window: Option<usize>,
}

/// Reusable buffers for [`attention`]: the rounded queries (shared), and per part of the head
/// split one chunk of keys and values and the scores of its heads.
#[derive(Default, Debug)]
pub struct AttentionScratch {
    q: Vec<f32>,
    parts: Vec<PartScratch>,
}

#[derive(Default, Debug)]
struct PartScratch {
    k: Vec<f32>,
    v: Vec<f32>,
    scores: Vec<f32>,
}

impl AttentionScratch {
    pub fn bytes(&self) -> usize {
        4 * (self.q.capacity() + self.parts.iter().map(|p| p.k.capacity() + p.v.capacity() + p.scores.capacity()).sum::<usize>())
    }
}

#[inline]
fn round_f16(x: f32) -> f32 {
    f16_to_f32(f32_to_f16(x))
}

/// `q`: `n_q` rows of `n_head * head_dim_k`, query `i` at absolute position `q_pos0 + i`;
/// the cache must already hold positions `0..=q_pos0 + n_q - 1` (this batch's own keys
/// included). `out`: `n_q` rows of `n_head * head_dim_v`. On the calling thread.
pub fn attention(p: &AttentionParams, q: &[f32], q_pos0: usize, kv: &dyn KvRead, out: &mut [f32], s: &mut AttentionScratch) {
    attention_on(&Exec::Serial, p, q, q_pos0, kv, out, s)
}

/// [`attention`] with the heads split over `exec`'s threads: every (query, head) row is
/// computed exactly as on one thread (its scores, softmax and weighted values never mix heads).
pub fn attention_on(exec: &Exec, p: &AttentionParams, q: &[f32], q_pos0: usize, kv: &dyn KvRead, out: &mut [f32], s: &mut AttentionScratch) {
    attention_tiled(exec, p, q, q_pos0, kv, out, s, SCORE_BUDGET, IN_PLACE)
}

/// Whether one-query tiles read f16 rows in place: where the f16 row kernels are SIMD (wasm32
/// with SIMD128). Natively the chunked path stays: its conversion (F16C) and dot (AVX2) are
/// vectorized, the in-place kernels there are the scalar reference.
const IN_PLACE: bool = cfg!(all(target_arch = "wasm32", target_feature = "simd128"));

#[allow(clippy::too_many_arguments)]
fn attention_tiled(
    exec: &Exec,
    p: &AttentionParams,
    q: &[f32],
    q_pos0: usize,
    kv: &dyn KvRead,
    out: &mut [f32],
    s: &mut AttentionScratch,
    budget: usize,
    in_place: bool,
) {
    let (hk, hv, nh) = (p.head_dim_k, p.head_dim_v, p.n_head);
    let q_stride = nh * hk;
    let o_stride = nh * hv;
    let n_q = q.len() / q_stride;
    debug_assert_eq!(out.len(), n_q * o_stride);
    debug_assert!(nh % p.n_head_kv == 0);
    debug_assert!(kv.len() >= q_pos0 + n_q);
    let lo = |pos: usize| lo_of(p.window, pos);

    s.q.clear();
    s.q.extend(q.iter().map(|&x| round_f16(x)));
    out.iter_mut().for_each(|v| *v = 0.0);
    // Widest key span of any query: a tile of `tile` queries needs `tile * nh * span` scores.
    let span_max = (q_pos0 + n_q) - lo(q_pos0 + n_q - 1).min(lo(q_pos0));
    let tile = (budget / (nh * span_max).max(1)).clamp(1, n_q);

    let parts = crate::exec::split(nh, 1, exec.threads()).len();
    if s.parts.len() < parts {
        s.parts.resize_with(parts, PartScratch::default);
    }
    let (sq, shared_parts, shared_out) = (&s.q, SharedMut::new(&mut s.parts[..]), SharedMut::new(out));
    exec.for_ranges(nh, 1, |part, heads| {
        // Safety: part `part` is the only user of its scratch, and writes only its heads' columns.
        let ps = unsafe { &mut shared_parts.slice(part..part + 1)[0] };
        heads_pass(&HeadsJob { p, sq, q_pos0, n_q, tile, kv, heads, in_place }, ps, &shared_out);
    });
}

/// Most heads of one group handled by one call of the f16 row kernels.
const MAX_GROUP_RUN: usize = 64;

/// Keys whose f16 value rows one call of `axpy_f16_heads` adds (decode): each output slice
/// stays in registers across them.
const V_BLOCK: usize = 16;

/// Calls `f(g, hs)` for each run `hs` of consecutive heads of `heads` that share K/V head
/// `g` (`group` query heads per K/V head), at most [`MAX_GROUP_RUN`] heads a run.
#[inline(always)]
fn for_group_runs(heads: std::ops::Range<usize>, group: usize, mut f: impl FnMut(usize, std::ops::Range<usize>)) {
    let mut h = heads.start;
    while h < heads.end {
        let g = h / group;
        let end = ((g + 1) * group).min(heads.end).min(h + MAX_GROUP_RUN);
        f(g, h..end);
        h = end;
    }
}

fn lo_of(window: Option<usize>, pos: usize) -> usize {
    // Keys visible to the query at `pos`: lo(pos)..=pos.
    match window {
        Some(w) => (pos + 1).saturating_sub(w),
        None => 0,
    }
}

/// What one part of the attention works on: its heads of every query, in tiles of `tile` queries.
struct HeadsJob<'a> {
    p: &'a AttentionParams,
    /// The queries, rounded to f16 as the K rows are.
    sq: &'a [f32],
    q_pos0: usize,
    n_q: usize,
    tile: usize,
    kv: &'a dyn KvRead,
    heads: std::ops::Range<usize>,
    /// One-query tiles read f16 rows in place ([`IN_PLACE`]; tests force either way).
    in_place: bool,
}

/// The attention of one [`HeadsJob`], tile by tile of queries: on x86-64 CPUs
/// with AVX2 the same body compiled for AVX2 (8-lane f32 instead of SSE2's 4: its dot's eight
/// partial sums and the weighted-value sums map onto one register), else the baseline build.
/// Both compute the very same IEEE operations in the same order (rustc never fuses a multiply
/// and an add, whatever the target features), so the results are bit-identical (tested below).
fn heads_pass(job: &HeadsJob<'_>, s: &mut PartScratch, out: &SharedMut<'_, f32>) {
    #[cfg(target_arch = "x86_64")]
    if crate::quant::kernel_tier() == "avx2" {
        // Safety: the CPU has AVX2 (`kernel_tier` probed it).
        return unsafe { heads_pass_avx2(job, s, out) };
    }
    heads_pass_body(job, s, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn heads_pass_avx2(job: &HeadsJob<'_>, s: &mut PartScratch, out: &SharedMut<'_, f32>) {
    heads_pass_body(job, s, out)
}

#[inline(always)]
fn heads_pass_body(job: &HeadsJob<'_>, s: &mut PartScratch, out: &SharedMut<'_, f32>) {
    let HeadsJob { p, sq, q_pos0, n_q, tile, kv, ref heads, in_place } = *job;
    let (hk, hv, nh) = (p.head_dim_k, p.head_dim_v, p.n_head);
    let (q_stride, o_stride) = (nh * hk, nh * hv);
    let group = nh / p.n_head_kv;
    let kv_k = p.n_head_kv * hk;
    let kv_v = p.n_head_kv * hv;
    let lo = |pos: usize| lo_of(p.window, pos);
    let (h0, nhp) = (heads.start, heads.len());
    s.k.resize(KV_CHUNK * kv_k, 0.0);
    s.v.resize(KV_CHUNK * kv_v, 0.0);

    let mut t0 = 0;
    while t0 < n_q {
        let t1 = (t0 + tile).min(n_q);
        let k_lo = lo(q_pos0 + t0);
        let k_hi = q_pos0 + t1; // exclusive
        let span = k_hi - k_lo;
        let scores = &mut s.scores;
        scores.clear();
        scores.resize((t1 - t0) * nhp * span, f32::NEG_INFINITY);

        // Scores, chunk by chunk of keys (one query: row by row, f16 rows read in place).
        let mut j0 = k_lo;
        if in_place && t1 - t0 == 1 {
            let pos = q_pos0 + t0;
            let ks = &mut s.k[..kv_k];
            let mut dots = [0f32; MAX_GROUP_RUN];
            for j in lo(pos)..pos + 1 {
                let row_k = kv.k_f16(j);
                if row_k.is_none() {
                    kv.read_k(j, 1, ks);
                }
                for_group_runs(heads.clone(), group, |g, hs| {
                    let qs = &sq[t0 * q_stride + hs.start * hk..t0 * q_stride + hs.end * hk];
                    let d = &mut dots[..hs.len()];
                    match row_k {
                        Some(r) => dot_f16_heads(&r[2 * g * hk..], qs, hk, d),
                        None => d.iter_mut().enumerate().for_each(|(m, d)| *d = dot(&qs[m * hk..(m + 1) * hk], &ks[g * hk..(g + 1) * hk])),
                    }
                    for (h, &d) in hs.zip(d.iter()) {
                        scores[(h - h0) * span + j - k_lo] = d * p.scale;
                    }
                });
            }
            j0 = k_hi;
        }
        while j0 < k_hi {
            let n = KV_CHUNK.min(k_hi - j0);
            kv.read_k(j0, n, &mut s.k[..n * kv_k]);
            for i in t0..t1 {
                let pos = q_pos0 + i;
                let (a, b) = (lo(pos).max(j0), (pos + 1).min(j0 + n));
                for h in heads.clone() {
                    let qh = &sq[i * q_stride + h * hk..][..hk];
                    let g = h / group;
                    let row = &mut scores[((i - t0) * nhp + h - h0) * span..][..span];
                    for j in a..b {
                        let kh = &s.k[(j - j0) * kv_k + g * hk..][..hk];
                        row[j - k_lo] = dot(qh, kh) * p.scale;
                    }
                }
            }
            j0 += n;
        }

        // Softmax per (query, head) row; masked entries are -inf and become 0.
        for row in scores.chunks_exact_mut(span) {
            // `>` rather than `f32::max` (a libm call per score in wasm): both skip a NaN score
            // and start from −∞, so they find the same maximum but for the sign of a zero one,
            // and `exp(x − max)` is the same for either zero (x − ±0 differs only in a zero's
            // sign, and exp(±0) = 1).
            let max = row.iter().copied().fold(f32::NEG_INFINITY, |m, x| if x > m { x } else { m });
            let mut sum = 0.0f64;
            for x in row.iter_mut() {
                let e = if *x == f32::NEG_INFINITY { 0.0 } else { super::math::exp_f32(*x - max) };
                *x = e;
                sum += e as f64;
            }
            let inv = (1.0 / sum) as f32;
            row.iter_mut().for_each(|x| *x = round_f16(*x * inv));
        }

        // Weighted values (one query: f16 rows read in place a block of keys at a time, a row
        // that cannot be read in place alone through `read_v`; each output element still sums
        // its keys in ascending order).
        let mut j0 = k_lo;
        if in_place && t1 - t0 == 1 {
            let pos = q_pos0 + t0;
            let vs = &mut s.v[..kv_v];
            let mut ws = [0f32; V_BLOCK * MAX_GROUP_RUN];
            let mut j = lo(pos);
            while j <= pos {
                let mut rows: [&[u8]; V_BLOCK] = [&[]; V_BLOCK];
                let mut nb = 0;
                while nb < V_BLOCK && j + nb <= pos {
                    let Some(r) = kv.v_f16(j + nb) else { break };
                    rows[nb] = r;
                    nb += 1;
                }
                if nb == 0 {
                    kv.read_v(j, 1, vs);
                }
                for_group_runs(heads.clone(), group, |g, hs| {
                    let m = hs.len();
                    // Safety: heads are split between parts, so these (query, head) rows are ours.
                    let o = unsafe { out.slice(t0 * o_stride + hs.start * hv..t0 * o_stride + hs.end * hv) };
                    if nb == 0 {
                        for (k, h) in hs.enumerate() {
                            let wm = scores[(h - h0) * span + j - k_lo];
                            if wm != 0.0 {
                                add_weighted(&mut o[k * hv..(k + 1) * hv], wm, &vs[g * hv..(g + 1) * hv]);
                            }
                        }
                        return;
                    }
                    let w = &mut ws[..nb * m];
                    for b in 0..nb {
                        for (k, h) in hs.clone().enumerate() {
                            w[b * m + k] = scores[(h - h0) * span + j + b - k_lo];
                        }
                    }
                    let segs: [&[u8]; V_BLOCK] = core::array::from_fn(|b| if b < nb { &rows[b][2 * g * hv..] } else { &[] });
                    axpy_f16_heads(&segs[..nb], w, o, hv);
                });
                j += nb.max(1);
            }
            j0 = k_hi;
        }
        while j0 < k_hi {
            let n = KV_CHUNK.min(k_hi - j0);
            kv.read_v(j0, n, &mut s.v[..n * kv_v]);
            for i in t0..t1 {
                let pos = q_pos0 + i;
                let (a, b) = (lo(pos).max(j0), (pos + 1).min(j0 + n));
                for h in heads.clone() {
                    let g = h / group;
                    let row = &scores[((i - t0) * nhp + h - h0) * span..][..span];
                    // Safety: heads are split between parts, so this (query, head) is ours.
                    let oh = unsafe { out.slice(i * o_stride + h * hv..i * o_stride + (h + 1) * hv) };
                    for j in a..b {
                        let w = row[j - k_lo];
                        if w == 0.0 {
                            continue;
                        }
                        add_weighted(oh, w, &s.v[(j - j0) * kv_v + g * hv..][..hv]);
                    }
                }
            }
            j0 += n;
        }
        t0 = t1;
    }
}

/// `o += w · v`, element by element: a value row's part in a head's output.
#[inline(always)]
fn add_weighted(o: &mut [f32], w: f32, v: &[f32]) {
    for (o, &x) in o.iter_mut().zip(v) {
        *o += w * x;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Plain {
        k: Vec<f32>,
        v: Vec<f32>,
        kw: usize,
        vw: usize,
    }
    impl KvRead for Plain {
        fn len(&self) -> usize {
            self.k.len() / self.kw
        }
        fn read_k(&self, start: usize, n: usize, dst: &mut [f32]) {
            dst.copy_from_slice(&self.k[start * self.kw..(start + n) * self.kw]);
        }
        fn read_v(&self, start: usize, n: usize, dst: &mut [f32]) {
            dst.copy_from_slice(&self.v[start * self.vw..(start + n) * self.vw]);
        }
    }

    /// Straightforward O(n²) reference in f64.
    fn reference(p: &AttentionParams, q: &[f32], q_pos0: usize, kv: &Plain) -> Vec<f64> {
        let (hk, hv) = (p.head_dim_k, p.head_dim_v);
        let n_q = q.len() / (p.n_head * hk);
        let mut out = vec![0.0f64; n_q * p.n_head * hv];
        for i in 0..n_q {
            let pos = q_pos0 + i;
            for h in 0..p.n_head {
                let g = h / (p.n_head / p.n_head_kv);
                let mut sc = vec![];
                for j in 0..=pos {
                    if let Some(w) = p.window {
                        if pos - j >= w {
                            continue;
                        }
                    }
                    let mut d = 0.0f64;
                    for x in 0..hk {
                        d += q[i * p.n_head * hk + h * hk + x] as f64 * kv.k[j * kv.kw + g * hk + x] as f64;
                    }
                    sc.push((j, d * p.scale as f64));
                }
                let mx = sc.iter().map(|s| s.1).fold(f64::NEG_INFINITY, f64::max);
                let z: f64 = sc.iter().map(|s| (s.1 - mx).exp()).sum();
                for &(j, d) in &sc {
                    let w = (d - mx).exp() / z;
                    for x in 0..hv {
                        out[i * p.n_head * hv + h * hv + x] += w * kv.v[j * kv.vw + g * hv + x] as f64;
                    }
                }
            }
        }
        out
    }

    fn pseudo(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed.wrapping_mul(2654435761).wrapping_add(12345);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s % 2000) as f32 / 1000.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn matches_reference_gqa_window_and_chunks() {
        for &(n_head, n_head_kv, window, n_ctx, n_q) in &[
            (4usize, 1usize, None, 150usize, 150usize),
            (4, 2, Some(40usize), 150, 150),
            (2, 2, Some(70), 200, 1),
            (6, 3, None, 130, 3),
        ] {
            let (hk, hv) = (16, 8);
            let p = AttentionParams { n_head, n_head_kv, head_dim_k: hk, head_dim_v: hv, scale: 0.3, window };
            let kv = Plain { k: pseudo(n_ctx * n_head_kv * hk, 1), v: pseudo(n_ctx * n_head_kv * hv, 2), kw: n_head_kv * hk, vw: n_head_kv * hv };
            let q = pseudo(n_q * n_head * hk, 3);
            let q_pos0 = n_ctx - n_q;
            let mut out = vec![0.0; n_q * n_head * hv];
            let mut s = AttentionScratch::default();
            attention(&p, &q, q_pos0, &kv, &mut out, &mut s);
            let want = reference(&p, &q, q_pos0, &kv);
            let maxd = out.iter().zip(&want).map(|(&a, &b)| (a as f64 - b).abs()).fold(0.0, f64::max);
            assert!(maxd < 2e-3, "heads {n_head}/{n_head_kv} window {window:?}: max diff {maxd}");
        }
    }

    #[test]
    fn query_tiles_do_not_change_the_result() {
        let (n_head, n_head_kv, hk, hv, n_ctx) = (4, 2, 8, 8, 90);
        for window in [None, Some(20)] {
            let p = AttentionParams { n_head, n_head_kv, head_dim_k: hk, head_dim_v: hv, scale: 0.4, window };
            let kv = Plain { k: pseudo(n_ctx * n_head_kv * hk, 7), v: pseudo(n_ctx * n_head_kv * hv, 8), kw: n_head_kv * hk, vw: n_head_kv * hv };
            let q = pseudo(50 * n_head * hk, 9);
            let mut one = vec![0.0; 50 * n_head * hv];
            let mut many = one.clone();
            attention_tiled(&Exec::Serial, &p, &q, 40, &kv, &mut one, &mut AttentionScratch::default(), SCORE_BUDGET, IN_PLACE);
            // A budget of 1000 scores: tiles of a few queries.
            attention_tiled(&Exec::Serial, &p, &q, 40, &kv, &mut many, &mut AttentionScratch::default(), 1000, IN_PLACE);
            assert_eq!(one, many);
            // Heads split over 2 and 3 threads (4 heads, 2 KV groups): bit for bit the same.
            for threads in [2, 3] {
                let mut split = vec![f32::NAN; one.len()];
                let e = Exec::with_threads(threads).unwrap();
                attention_tiled(&e, &p, &q, 40, &kv, &mut split, &mut AttentionScratch::default(), 1000, IN_PLACE);
                assert_eq!(one.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), split.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
            }
        }
    }

    /// The AVX2 compilation of the attention body against the baseline one, bit for bit: head
    /// widths with and without a remainder past the dot's eight lanes, GQA, windows, decode and
    /// prefill shapes.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_body_is_bit_identical_to_the_baseline() {
        if crate::quant::kernel_tier() != "avx2" {
            eprintln!("no AVX2 on this CPU: nothing to compare");
            return;
        }
        for &(n_head, n_head_kv, hk, hv, window, n_ctx, n_q) in &[
            (4usize, 1usize, 256usize, 256usize, None, 120usize, 120usize),
            (4, 2, 20, 13, Some(30usize), 100, 100),
            (2, 1, 64, 64, None, 300, 1),
            (6, 3, 7, 9, Some(5), 40, 3),
        ] {
            let p = AttentionParams { n_head, n_head_kv, head_dim_k: hk, head_dim_v: hv, scale: 0.125, window };
            let kv = Plain { k: pseudo(n_ctx * n_head_kv * hk, 11), v: pseudo(n_ctx * n_head_kv * hv, 12), kw: n_head_kv * hk, vw: n_head_kv * hv };
            let q = pseudo(n_q * n_head * hk, 13);
            let q_pos0 = n_ctx - n_q;
            let run = |avx2: bool| {
                let mut out = vec![0.0f32; n_q * n_head * hv];
                let mut ps = PartScratch::default();
                let shared = SharedMut::new(&mut out[..]);
                let tile = 17.min(n_q);
                let job = HeadsJob { p: &p, sq: &q, q_pos0, n_q, tile, kv: &kv, heads: 0..n_head, in_place: IN_PLACE };
                if avx2 {
                    // Safety: the CPU has AVX2 (checked above).
                    unsafe { heads_pass_avx2(&job, &mut ps, &shared) };
                } else {
                    heads_pass_body(&job, &mut ps, &shared);
                }
                out.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
            };
            assert_eq!(run(true), run(false), "heads {n_head}/{n_head_kv} dims {hk}/{hv} window {window:?} n_q {n_q}");
        }
    }

    /// A cache of f16 rows, as the K/V cache holds them: read converted, or in place
    /// (`k_f16`, `v_f16`) but for every `no_place`-th row (as a rotated sink key is not).
    struct Halves {
        k: Vec<u8>,
        v: Vec<u8>,
        kw: usize,
        vw: usize,
        no_place: usize,
    }
    impl KvRead for Halves {
        fn len(&self) -> usize {
            self.k.len() / (2 * self.kw)
        }
        fn read_k(&self, start: usize, n: usize, dst: &mut [f32]) {
            crate::quant::dequantize_f16(&self.k[2 * start * self.kw..2 * (start + n) * self.kw], &mut dst[..n * self.kw]);
        }
        fn read_v(&self, start: usize, n: usize, dst: &mut [f32]) {
            crate::quant::dequantize_f16(&self.v[2 * start * self.vw..2 * (start + n) * self.vw], &mut dst[..n * self.vw]);
        }
        fn k_f16(&self, idx: usize) -> Option<&[u8]> {
            (idx % self.no_place != 0).then(|| &self.k[2 * idx * self.kw..2 * (idx + 1) * self.kw])
        }
        fn v_f16(&self, idx: usize) -> Option<&[u8]> {
            (idx % self.no_place != 1).then(|| &self.v[2 * idx * self.vw..2 * (idx + 1) * self.vw])
        }
    }

    /// Decode's one-query tiles (f16 rows read in place, row by row) against the same queries
    /// in one batch (rows converted a chunk at a time), bit for bit: GQA shapes, head widths
    /// with and without a remainder past the dot's eight lanes, windows, rows that cannot be
    /// read in place, heads split over threads (runs of a group cut between parts).
    #[test]
    fn decode_tiles_equal_the_batch_bit_for_bit() {
        let halves = |v: Vec<f32>| v.iter().flat_map(|&x| f32_to_f16(x * 3.0).to_le_bytes()).collect::<Vec<u8>>();
        for &(n_head, n_head_kv, hk, hv, window, n_ctx, n_q) in &[
            (4usize, 1usize, 256usize, 256usize, None, 140usize, 6usize),
            (6, 3, 20, 13, Some(30usize), 100, 5),
            (9, 3, 7, 9, None, 75, 4),
            (4, 4, 64, 64, Some(50), 130, 3),
        ] {
            let p = AttentionParams { n_head, n_head_kv, head_dim_k: hk, head_dim_v: hv, scale: 0.125, window };
            let (kw, vw) = (n_head_kv * hk, n_head_kv * hv);
            for no_place in [usize::MAX, 7] {
                let kv = Halves { k: halves(pseudo(n_ctx * kw, 21)), v: halves(pseudo(n_ctx * vw, 22)), kw, vw, no_place };
                let q = pseudo(n_q * n_head * hk, 23);
                let q_pos0 = n_ctx - n_q;
                let mut batch = vec![0.0f32; n_q * n_head * hv];
                attention_tiled(&Exec::Serial, &p, &q, q_pos0, &kv, &mut batch, &mut AttentionScratch::default(), SCORE_BUDGET, true);
                for threads in [1, 2, 3] {
                    let e = Exec::with_threads(threads).unwrap();
                    for i in 0..n_q {
                        let mut one = vec![f32::NAN; n_head * hv];
                        attention_tiled(&e, &p, &q[i * n_head * hk..(i + 1) * n_head * hk], q_pos0 + i, &kv, &mut one, &mut AttentionScratch::default(), SCORE_BUDGET, true);
                        let want = &batch[i * n_head * hv..(i + 1) * n_head * hv];
                        assert_eq!(one.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), want.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), "heads {n_head}/{n_head_kv} dims {hk}/{hv} window {window:?} query {i} threads {threads} no_place {no_place}");
                    }
                }
            }
        }
    }

    #[test]
    fn first_position_returns_its_own_value() {
        let p = AttentionParams { n_head: 2, n_head_kv: 1, head_dim_k: 4, head_dim_v: 4, scale: 1.0, window: Some(1) };
        let kv = Plain { k: pseudo(12, 5), v: (0..12).map(|i| i as f32).collect(), kw: 4, vw: 4 };
        let q = pseudo(3 * 8, 6);
        let mut out = vec![0.0; 3 * 8];
        attention(&p, &q, 0, &kv, &mut out, &mut AttentionScratch::default());
        // Window 1: every query sees only itself.
        for i in 0..3 {
            for h in 0..2 {
                for x in 0..4 {
                    assert_eq!(out[i * 8 + h * 4 + x], (i * 4 + x) as f32);
                }
            }
        }
    }
}
