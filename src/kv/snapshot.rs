//! What a saved conversation records of a KV cache: its settings (a snapshot is restored only
//! into a cache with the same ones), its position counters, and the held rows, byte for byte
//! (so a restored cache is exactly the saved one: every later result is the same).

use serde::{Deserialize, Serialize};

use super::KvCache;

/// The settings a snapshot must match to be restored: storage, policy, budget, geometry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvSettings {
    pub dtype: String,
    pub policy: String,
    pub budget_tokens: usize,
    pub sinks: usize,
    pub context_limit: bool,
    pub k_width: usize,
    pub v_width: usize,
    /// Slots per layer (sliding-window layers hold their window).
    pub layer_slots: Vec<usize>,
}

/// Where the cache is in the conversation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvCounters {
    pub n_past: usize,
    pub evicted: usize,
    pub rebase: usize,
    pub rebases: usize,
}

impl KvCache {
    pub fn settings(&self) -> KvSettings {
        KvSettings {
            dtype: self.dtype.name().to_string(),
            policy: self.policy.name().to_string(),
            budget_tokens: self.budget,
            sinks: self.n_sink,
            context_limit: self.context_limit,
            k_width: self.layout.shape.k_width,
            v_width: self.layout.shape.v_width,
            layer_slots: self.layers.iter().map(|l| l.cap).collect(),
        }
    }

    pub fn counters(&self) -> KvCounters {
        KvCounters { n_past: self.n_past, evicted: self.evicted, rebase: self.rebase, rebases: self.rebases }
    }

    /// Absolute positions layer `il` holds at `c`, in the order they are saved.
    fn held_positions(&self, il: usize, c: &KvCounters) -> impl Iterator<Item = usize> {
        let l = &self.layers[il];
        let (a, b) = if l.global {
            let sinks = c.n_past.min(self.n_sink);
            ((0..sinks), (sinks + c.evicted).min(c.n_past)..c.n_past)
        } else {
            ((0..0), c.n_past - c.n_past.min(l.cap)..c.n_past)
        };
        a.chain(b)
    }

    /// Counters a cache with these settings can be in (`Err`: why not).
    fn check_counters(&self, c: &KvCounters) -> Result<(), String> {
        let window_start = self.n_sink.min(c.n_past);
        if c.evicted > c.n_past - window_start || c.rebase > c.evicted {
            return Err("inconsistent eviction counters".into());
        }
        if c.evicted > 0 && self.policy != super::KvPolicy::WindowSinks {
            return Err("evictions under a policy that never evicts".into());
        }
        let held = c.n_past - c.evicted;
        if self.layers.iter().any(|l| l.global) && held > self.budget {
            return Err(format!("{held} held tokens exceed the budget of {}", self.budget));
        }
        Ok(())
    }

    /// Bytes of the rows held at `c`.
    fn rows_bytes(&self, c: &KvCounters) -> usize {
        let row = self.layout.shape.row_bytes(self.dtype);
        (0..self.layers.len()).map(|il| self.held_positions(il, c).count() * row).sum()
    }

    /// Bytes [`export_rows`](Self::export_rows) appends.
    pub fn export_rows_bytes(&self) -> usize {
        self.rows_bytes(&self.counters())
    }

    /// Appends every held row (per layer, per position: K then V).
    pub fn export_rows(&self, out: &mut Vec<u8>) {
        let c = self.counters();
        out.reserve(self.rows_bytes(&c));
        for il in 0..self.layers.len() {
            for abs in self.held_positions(il, &c) {
                let l = &self.layers[il];
                let slot = self.slot(l, abs);
                out.extend_from_slice(l.k.row(slot));
                out.extend_from_slice(l.v.row(slot));
            }
        }
    }

    /// Replaces the cache's content by saved counters and rows (from a cache with the same
    /// [`settings`](Self::settings): the caller checks them). `Err` (nothing changed) when they
    /// do not fit these settings.
    pub fn import_rows(&mut self, c: &KvCounters, rows: &[u8]) -> Result<(), String> {
        self.check_counters(c)?;
        if rows.len() != self.rows_bytes(c) {
            return Err(format!("{} bytes of rows where {} are expected", rows.len(), self.rows_bytes(c)));
        }
        let (kr, vr) = (self.dtype.row_bytes(self.layout.shape.k_width), self.dtype.row_bytes(self.layout.shape.v_width));
        // A row with an Inf or NaN would fail the next step as if the model were broken
        // (MODEL_NON_FINITE): refused here, where the saved session is at fault.
        if !rows.chunks_exact(kr + vr).all(|r| self.dtype.row_finite(&r[..kr]) && self.dtype.row_finite(&r[kr..])) {
            return Err("a K/V row holds an Inf or NaN".into());
        }
        self.clear();
        let mut at = 0;
        for il in 0..self.layers.len() {
            let positions: Vec<usize> = self.held_positions(il, c).collect();
            for abs in positions {
                let slot = self.slot(&self.layers[il], abs);
                let l = &mut self.layers[il];
                l.k.row_mut(slot).copy_from_slice(&rows[at..at + kr]);
                l.v.row_mut(slot).copy_from_slice(&rows[at + kr..at + kr + vr]);
                at += kr + vr;
            }
        }
        self.n_past = c.n_past;
        self.evicted = c.evicted;
        self.rebase = c.rebase;
        self.rebases = c.rebases;
        // Exactly the held positions are valid: a ring is "wrapped" iff it holds its capacity.
        self.written = c.n_past;
        Ok(())
    }
}
