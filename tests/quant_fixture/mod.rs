//! Shared helpers for the quant tests: the EQFX fixture reader (format documented in
//! tools/gen_quant_fixtures.py), bit-exact comparison, and a tiny deterministic RNG with
//! random-block generation for the kernels' property tests.
#![allow(dead_code)]

use edgellm::gguf::GgmlType;
use std::collections::BTreeMap;
use std::path::Path;

pub const NO_OFFSET: u64 = u64::MAX;

#[derive(Debug)]
pub struct Case {
    /// 0 = dequantize (input: raw bytes, output: f32), 1 = quantize activation (f32 -> bytes).
    pub kind: u8,
    pub label: String,
    pub ty: GgmlType,
    pub n: usize,
    /// Absolute offset of the input in the real model, when the input is not inline.
    pub offset: Option<u64>,
    pub input_hash: u64,
    pub input: Vec<u8>,
    pub output: Vec<u8>,
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> &'a [u8] {
        let s = &self.b[self.at..self.at + n];
        self.at += n;
        s
    }
    fn u8(&mut self) -> u8 {
        self.take(1)[0]
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take(2).try_into().unwrap())
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().unwrap())
    }
    fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take(8).try_into().unwrap())
    }
}

pub fn load(path: &Path) -> Vec<Case> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()));
    let mut r = Reader { b: &bytes, at: 0 };
    assert_eq!(r.take(4), b"EQFX", "{}: bad magic", path.display());
    assert_eq!(r.u32(), 1, "{}: unknown version", path.display());
    let count = r.u32() as usize;
    let mut cases = Vec::with_capacity(count);
    for _ in 0..count {
        let kind = r.u8();
        let label_len = r.u16() as usize;
        let label = String::from_utf8(r.take(label_len).to_vec()).unwrap();
        let ty_id = r.u32();
        let ty = GgmlType::from_id(ty_id).unwrap_or_else(|| panic!("{label}: type id {ty_id}"));
        let n = r.u32() as usize;
        let offset = r.u64();
        let input_hash = r.u64();
        let in_len = r.u32() as usize;
        let input = r.take(in_len).to_vec();
        let out_len = r.u32() as usize;
        let output = r.take(out_len).to_vec();
        let offset = (offset != NO_OFFSET).then_some(offset);
        cases.push(Case {
            kind,
            label,
            ty,
            n,
            offset,
            input_hash,
            input,
            output,
        });
    }
    assert_eq!(r.at, bytes.len(), "{}: trailing bytes", path.display());
    cases
}

pub fn fnv1a64(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

pub fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Compare bit patterns. NaN is compared as a class (both NaN): NaN payloads/signs produced by
/// arithmetic (Inf * 0, NaN * x) are not specified by IEEE and differ between numpy's SIMD
/// loops, x86 scalar code and wasm. Returns the number of values compared.
pub fn assert_bits_eq(label: &str, got: &[f32], want: &[f32]) -> usize {
    assert_eq!(got.len(), want.len(), "{label}: length");
    let mut bad = Vec::new();
    for (i, (g, w)) in got.iter().zip(want.iter()).enumerate() {
        let same = if w.is_nan() {
            g.is_nan()
        } else {
            g.to_bits() == w.to_bits()
        };
        if !same {
            bad.push(format!(
                "[{i}] got {g:e} ({:#010x}) want {w:e} ({:#010x})",
                g.to_bits(),
                w.to_bits()
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{label}: {} of {} values differ; first: {:?}",
        bad.len(),
        got.len(),
        &bad[..bad.len().min(5)]
    );
    got.len()
}

/// Per-type tally of compared values, printed for the record.
#[derive(Default)]
pub struct Tally(pub BTreeMap<String, (usize, usize)>);

impl Tally {
    pub fn add(&mut self, ty: GgmlType, values: usize) {
        let e = self.0.entry(ty.name().to_string()).or_default();
        e.0 += 1;
        e.1 += values;
    }
    pub fn print(&self, what: &str) {
        for (ty, (cases, values)) in &self.0 {
            eprintln!("{what}: {ty:5} {cases:4} cases {values:8} values bit-exact");
        }
    }
}

// ---- random data ---------------------------------------------------------------------------

/// splitmix64: deterministic, dependency-free.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f32 {
        let u1 = self.unit().max(1e-300);
        let u2 = self.unit();
        ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
    /// An f16 scale of magnitude ~1.2e-4 .. 0.125, random sign: what real quantizers produce.
    pub fn sane_f16(&mut self) -> u16 {
        let exp = 2 + self.below(10) as u16; // f16 biased exponents 2..=11
        let mant = self.below(1024) as u16;
        let sign = (self.below(2) as u16) << 15;
        sign | (exp << 10) | mant
    }
}

/// Byte offsets of the f16 scale fields (d, then dmin/m) in one block of each weight type.
pub fn scale_fields(ty: GgmlType) -> &'static [usize] {
    use GgmlType::*;
    match ty {
        Q4_0 | Q5_0 | Q8_0 => &[0],
        Q4_1 | Q5_1 | Q4_K | Q5_K => &[0, 2],
        Q2_K => &[80, 82],
        Q3_K => &[108],
        Q6_K => &[208],
        _ => &[],
    }
}

/// The weight types `vec_dot` takes, block types first.
pub const WEIGHT_TYPES: [GgmlType; 13] = {
    use GgmlType::*;
    [
        Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, F32, F16, BF16,
    ]
};

/// A random row of `n` elements of `ty`: random quant bytes with sane f16 scales, or random
/// normal floats for the float types.
pub fn random_row(rng: &mut Rng, ty: GgmlType, n: usize) -> Vec<u8> {
    use GgmlType::*;
    match ty {
        F32 => (0..n).flat_map(|_| rng.normal().to_le_bytes()).collect(),
        F16 => (0..n)
            .flat_map(|_| edgellm::quant::f32_to_f16(rng.normal()).to_le_bytes())
            .collect(),
        BF16 => (0..n)
            .flat_map(|_| edgellm::quant::f32_to_bf16(rng.normal()).to_le_bytes())
            .collect(),
        _ => {
            let (bs, ts) = (ty.block_size() as usize, ty.type_size() as usize);
            let mut row = rng.bytes(n / bs * ts);
            for block in row.chunks_exact_mut(ts) {
                for &f in scale_fields(ty) {
                    block[f..f + 2].copy_from_slice(&rng.sane_f16().to_le_bytes());
                }
            }
            row
        }
    }
}
