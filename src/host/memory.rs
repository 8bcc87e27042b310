//! The host's side of the memory ledger (`crate::memory`): estimates from a header before a
//! load (skimmed from a stream, so nothing big is allocated to decide), admission, snapshots of
//! what the loaded engine holds, and pressure-level changes for the worker to report.

use serde::{Deserialize, Serialize};

use crate::gguf::GgufHeader;
use crate::engine::SessionOptions;
use crate::kv::KvOptions;
use crate::memory::{
    probe, Estimate, EstimateOptions, HeaderSkimmer, HeaderStats, KvElem, Ledger, Measured,
    MemoryOptions, MemorySnapshot, ModelGeometry, Refusal, SkimStatus,
};

use super::{Host, HostError, PREFILL_CHUNK};

/// The ledger and the header skimmer of an estimate in progress.
#[derive(Debug)]
pub struct MemoryState {
    pub ledger: Ledger,
    skim: Option<HeaderSkimmer>,
    /// The last estimate that fit, for the load that follows it (`Host::load_begin_admitted`).
    admitted: Option<Admission>,
    /// The executor's thread count (the estimate counts its workers' stacks).
    pub threads: usize,
}

impl Default for MemoryState {
    fn default() -> Self {
        MemoryState { ledger: Ledger::new(), skim: None, admitted: None, threads: 1 }
    }
}

/// A header admitted by its estimate. The worker skims a file's header before the download
/// (so a refusal costs nothing), then loads the same bytes: the load takes this admission over
/// instead of estimating and admitting the header a second time.
#[derive(Clone, Debug)]
pub(super) struct Admission {
    pub estimate: Estimate,
    /// The KV options it was estimated with.
    kv: Option<KvOptions>,
    /// What identifies the header it was made for (checked against the loader's).
    data_offset: u64,
    n_tensors: usize,
    file_len: Option<u64>,
}

impl Admission {
    /// Whether it was made for `header` of a `file_len`-byte file: the same data offset, tensor
    /// count and tensor bytes (a load of other bytes is admitted afresh).
    fn is_for(&self, header: &GgufHeader, file_len: u64) -> bool {
        self.data_offset == header.data_offset
            && self.n_tensors == header.tensors.len()
            && self.estimate.weights == header.tensor_data_bytes()
            && self.file_len.is_none_or(|f| f == file_len)
    }
}

/// What an estimate is for; unset fields take the engine's current settings (its KV options,
/// the host's prefill chunk, sampling on).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EstimateRequest {
    /// KV options as `set_kv_options` takes them (`tokens` or `bytes`, `dtype`, ...).
    #[serde(default)]
    pub kv: Option<KvOptions>,
    /// A plain context of this many positions instead (what a session without KV options uses).
    #[serde(default)]
    pub ctx: Option<usize>,
    #[serde(default)]
    pub batch: Option<usize>,
    #[serde(default)]
    pub sampling: Option<bool>,
    /// Bytes per pushed chunk (the JS loader's chunk size).
    #[serde(default)]
    pub load_chunk: Option<u64>,
    /// Threads to estimate for (default: the host's).
    #[serde(default)]
    pub threads: Option<usize>,
    /// Budget to check against (default: the engine's).
    #[serde(default)]
    pub budget_bytes: Option<u64>,
    /// The estimate of a load that will set exactly `kv` (absent: the plain context), not the
    /// engine's current KV options: a load admits its model before it replaces the loaded one,
    /// whose options are still set then.
    #[serde(default)]
    pub as_loaded: bool,
}

/// An estimate and the admission decision.
#[derive(Clone, Debug, Serialize)]
pub struct EstimateReport {
    pub estimate: Estimate,
    pub budget_bytes: Option<u64>,
    /// Whether the estimated peak fits the budget (true without a budget).
    pub fits: bool,
    pub header_bytes: u64,
    pub architecture: Option<String>,
    pub name: Option<String>,
    pub n_vocab: usize,
    pub n_layer: usize,
    pub context_length: usize,
    pub header_stats: HeaderStats,
}

/// Progress of a skimmed header.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SkimProgress {
    pub complete: bool,
    pub bytes_received: u64,
    /// Bytes of the header once complete.
    pub header_bytes: Option<u64>,
}

