//! Q8_0 re-laid out as two 4-bit planes, for the screened output head (`crate::ops::screen`).
//!
//! A Q8_0 quant `q` is stored as the offset-binary byte `u = q ^ 0x80` (`u = q + 128`) cut in
//! two nibbles: `h = u >> 4` (so `q >> 4 = h - 8`) and `l = u & 15` (`q = 16·(h - 8) + l`).
//! Pass 1 of the screen reads the scales, every `h` and the `l` of a few calibrated outlier
//! dimensions; pass 2 (and the full head) reads the rest of `l`. Same bytes as Q8_0, no copy.
//!
//! Within a block, elements are permuted (the block's integer sum does not depend on the order
//! of its terms, so every dot stays bit-identical to Q8_0's): storage position `p` (0..32) holds
//! dimension `perm[p]`; byte `k` of a block's plane holds positions `k` (low nibble) and `k+16`
//! (high nibble). The last `c` bytes (`k ≥ 16 - c`) of a block's `l` plane are its "known"
//! bytes: they hold the block's outlier dimensions and are read by pass 1.
//!
//! Rows are stored in groups of [`GROUP`]: per group, first every row's pass-1 part `A`
//! (`[d: f16 × nb][h: 16 × nb][known l bytes: Σc]`), then every row's rest `B` (the other `l`
//! bytes, block by block). Pass 1 then streams the `A` parts and skips the `B` parts in long
//! gaps that hardware prefetchers do not fill.

use super::float::read_f16;
use super::q8::{Q8_0_BYTES, QK};

/// Rows per group of the layout.
pub const GROUP: usize = 256;

/// How a Q8_0 matrix is laid out in planes (depends on its width and the outlier dimensions).
#[derive(Clone, Debug, PartialEq)]
pub struct PlaneLayout {
    pub n_in: usize,
    pub n_out: usize,
    nb: usize,
    /// Per block: storage position -> dimension within the block.
    perm: Vec<[u8; QK]>,
    /// Per block: known `l` bytes (`c`), their offset in the row's known section, the offset
    /// of the other `16 - c` bytes in the row's `B` part.
    c: Vec<u8>,
    o_off: Vec<u16>,
    b_off: Vec<u16>,
    /// Bytes of a row's `A` and `B` parts.
    ra: usize,
    rb: usize,
    /// The outlier dimensions asked for (sorted).
    outliers: Vec<usize>,
    /// Every row's scales are finite (no f16 Inf or NaN): set by `relayout_in_place`. The
    /// wasm pass 1 then converts them without testing for the rare general case.
    finite_scales: bool,
}

