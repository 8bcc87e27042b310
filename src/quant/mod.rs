//! Block formats: scalar reference dequantization, activation quantizers and dot products.
//!
//! One file per format family; this module validates lengths and dispatches by type.
//!
//! - Dequantization is bit-exact with ggml's `dequantize_row_*` and with gguf-py's numpy
//!   dequantization. Useful fact for SIMD twins: in every supported format the products of an
//!   f16 scale with the small integers (sub-block scale, quant) fit in f32's 24-bit significand
//!   (at most 11 + 7 + 5 bits, powers of two aside), so they are exact, and each value is the
//!   *single* rounding of `d*sc*q - dmin*m` (or `d*q + m`): any evaluation order, with or
//!   without FMA, gives the same bits (NaN payloads aside).
//! - Activations are quantized as ggml's CPU backend quantizes the right-hand side of a matmul
//!   for that weight type (`vec_dot_type`), using ggml's *reference* (scalar) quantizers.
//! - `vec_dot` sums integer products exactly in i32 within each block and combines blocks in
//!   f32, in the operand order of ggml's generic dot for that pair. Where ggml's generic k-quant
//!   dots spread a block's integer sum over 8 float lanes, we keep one i32 per block (the same
//!   integer, converted once): a SIMD twin that reduces its integer lanes before converting
//!   can then reproduce this scalar result bit for bit.
//!
//! Hot loops should fetch a kernel once (`vec_dot_kernel`, `dequantize_kernel`), validate the
//! matrix once (`check_vec_dot`), then call the plain `fn` per row.

// Index loops mirror the block layouts (element e <- byte b) more legibly than iterator chains.
#![allow(clippy::needless_range_loop)]

#[cfg(target_arch = "x86_64")]
mod avx2;
pub mod f16_rows;
mod float;
pub mod planes;
#[cfg(target_arch = "x86_64")]
mod planes_avx2;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod planes_simd128;
mod q2_k;
mod q3_k;
mod q4;
mod q4_k;
mod q5;
mod q5_k;
mod q6_k;
mod q8;
mod q8_k;
pub mod streams;
#[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
mod relaxed;
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128;
#[cfg(all(test, target_arch = "wasm32", target_feature = "simd128"))]
mod simd128_tests;

use crate::gguf::GgmlType;

pub use float::{bf16_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16};
/// The SIMD128 twins of `f16_to_f32` / `f32_to_f16`, for SIMD code outside `quant`.
#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
pub(crate) use simd128::{f16_bits_to_f32x4, f32x4_to_f16_bits};

/// Why a quant operation refused its input. `code()` is stable (it reaches JS as `Error.code`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum QuantError {
    /// No kernel for this type (for this operation: `op` says which).
    UnsupportedType { ty: GgmlType, op: &'static str },
    /// The element count is not a whole number of blocks of this type.
    PartialBlock {
        ty: GgmlType,
        n: usize,
        block: usize,
    },
    /// A byte or element buffer does not have the length the element count requires.
    BadLength {
        ty: GgmlType,
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// `quantize_activation` was asked for a type no weight type pairs with.
    NotActivationType { ty: GgmlType },
}

impl QuantError {
    pub fn code(&self) -> &'static str {
        match self {
            QuantError::UnsupportedType { .. } => "UNSUPPORTED_TENSOR_TYPE",
            QuantError::PartialBlock { .. } => "QUANT_PARTIAL_BLOCK",
            QuantError::BadLength { .. } => "QUANT_BAD_LENGTH",
            QuantError::NotActivationType { .. } => "QUANT_NOT_ACTIVATION_TYPE",
        }
    }
}

impl std::fmt::Display for QuantError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QuantError::UnsupportedType { ty, op } => {
                write!(f, "tensor type {ty} is not supported for {op}")
            }
            QuantError::PartialBlock { ty, n, block } => write!(
                f,
                "{n} elements is not a whole number of {ty} blocks ({block} elements each)"
            ),
            QuantError::BadLength {
                ty,
                what,
                expected,
                got,
            } => {
                write!(f, "{ty} {what}: expected {expected}, got {got}")
            }
            QuantError::NotActivationType { ty } => write!(
                f,
                "{ty} is not an activation type (expected F32, F16, BF16, Q8_0, Q8_1 or Q8_K)"
            ),
        }
    }
}

impl std::error::Error for QuantError {}

