//! The memory ledger: `M_peak = M_weights + M_KV + M_act + M_runtime <= M_budget`, plus the
//! load peak.
//!
//! - **Estimate** ([`Estimate`]) each term from the GGUF header alone, before any weight is
//!   allocated: [`HeaderSkimmer`] reads what it needs from the header as it streams by (a few
//!   KB held), so a refusal costs no memory.
//! - **Measure** ([`Measured`]) while running: weights = the model's tensor bytes, kv = the KV
//!   cache's allocation, activations = the session's scratch buffers, logits and sampler,
//!   runtime = the rest of wasm memory ([`probe`]); and the wasm memory high-water mark.
//! - **Pressure** ([`Level`]): `ok`, `elevated` (≥ 75 % of the budget by default), `critical`
//!   (≥ 90 %), from the measured total; the host reports each change.
//! - **Admission** ([`Ledger::admit`]): a model whose estimated peak exceeds the budget is
//!   refused with `OVER_MEMORY_BUDGET` and the figures per term, before allocation.
//!
//! The figures are wasm32 figures (the browser build), wherever they are computed.

mod estimate;
pub mod probe;
mod skim;
pub mod wasm32;

pub use estimate::{
    tokenizer_bytes, Estimate, EstimateOptions, KvElem, ModelGeometry,
    RuntimeParts, ScratchPlan, FRAGMENTATION_FRACTION, FRAGMENTATION_MIN, MODULE_BYTES,
};
pub use probe::CountingAlloc;
pub use skim::{HeaderSkimmer, HeaderStats, HeaderSummary, SkimStatus, KEEP_ARRAY, KEEP_STRING};

use serde::{Deserialize, Serialize};

/// Pressure against the budget.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    #[default]
    Ok,
    Elevated,
    Critical,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Elevated => "elevated",
            Level::Critical => "critical",
        }
    }
}

/// Fractions of the budget at which the level changes.
pub const DEFAULT_ELEVATED: f64 = 0.75;
pub const DEFAULT_CRITICAL: f64 = 0.90;

/// The budget and the pressure thresholds (the JS `memory` option).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryOptions {
    /// Most bytes the engine may use (`None`: no budget, the level stays `ok`).
    #[serde(default)]
    pub budget_bytes: Option<u64>,
    /// `elevated` at this fraction of the budget or more.
    #[serde(default = "default_elevated")]
    pub elevated: f64,
    /// `critical` at this fraction of the budget or more.
    #[serde(default = "default_critical")]
    pub critical: f64,
}

fn default_elevated() -> f64 {
    DEFAULT_ELEVATED
}

fn default_critical() -> f64 {
    DEFAULT_CRITICAL
}

impl Default for MemoryOptions {
    fn default() -> Self {
        MemoryOptions { budget_bytes: None, elevated: DEFAULT_ELEVATED, critical: DEFAULT_CRITICAL }
    }
}

impl MemoryOptions {
    /// `BAD_MEMORY_OPTIONS` unless `0 < elevated <= critical`.
    pub fn check(&self) -> Result<(), String> {
        let ok = |f: f64| f.is_finite() && f > 0.0;
        if !ok(self.elevated) || !ok(self.critical) || self.elevated > self.critical {
            return Err(format!(
                "memory thresholds must satisfy 0 < elevated <= critical (got elevated {}, critical {})",
                self.elevated, self.critical
            ));
        }
        if self.budget_bytes == Some(0) {
            return Err("memory budget_bytes must be positive".into());
        }
        Ok(())
    }

    /// The level of `bytes` against the budget.
    pub fn level(&self, bytes: u64) -> Level {
        match self.budget_bytes {
            None => Level::Ok,
            Some(b) => {
                let f = bytes as f64 / b as f64;
                if f >= self.critical {
                    Level::Critical
                } else if f >= self.elevated {
                    Level::Elevated
                } else {
                    Level::Ok
                }
            }
        }
    }
}

/// One term, estimated and measured (bytes; `None` where not known yet / not measurable).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Figures {
    pub estimated: Option<u64>,
    pub measured: Option<u64>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Terms {
    pub weights: Figures,
    pub kv: Figures,
    pub activations: Figures,
    pub runtime: Figures,
}

/// What the running engine holds (bytes), as its components report it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Measured {
    pub weights: u64,
    pub kv: u64,
    pub activations: u64,
}

/// The ledger's view at one moment (the JS `engine.memory()` object).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MemorySnapshot {
    pub level: Level,
    pub budget_bytes: Option<u64>,
    /// Size of wasm linear memory now (what the tab pays; it never shrinks). 0 natively.
    pub wasm_memory_bytes: u64,
    /// Highest wasm memory seen (= `wasm_memory_bytes` in wasm; the heap peak natively).
    pub high_water_bytes: u64,
    pub terms: Terms,
    pub total: Figures,
    pub load_peak: Figures,
    /// `measured total / budget` (null without a budget or a measurement).
    pub usage: Option<f64>,
    pub thresholds: Thresholds,
    /// "empty", "loading", "ready" or "generating".
    pub phase: &'static str,
    /// Bytes live on the heap (counting allocator), if known: the rest of wasm memory is free
    /// space the allocator holds.
    pub heap_live_bytes: Option<u64>,
    /// wasm memory when the engine was created (module data + stack).
    pub module_bytes: Option<u64>,
    /// The KV budget (tokens) and storage the estimate is for.
    pub kv_tokens: Option<usize>,
    pub kv_dtype: Option<KvElem>,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Thresholds {
    pub elevated: f64,
    pub critical: f64,
}