impl PlaneLayout {
    /// The layout of an `n_out × n_in` Q8_0 matrix (`n_in` a multiple of 32, > 0) whose pass 1
    /// also reads the `l` nibbles of `outliers` (dimensions `< n_in`; duplicates ignored). A
    /// block with `k` outliers keeps `ceil(k / 2)` bytes known (an odd count knows one more
    /// dimension, the lowest other one).
    pub fn new(n_in: usize, n_out: usize, outliers: &[usize]) -> PlaneLayout {
        assert!(n_in > 0 && n_in.is_multiple_of(QK), "Q8_0 rows are whole blocks");
        let nb = n_in / QK;
        let mut outl: Vec<usize> = outliers.iter().copied().filter(|&d| d < n_in).collect();
        outl.sort_unstable();
        outl.dedup();
        let (mut perm, mut c, mut o_off, mut b_off) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut o, mut b) = (0usize, 0usize);
        for blk in 0..nb {
            let mine: Vec<usize> = outl.iter().filter(|&&d| d / QK == blk).map(|&d| d % QK).collect();
            let cb = mine.len().div_ceil(2);
            // Known positions, ascending: 16-cb..16 then 32-cb..32.
            let known: Vec<usize> = (16 - cb..16).chain(32 - cb..32).collect();
            let mut dims_known = mine.clone();
            let mut rest: Vec<usize> = (0..QK).filter(|d| !mine.contains(d)).collect();
            while dims_known.len() < known.len() {
                dims_known.push(rest.remove(0));
            }
            dims_known.sort_unstable();
            let mut p = [0u8; QK];
            let mut it_known = dims_known.into_iter();
            let mut it_rest = rest.into_iter();
            for (pos, slot) in p.iter_mut().enumerate() {
                let d = if known.contains(&pos) { it_known.next() } else { it_rest.next() };
                *slot = d.expect("32 positions for 32 dimensions") as u8;
            }
            perm.push(p);
            c.push(cb as u8);
            o_off.push(o as u16);
            b_off.push(b as u16);
            o += cb;
            b += 16 - cb;
        }
        PlaneLayout { n_in, n_out, nb, perm, c, o_off, b_off, ra: nb * 18 + o, rb: b, outliers: outl, finite_scales: false }
    }

    pub fn blocks(&self) -> usize {
        self.nb
    }

    /// Whether every scale is finite (after `relayout_in_place`).
    pub fn finite_scales(&self) -> bool {
        self.finite_scales
    }

    /// The outlier dimensions whose `l` nibbles pass 1 reads.
    pub fn outliers(&self) -> &[usize] {
        &self.outliers
    }

    /// Bytes of the matrix (the same as Q8_0's).
    pub fn bytes(&self) -> usize {
        self.n_out * (self.ra + self.rb)
    }

    /// Bytes pass 1 reads per row (scales, `h` plane, known `l` bytes).
    pub fn pass1_row_bytes(&self) -> usize {
        self.ra
    }

    /// Bytes of a row's `B` part.
    pub fn rest_row_bytes(&self) -> usize {
        self.rb
    }

    /// Bytes of one whole row (what computing its exact dot reads).
    pub fn row_bytes(&self) -> usize {
        self.ra + self.rb
    }

    fn group_of(&self, r: usize) -> (usize, usize, usize) {
        let g0 = r / GROUP * GROUP;
        let rows = GROUP.min(self.n_out - g0);
        (g0 * (self.ra + self.rb), rows, r - g0)
    }

    /// Byte offset of row `r`'s `A` part.
    pub fn a_at(&self, r: usize) -> usize {
        let (base, _, i) = self.group_of(r);
        base + i * self.ra
    }

    /// Byte offset of row `r`'s `B` part.
    pub fn b_at(&self, r: usize) -> usize {
        let (base, rows, i) = self.group_of(r);
        base + rows * self.ra + i * self.rb
    }

    /// Writes one Q8_0 row (`src`, `34 × nb` bytes) as its `A` and `B` parts. Not inlined: in
    /// wasm, V8 runs a call in the tier it started in, so the re-layout's one long call would
    /// run its whole loop in the baseline compiler's code; called once per row, this function
    /// is optimized after the first rows.
    #[inline(never)]
    fn split_row(&self, src: &[u8], a: &mut [u8], b: &mut [u8]) {
        let o0 = self.nb * 18;
        for blk in 0..self.nb {
            let x = &src[blk * Q8_0_BYTES..(blk + 1) * Q8_0_BYTES];
            a[2 * blk..2 * blk + 2].copy_from_slice(&x[0..2]);
            let u = |pos: usize| x[2 + self.perm[blk][pos] as usize] ^ 0x80;
            let cb = self.c[blk] as usize;
            for k in 0..16 {
                let (lo, hi) = (u(k), u(k + 16));
                a[self.nb * 2 + blk * 16 + k] = (lo >> 4) | (hi & 0xF0);
                let l = (lo & 0x0F) | (hi << 4);
                if k >= 16 - cb {
                    a[o0 + self.o_off[blk] as usize + k - (16 - cb)] = l;
                } else {
                    b[self.b_off[blk] as usize + k] = l;
                }
            }
        }
    }

    /// Re-lays out `data` (this matrix in Q8_0, row-major) in place, one group at a time
    /// through a scratch buffer of one group (`GROUP` rows): no second copy of the matrix.
    /// `finite_scales`: whether every scale is finite, `quant::block_scales_finite` of these
    /// Q8_0 bytes (the weight found it at load); noted for the pass-1 kernels, which then skip
    /// the Inf/NaN test.
    pub fn relayout_in_place(&mut self, data: &mut [u8], finite_scales: bool) {
        let row = self.nb * Q8_0_BYTES;
        assert_eq!(data.len(), self.n_out * row);
        let mut tmp = Vec::new();
        for g0 in (0..self.n_out).step_by(GROUP) {
            let rows = GROUP.min(self.n_out - g0);
            let base = g0 * row;
            tmp.clear();
            tmp.extend_from_slice(&data[base..base + rows * row]);
            let (a_all, b_all) = data[base..base + rows * row].split_at_mut(rows * self.ra);
            for i in 0..rows {
                let (a, b) = (&mut a_all[i * self.ra..(i + 1) * self.ra], &mut b_all[i * self.rb..(i + 1) * self.rb]);
                self.split_row(&tmp[i * row..(i + 1) * row], a, b);
            }
        }
        self.finite_scales = finite_scales;
    }

    /// Row `r` back in Q8_0 (`dst`: `34 × nb` bytes): the bytes it was made from.
    pub fn q8_0_row(&self, data: &[u8], r: usize, dst: &mut [u8]) {
        let (a, b) = (&data[self.a_at(r)..self.a_at(r) + self.ra], &data[self.b_at(r)..self.b_at(r) + self.rb]);
        let o0 = self.nb * 18;
        for blk in 0..self.nb {
            let y = &mut dst[blk * Q8_0_BYTES..(blk + 1) * Q8_0_BYTES];
            y[0..2].copy_from_slice(&a[2 * blk..2 * blk + 2]);
            let lb = self.l_bytes(a, b, o0, blk);
            for k in 0..16 {
                let h = a[self.nb * 2 + blk * 16 + k];
                y[2 + self.perm[blk][k] as usize] = ((h << 4) | (lb[k] & 0x0F)) ^ 0x80;
                y[2 + self.perm[blk][k + 16] as usize] = ((h & 0xF0) | (lb[k] >> 4)) ^ 0x80;
            }
        }
    }

    /// Block `blk`'s 16 `l` bytes, gathered from the row's `B` part and known section.
    fn l_bytes(&self, a: &[u8], b: &[u8], o0: usize, blk: usize) -> [u8; 16] {
        let cb = self.c[blk] as usize;
        let mut l = [0u8; 16];
        let bo = self.b_off[blk] as usize;
        l[..16 - cb].copy_from_slice(&b[bo..bo + 16 - cb]);
        let oo = o0 + self.o_off[blk] as usize;
        l[16 - cb..].copy_from_slice(&a[oo..oo + cb]);
        l
    }

    /// Dequantizes row `r` (an embedding lookup on a tied head): the values of Q8_0's
    /// `dequantize_row`, bit for bit.
    pub fn dequantize_row(&self, data: &[u8], r: usize, dst: &mut [f32]) {
        let mut q = vec![0u8; self.nb * Q8_0_BYTES];
        self.q8_0_row(data, r, &mut q);
        super::q8::dequantize_q8_0(&q, dst);
    }
}