/// Dequantize `src` (whole blocks) into `dst`. Lengths must already match the type.
pub type DequantKernel = fn(src: &[u8], dst: &mut [f32]);

/// Dot product of one weight row with one activation row of `n` elements. Lengths must already
/// have been validated (`check_vec_dot`); a kernel never reads out of bounds, but short slices
/// make it panic.
pub type VecDotKernel = fn(w_row: &[u8], act: &[u8], n: usize) -> f32;

/// Quantize `x` (whole blocks) into `dst` (sized exactly).
type QuantizeKernel = fn(x: &[f32], dst: &mut [u8]);

/// Whether `dequantize` handles `ty`: the 13 weight types plus the activation-only Q8_1/Q8_K.
pub fn is_supported(ty: GgmlType) -> bool {
    dequantize_kernel(ty).is_ok()
}

/// Whether `ty` can be a weight in `vec_dot` (all supported types but Q8_1/Q8_K).
pub fn supports_vec_dot(ty: GgmlType) -> bool {
    vec_dot_kernel(ty).is_ok()
}

/// The activation format llama.cpp's CPU backend pairs with weights of type `ty`:
/// Q4_0/Q5_0/Q8_0 -> Q8_0; Q4_1/Q5_1 -> Q8_1; Q2_K..Q6_K -> Q8_K; F16 -> F16; BF16 -> BF16;
/// F32 -> F32. Any other type has no pairing and maps to itself (`vec_dot` then refuses it
/// with `UNSUPPORTED_TENSOR_TYPE`).
pub fn vec_dot_type(ty: GgmlType) -> GgmlType {
    use GgmlType::*;
    match ty {
        Q4_0 | Q5_0 | Q8_0 => Q8_0,
        Q4_1 | Q5_1 => Q8_1,
        Q2_K | Q3_K | Q4_K | Q5_K | Q6_K => Q8_K,
        other => other,
    }
}

/// Whether every block of `data` (whole blocks of `ty`) has a finite scale, for the types
/// whose block starts with its one f16 scale (Q4_0, Q5_0, Q8_0; `false` for every other type):
/// their four-row decode kernels then convert the scales without testing for Inf and NaN
/// (`Rows4Kernel::dot_finite`). Read once per weight at load.
pub fn block_scales_finite(ty: GgmlType, data: &[u8]) -> bool {
    use GgmlType::*;
    if !matches!(ty, Q4_0 | Q5_0 | Q8_0) {
        return false;
    }
    let bb = ty.type_size() as usize;
    // An f16 is Inf or NaN when its five exponent bits are all set.
    data.chunks_exact(bb).all(|b| u16::from_le_bytes([b[0], b[1]]) & 0x7c00 != 0x7c00)
}

/// Bytes of `n` elements of `ty`, or the typed error saying why there is no such size.
pub fn row_bytes(ty: GgmlType, n: usize) -> Result<usize, QuantError> {
    let block = ty.block_size() as usize;
    if !n.is_multiple_of(block) {
        return Err(QuantError::PartialBlock { ty, n, block });
    }
    // type_size <= 292, so this only fails for absurd n on 32-bit targets.
    (n / block)
        .checked_mul(ty.type_size() as usize)
        .ok_or(QuantError::BadLength {
            ty,
            what: "row size overflows usize for element count",
            expected: usize::MAX,
            got: n,
        })
}

/// The dequantization kernel for `ty`.
pub fn dequantize_kernel(ty: GgmlType) -> Result<DequantKernel, QuantError> {
    use GgmlType::*;
    Ok(match ty {
        F32 => float::dequantize_f32,
        F16 => dequantize_f16,
        BF16 => float::dequantize_bf16,
        Q4_0 => q4::dequantize_q4_0,
        Q4_1 => q4::dequantize_q4_1,
        Q5_0 => q5::dequantize_q5_0,
        Q5_1 => q5::dequantize_q5_1,
        Q8_0 => dequantize_q8_0,
        Q8_1 => q8::dequantize_q8_1,
        Q2_K => q2_k::dequantize_q2_k,
        Q3_K => q3_k::dequantize_q3_k,
        Q4_K => q4_k::dequantize_q4_k,
        Q5_K => q5_k::dequantize_q5_k,
        Q6_K => q6_k::dequantize_q6_k,
        Q8_K => q8_k::dequantize_q8_k,
        _ => {
            return Err(QuantError::UnsupportedType {
                ty,
                op: "dequantization",
            })
        }
    })
}

