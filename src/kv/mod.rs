//! The KV cache: keys and values of every processed position, per layer, stored as f16 (the
//! precision llama.cpp's default cache keeps).
//!
//! For now a plain growing cache with a hard limit (`max_tokens`, the context length); a later
//! issue bounds it (window + attention sinks, int8). Its interface is the one the model uses:
//! `check_room(n)` → per layer `write(layer, k, v)` then `layer(layer, upto)` to attend →
//! `commit(n)` once every layer has written (or `rollback()` on error).

use crate::ops::attention::KvRead;
use crate::quant::{f16_to_f32, f32_to_f16};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvError {
    /// The batch would not fit: `held + requested > max`.
    ContextFull { held: usize, requested: usize, max: usize },
}

impl KvError {
    pub fn code(&self) -> &'static str {
        match self {
            KvError::ContextFull { .. } => "CONTEXT_FULL",
        }
    }
}

impl std::fmt::Display for KvError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KvError::ContextFull { held, requested, max } => write!(
                f,
                "context full: {held} tokens held + {requested} new > {max} (the session's context length)"
            ),
        }
    }
}

impl std::error::Error for KvError {}

#[derive(Clone, Debug, Default)]
struct LayerCache {
    k: Vec<u16>,
    v: Vec<u16>,
}

#[derive(Clone, Debug)]
pub struct KvCache {
    layers: Vec<LayerCache>,
    /// f16 values per position: `n_head_kv * head_dim_k` (keys), `... * head_dim_v` (values).
    k_width: usize,
    v_width: usize,
    len: usize,
    max_tokens: usize,
}

/// One layer's positions `0..len` as seen by attention.
pub struct LayerView<'a> {
    k: &'a [u16],
    v: &'a [u16],
    k_width: usize,
    v_width: usize,
    len: usize,
}

impl KvRead for LayerView<'_> {
    fn len(&self) -> usize {
        self.len
    }
    fn read_k(&self, start: usize, n: usize, dst: &mut [f32]) {
        let src = &self.k[start * self.k_width..(start + n) * self.k_width];
        for (d, &h) in dst.iter_mut().zip(src) {
            *d = f16_to_f32(h);
        }
    }
    fn read_v(&self, start: usize, n: usize, dst: &mut [f32]) {
        let src = &self.v[start * self.v_width..(start + n) * self.v_width];
        for (d, &h) in dst.iter_mut().zip(src) {
            *d = f16_to_f32(h);
        }
    }
}

impl KvCache {
    /// An empty cache for `n_layer` layers holding at most `max_tokens` positions. Memory is
    /// allocated as positions arrive, not up front.
    pub fn new(n_layer: usize, k_width: usize, v_width: usize, max_tokens: usize) -> KvCache {
        KvCache { layers: vec![LayerCache::default(); n_layer], k_width, v_width, len: 0, max_tokens }
    }