/// A Q8_0 activation row prepared for the plane kernels: permuted to each block's storage
/// order, with the per-block constants the kernels need (computed once per matmul).
#[derive(Clone, Debug, Default)]
pub struct PlanesAct {
    pub nb: usize,
    /// Offset of the known-`l` section in a row's `A` part.
    pub o0: usize,
    /// Per block: 32 quants in storage order.
    pub qxp: Vec<[i8; QK]>,
    /// Per block: the activation's scale.
    pub dx: Vec<f32>,
    /// Per block: Σ qx over all positions.
    pub sum: Vec<i32>,
    /// Per block: 15 · Σ qx over the unknown positions (the centre 7.5 of `l`, doubled).
    pub c15: Vec<i32>,
    /// Per block: the weight of its |dw| in pass 1's error bound (`ops::screen`'s `Bound`),
    /// `7.5·m + 256·γ_{nb+1}·n` rounded up to f32, with `m = |dx|·Σ_unknown |qx|` and
    /// `n = |dx|·Σ |qx|` (both exact in f32): pass 1 sums `|dw|·w` once instead of the two.
    pub w: Vec<f32>,
    /// Per block: known `l` bytes, their offset in the known section, the rest's offset in `B`.
    pub c: Vec<u8>,
    pub o_off: Vec<u16>,
    pub b_off: Vec<u16>,
    /// Per block: 0xFF at the known bytes (`k ≥ 16 - c`), else 0.
    pub mask: Vec<[u8; 16]>,
    /// Per block: what the wasm pass 1 and four-row full head
    /// read (`planes_simd128::Pass1Block`).
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    pub simd: Vec<super::planes_simd128::Pass1Block>,
    /// Per four blocks: their scalars as lanes (`planes_simd128::Pass1Quad`).
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    pub quads: Vec<super::planes_simd128::Pass1Quad>,
    /// Some block's known bytes are read through its own window (`Pass1Block::known_at`),
    /// not its group's.
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    pub simd_blockwise: bool,
    /// The layout's `finite_scales`: pass 1 converts the scales without the Inf/NaN test.
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    pub finite_scales: bool,
}

impl PlanesAct {
    /// Bytes held for a row of `nb` blocks.
    pub fn bytes_for(nb: usize) -> usize {
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        let simd = nb * super::planes_simd128::PASS1_BLOCK_BYTES + nb.div_ceil(4) * super::planes_simd128::PASS1_QUAD_BYTES;
        #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
        let simd = 0;
        nb * (QK + 4 * 4 + 1 + 2 * 2 + 16) + simd
    }

    pub fn bytes(&self) -> usize {
        Self::bytes_for(self.qxp.capacity())
    }