/// The estimate options for a model of geometry `g` under `kv` (the session's KV options) and
/// the request's overrides; a KV budget is in tokens as the cache would size it
/// (`KvConfig::budget_tokens`: `KV_BUDGET_TOO_SMALL` for too few bytes).
pub fn estimate_options(g: &ModelGeometry, kv: Option<&KvOptions>, threads: usize, req: &EstimateRequest) -> Result<EstimateOptions, HostError> {
    let default_tokens = SessionOptions::default_context(&g.hparams);
    let kv = req.kv.as_ref().or(if req.ctx.is_some() || req.as_loaded { None } else { kv });
    let kv_error = |e: crate::kv::KvError| HostError::new(e.code(), e.to_string());
    let (kv_tokens, kv_dtype) = match kv {
        None => (req.ctx.unwrap_or(default_tokens), KvElem::F16),
        Some(o) => {
            let cfg = o.to_config(default_tokens).map_err(kv_error)?;
            (cfg.budget_tokens(&g.kv).map_err(kv_error)?, cfg.dtype)
        }
    };
    let d = EstimateOptions::default();
    Ok(EstimateOptions {
        kv_tokens,
        kv_dtype,
        batch: req.batch.unwrap_or(PREFILL_CHUNK),
        sampling: req.sampling.unwrap_or(d.sampling),
        load_chunk: req.load_chunk.unwrap_or(d.load_chunk),
        threads: req.threads.unwrap_or(threads),
    })
}

fn model_error(e: crate::model::ModelError) -> HostError {
    HostError::new(e.code(), e.to_string())
}

/// Which generation step the guard looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Step {
    Prefill,
    Decode,
}

/// The `OVER_MEMORY_BUDGET` error of a refusal.
pub fn refusal_error(r: &Refusal) -> HostError {
    HostError::new("OVER_MEMORY_BUDGET", r.message())
}

/// Admits a freshly parsed header (the loader's, at `HeaderReady`) of a `file_len`-byte file:
/// the engine must support it (`check_supported`), and its estimate must fit the budget
/// (`budget`, else the ledger's) — unless `admitted`, the estimate the worker made of the same
/// header before the download, already decided both. Returns the load's estimate (kept for the
/// snapshots); `OVER_MEMORY_BUDGET` when it does not fit. A header whose hyper-parameters
/// cannot be read (the load will fail on them later, with their own error) is checked on its
/// weights alone.
pub(super) fn admit_header(
    mem: &mut MemoryState,
    kv: Option<&KvOptions>,
    header: &GgufHeader,
    file_len: u64,
    budget: Option<u64>,
    admitted: Option<Admission>,
) -> Result<Option<Estimate>, HostError> {
    if let Some(a) = admitted.filter(|a| a.is_for(header, file_len)) {
        mem.ledger.last_estimate = Some(a.estimate.clone());
        return Ok(Some(a.estimate));
    }
    super::check_supported(header)?;
    let stats = HeaderStats::of(header, header.data_offset);
    match ModelGeometry::from_header(header) {
        Ok(g) => {
            let e = Estimate::new(&g, &stats, &estimate_options(&g, kv, mem.threads, &EstimateRequest::default())?);
            mem.ledger.admit(e, budget).map(Some).map_err(|r| refusal_error(&r))
        }
        Err(_) => match budget.or(mem.ledger.options.budget_bytes) {
            Some(b) if header.tensor_data_bytes() > b => Err(HostError::new(
                "OVER_MEMORY_BUDGET",
                format!("the model's weights need {} bytes, more than the memory budget of {b} bytes", header.tensor_data_bytes()),
            )),
            _ => Ok(None),
        },
    }
}

impl Host {
    fn estimate_for(&self, header: &GgufHeader, stats: &HeaderStats, req: &EstimateRequest) -> Result<(Estimate, ModelGeometry), HostError> {
        let g = ModelGeometry::from_header(header).map_err(model_error)?;
        if let Some(kv) = &req.kv {
            kv.check().map_err(|e| HostError::new(e.code(), e.to_string()))?;
        }
        let o = estimate_options(&g, self.kv_options.as_ref(), self.memory.threads, req)?;
        o.check()?;
        Ok((Estimate::new(&g, stats, &o), g))
    }

