//! Writes GGUF files, mainly to build small synthetic models for tests.
//!
//! The writer encodes what it is given: it checks only what it needs to lay the file out
//! (version, alignment, each tensor's byte count), so tests can also use it to build files the
//! parser must reject (duplicate keys, duplicate names, odd shapes).

use super::error::GgufError;
use super::types::{Array, GgmlType, Value};
use super::validate::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT};

struct PendingTensor {
    name: String,
    dims: Vec<u64>,
    ggml_type: GgmlType,
    data: Vec<u8>,
}

/// Collects metadata and tensors, then lays them out as a GGUF file in memory.
pub struct GgufWriter {
    version: u32,
    metadata: Vec<(String, Value)>,
    tensors: Vec<PendingTensor>,
}

impl Default for GgufWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl GgufWriter {
    /// A GGUF v3 writer.
    pub fn new() -> Self {
        Self::with_version(3)
    }

    /// A writer for version 2 or 3 (both share one encoding; others fail in `to_bytes`).
    pub fn with_version(version: u32) -> Self {
        GgufWriter { version, metadata: Vec::new(), tensors: Vec::new() }
    }

    /// Appends a key/value pair. `general.alignment` (U32) sets the data alignment.
    pub fn metadata(&mut self, key: impl Into<String>, value: Value) -> &mut Self {
        self.metadata.push((key.into(), value));
        self
    }

    /// Appends a tensor; `dims[0]` is the row length (ggml order). `data` must hold exactly
    /// the bytes the shape and type need (checked in `to_bytes`).
    pub fn tensor(
        &mut self,
        name: impl Into<String>,
        dims: &[u64],
        ggml_type: GgmlType,
        data: Vec<u8>,
    ) -> &mut Self {
        self.tensors.push(PendingTensor {
            name: name.into(),
            dims: dims.to_vec(),
            ggml_type,
            data,
        });
        self
    }

    /// The alignment the file will use.
    pub fn alignment(&self) -> Result<u64, GgufError> {
        match self.metadata.iter().find(|(k, _)| k == ALIGNMENT_KEY) {
            None => Ok(DEFAULT_ALIGNMENT),
            Some((_, Value::U32(a))) if a.is_power_of_two() => Ok(*a as u64),
            Some((_, v)) => Err(GgufError::BadAlignment { reason: format!("writer given {v:?}") }),
        }
    }

    /// Encodes the file: header, padding to the alignment, then each tensor's data in the order
    /// added, each starting at an aligned offset.
    pub fn to_bytes(&self) -> Result<Vec<u8>, GgufError> {
        if self.version != 2 && self.version != 3 {
            return Err(GgufError::UnsupportedVersion { version: self.version });
        }
        let alignment = self.alignment()?;
        let mut offsets = Vec::with_capacity(self.tensors.len());
        let mut data_len: u64 = 0;
        for t in &self.tensors {
            let n: u64 = t.dims.iter().try_fold(1u64, |n, &d| n.checked_mul(d)).unwrap_or(u64::MAX);
            let expected = t.ggml_type.bytes_for(n).unwrap_or(u64::MAX);
            if expected != t.data.len() as u64 {
                return Err(GgufError::TensorDataSize {
                    tensor: t.name.clone(),
                    expected,
                    actual: t.data.len() as u64,
                });
            }
            offsets.push(data_len);
            data_len = align_up(data_len + expected, alignment);
        }

        let mut out = Vec::new();
        out.extend_from_slice(b"GGUF");
        put_u32(&mut out, self.version);
        put_u64(&mut out, self.tensors.len() as u64);
        put_u64(&mut out, self.metadata.len() as u64);
        for (key, value) in &self.metadata {
            put_str(&mut out, key);
            put_u32(&mut out, value.value_type() as u32);
            put_value(&mut out, value);
        }
        for (t, &offset) in self.tensors.iter().zip(&offsets) {
            put_str(&mut out, &t.name);
            put_u32(&mut out, t.dims.len() as u32);
            for &d in &t.dims {
                put_u64(&mut out, d);
            }
            put_u32(&mut out, t.ggml_type.id());
            put_u64(&mut out, offset);
        }
        let data_offset = align_up(out.len() as u64, alignment);
        out.resize(data_offset as usize, 0);
        out.reserve(data_len as usize);
        for (t, &offset) in self.tensors.iter().zip(&offsets) {
            out.resize((data_offset + offset) as usize, 0);
            out.extend_from_slice(&t.data);
        }
        // Pad the last tensor too, as ggml does, so the file length is a multiple of the
        // alignment past the data offset.
        out.resize((data_offset + data_len) as usize, 0);
        Ok(out)
    }
}

fn align_up(n: u64, alignment: u64) -> u64 {
    n.div_ceil(alignment) * alignment
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_u64(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// A value's payload (its type id is written by the caller).
fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => out.push(*x),
        Value::I8(x) => out.push(*x as u8),
        Value::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => out.push(*x as u8),
        Value::String(s) => put_str(out, s),
        Value::Array(a) => put_array(out, a),
    }
}

/// Element type, count, elements. A nested array element is encoded the same way, without a
/// value-type tag of its own (the outer element type already says "array").
fn put_array(out: &mut Vec<u8>, a: &Array) {
    put_u32(out, a.value_type() as u32);
    put_u64(out, a.len() as u64);
    fn all<T: Copy, const N: usize>(out: &mut Vec<u8>, v: &[T], f: impl Fn(T) -> [u8; N]) {
        for &x in v {
            out.extend_from_slice(&f(x));
        }
    }
    match a {
        Array::U8(v) => out.extend_from_slice(v),
        Array::I8(v) => all(out, v, i8::to_le_bytes),
        Array::U16(v) => all(out, v, u16::to_le_bytes),
        Array::I16(v) => all(out, v, i16::to_le_bytes),
        Array::U32(v) => all(out, v, u32::to_le_bytes),
        Array::I32(v) => all(out, v, i32::to_le_bytes),
        Array::U64(v) => all(out, v, u64::to_le_bytes),
        Array::I64(v) => all(out, v, i64::to_le_bytes),
        Array::F32(v) => all(out, v, f32::to_le_bytes),
        Array::F64(v) => all(out, v, f64::to_le_bytes),
        Array::Bool(v) => all(out, v, |b: bool| [b as u8]),
        Array::String(v) => v.iter().for_each(|s| put_str(out, s)),
        Array::Array(v) => v.iter().for_each(|inner| put_array(out, inner)),
    }
}