/// The ledger's state in a host: options, the estimate of the loaded model, what was measured
/// at load, the last level reported.
#[derive(Clone, Debug, Default)]
pub struct Ledger {
    pub options: MemoryOptions,
    pub estimate: Option<Estimate>,
    /// Estimate of the load in progress or last refused (what `OVER_MEMORY_BUDGET` reports).
    pub last_estimate: Option<Estimate>,
    /// wasm memory (natively: heap peak) at the end of the load.
    pub load_peak_measured: Option<u64>,
    high_water: u64,
    level: Level,
    /// The level changed since the last poll.
    changed: bool,
    pub module_bytes: Option<u64>,
}

/// Why a load was refused: the error's figures.
#[derive(Clone, Debug, Serialize)]
pub struct Refusal {
    pub budget_bytes: u64,
    pub peak: u64,
    pub estimate: Estimate,
}

impl Refusal {
    pub fn message(&self) -> String {
        let e = &self.estimate;
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        format!(
            "the model needs an estimated {:.1} MiB (weights {:.1} + KV {:.1} + activations {:.1} + runtime {:.1}; load peak {:.1}), more than the memory budget of {:.1} MiB",
            mib(self.peak),
            mib(e.weights),
            mib(e.kv),
            mib(e.activations),
            mib(e.runtime),
            mib(e.load_peak),
            mib(self.budget_bytes)
        )
    }
}

impl Ledger {
    pub fn new() -> Ledger {
        Ledger { module_bytes: probe::wasm_memory(), ..Ledger::default() }
    }

    /// Refuses an estimate whose peak exceeds `budget` (or the ledger's own budget).
    pub fn admit(&mut self, e: Estimate, budget: Option<u64>) -> Result<Estimate, Box<Refusal>> {
        self.last_estimate = Some(e.clone());
        match budget.or(self.options.budget_bytes) {
            Some(b) if e.peak > b => Err(Box::new(Refusal { budget_bytes: b, peak: e.peak, estimate: e })),
            _ => Ok(e),
        }
    }

    /// Builds the snapshot from what the host measured (`None`: nothing loaded) and updates
    /// the level; returns it with whether the level changed since the last poll.
    pub fn snapshot(&mut self, measured: Option<Measured>, phase: &'static str) -> MemorySnapshot {
        let wasm = probe::wasm_memory();
        let process = probe::process_bytes();
        let live = probe::heap_live();
        let hw = wasm.or_else(probe::heap_peak).unwrap_or(0);
        self.high_water = self.high_water.max(hw);
        let e = self.estimate.as_ref();
        let est = |f: fn(&Estimate) -> u64| e.map(f);
        let sum = measured.map(|m| m.weights + m.kv + m.activations);
        let runtime = match (process, sum) {
            (Some(p), Some(s)) => Some(p.saturating_sub(s)),
            _ => None,
        };
        let total_measured = match (measured, process) {
            (Some(_), Some(p)) => Some(p),
            (Some(_), None) => sum,
            (None, p) => p,
        };
        let terms = Terms {
            weights: Figures { estimated: est(|e| e.weights), measured: measured.map(|m| m.weights) },
            kv: Figures { estimated: est(|e| e.kv), measured: measured.map(|m| m.kv) },
            activations: Figures { estimated: est(|e| e.activations), measured: measured.map(|m| m.activations) },
            runtime: Figures { estimated: est(|e| e.runtime), measured: runtime },
        };
        let level = self.options.level(total_measured.unwrap_or(0));
        if level != self.level {
            self.level = level;
            self.changed = true;
        }
        MemorySnapshot {
            level,
            budget_bytes: self.options.budget_bytes,
            wasm_memory_bytes: wasm.unwrap_or(0),
            high_water_bytes: self.high_water,
            terms,
            total: Figures { estimated: est(|e| e.total), measured: total_measured },
            load_peak: Figures { estimated: est(|e| e.load_peak), measured: self.load_peak_measured },
            usage: match (self.options.budget_bytes, total_measured) {
                (Some(b), Some(t)) => Some(t as f64 / b as f64),
                _ => None,
            },
            thresholds: Thresholds { elevated: self.options.elevated, critical: self.options.critical },
            phase,
            heap_live_bytes: live,
            module_bytes: self.module_bytes,
            kv_tokens: e.map(|e| e.kv_tokens),
            kv_dtype: e.map(|e| e.kv_dtype),
        }
    }

    /// Whether the level changed since the last call (and clears the flag).
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    pub fn level(&self) -> Level {
        self.level
    }
}