/// F16 values (little-endian) to f32, `min(src.len() / 2, dst.len())` of them: the SIMD twin
/// where the build has one (wasm32 `simd128`; the same bits, the conversion being exact), else
/// the scalar loop. Also the K/V cache's f16 rows (`kv::decode_row`).
pub fn dequantize_f16(src: &[u8], dst: &mut [f32]) {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return simd128::dequantize_f16(src, dst);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    float::dequantize_f16(src, dst)
}

/// Elements per Q8_0 block (an f16 scale, then this many int8 quants): also the K/V cache's
/// int8 block (`kv::Q8_BLOCK`), whose rows [`dequantize_q8_0`] reads.
pub const Q8_0_BLOCK: usize = q8::QK;

/// `(d, 1/d)` of one Q8_0 block as the activation quantizer computes them (a block holding a
/// NaN gets `d = NaN`): the K/V cache's int8 rows are encoded with the same scales.
pub fn q8_0_block_scale(x: &[f32]) -> (f32, f32) {
    q8::block_scale(x)
}

/// Whole Q8_0 blocks to f32 (as many as both `src` and `dst` hold), as [`dequantize_f16`]
/// chooses its kernel. Also the K/V cache's int8 rows, whose blocks are Q8_0's.
pub fn dequantize_q8_0(src: &[u8], dst: &mut [f32]) {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return simd128::dequantize_q8_0(src, dst);
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    q8::dequantize_q8_0(src, dst)
}

/// The dot kernel for weights of type `w_ty` against activations of `vec_dot_type(w_ty)`:
/// the SIMD twin where the build (wasm32 with `simd128`) or the CPU (x86-64 with AVX2) has one
/// (bit-identical to the scalar kernel, see `simd128.rs`, `avx2.rs`), else the scalar reference.
pub fn vec_dot_kernel(w_ty: GgmlType) -> Result<VecDotKernel, QuantError> {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    if let Some(k) = simd_vec_dot_kernel(w_ty) {
        return Ok(k);
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(k) = avx2_kernels(w_ty) {
        return Ok(k.dot);
    }
    vec_dot_kernel_scalar(w_ty)
}

/// The AVX2 kernels for `w_ty` when this CPU has AVX2 (runtime-detected; std caches the probe).
#[cfg(target_arch = "x86_64")]
fn avx2_kernels(w_ty: GgmlType) -> Option<&'static avx2::Kernels> {
    avx2::kernels_for(w_ty).filter(|_| avx2::enabled())
}

/// The name of the SIMD tier whose kernels `vec_dot_kernel` and friends hand out on this
/// build and CPU: "relaxed-simd" / "simd128" (wasm builds), "avx2" (x86-64 CPUs with AVX2),
/// or "scalar".
pub fn kernel_tier() -> &'static str {
    #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
    return "relaxed-simd";
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128", not(target_feature = "relaxed-simd")))]
    return "simd128";
    #[cfg(target_arch = "x86_64")]
    if avx2::enabled() {
        return "avx2";
    }
    #[allow(unreachable_code)]
    "scalar"
}

/// Four dots at once: four weight rows (`w`, `row_bytes` apart: consecutive rows, or a row of
/// each of the caller's streams, `streams::schedule`) against one activation row (prepared,
/// see [`Rows4Kernel`]). `w` may run on past the fourth row: where the rows are consecutive,
/// the bytes after it are the matrix's next rows, the ones the next call will take, and the
/// kernel may prefetch them (AVX2's), but only when `w` holds all four of them, and never lets
/// them change a result.
pub type VecDotRows4 = fn(w: &[u8], row_bytes: usize, act: &[u8], n: usize) -> [f32; 4];

/// Four dots at once: one weight row against four consecutive activation rows (`act`,
/// `act_row_bytes` apart; `act_d` their scales from [`activation_scales4`], starting at this
/// group of four); lane k is bit-identical to `vec_dot` with activation row k.
pub type VecDotToks4 = fn(w_row: &[u8], act: &[u8], act_row_bytes: usize, act_d: &[f32], n: usize) -> [f32; 4];