    /// Bytes of a row's `A` part in the layout this activation was prepared for (its scales,
    /// `h` plane and known section: `PlaneLayout::pass1_row_bytes`), what the wasm kernels'
    /// bounds checks need.
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    pub fn a_part_bytes(&self) -> usize {
        self.nb.checked_sub(1).map_or(0, |last| self.o0 + self.o_off[last] as usize + self.c[last] as usize)
    }
    /// Prepares `act` (Q8_0, `34 × nb` bytes) for `layout`'s kernels, reusing `self`'s buffers.
    pub fn prepare(&mut self, layout: &PlaneLayout, act: &[u8]) {
        let nb = layout.nb;
        self.nb = nb;
        self.o0 = nb * 18;
        for v in [&mut self.sum, &mut self.c15] {
            v.clear();
        }
        for v in [&mut self.dx, &mut self.w] {
            v.clear();
        }
        let g256 = rounding_gamma256(nb);
        self.qxp.clear();
        self.mask.clear();
        self.c.clone_from(&layout.c);
        self.o_off.clone_from(&layout.o_off);
        self.b_off.clone_from(&layout.b_off);
        for blk in 0..nb {
            let y = &act[blk * Q8_0_BYTES..(blk + 1) * Q8_0_BYTES];
            let dx = read_f16(y, 0);
            let cb = layout.c[blk] as usize;
            let mut q = [0i8; QK];
            let (mut sum, mut unk, mut unk_abs, mut all_abs) = (0i32, 0i32, 0i32, 0i32);
            for (pos, slot) in q.iter_mut().enumerate() {
                let v = y[2 + layout.perm[blk][pos] as usize] as i8;
                *slot = v;
                let v = v as i32;
                sum += v;
                all_abs += v.abs();
                if pos % 16 < 16 - cb {
                    unk += v;
                    unk_abs += v.abs();
                }
            }
            let mut mask = [0u8; 16];
            mask[16 - cb..].fill(0xFF);
            self.qxp.push(q);
            self.dx.push(dx);
            self.sum.push(sum);
            self.c15.push(15 * unk);
            let (m, n) = (dx.abs() * unk_abs as f32, dx.abs() * all_abs as f32);
            self.w.push(f32_up(7.5 * m as f64 + g256 * n as f64));
            self.mask.push(mask);
        }
        #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
        {
            let (mut simd, mut quads) = (core::mem::take(&mut self.simd), core::mem::take(&mut self.quads));
            self.simd_blockwise = super::planes_simd128::prepare_pass1_blocks(self, &mut simd, &mut quads);
            (self.simd, self.quads) = (simd, quads);
            self.finite_scales = layout.finite_scales;
        }
    }
}

/// Pass 1 of one row: `a2 = Σ_b (A_b as f32)·(dw_b·dx_b)` (twice the estimate; `A_b` the exact
/// integer `32·Σ q·(h-8) + 2·Σ_known q·l + 15·Σ_unknown q`) and `e = Σ_b |dw_b|·w_b` (the
/// bound's sum, `PlanesAct::w`), each summed in [`PASS1_LANES`] lanes (block `b` into lane
/// `b % 4`, in block order) then `(l0 + l1) + (l2 + l3)` ([`lanes_total`]): the order a kernel
/// that takes a row's blocks four at a time keeps. Every tier's kernel returns these bits.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pass1 {
    pub a2: f32,
    pub e: f32,
}

/// `256·γ_{nb+1}` for rows of `nb` blocks (`γ_k = k·u / (1 − k·u)`, `u = 2^-24`): the factor of
/// `Σ|dw|·|dx|·Σ|qx|` that bounds the float rounding of a row's exact dot and of its pass-1
/// estimate together (derived at `ops::screen`'s `Bound`), in each block's `PlanesAct::w`.
pub fn rounding_gamma256(nb: usize) -> f64 {
    let (u, k) = (f64::powi(2.0, -24), (nb + 1) as f64);
    256.0 * (k * u / (1.0 - k * u))
}

/// The smallest f32 at or above `v` (`v` ≥ 0, or NaN, which stays NaN): branch-free, as the
/// screen rounds every row's bound with it.
pub fn f32_up(v: f64) -> f32 {
    let f = v as f32;
    f32::from_bits(f.to_bits() + ((f as f64) < v) as u32)
}

/// The largest f32 at or below `v` (any sign): the screen's thresholds, rounded the other way
/// from [`f32_up`]'s bounds.
pub fn f32_down(v: f64) -> f32 {
    let f = v as f32;
    if (f as f64) > v {
        f.next_down()
    } else {
        f
    }
}

/// Lanes of pass 1's float sums (see [`Pass1`]).
pub const PASS1_LANES: usize = 4;

/// A pass-1 sum from its lanes, in the one order every tier uses.
#[inline(always)]
pub fn lanes_total(l: [f32; PASS1_LANES]) -> f32 {
    (l[0] + l[1]) + (l[2] + l[3])
}