    /// Records the loaded model's estimate (the one its header was admitted with) and the load's
    /// peak (call at the end of a load).
    pub(super) fn memory_loaded(&mut self, e: Option<Estimate>) {
        let m = &mut self.memory.ledger;
        m.estimate = e;
        m.load_peak_measured = probe::wasm_memory().or_else(probe::heap_peak);
    }

    /// Forgets the last estimate's admission (the settings it was made under changed).
    pub(super) fn forget_admission(&mut self) {
        self.memory.admitted = None;
    }

    /// [`Host::forget_admission`] unless the admission was estimated with the KV options `kv`.
    pub(super) fn forget_admission_unless_for(&mut self, kv: &Option<KvOptions>) {
        if self.memory.admitted.as_ref().is_some_and(|a| &a.kv != kv) {
            self.forget_admission();
        }
    }

    /// Starts a new load's measurements; returns the admission of the last estimate, if any (an
    /// estimate is for the one load that follows it).
    pub(super) fn memory_load_begin(&mut self) -> Option<Admission> {
        self.memory.ledger.estimate = None;
        self.memory.ledger.load_peak_measured = None;
        probe::reset_heap_peak();
        self.memory.admitted.take()
    }

    // ── estimate before load ─────────────────────────────────────────────────────────────────

    /// Starts reading a header for an estimate (nothing is loaded or dropped).
    pub fn estimate_begin(&mut self) {
        self.memory.admitted = None;
        self.memory.skim = Some(HeaderSkimmer::new());
    }

    /// Feeds the next bytes of the file to the estimate.
    pub fn estimate_push(&mut self, chunk: &[u8]) -> Result<SkimProgress, HostError> {
        let s = self.memory.skim.as_mut().ok_or_else(|| HostError::new("NO_ESTIMATE_IN_PROGRESS", "estimate_push called before estimate_begin"))?;
        match s.push(chunk) {
            Ok(SkimStatus::NeedMore { bytes_received }) => Ok(SkimProgress { complete: false, bytes_received, header_bytes: None }),
            Ok(SkimStatus::Complete { header_len }) => Ok(SkimProgress { complete: true, bytes_received: s.bytes_received(), header_bytes: Some(header_len) }),
            Err(e) => {
                self.memory.skim = None;
                Err(e.into())
            }
        }
    }

    /// Ends the estimate: the figures per term and whether they fit the budget. `file_len`:
    /// the file's length when known (tensors must lie inside it).
    pub fn estimate_finish(&mut self, file_len: Option<u64>, req: &EstimateRequest) -> Result<EstimateReport, HostError> {
        let s = self.memory.skim.take().ok_or_else(|| HostError::new("NO_ESTIMATE_IN_PROGRESS", "estimate_finish called before estimate_begin"))?;
        let summary = s.finish(file_len)?;
        super::check_supported(&summary.header)?;
        let (e, g) = self.estimate_for(&summary.header, &summary.stats, req)?;
        let budget = req.budget_bytes.or(self.memory.ledger.options.budget_bytes);
        let fits = self.memory.ledger.admit(e.clone(), budget).is_ok();
        let h = &summary.header;
        // A plain estimate (no what-if overrides) is the one the load that follows would make
        // with the options set now; a load's own (`as_loaded`) is for the KV options it names.
        let for_load = req.ctx.is_none() && req.batch.is_none() && req.sampling.is_none() && req.threads.is_none() && (req.as_loaded || req.kv.is_none());
        if fits && for_load {
            let kv = if req.as_loaded { req.kv.clone() } else { self.kv_options.clone() };
            self.memory.admitted = Some(Admission { estimate: e.clone(), kv, data_offset: h.data_offset, n_tensors: h.tensors.len(), file_len });
        }
        Ok(EstimateReport {
            estimate: e,
            budget_bytes: budget,
            fits,
            header_bytes: summary.stats.header_len,
            architecture: h.architecture().map(str::to_string),
            name: h.get_str("general.name").map(str::to_string),
            n_vocab: g.n_vocab,
            n_layer: g.hparams.n_layer,
            context_length: g.hparams.n_ctx_train,
            header_stats: summary.stats,
        })
    }

    /// The estimate of a header parsed in full (native tools: `edgellm inspect --estimate`).
    pub fn estimate_header(&self, header: &GgufHeader, header_len: u64, req: &EstimateRequest) -> Result<Estimate, HostError> {
        self.estimate_for(header, &HeaderStats::of(header, header_len), req).map(|(e, _)| e)
    }