/// The f32 scales of Q8_0 activation rows, laid out for the toks kernels: for each group of
/// four rows (4g..4g+4) and block i, the four rows' `d` at `[(g * nb + i) * 4 + k]` (complete
/// groups only). Converted once per matmul instead of once per weight row: a prefill matmul
/// dots every weight row with the same activations. Empty for other activation types, whose
/// kernels read their (f32) scales from the rows.
pub fn activation_scales4(act_ty: GgmlType, act: &[u8], act_row_bytes: usize, n_tok: usize, n: usize, dst: &mut Vec<f32>) {
    dst.clear();
    if act_ty != GgmlType::Q8_0 {
        return;
    }
    let nb = n / 32; // Q8_0 blocks
    for g in 0..n_tok / 4 {
        for i in 0..nb {
            for k in 0..4 {
                let at = (4 * g + k) * act_row_bytes + i * q8::Q8_0_BYTES;
                dst.push(float::read_f16(act, at));
            }
        }
    }
}

/// The part of `activation_scales4`'s output for the group of four rows starting at row `t`
/// (a multiple of 4) of `n`-element rows: what a toks kernel for those rows reads. Empty when
/// `scales` is.
pub fn activation_scales4_at(scales: &[f32], t: usize, n: usize) -> &[f32] {
    if scales.is_empty() {
        scales
    } else {
        &scales[t / 4 * 4 * (n / 32)..]
    }
}

/// A decode kernel for one weight type: `dot` computes four weight rows (`row_bytes` apart)
/// against one activation row: the quantized row itself, or, where `prep`
/// is set, what `prep` made of it once per matmul (work every group of rows would otherwise
/// repeat: the relaxed tier's 7-bit split, offset sums, f32 scales). Lane k is bit-identical to
/// `vec_dot` of row k. `dot_finite` is `dot` for weights whose block scales are all finite
/// ([`block_scales_finite`]): where the build has such a variant (wasm Q4_0, Q5_0, Q8_0), the
/// same bits without testing each scale for Inf and NaN.
#[derive(Clone, Copy)]
pub struct Rows4Kernel {
    pub prep: Option<fn(act: &[u8], n: usize, out: &mut Vec<u8>)>,
    pub dot: VecDotRows4,
    pub dot_finite: VecDotRows4,
}

impl Rows4Kernel {
    /// The activation row as `dot` reads it (`buf` holds a prepared row).
    pub fn prepare<'a>(&self, act: &'a [u8], n: usize, buf: &'a mut Vec<u8>) -> &'a [u8] {
        match self.prep {
            Some(prep) => {
                prep(act, n, buf);
                &buf[..]
            }
            None => act,
        }
    }
}