/// Pass 1 of one row whose `A` part is `a` (scalar reference).
pub fn pass1_row(a: &[u8], x: &PlanesAct) -> Pass1 {
    let nb = x.nb;
    // Lanes start at −0.0, the exact identity of f32 addition (as a lane no block reaches).
    let (mut a2, mut e) = ([-0f32; PASS1_LANES], [-0f32; PASS1_LANES]);
    for blk in 0..nb {
        let dw = read_f16(a, 2 * blk);
        let h = &a[nb * 2 + blk * 16..nb * 2 + blk * 16 + 16];
        let q = &x.qxp[blk];
        let mut sh = 0i32;
        for k in 0..16 {
            sh += (h[k] & 0x0F) as i32 * q[k] as i32 + (h[k] >> 4) as i32 * q[k + 16] as i32;
        }
        let cb = x.c[blk] as usize;
        let oo = x.o0 + x.o_off[blk] as usize;
        let mut sl = 0i32;
        for k in 16 - cb..16 {
            let l = a[oo + k - (16 - cb)];
            sl += (l & 0x0F) as i32 * q[k] as i32 + (l >> 4) as i32 * q[k + 16] as i32;
        }
        let j = blk % PASS1_LANES;
        a2[j] += pass1_block_int(sh, sl, x, blk) as f32 * (dw * x.dx[blk]);
        e[j] += dw.abs() * x.w[blk];
    }
    Pass1 { a2: lanes_total(a2), e: lanes_total(e) }
}

/// `A_b` from the block's nibble sums `sh = Σ h·q` and `sl = Σ_known l·q` (shared by the tiers).
#[inline]
pub fn pass1_block_int(sh: i32, sl: i32, x: &PlanesAct, blk: usize) -> i32 {
    32 * (sh - 8 * x.sum[blk]) + 2 * sl + x.c15[blk]
}

/// Q8_0's block integer `Σ q·qx` from the nibble sums `sh = Σ h·q`, `sl = Σ l·q` (all positions).
#[inline]
pub fn full_block_int(sh: i32, sl: i32, x: &PlanesAct, blk: usize) -> i32 {
    16 * sh + sl + full_cst(x, blk)
}

/// The constant part of block `blk`'s exact integer: `u = q ^ 0x80` stores `q + 128`, so the
/// planes' dot carries `128·Σqx` too much.
#[inline]
pub fn full_cst(x: &PlanesAct, blk: usize) -> i32 {
    -128 * x.sum[blk]
}

/// The exact dot of one row (`A` part `a`, `B` part `b`) with the activation: Q8_0's
/// `vec_dot` (`sumf += sumi · (dw·dx)` in block order), bit for bit (scalar reference).
pub fn full_row(a: &[u8], b: &[u8], x: &PlanesAct) -> f32 {
    let nb = x.nb;
    let mut sumf = 0f32;
    for blk in 0..nb {
        let dw = read_f16(a, 2 * blk);
        let h = &a[nb * 2 + blk * 16..nb * 2 + blk * 16 + 16];
        let q = &x.qxp[blk];
        let cb = x.c[blk] as usize;
        let (bo, oo) = (x.b_off[blk] as usize, x.o0 + x.o_off[blk] as usize);
        let (mut sh, mut sl) = (0i32, 0i32);
        for k in 0..16 {
            let l = if k < 16 - cb { b[bo + k] } else { a[oo + k - (16 - cb)] };
            sh += (h[k] & 0x0F) as i32 * q[k] as i32 + (h[k] >> 4) as i32 * q[k + 16] as i32;
            sl += (l & 0x0F) as i32 * q[k] as i32 + (l >> 4) as i32 * q[k + 16] as i32;
        }
        sumf += full_block_int(sh, sl, x, blk) as f32 * (dw * x.dx[blk]);
    }
    sumf
}

/// The 16 bytes at `b[bo..]` for a SIMD load: in place, or (past the end of the matrix: the
/// last row's last blocks) copied into `tmp` with zeros after the end. Only the first
/// `16 - c` bytes are used.
#[inline(always)]
pub(super) fn rest16<'a>(b: &'a [u8], bo: usize, tmp: &'a mut [u8; 16]) -> &'a [u8] {
    if bo + 16 <= b.len() {
        &b[bo..bo + 16]
    } else {
        let n = b.len() - bo;
        tmp[..n].copy_from_slice(&b[bo..]);
        &tmp[..]
    }
}

/// One row's pass-1 kernel (`a`: its `A` part).
pub type Pass1Kernel = fn(a: &[u8], x: &PlanesAct) -> Pass1;
/// One row's exact-dot kernel (`a`, `b`: its parts; `b` may extend past the row, to the end
/// of the matrix, so SIMD twins can load 16 bytes at a time).
pub type FullRowKernel = fn(a: &[u8], b: &[u8], x: &PlanesAct) -> f32;

/// Rows per call of a [`Pass1RowsKernel`] (a multiple of 4 and of `streams::STREAMS`).
pub const PASS1_ROWS: usize = 8;