    /// Positions held (committed).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn max_tokens(&self) -> usize {
        self.max_tokens
    }

    pub fn n_layer(&self) -> usize {
        self.layers.len()
    }

    /// Values per position and layer: (keys, values).
    pub fn kv_widths(&self) -> (usize, usize) {
        (self.k_width, self.v_width)
    }

    /// `CONTEXT_FULL` unless `n` more positions fit.
    pub fn check_room(&self, n: usize) -> Result<(), KvError> {
        if self.len + n > self.max_tokens {
            return Err(KvError::ContextFull { held: self.len, requested: n, max: self.max_tokens });
        }
        Ok(())
    }

    /// Stores keys and values (f32 rows of `k_width` / `v_width`) for positions
    /// `len()..len() + n` of `layer`, replacing anything an uncommitted batch left there.
    pub fn write(&mut self, layer: usize, k: &[f32], v: &[f32]) {
        debug_assert_eq!(k.len() / self.k_width, v.len() / self.v_width);
        let l = &mut self.layers[layer];
        l.k.truncate(self.len * self.k_width);
        l.v.truncate(self.len * self.v_width);
        l.k.extend(k.iter().map(|&x| f32_to_f16(x)));
        l.v.extend(v.iter().map(|&x| f32_to_f16(x)));
    }

    /// Positions `0..upto` of `layer` (committed ones plus what this batch wrote).
    pub fn layer(&self, layer: usize, upto: usize) -> LayerView<'_> {
        let l = &self.layers[layer];
        debug_assert!(l.k.len() >= upto * self.k_width);
        LayerView { k: &l.k, v: &l.v, k_width: self.k_width, v_width: self.v_width, len: upto }
    }

    /// Makes the `n` positions every layer has written part of the cache.
    pub fn commit(&mut self, n: usize) {
        self.len += n;
        debug_assert!(self.layers.iter().all(|l| l.k.len() == self.len * self.k_width));
    }

    /// Drops whatever an unfinished batch wrote.
    pub fn rollback(&mut self) {
        self.truncate(self.len);
    }

    /// Keeps positions `0..n` (n ≤ len), e.g. to re-run from a shared prefix.
    pub fn truncate(&mut self, n: usize) {
        let n = n.min(self.len);
        for l in &mut self.layers {
            l.k.truncate(n * self.k_width);
            l.v.truncate(n * self.v_width);
        }
        self.len = n;
    }

    pub fn clear(&mut self) {
        self.truncate(0);
    }

    /// Bytes the held positions occupy.
    pub fn bytes_used(&self) -> usize {
        self.len * (self.k_width + self.v_width) * 2 * self.layers.len()
    }

    /// Bytes allocated (≥ used: vectors grow geometrically).
    pub fn bytes_allocated(&self) -> usize {
        self.layers.iter().map(|l| 2 * (l.k.capacity() + l.v.capacity())).sum()
    }

    /// Bytes one more position costs.
    pub fn bytes_per_token(&self) -> usize {
        (self.k_width + self.v_width) * 2 * self.layers.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_commit_read_rollback() {
        let mut c = KvCache::new(2, 4, 2, 5);
        assert!(c.check_room(5).is_ok());
        assert_eq!(c.check_room(6).unwrap_err().code(), "CONTEXT_FULL");
        let k: Vec<f32> = (0..12).map(|i| i as f32 * 0.5).collect();
        let v: Vec<f32> = (0..6).map(|i| -(i as f32)).collect();
        for layer in 0..2 {
            c.write(layer, &k, &v);
        }
        let view = c.layer(1, 3);
        let mut dk = vec![0.0; 8];
        view.read_k(1, 2, &mut dk);
        assert_eq!(dk, k[4..12]);
        let mut dv = vec![0.0; 2];
        view.read_v(2, 1, &mut dv);
        assert_eq!(dv, [-4.0, -5.0]);
        c.commit(3);
        assert_eq!(c.len(), 3);
        assert_eq!(c.bytes_used(), 3 * 6 * 2 * 2);
        // An unfinished batch is dropped by rollback.
        c.write(0, &k[..4], &v[..2]);
        c.rollback();
        assert_eq!(c.len(), 3);
        assert_eq!(c.check_room(3).unwrap_err(), KvError::ContextFull { held: 3, requested: 3, max: 5 });
        c.truncate(1);
        assert_eq!(c.len(), 1);
        c.clear();
        assert!(c.is_empty());
    }

    #[test]
    fn values_are_rounded_to_f16() {
        let mut c = KvCache::new(1, 1, 1, 4);
        c.write(0, &[1.0 + 1.0 / 4096.0], &[65504.0]);
        c.commit(1);
        let view = c.layer(0, 1);
        let mut d = [0.0f32];
        view.read_k(0, 1, &mut d);
        assert_eq!(d[0], 1.0); // below f16 resolution at 1.0 (2^-10)
        view.read_v(0, 1, &mut d);
        assert_eq!(d[0], 65504.0);
    }
}