/// The four-weight-rows kernel for `w_ty` where this build has one (SIMD128 builds: Q4_0,
/// Q5_0, Q8_0, Q4_K, Q6_K; AVX2 CPUs: every quantized type);
/// lengths as for `VecDotKernel`, validated once by the caller.
pub fn vec_dot_rows4_kernel(w_ty: GgmlType) -> Option<Rows4Kernel> {
    #[cfg(target_arch = "x86_64")]
    if let Some(k) = avx2_kernels(w_ty) {
        return Some(Rows4Kernel { prep: None, dot: k.rows4, dot_finite: k.rows4 });
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
    {
        use GgmlType::*;
        let k = |prep, dot, dot_finite| Some(Rows4Kernel { prep, dot, dot_finite });
        match w_ty {
            Q4_0 => return k(Some(relaxed::prep_q4_0), relaxed::rows4_q4_0::<false>, relaxed::rows4_q4_0::<true>),
            Q5_0 => return k(Some(relaxed::prep_q5_0), relaxed::rows4_q5_0::<false>, relaxed::rows4_q5_0::<true>),
            Q8_0 => return k(Some(relaxed::prep_q8_0), relaxed::rows4_q8_0::<false>, relaxed::rows4_q8_0::<true>),
            Q4_K => return k(None, relaxed::rows4_q4_k, relaxed::rows4_q4_k),
            Q6_K => return k(None, relaxed::rows4_q6_k, relaxed::rows4_q6_k),
            _ => {}
        }
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        use GgmlType::*;
        let (dot, dot_finite): (VecDotRows4, VecDotRows4) = match w_ty {
            Q4_0 => (simd128::rows4_q4_0::<false>, simd128::rows4_q4_0::<true>),
            Q5_0 => (simd128::rows4_q5_0::<false>, simd128::rows4_q5_0::<true>),
            Q8_0 => (simd128::rows4_q8_0::<false>, simd128::rows4_q8_0::<true>),
            Q4_K => (simd128::rows4_q4_k, simd128::rows4_q4_k),
            Q6_K => (simd128::rows4_q6_k, simd128::rows4_q6_k),
            _ => return None,
        };
        Some(Rows4Kernel { prep: None, dot, dot_finite })
    }
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    {
        let _ = w_ty;
        None
    }
}

/// The four-tokens kernel for `w_ty` where this build has one (SIMD128 builds: Q4_0, Q5_0,
/// Q8_0, Q4_K, Q6_K; AVX2 CPUs: every quantized type).
pub fn vec_dot_toks4_kernel(w_ty: GgmlType) -> Option<VecDotToks4> {
    #[cfg(target_arch = "x86_64")]
    if let Some(k) = avx2_kernels(w_ty) {
        return Some(k.toks4);
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
    {
        use GgmlType::*;
        match w_ty {
            Q4_0 => return Some(relaxed::toks4_q4_0 as VecDotToks4),
            Q5_0 => return Some(relaxed::toks4_q5_0),
            Q4_K => return Some(relaxed::toks4_q4_k),
            Q6_K => return Some(relaxed::toks4_q6_k),
            _ => {}
        }
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        use GgmlType::*;
        match w_ty {
            Q4_0 => Some(simd128::toks4_q4_0 as VecDotToks4),
            Q5_0 => Some(simd128::toks4_q5_0),
            Q8_0 => Some(simd128::toks4_q8_0),
            Q4_K => Some(simd128::toks4_q4_k),
            Q6_K => Some(simd128::toks4_q6_k),
            _ => None,
        }
    }
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    {
        let _ = w_ty;
        None
    }
}

/// Eight dots at once: as `VecDotToks4` with eight activation rows.
pub type VecDotToks8 = fn(w_row: &[u8], act: &[u8], act_row_bytes: usize, act_d: &[f32], n: usize) -> [f32; 8];

/// The eight-tokens kernel for `w_ty` where this build has one (SIMD128: Q4_0, Q5_0, Q8_0;
/// AVX2 CPUs: every quantized type).
pub fn vec_dot_toks8_kernel(w_ty: GgmlType) -> Option<VecDotToks8> {
    #[cfg(target_arch = "x86_64")]
    if let Some(k) = avx2_kernels(w_ty) {
        return Some(k.toks8);
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "relaxed-simd"))]
    {
        use GgmlType::*;
        match w_ty {
            Q4_0 => return Some(relaxed::toks8_q4_0 as VecDotToks8),
            Q5_0 => return Some(relaxed::toks8_q5_0),
            _ => {}
        }
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        use GgmlType::*;
        match w_ty {
            Q4_0 => Some(simd128::toks8_q4_0 as VecDotToks8),
            Q5_0 => Some(simd128::toks8_q5_0),
            Q8_0 => Some(simd128::toks8_q8_0),
            _ => None,
        }
    }
    #[cfg(not(all(target_arch = "wasm32", target_feature = "simd128")))]
    {
        let _ = w_ty;
        None
    }
}