/// Pass 1 of [`PASS1_ROWS`] rows, each `rows[k]` one row's `A` part, computed in that order
/// (`streams::ordered` picks them); `ahead` (bytes from `rows[0]`, 0 for none) is where the
/// caller's next call reads, for kernels that prefetch (AVX2's, whose rows are consecutive;
/// the wasm kernel has no prefetch and reads `streams::STREAMS` streams instead).
pub type Pass1RowsKernel = fn(rows: &[&[u8]; PASS1_ROWS], ahead: usize, x: &PlanesAct) -> [Pass1; PASS1_ROWS];

/// Pass 1 of [`PASS1_ROWS`] rows, one at a time (the scalar reference of the many-row kernels).
pub fn pass1_rows(rows: &[&[u8]; PASS1_ROWS], _ahead: usize, x: &PlanesAct) -> [Pass1; PASS1_ROWS] {
    rows.map(|a| pass1_row(a, x))
}

/// The exact dots of four rows (any rows: the full head takes them from `streams::STREAMS`
/// streams): row k's `A` part `a[k]` (whole) and its `B` part `b[k]` (running on to the end of
/// the matrix, so SIMD twins can load 16 bytes at a time).
pub type FullRows4Kernel = fn(a: [&[u8]; 4], b: [&[u8]; 4], x: &PlanesAct) -> [f32; 4];

/// Four exact dots, one at a time (the scalar reference of the four-row kernels).
pub fn full_rows4(a: [&[u8]; 4], b: [&[u8]; 4], x: &PlanesAct) -> [f32; 4] {
    let (_, _, one) = kernels();
    [0, 1, 2, 3].map(|k| one(a[k], b[k], x))
}

/// The four-row exact-dot kernel of this build and CPU (AVX2, SIMD128 and relaxed wasm;
/// elsewhere [`full_rows4`] over this build's one-row kernel), bit-identical to [`full_row`].
pub fn full_rows4_kernel() -> FullRows4Kernel {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return super::planes_simd128::full_rows4;
    #[cfg(target_arch = "x86_64")]
    if super::avx2::enabled() {
        return super::planes_avx2::full_rows4;
    }
    #[allow(unreachable_code)]
    full_rows4
}

