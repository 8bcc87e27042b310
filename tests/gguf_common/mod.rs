//! Helpers shared by the tests/gguf_*.rs tests: a seeded RNG, a synthetic model that uses every
//! metadata value type, and a raw byte builder for headers the writer would never produce.
#![allow(dead_code)]

use edgellm::gguf::{Array, GgmlType, GgufWriter, Value};

/// xorshift64*: deterministic, seedable, no dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

/// Metadata covering every value type: each scalar, strings (empty, non-ASCII), arrays of each
/// element type (empty and not), arrays of strings, and arrays nested three deep.
pub fn every_value_type() -> Vec<(String, Value)> {
    let v = |k: &str, v: Value| (k.to_string(), v);
    vec![
        v("general.architecture", Value::String("synth".into())),
        v("general.name", Value::String("Synthetic ✓ model".into())),
        v("t.u8", Value::U8(255)),
        v("t.i8", Value::I8(-128)),
        v("t.u16", Value::U16(65535)),
        v("t.i16", Value::I16(-32768)),
        v("t.u32", Value::U32(4_000_000_000)),
        v("t.i32", Value::I32(-2_000_000_000)),
        v("t.u64", Value::U64(u64::MAX)),
        v("t.i64", Value::I64(i64::MIN)),
        v("t.f32", Value::F32(-1.5e-7)),
        v("t.f64", Value::F64(std::f64::consts::PI)),
        v("t.bool_true", Value::Bool(true)),
        v("t.bool_false", Value::Bool(false)),
        v("t.string_empty", Value::String(String::new())),
        v("t.a.u8", Value::Array(Array::U8(vec![0, 1, 255]))),
        v("t.a.i8", Value::Array(Array::I8(vec![-1, 0, 127]))),
        v("t.a.u16", Value::Array(Array::U16(vec![1, 65535]))),
        v("t.a.i16", Value::Array(Array::I16(vec![-300, 300]))),
        v("t.a.u32", Value::Array(Array::U32(vec![7, 8, 9, u32::MAX]))),
        v("t.a.i32", Value::Array(Array::I32(vec![i32::MIN, -1, 0, 1]))),
        v("t.a.u64", Value::Array(Array::U64(vec![u64::MAX, 0]))),
        v("t.a.i64", Value::Array(Array::I64(vec![i64::MAX, -5]))),
        v("t.a.f32", Value::Array(Array::F32(vec![0.0, -0.0, 1.0e30, f32::MIN_POSITIVE]))),
        v("t.a.f64", Value::Array(Array::F64(vec![1.0e-300, -2.5]))),
        v("t.a.bool", Value::Array(Array::Bool(vec![true, false, true]))),
        v("t.a.string", Value::Array(Array::String(vec!["a".into(), String::new(), "ünï".into()]))),
        v("t.a.empty_u32", Value::Array(Array::U32(vec![]))),
        v("t.a.empty_string", Value::Array(Array::String(vec![]))),
        v("t.a.empty_array", Value::Array(Array::Array(vec![]))),
        v(
            "t.a.nested_u32",
            Value::Array(Array::Array(vec![
                Array::U32(vec![1, 2]),
                Array::U32(vec![]),
                Array::U32(vec![3]),
            ])),
        ),
        v(
            "t.a.nested_mixed",
            Value::Array(Array::Array(vec![
                Array::String(vec!["x".into(), "yz".into()]),
                Array::F32(vec![0.5]),
                Array::Array(vec![Array::Bool(vec![true]), Array::I64(vec![-9, 9])]),
            ])),
        ),
    ]
}

/// (name, dims, type) of the synthetic model's tensors: several types, 1 to 4 dimensions.
pub fn synthetic_tensors() -> Vec<(&'static str, Vec<u64>, GgmlType)> {
    vec![
        ("output_norm.weight", vec![64], GgmlType::F32),
        ("token_embd.weight", vec![64, 10], GgmlType::Q8_0),
        ("blk.0.attn_q.weight", vec![256, 3], GgmlType::Q4_K),
        ("blk.0.ffn_down.weight", vec![256, 2, 2], GgmlType::Q6_K),
        ("blk.0.attn_k.weight", vec![32, 3, 1, 2], GgmlType::Q5_0),
        ("blk.0.small", vec![3], GgmlType::F16),
        ("blk.0.empty", vec![32, 0], GgmlType::Q4_0),
    ]
}

/// A small valid GGUF file built with the writer: every value type plus `synthetic_tensors`
/// filled with seeded random bytes. Returns the file and each tensor's bytes.
pub fn synthetic_model(version: u32, alignment: Option<u32>) -> (Vec<u8>, Vec<Vec<u8>>) {
    let mut w = GgufWriter::with_version(version);
    for (k, v) in every_value_type() {
        w.metadata(k, v);
    }
    if let Some(a) = alignment {
        w.metadata("general.alignment", Value::U32(a));
    }
    let mut rng = Rng::new(42);
    let mut datas = Vec::new();
    for (name, dims, t) in synthetic_tensors() {
        let n = t.bytes_for(dims.iter().product()).unwrap() as usize;
        let data = rng.bytes(n);
        w.tensor(name, &dims, t, data.clone());
        datas.push(data);
    }
    (w.to_bytes().unwrap(), datas)
}

/// Builds raw GGUF bytes field by field, for headers the writer would refuse or never produce.
#[derive(Default)]
pub struct Raw(pub Vec<u8>);

impl Raw {
    /// Magic, version, tensor count, metadata count.
    pub fn header(version: u32, n_tensors: u64, n_kv: u64) -> Raw {
        let mut r = Raw::default();
        r.0.extend_from_slice(b"GGUF");
        r.u32(version).u64(n_tensors).u64(n_kv);
        r
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
    pub fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64).bytes(s.as_bytes())
    }
    /// A u32 key/value pair.
    pub fn kv_u32(&mut self, key: &str, v: u32) -> &mut Self {
        self.str(key).u32(4).u32(v)
    }
    /// A tensor info: name, dims, type id, offset.
    pub fn tensor(&mut self, name: &str, dims: &[u64], type_id: u32, offset: u64) -> &mut Self {
        self.str(name).u32(dims.len() as u32);
        for &d in dims {
            self.u64(d);
        }
        self.u32(type_id).u64(offset)
    }
    /// Pads with zeros to a multiple of `align`, then appends `n` data bytes.
    pub fn data(&mut self, align: usize, n: usize) -> &mut Self {
        while !self.0.len().is_multiple_of(align) {
            self.0.push(0);
        }
        self.0.extend(std::iter::repeat_n(0xAB, n));
        self
    }
}