/// Whether this build (and CPU) has a SIMD twin for `w_ty`.
pub fn has_simd_vec_dot(w_ty: GgmlType) -> bool {
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    return simd_vec_dot_kernel(w_ty).is_some();
    #[cfg(target_arch = "x86_64")]
    return avx2_kernels(w_ty).is_some();
    #[cfg(not(any(target_arch = "x86_64", all(target_arch = "wasm32", target_feature = "simd128"))))]
    {
        let _ = w_ty;
        false
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
fn simd_vec_dot_kernel(w_ty: GgmlType) -> Option<VecDotKernel> {
    use GgmlType::*;
    Some(match w_ty {
        Q4_0 => simd128::vec_dot_q4_0_q8_0,
        Q4_1 => simd128::vec_dot_q4_1_q8_1,
        Q5_0 => simd128::vec_dot_q5_0_q8_0,
        Q5_1 => simd128::vec_dot_q5_1_q8_1,
        Q8_0 => simd128::vec_dot_q8_0_q8_0,
        Q2_K => simd128::vec_dot_q2_k_q8_k,
        Q3_K => simd128::vec_dot_q3_k_q8_k,
        #[cfg(target_feature = "relaxed-simd")]
        Q4_K => relaxed::vec_dot_q4_k_q8_k,
        #[cfg(not(target_feature = "relaxed-simd"))]
        Q4_K => simd128::vec_dot_q4_k_q8_k,
        Q5_K => simd128::vec_dot_q5_k_q8_k,
        #[cfg(target_feature = "relaxed-simd")]
        Q6_K => relaxed::vec_dot_q6_k_q8_k,
        #[cfg(not(target_feature = "relaxed-simd"))]
        Q6_K => simd128::vec_dot_q6_k_q8_k,
        _ => return None,
    })
}

/// The scalar reference dot kernel for `w_ty` (what every SIMD twin is tested against).
pub fn vec_dot_kernel_scalar(w_ty: GgmlType) -> Result<VecDotKernel, QuantError> {
    use GgmlType::*;
    Ok(match w_ty {
        F32 => float::vec_dot_f32,
        F16 => float::vec_dot_f16,
        BF16 => float::vec_dot_bf16,
        Q4_0 => q4::vec_dot_q4_0_q8_0,
        Q4_1 => q4::vec_dot_q4_1_q8_1,
        Q5_0 => q5::vec_dot_q5_0_q8_0,
        Q5_1 => q5::vec_dot_q5_1_q8_1,
        Q8_0 => q8::vec_dot_q8_0_q8_0,
        Q2_K => q2_k::vec_dot_q2_k_q8_k,
        Q3_K => q3_k::vec_dot_q3_k_q8_k,
        Q4_K => q4_k::vec_dot_q4_k_q8_k,
        Q5_K => q5_k::vec_dot_q5_k_q8_k,
        Q6_K => q6_k::vec_dot_q6_k_q8_k,
        _ => {
            return Err(QuantError::UnsupportedType {
                ty: w_ty,
                op: "vec_dot",
            })
        }
    })
}

fn quantize_kernel(act_ty: GgmlType) -> Result<QuantizeKernel, QuantError> {
    use GgmlType::*;
    Ok(match act_ty {
        F32 => float::quantize_f32,
        F16 => float::quantize_f16,
        BF16 => float::quantize_bf16,
        Q8_0 => q8::quantize_q8_0,
        Q8_1 => q8::quantize_q8_1,
        Q8_K => q8_k::quantize_q8_k,
        _ => return Err(QuantError::NotActivationType { ty: act_ty }),
    })
}

fn check_len(
    ty: GgmlType,
    what: &'static str,
    expected: usize,
    got: usize,
) -> Result<(), QuantError> {
    if expected == got {
        Ok(())
    } else {
        Err(QuantError::BadLength {
            ty,
            what,
            expected,
            got,
        })
    }
}

/// Dequantize `dst.len()` elements from `src`; `src.len()` must be exactly their byte size.
/// Dequantizing one row (an embedding lookup) is this call on that row's bytes.
pub fn dequantize(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<(), QuantError> {
    let kernel = dequantize_kernel(ty)?;
    let bytes = row_bytes(ty, dst.len())?;
    check_len(ty, "source bytes", bytes, src.len())?;
    kernel(src, dst);
    Ok(())
}

/// Quantize one activation row `x` into `act_ty` blocks (as llama.cpp's reference quantizer
/// does), replacing `dst`'s contents. `dst`'s capacity is reused across calls.
pub fn quantize_activation(
    act_ty: GgmlType,
    x: &[f32],
    dst: &mut Vec<u8>,
) -> Result<(), QuantError> {
    let kernel = quantize_kernel(act_ty)?;
    let bytes = row_bytes(act_ty, x.len())?;
    dst.clear();
    dst.resize(bytes, 0);
    kernel(x, dst);
    Ok(())
}

/// Quantize one activation row `x` into `dst`, which must be exactly its byte size (a slice of
/// a larger scratch buffer: no intermediate copy).
pub fn quantize_activation_into(act_ty: GgmlType, x: &[f32], dst: &mut [u8]) -> Result<(), QuantError> {
    let kernel = quantize_kernel(act_ty)?;
    let bytes = row_bytes(act_ty, x.len())?;
    check_len(act_ty, "activation row bytes", bytes, dst.len())?;
    kernel(x, dst);
    Ok(())
}

/// Validate, once, the lengths of a weight row and an activation row of `n` elements for
/// `vec_dot` on `w_ty` (the activation being `vec_dot_type(w_ty)`).
pub fn check_vec_dot(
    w_ty: GgmlType,
    w_len: usize,
    act_len: usize,
    n: usize,
) -> Result<(), QuantError> {
    vec_dot_kernel(w_ty)?;
    let a_ty = vec_dot_type(w_ty);
    check_len(w_ty, "weight row bytes", row_bytes(w_ty, n)?, w_len)?;
    check_len(a_ty, "activation row bytes", row_bytes(a_ty, n)?, act_len)
}

/// Dot product of one weight row (`n` elements of type `w_ty`) with an activation row
/// quantized by `quantize_activation(vec_dot_type(w_ty), ..)`. The SIMD kernel where the build has one; bit-identical to the scalar reference.
pub fn vec_dot(w_ty: GgmlType, w_row: &[u8], act: &[u8], n: usize) -> Result<f32, QuantError> {
    check_vec_dot(w_ty, w_row.len(), act.len(), n)?;
    let kernel = vec_dot_kernel(w_ty)?;
    Ok(kernel(w_row, act, n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use GgmlType::*;

    const SUPPORTED: [GgmlType; 15] = [
        F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K,
    ];

    #[test]
    fn supported_set_is_exactly_the_documented_one() {
        for ty in GgmlType::ALL {
            assert_eq!(is_supported(ty), SUPPORTED.contains(&ty), "{ty}");
            assert_eq!(
                supports_vec_dot(ty),
                SUPPORTED.contains(&ty) && ty != Q8_1 && ty != Q8_K,
                "{ty}"
            );
        }
    }

    /// Every f16 exponent-31 pattern (±Inf, NaN) in any block's scale is seen; the largest
    /// finite, subnormal and zero scales are finite; types without a leading f16 scale answer
    /// false (their kernels keep the test).
    #[test]
    fn block_scales_finite_sees_every_inf_and_nan() {
        for ty in [Q4_0, Q5_0, Q8_0] {
            let bb = ty.type_size() as usize;
            let mut data: Vec<u8> = (0..5 * bb).map(|i| (i * 37 % 251) as u8).collect();
            for (blk, d) in [0x7bffu16, 0xfbff, 0x0001, 0x8000, 0x3c00].into_iter().enumerate() {
                data[blk * bb..blk * bb + 2].copy_from_slice(&d.to_le_bytes());
            }
            assert!(block_scales_finite(ty, &data), "{ty}");
            for d in [0x7c00u16, 0xfc00, 0x7c01, 0xfe00, 0x7fff, 0xffff] {
                for blk in 0..5 {
                    let mut bad = data.clone();
                    bad[blk * bb..blk * bb + 2].copy_from_slice(&d.to_le_bytes());
                    assert!(!block_scales_finite(ty, &bad), "{ty} {d:#x} in block {blk}");
                }
            }
        }
        for ty in [Q4_1, Q5_1, Q4_K, Q6_K, F16] {
            assert!(!block_scales_finite(ty, &[0u8; 512]), "{ty}");
        }
    }

    #[test]
    fn block_constants_agree_with_ggml_type_table() {
        // The kernels hard-code their layouts; the shared table must say the same.
        let table = [
            (Q4_0, 32, q4::Q4_0_BYTES),
            (Q4_1, 32, q4::Q4_1_BYTES),
            (Q5_0, 32, q5::Q5_0_BYTES),
            (Q5_1, 32, q5::Q5_1_BYTES),
            (Q8_0, 32, q8::Q8_0_BYTES),
            (Q8_1, 32, q8::Q8_1_BYTES),
            (Q2_K, 256, q2_k::Q2_K_BYTES),
            (Q3_K, 256, q3_k::Q3_K_BYTES),
            (Q4_K, 256, q4_k::Q4_K_BYTES),
            (Q5_K, 256, q5_k::Q5_K_BYTES),
            (Q6_K, 256, q6_k::Q6_K_BYTES),
            (Q8_K, 256, q8_k::Q8_K_BYTES),
        ];
        for (ty, bs, ts) in table {
            assert_eq!(
                (ty.block_size() as usize, ty.type_size() as usize),
                (bs, ts),
                "{ty}"
            );
        }
    }

    #[test]
    fn every_vec_dot_type_is_quantizable() {
        for ty in SUPPORTED {
            if supports_vec_dot(ty) {
                assert!(quantize_kernel(vec_dot_type(ty)).is_ok(), "{ty}");
            }
        }
    }
}