/// The kernels of this build and CPU: pass 1 of one row and of [`PASS1_ROWS`], the exact dot
/// (SIMD twins where there are, bit-identical to [`pass1_row`], [`pass1_rows`] and [`full_row`]).
pub fn kernels() -> (Pass1Kernel, Pass1RowsKernel, FullRowKernel) {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return (super::planes_simd128::pass1_row, super::planes_simd128::pass1_rows, super::planes_simd128::full_row);
    #[cfg(target_arch = "x86_64")]
    if super::avx2::enabled() {
        return (super::planes_avx2::pass1_row, super::planes_avx2::pass1_rows8, super::planes_avx2::full_row);
    }
    #[allow(unreachable_code)]
    (pass1_row, pass1_rows, full_row)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The screen's directed roundings give the nearest f32 on their side of `v`: exact f32s
    /// stay, values between two f32s (of both signs, tiny and huge, around powers of two) go to
    /// the neighbour above (`f32_up`) or below (`f32_down`), NaN stays NaN.
    #[test]
    fn directed_roundings_are_tight() {
        let mut vals = vec![0.0f64, 1.0, 0.1, 1.0 / 3.0, 2f64.powi(-149) * 0.75, 2f64.powi(-130) / 3.0, 3.4e38, 65504.5, 7.5 * 0.337];
        let mut x = 0.5f64;
        for _ in 0..2000 {
            x = (x * 3.7 + 0.1234567).fract();
            vals.push(x * 10f64.powi((x * 60.0) as i32 - 30));
        }
        for k in [-3i32, 0, 24, 100] {
            let p = 2f64.powi(k);
            vals.extend([p, p * (1.0 + 1e-12), p * (1.0 - 1e-12)]);
        }
        for v in vals {
            let up = f32_up(v);
            assert!(up as f64 >= v && (up.next_down() as f64) < v, "f32_up({v:e}) = {up:e}");
            for w in [v, -v] {
                let down = f32_down(w);
                assert!(down as f64 <= w && (down.next_up() as f64) > w, "f32_down({w:e}) = {down:e}");
            }
        }
        assert!(f32_up(f64::NAN).is_nan() && f32_down(f64::NAN).is_nan());
    }

    fn pseudo_bytes(n: usize, seed: u32) -> Vec<u8> {
        let mut s = seed.wrapping_mul(2654435761).wrapping_add(7);
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s >> 8) as u8
            })
            .collect()
    }

    /// A Q8_0 matrix with sane scales (random f16 bits could be NaN).
    pub(crate) fn q8_matrix(n_in: usize, n_out: usize, seed: u32) -> Vec<u8> {
        let mut m = pseudo_bytes(n_out * n_in / QK * Q8_0_BYTES, seed);
        for (i, b) in m.chunks_exact_mut(Q8_0_BYTES).enumerate() {
            let d = super::super::float::f32_to_f16(0.001 + (i % 7) as f32 * 0.0003);
            b[0..2].copy_from_slice(&d.to_le_bytes());
        }
        m
    }

    /// Bits, with NaN compared as a class (IEEE leaves payloads open).
    fn bits(p: &Pass1) -> [u32; 2] {
        [p.a2, p.e].map(|v| if v.is_nan() { u32::MAX } else { v.to_bits() })
    }

    fn bits1(v: f32) -> u32 {
        if v.is_nan() { u32::MAX } else { v.to_bits() }
    }

    /// This build's tier (AVX2 natively where the CPU has it; SIMD128 or relaxed in wasm)
    /// against the scalar reference, bit for bit, on random and edge rows; the matrix's last
    /// row exercises the SIMD loads that would pass the end of the buffer.
    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn simd_tier_is_bit_identical_to_scalar() {
        let (pass1, pass1_n, full) = kernels();
        // Each case with and without the edge scales: with them the wasm pass 1 takes the
        // scales' checked conversion, without them the unchecked one (`finite_scales`).
        let cases = [(32, 7), (64, 9), (640, 40), (256, 300), (96, 24), (160, 12)].into_iter().enumerate();
        for (case, (n_in, n_out), edge_scales) in cases.flat_map(|(c, s)| [(c, s, true), (c, s, false)]) {
            let mut q8 = q8_matrix(n_in, n_out, 100 + case as u32);
            let row = n_in / QK * Q8_0_BYTES;
            // Edge rows: every quant -128 / 127 / 0 / -1.
            for (r, v) in [0x80u8, 0x7F, 0x00, 0xFF].into_iter().enumerate() {
                for b in q8[r * row..(r + 1) * row].chunks_exact_mut(Q8_0_BYTES) {
                    b[2..].fill(v);
                }
            }
            // Edge scales on row 5 (inside the first many-row call), block after block: the
            // smallest subnormal, ±0, ±max, the smallest normal, a mid subnormal, ±Inf, NaN.
            const EDGE_F16: [u16; 10] = [0x0001, 0x0000, 0x8000, 0x7bff, 0xfbff, 0x0400, 0x0200, 0x7c00, 0xfc00, 0x7e00];
            if n_out > 5 && edge_scales {
                for (i, b) in q8[5 * row..6 * row].chunks_exact_mut(Q8_0_BYTES).enumerate() {
                    b[0..2].copy_from_slice(&EDGE_F16[i % EDGE_F16.len()].to_le_bytes());
                }
            }
            // Case 4: a block with 20 outliers (more than 8 known bytes), one with a single
            // outlier, one with none. Case 5: four blocks with 4 known bytes each (7 and 8
            // outliers), the most one window of a group holds, then a lone block with 3.
            let outl: Vec<usize> = match case {
                4 => (0..20).chain([40]).collect(),
                5 => (0..128).filter(|d| d % 4 == 1 && *d != 5 && *d != 69).chain([130, 140, 150, 155, 159]).collect(),
                _ => (0..n_in).filter(|d| (d * 7 + case) % 11 == 0).take(32).collect(),
            };
            let mut layout = PlaneLayout::new(n_in, n_out, &outl);
            let mut planes = q8.clone();
            layout.relayout_in_place(&mut planes, crate::quant::block_scales_finite(crate::gguf::GgmlType::Q8_0, &q8));
            // The edge scales reach their first Inf at a row's eighth block.
            assert_eq!(layout.finite_scales(), !(n_out > 5 && edge_scales && n_in / QK >= 8), "case {case}");
            for k in 0..4 {
                let xs: Vec<f32> = (0..n_in)
                    .map(|i| match k {
                        0 => ((i * 37 % 101) as f32 - 50.0) * if i % 13 == 0 { 30.0 } else { 0.1 },
                        1 => if i % 2 == 0 { 1e4 } else { -1e4 },
                        2 => 0.0,
                        _ => ((i * 91 % 17) as f32 - 8.0) * 1e-3,
                    })
                    .collect();
                let mut act = Vec::new();
                crate::quant::quantize_activation(crate::gguf::GgmlType::Q8_0, &xs, &mut act).unwrap();
                let mut x = PlanesAct::default();
                x.prepare(&layout, &act);
                let ra = layout.pass1_row_bytes();
                let a_part = |r: usize| &planes[layout.a_at(r)..layout.a_at(r) + ra];
                // The many-row kernel on consecutive rows (with and without prefetching the
                // next calls' rows, which the last calls' addresses pass the matrix's end) and
                // on every schedule's rows (rows from several groups, any order).
                for r in (0..n_out).step_by(PASS1_ROWS).filter(|r| r + PASS1_ROWS <= n_out) {
                    let rows: [&[u8]; PASS1_ROWS] = core::array::from_fn(|k| a_part(r + k));
                    let want = pass1_rows(&rows, 0, &x);
                    for ahead in [0, PASS1_ROWS * ra, 2 * PASS1_ROWS * ra] {
                        for (k, (g, w)) in pass1_n(&rows, ahead, &x).iter().zip(&want).enumerate() {
                            assert_eq!(bits(g), bits(w), "case {case} act {k} rows {r}+{k} ahead {ahead}");
                        }
                    }
                }
                for (streams, range) in [(1, 0..n_out), (2, 1..n_out), (4, 0..n_out), (4, 3..n_out.saturating_sub(1).max(3))] {
                    for set in crate::quant::streams::schedule::<PASS1_ROWS>(range, streams).0 {
                        for (k, g) in pass1_n(&set.map(a_part), 0, &x).iter().enumerate() {
                            assert_eq!(bits(g), bits(&pass1_row(a_part(set[k]), &x)), "case {case} act {k} row {} of {set:?}", set[k]);
                        }
                    }
                }
                // The four-row exact kernel on every schedule's rows (consecutive ones, and
                // rows of several streams and groups), the matrix's last rows among them.
                let b_part = |r: usize| &planes[layout.b_at(r)..];
                for streams in [1, 2, 4] {
                    let (sets, _) = crate::quant::streams::schedule::<4>(0..n_out, streams);
                    for set in sets {
                        let got = full_rows4_kernel()(set.map(a_part), set.map(b_part), &x);
                        for (k, g) in got.iter().enumerate() {
                            let want = full_row(a_part(set[k]), b_part(set[k]), &x);
                            assert_eq!(bits1(*g), bits1(want), "case {case} act {k} full rows4 {set:?} ({streams} streams)");
                        }
                    }
                }
                for r in 0..n_out {
                    let a = &planes[layout.a_at(r)..layout.a_at(r) + layout.pass1_row_bytes()];
                    let b = &planes[layout.b_at(r)..];
                    let (p, ps) = (pass1(a, &x), pass1_row(a, &x));
                    assert_eq!(bits(&p), bits(&ps), "case {case} act {k} row {r}");
                    let a = &planes[layout.a_at(r)..];
                    assert_eq!(bits1(full(a, b, &x)), bits1(full_row(a, b, &x)), "case {case} act {k} row {r}");
                }
            }
        }
    }

    #[test]
    fn relayout_round_trips_and_dots_equal_q8_0() {
        for (n_in, n_out, outl) in [(64, 5, vec![3, 40, 41, 63]), (640, 300, vec![0, 1, 2, 31, 32, 100, 639, 5, 7, 9, 11]), (32, 3, vec![])] {
            let q8 = q8_matrix(n_in, n_out, n_in as u32);
            let mut layout = PlaneLayout::new(n_in, n_out, &outl);
            let mut planes = q8.clone();
            layout.relayout_in_place(&mut planes, crate::quant::block_scales_finite(crate::gguf::GgmlType::Q8_0, &q8));
            assert_eq!(layout.bytes(), q8.len());
            let row = n_in / QK * Q8_0_BYTES;
            let mut back = vec![0u8; row];
            let xs: Vec<f32> = (0..n_in).map(|i| ((i * 37 % 101) as f32 - 50.0) * if i == 3 { 20.0 } else { 0.1 }).collect();
            let mut act = Vec::new();
            crate::quant::quantize_activation(crate::gguf::GgmlType::Q8_0, &xs, &mut act).unwrap();
            let mut x = PlanesAct::default();
            x.prepare(&layout, &act);
            for r in 0..n_out {
                layout.q8_0_row(&planes, r, &mut back);
                assert_eq!(&back[..], &q8[r * row..(r + 1) * row], "row {r}");
                let want = super::super::q8::vec_dot_q8_0_q8_0(&q8[r * row..(r + 1) * row], &act, n_in);
                let (a, b) = (&planes[layout.a_at(r)..], &planes[layout.b_at(r)..]);
                assert_eq!(full_row(a, b, &x).to_bits(), want.to_bits());
                // The pass-1 estimate is within its bound of the exact value.
                let p = pass1_row(a, &x);
                let e = p.e as f64;
                assert!((0.5 * p.a2 as f64 - want as f64).abs() <= e, "row {r}: {} vs {want} ± {e}", 0.5 * p.a2);
            }
        }
    }
}