    /// Refuses, before it runs, a step that would grow memory past the budget: `n` new
    /// positions make the KV cache allocate its next pages, and the first steps grow the
    /// activation buffers up to their estimate. Conservative: it assumes every new byte grows
    /// memory (free space inside it is not counted). `OVER_MEMORY_BUDGET`; the generation can
    /// be ended (or continued with a larger budget).
    pub(super) fn memory_guard(&self, step: Step) -> Result<(), HostError> {
        let (Some(budget), Some(now)) = (self.memory.ledger.options.budget_bytes, probe::process_bytes()) else { return Ok(()) };
        let (Some(l), Some(g)) = (self.loaded.as_ref(), self.generating.as_ref()) else { return Ok(()) };
        let d = &g.current.driver;
        let n = match step {
            Step::Prefill => d.prompt_remaining().min(PREFILL_CHUNK),
            Step::Decode if d.finish_reason().is_some() || d.ids().len() >= d.max_tokens() => 0,
            Step::Decode => 1,
        };
        if n == 0 {
            return Ok(());
        }
        let kv = l.session.kv();
        let kv_growth = kv.allocated_at(kv.n_past() + n).saturating_sub(kv.bytes_allocated() as u64);
        // What the activation buffers hold now, as the ledger measures them.
        let act_now = self.measured().map_or(0, |m| m.activations);
        let act_growth = self.memory.ledger.estimate.as_ref().map_or(0, |e| e.activations.saturating_sub(act_now));
        let growth = kv_growth + act_growth;
        if growth > 0 && now + growth > budget {
            let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
            return Err(HostError::new(
                "OVER_MEMORY_BUDGET",
                format!(
                    "the next step would grow memory by up to {:.1} MiB (KV {:.1} + activations {:.1}) from {:.1} MiB, past the memory budget of {:.1} MiB",
                    mib(growth),
                    mib(kv_growth),
                    mib(act_growth),
                    mib(now),
                    mib(budget)
                ),
            ));
        }
        Ok(())
    }

    // ── budget, snapshots, pressure ──────────────────────────────────────────────────────────

    /// Sets the budget and thresholds (`BAD_MEMORY_OPTIONS` when they make no sense).
    pub fn set_memory_options(&mut self, o: MemoryOptions) -> Result<(), HostError> {
        o.check().map_err(|m| HostError::new("BAD_MEMORY_OPTIONS", m))?;
        self.memory.ledger.options = o;
        // An admission was decided under the old budget.
        self.memory.admitted = None;
        Ok(())
    }

    pub fn memory_options(&self) -> &MemoryOptions {
        &self.memory.ledger.options
    }

    /// The estimate of the last load (or refused load), if any.
    pub fn last_estimate(&self) -> Option<&Estimate> {
        self.memory.ledger.last_estimate.as_ref()
    }

    fn measured(&self) -> Option<Measured> {
        if let Some(l) = &self.loading {
            return Some(Measured { weights: l.loader.bytes_allocated(), kv: 0, activations: 0 });
        }
        let l = self.loaded.as_ref()?;
        let kv = l.session.kv().bytes_allocated() as u64;
        let session = l.session.bytes() as u64;
        Some(Measured {
            weights: l.model.weight_bytes() as u64,
            kv,
            activations: session.saturating_sub(kv) + l.session.sampler().bytes() as u64,
        })
    }

    fn phase(&self) -> &'static str {
        if self.loading.is_some() {
            "loading"
        } else if self.generating.is_some() {
            "generating"
        } else if self.loaded.is_some() {
            "ready"
        } else {
            "empty"
        }
    }

    /// The ledger now: every term estimated and measured, wasm memory, the level.
    pub fn memory_snapshot(&mut self) -> MemorySnapshot {
        let m = self.measured();
        let phase = self.phase();
        self.memory.ledger.snapshot(m, phase)
    }

    /// Samples memory; returns the snapshot when the pressure level changed since the last
    /// poll (the worker calls this after every load chunk, prefill chunk and decode step).
    pub fn memory_poll(&mut self) -> Option<MemorySnapshot> {
        let s = self.memory_snapshot();
        self.memory.ledger.take_changed().then_some(s)
    }
}
