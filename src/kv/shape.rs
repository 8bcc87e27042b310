//! The sizes of a KV cache, from the model's hyper-parameters alone: K/V row widths and each
//! layer's window. The one place KV storage is sized — the cache allocates by it and the memory
//! ledger estimates by it (`crate::memory`), so the two cannot disagree.

use crate::limits::MAX_CONTEXT_TOKENS;

use super::store::paged_bytes;
use super::KvDtype;

/// What sizes a model's KV storage (built by `HParams::kv_shape`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvShape {
    /// Values per position and layer: `n_head_kv × head_dim_k` (keys), `... × head_dim_v`.
    pub k_width: usize,
    pub v_width: usize,
    /// Per layer: its sliding window (a local layer), or `None` (global attention).
    pub windows: Vec<Option<usize>>,
}

impl KvShape {
    pub fn n_layer(&self) -> usize {
        self.windows.len()
    }

    /// Bytes of K + V one layer stores per position.
    pub fn row_bytes(&self, dtype: KvDtype) -> usize {
        dtype.row_bytes(self.k_width) + dtype.row_bytes(self.v_width)
    }

    /// Slots of layer `il` under a budget of `b` tokens (a window layer holds at most its window).
    pub fn layer_cap(&self, il: usize, b: usize) -> usize {
        match self.windows[il] {
            Some(w) => w.min(b),
            None => b,
        }
    }

    /// Bytes of K/V storage when `tokens` positions have been processed (global layers hold
    /// them all, window layers at most their window): `Σ_layers min(tokens, cap) × row`. At
    /// the budget this is the cache's full allocation. Saturating (a figure from hostile sizes
    /// is refused by any budget, never wrapped).
    pub fn bytes_at(&self, dtype: KvDtype, tokens: usize) -> u64 {
        let row = self.row_bytes(dtype) as u64;
        (0..self.n_layer()).fold(0u64, |sum, il| sum.saturating_add((self.layer_cap(il, tokens) as u64).saturating_mul(row)))
    }

    /// The largest budget in tokens whose full storage fits in `bytes` (0 if none), at most
    /// [`MAX_CONTEXT_TOKENS`].
    pub fn tokens_for_bytes(&self, dtype: KvDtype, bytes: u64) -> usize {
        let row = self.row_bytes(dtype) as u64;
        if row == 0 || self.n_layer() == 0 {
            return 0;
        }
        // bytes_at is non-decreasing in tokens; binary search.
        let (mut lo, mut hi) = (0usize, (bytes / row).min(MAX_CONTEXT_TOKENS as u64) as usize + 1);
        while lo + 1 < hi {
            let mid = lo + (hi - lo) / 2;
            if self.bytes_at(dtype, mid) <= bytes {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Bytes a cache with a budget of `budget` tokens has allocated once it has processed
    /// `tokens` positions: each layer allocates its K and V slots a page at a time as they are
    /// first written, up to its capacity (`store::paged_bytes`).
    pub fn allocated_at(&self, dtype: KvDtype, budget: usize, tokens: usize) -> u64 {
        let (kr, vr) = (dtype.row_bytes(self.k_width), dtype.row_bytes(self.v_width));
        (0..self.n_layer())
            .map(|il| {
                let cap = self.layer_cap(il, budget);
                (paged_bytes(kr, cap, tokens) + paged_bytes(vr, cap, tokens)) as u64
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> KvShape {
        KvShape { k_width: 64, v_width: 32, windows: vec![None, Some(5), None, Some(300)] }
    }

    #[test]
    fn bytes_and_tokens_agree() {
        let s = shape();
        let row = s.row_bytes(KvDtype::F16) as u64;
        assert_eq!(row, 2 * 96);
        assert_eq!(s.bytes_at(KvDtype::F16, 3), 4 * 3 * row);
        assert_eq!(s.bytes_at(KvDtype::F16, 1000), (2 * 1000 + 5 + 300) * row);
        for bytes in [0, row, 4 * row - 1, 4 * row, 1 << 20, 1 << 30] {
            let t = s.tokens_for_bytes(KvDtype::F16, bytes);
            assert!(s.bytes_at(KvDtype::F16, t) <= bytes);
            assert!(t == MAX_CONTEXT_TOKENS || s.bytes_at(KvDtype::F16, t + 1) > bytes, "{bytes}");
        }
        assert_eq!(s.tokens_for_bytes(KvDtype::F16, u64::MAX), MAX_CONTEXT_TOKENS);
        // Saturating on 64-bit targets, exact on wasm32.
        let max = usize::MAX as u64;
        assert_eq!(s.bytes_at(KvDtype::F16, usize::MAX), max.saturating_mul(2 * row).saturating_add((5 + 300) * row));
    }

    #[test]
    fn allocation_is_paged_up_to_each_layers_capacity() {
        use super::super::PAGE_ROWS;
        let s = shape();
        let (kr, vr) = (KvDtype::F16.row_bytes(64) as u64, KvDtype::F16.row_bytes(32) as u64);
        // One position: a page in each global layer and in the 300-slot window layer; the
        // 5-slot window layer allocates its whole capacity.
        let page = PAGE_ROWS as u64;
        assert_eq!(s.allocated_at(KvDtype::F16, 4096, 1), (3 * page + 5) * (kr + vr));
        // Full: the budget's storage.
        assert_eq!(s.allocated_at(KvDtype::F16, 1000, 1000), s.bytes_at(KvDtype::F16, 1000));
        assert_eq!(s.allocated_at(KvDtype::F16, 1000, 0), 0);
    }
}
