//! The KV cache: keys and values of the positions a session's model attends to, with a budget
//! set per session, f16 or int8 storage, and an eviction policy (see [`KvConfig`]).
//!
//! ## Layout
//! Every layer has a fixed number of slots, allocated a page at a time as they are first
//! written and never reallocated ([`store::Pages`]), so memory stops growing once the cache
//! has filled:
//! - **global-attention layers** hold up to `B` tokens (the budget): the first `n_sink` tokens of
//!   the conversation in slots `0..n_sink` (attention sinks), then a ring of `B − n_sink` slots
//!   for the most recent tokens (slot of absolute position `a`: `n_sink + (a − n_sink) mod
//!   (B − n_sink)`);
//! - **sliding-window layers** (Gemma 3's local layers) hold only their window: a ring of
//!   `min(window, B)` slots (slot `a mod cap`) from the start. What falls out of it was
//!   invisible to the layer anyway, so these layers are exact whatever the budget.
//!
//! A batch of new tokens is encoded once into a staging buffer; attention reads a *view*
//! (held past positions, then the batch) and the batch is then copied into the ring. This way
//! a window layer's ring is exactly its window (no slack for the batch), and the batch never
//! overwrites keys its own earlier queries still need.
//!
//! ## Eviction and RoPE (policy `window-sinks`)
//! When a global ring is full, each new token evicts the oldest non-sink token (one at a time:
//! the model always sees `B` tokens). A batch that evicts drops its whole share before its first
//! query, so past that point the session feeds a prompt one token at a time
//! ([`KvCache::next_batch_max`]): a token's view is then the same however the conversation was
//! split into batches and requests. As in StreamingLLM and llama.cpp's context shift, the
//! model sees *compacted* positions: sinks at `0..n_sink`, the window right after them. Keys
//! are stored rotated (RoPE applied at write time, at their absolute position in a "stored
//! frame"). Because a RoPE score depends only on the difference of the two positions,
//! compacting the window by `E` evicted tokens (shifting every window key by `−E`) is the same as
//! leaving the window where it is and shifting the sinks by `+E`. So:
//! - window keys are never re-rotated when tokens are evicted;
//! - the `n_sink` sink keys are rotated by `+shift` (each layer with its own RoPE: base, NEOX or
//!   normal layout, scaling) when attention reads them, on the fly, without changing what is
//!   stored (so no rounding accumulates): `n_sink` rotations per global layer per step;
//! - queries and new keys use positions of the stored frame (`absolute − rebase`), so they
//!   keep growing. To keep RoPE angles in the range where f32 is as accurate as in normal use,
//!   once positions would pass `rebase_after` (default `max(8192, 2B)`) every held key is
//!   re-rotated once by `−shift` and the frame moves: one pass over the cache every several
//!   thousand tokens (amortized: < 1 key rotation per token and layer), instead of one per
//!   token.
//!
//! Policy `error` never evicts: `PROMPT_OVER_KV_BUDGET` / `KV_FULL` (or `CONTEXT_FULL` for the
//! plain context-length cache of a session without a KV configuration).
//!
//! ## How the model uses it
//! `begin(n)` (checks room, plans evictions, may rebase) → per layer `stage(layer, k, v)`,
//! attention over `view(layer)` with queries from `query_pos0(layer)`, `store(layer)` →
//! `commit()` once every layer is done, or `abort()` on error.

mod config;
mod shape;
mod snapshot;
mod store;

pub use config::{KvBudget, KvConfig, KvDtype, KvOptions, KvPolicy, DEFAULT_SINKS, Q8_BLOCK};
pub use snapshot::{KvCounters, KvSettings};
pub use shape::KvShape;
pub use store::{decode_row, encode_row, paged_bytes, PAGE_ROWS};

use serde::Serialize;

use crate::ops::attention::KvRead;
use crate::ops::Rope;

use store::Pages;

/// Why the cache refused. `code()` is stable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KvError {
    /// The plain context-length cache (no KV configuration) cannot take the tokens.
    ContextFull { held: usize, requested: usize, max: usize },
    /// Policy `error`: a decode step (or batch) would go past the budget.
    Full { held: usize, requested: usize, budget: usize },
    /// Policy `error`: the prompt cannot fit; refused before any work.
    PromptOverBudget { held: usize, prompt: usize, budget: usize },
    /// One forward batch larger than the ring (`budget − sinks`): callers split batches.
    BatchTooLarge { n: usize, max: usize },
    /// Settings that cannot work (zero budget, sinks filling the whole budget, ...).
    BadConfig(String),
    /// A budget in bytes too small for even the minimum number of tokens.
    BudgetTooSmall { budget_bytes: usize, min_bytes: usize },
}

impl KvError {
    pub fn code(&self) -> &'static str {
        match self {
            KvError::ContextFull { .. } => "CONTEXT_FULL",
            KvError::Full { .. } => "KV_FULL",
            KvError::PromptOverBudget { .. } => "PROMPT_OVER_KV_BUDGET",
            KvError::BatchTooLarge { .. } => "KV_BATCH_TOO_LARGE",
            KvError::BadConfig(_) => "BAD_KV_CONFIG",
            KvError::BudgetTooSmall { .. } => "KV_BUDGET_TOO_SMALL",
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
            KvError::Full { held, requested, budget } => write!(
                f,
                "KV cache full: {held} tokens held + {requested} new > the budget of {budget} (policy \"error\"; use policy \"window-sinks\" to evict old tokens)"
            ),
            KvError::PromptOverBudget { held, prompt, budget } => write!(
                f,
                "the prompt needs {prompt} KV slots but {} of the budget of {budget} are free (policy \"error\"); shorten it or raise the KV budget",
                budget.saturating_sub(*held)
            ),
            KvError::BatchTooLarge { n, max } => write!(f, "a batch of {n} tokens is larger than the KV ring ({max}); split it"),
            KvError::BadConfig(s) => write!(f, "bad KV cache settings: {s}"),
            KvError::BudgetTooSmall { budget_bytes, min_bytes } => write!(
                f,
                "a KV budget of {budget_bytes} bytes is too small: this model needs at least {min_bytes} bytes"
            ),
        }
    }
}

impl std::error::Error for KvError {}

/// The model's geometry, as far as the cache is concerned: its sizes ([`KvShape`], from the
/// hyper-parameters) and, per layer, the RoPE its keys were rotated with.
#[derive(Clone, Debug, PartialEq)]
pub struct KvLayout {
    pub shape: KvShape,
    pub head_dim_k: usize,
    /// Per layer (as `shape.windows`).
    pub ropes: Vec<Rope>,
}

impl KvLayout {
    pub fn n_layer(&self) -> usize {
        self.shape.n_layer()
    }
}

/// Occupancy of the layers of one kind.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KvKindStats {
    /// "global" or "local" (sliding window).
    pub kind: &'static str,
    pub layers: usize,
    pub window: Option<usize>,
    pub tokens_held: usize,
    /// Slots per layer.
    pub capacity_tokens: usize,
    pub bytes: usize,
    /// Bytes at full occupancy (= allocated once full).
    pub budget_bytes: usize,
    /// Bytes one more held token costs in these layers (K + V, every layer of the kind).
    pub bytes_per_token: usize,
}

/// What the cache holds now.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KvStats {
    /// Tokens the model attends to (held by the global layers; sinks included).
    pub tokens_held: usize,
    /// Tokens dropped from the global layers so far.
    pub evicted: usize,
    /// Bytes of K/V held.
    pub bytes: usize,
    /// Bytes at full occupancy.
    pub budget_bytes: usize,
    /// Bytes allocated (pages; reaches `budget_bytes` when full, never more).
    pub allocated_bytes: usize,
    pub budget_tokens: usize,
    /// Positions processed since the cache was last cleared.
    pub n_past: usize,
    pub sinks: usize,
    pub dtype: &'static str,
    pub policy: &'static str,
    /// Times the stored positions were re-based (one re-rotation pass each).
    pub rebases: usize,
    pub by_kind: Vec<KvKindStats>,
}

/// A point [`KvCache::restore`] can go back to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvMark {
    n_past: usize,
    evicted: usize,
    /// Rings that dropped a token since: then the mark can no longer be restored.
    dropped: usize,
}

/// The plan of the batch in progress.
#[derive(Clone, Copy, Debug)]
struct Batch {
    n: usize,
    /// Oldest window tokens the batch evicts from the global layers.
    evict: usize,
    /// Sinks held before the batch (the first entries of every global view).
    sinks_view: usize,
    /// Held positions in the global view before the batch's rows.
    q0_global: usize,
    /// Rotation (positions) applied to sinks when read.
    shift: usize,
}

#[derive(Clone, Debug)]
struct LayerStore {
    k: Pages,
    v: Pages,
    cap: usize,
    global: bool,
}

#[derive(Clone, Debug)]
pub struct KvCache {
    layout: KvLayout,
    dtype: KvDtype,
    policy: KvPolicy,
    context_limit: bool,
    /// Budget in tokens (global layers' slots).
    budget: usize,
    n_sink: usize,
    rebase_after: usize,
    layers: Vec<LayerStore>,
    /// Positions processed (absolute position of the next token).
    n_past: usize,
    /// Window tokens evicted from the global layers.
    evicted: usize,
    /// Start of the stored frame: keys are rotated at `absolute − rebase`.
    rebase: usize,
    rebases: usize,
    /// Tokens any ring dropped (global evictions and window layers' overwrites).
    dropped: usize,
    /// Highest position any batch has written (or begun to write) since the last clear, + 1:
    /// a ring of `cap` slots still holds every position below `n_past` iff `written <= cap`.
    written: usize,
    stage_k: Vec<u8>,
    stage_v: Vec<u8>,
    batch: Option<Batch>,
    /// Per layer: (cos, sin) of the sink rotation of the current batch.
    sink_cs: Vec<Vec<f32>>,
}

impl KvCache {
    /// A cache for `layout` with `cfg`'s budget, storage and policy. Nothing is allocated
    /// until positions arrive.
    pub fn new(layout: KvLayout, cfg: &KvConfig) -> Result<KvCache, KvError> {
        if layout.n_layer() == 0 {
            return Err(KvError::BadConfig("the model has no layers".into()));
        }
        cfg.check()?;
        let budget = cfg.budget_tokens(&layout.shape)?;
        let n_sink = if cfg.policy == KvPolicy::WindowSinks { cfg.n_sink } else { 0 };
        if !cfg.context_limit && budget == 0 {
            return Err(KvError::BadConfig("the budget must be at least 1 token".into()));
        }
        if cfg.policy == KvPolicy::WindowSinks && budget <= n_sink {
            return Err(KvError::BadConfig(format!(
                "a budget of {budget} tokens leaves no room for a window after {n_sink} sinks"
            )));
        }
        let default_rebase = 8192usize.max(budget.saturating_mul(2));
        let rebase_after = cfg.rebase_after.unwrap_or(default_rebase).max(budget.saturating_add(1));
        Ok(KvCache::build(layout, cfg, budget, n_sink, rebase_after))
    }

    /// The plain context of `max_tokens` positions (f16, no eviction, `CONTEXT_FULL`).
    pub fn context(layout: KvLayout, max_tokens: usize) -> KvCache {
        let cfg = KvConfig::context(max_tokens);
        KvCache::build(layout, &cfg, max_tokens, 0, usize::MAX)
    }

    fn build(layout: KvLayout, cfg: &KvConfig, budget: usize, n_sink: usize, rebase_after: usize) -> KvCache {
        let (kr, vr) = (cfg.dtype.row_bytes(layout.shape.k_width), cfg.dtype.row_bytes(layout.shape.v_width));
        let layers = (0..layout.n_layer())
            .map(|il| {
                let cap = layout.shape.layer_cap(il, budget);
                LayerStore { k: Pages::new(kr, cap), v: Pages::new(vr, cap), cap, global: layout.shape.windows[il].is_none() }
            })
            .collect();
        let sink_cs = layout.shape.windows.iter().zip(&layout.ropes).map(|(w, r)| vec![0.0f32; if w.is_none() && n_sink > 0 { r.n_rot } else { 0 }]).collect();
        KvCache {
            layout,
            dtype: cfg.dtype,
            policy: cfg.policy,
            context_limit: cfg.context_limit,
            budget,
            n_sink,
            rebase_after,
            layers,
            n_past: 0,
            evicted: 0,
            rebase: 0,
            rebases: 0,
            dropped: 0,
            written: 0,
            stage_k: Vec::new(),
            stage_v: Vec::new(),
            batch: None,
            sink_cs,
        }
    }

    pub fn layout(&self) -> &KvLayout {
        &self.layout
    }

    pub fn dtype(&self) -> KvDtype {
        self.dtype
    }

    pub fn policy(&self) -> KvPolicy {
        self.policy
    }

    pub fn n_sink(&self) -> usize {
        self.n_sink
    }

    /// Budget in tokens.
    pub fn max_tokens(&self) -> usize {
        self.budget
    }

    pub fn n_layer(&self) -> usize {
        self.layout.n_layer()
    }

    /// Values per position and layer: (keys, values).
    pub fn kv_widths(&self) -> (usize, usize) {
        (self.layout.shape.k_width, self.layout.shape.v_width)
    }

    fn has_global(&self) -> bool {
        self.layers.iter().any(|l| l.global)
    }

    fn global_held(&self) -> usize {
        let sinks = self.n_past.min(self.n_sink);
        sinks + (self.n_past - sinks - self.evicted)
    }

    fn local_held(&self, cap: usize) -> usize {
        self.n_past.min(cap)
    }

    /// Tokens the model attends to: held by the global layers (all of them until the budget
    /// is reached), or by the window layers in a model without global ones.
    pub fn len(&self) -> usize {
        if self.has_global() {
            self.global_held()
        } else {
            self.layers.iter().map(|l| self.local_held(l.cap)).max().unwrap_or(0)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.n_past == 0
    }

    /// Positions processed since the last `clear` (held + evicted).
    pub fn n_past(&self) -> usize {
        self.n_past
    }

    /// Tokens evicted from the global layers so far.
    pub fn evicted(&self) -> usize {
        self.evicted
    }

    /// The largest batch one forward pass may bring (longer prompts are split by the session).
    pub fn max_batch(&self) -> usize {
        match self.policy {
            KvPolicy::WindowSinks if self.has_global() => self.budget - self.n_sink,
            _ => usize::MAX,
        }
    }

    /// The largest batch the next forward pass may bring so that its output does not depend on
    /// how a prompt was split: [`max_batch`](Self::max_batch) while this batch evicts nothing,
    /// one token once `window-sinks` evicts. A batch that evicts drops its whole share before
    /// its first query (`begin`), so a token's view would depend on where its batch began; one
    /// token at a time, every token sees the budget's last tokens and the sinks, as a decode
    /// step does — the same rows whether a conversation is prefilled afresh or continued.
    pub fn next_batch_max(&self) -> usize {
        match self.policy {
            KvPolicy::WindowSinks if self.has_global() => {
                let free = self.budget.saturating_sub(self.global_held());
                if free == 0 {
                    1
                } else {
                    free.min(self.max_batch())
                }
            }
            _ => usize::MAX,
        }
    }

    fn over_budget(&self, n: usize) -> bool {
        self.policy == KvPolicy::Error && self.has_global() && self.global_held() + n > self.budget
    }

    /// Whether `n` more tokens can be added (in batches of at most `max_batch`): always with
    /// `window-sinks`; within the budget with `error` (`KV_FULL` / `CONTEXT_FULL` otherwise).
    pub fn check_room(&self, n: usize) -> Result<(), KvError> {
        if self.over_budget(n) {
            return Err(self.full(n));
        }
        Ok(())
    }

    /// [`check_room`](Self::check_room) for a prompt about to be prefilled:
    /// `PROMPT_OVER_KV_BUDGET` (or `CONTEXT_FULL`).
    pub fn check_prompt(&self, n: usize) -> Result<(), KvError> {
        if self.over_budget(n) {
            let held = self.global_held();
            return Err(if self.context_limit {
                KvError::ContextFull { held, requested: n, max: self.budget }
            } else {
                KvError::PromptOverBudget { held, prompt: n, budget: self.budget }
            });
        }
        Ok(())
    }

    fn full(&self, n: usize) -> KvError {
        let held = self.global_held();
        if self.context_limit {
            KvError::ContextFull { held, requested: n, max: self.budget }
        } else {
            KvError::Full { held, requested: n, budget: self.budget }
        }
    }

    // ── one batch ────────────────────────────────────────────────────────────────────────────

    /// Plans a batch of `n` new positions: checks room, decides what it evicts, and (rarely)
    /// re-bases stored positions. Nothing held changes until [`commit`](Self::commit) except
    /// by a re-base, which leaves every attention score as it was.
    pub fn begin(&mut self, n: usize) -> Result<(), KvError> {
        self.batch = None;
        if n == 0 {
            return Err(KvError::BadConfig("empty batch".into()));
        }
        if self.over_budget(n) {
            return Err(self.full(n));
        }
        let sinks_before = self.n_past.min(self.n_sink);
        let window_len = self.n_past - sinks_before - self.evicted;
        let new_sinks = n.min(self.n_sink - sinks_before);
        let m = n - new_sinks;
        let ring = self.budget - self.n_sink;
        let mut evict = 0;
        if self.has_global() && self.policy == KvPolicy::WindowSinks {
            if m > ring {
                return Err(KvError::BatchTooLarge { n, max: ring });
            }
            evict = (window_len + m).saturating_sub(ring);
        }
        // Keep RoPE positions of the stored frame bounded: re-base to where the window will
        // start after this batch (the keys it evicts are rotated too, harmlessly).
        if self.n_past + n - self.rebase > self.rebase_after && self.evicted + evict > self.rebase {
            self.rebase_now(self.evicted + evict - self.rebase);
        }
        let shift = self.evicted + evict - self.rebase;
        if shift != 0 && sinks_before > 0 {
            for (cs, rope) in self.sink_cs.iter_mut().zip(&self.layout.ropes) {
                if !cs.is_empty() {
                    rope.angles(shift, cs);
                }
            }
        }
        self.batch = Some(Batch { n, evict, sinks_view: sinks_before, q0_global: sinks_before + window_len - evict, shift });
        // Counted now, not at commit: an aborted batch may already have overwritten slots.
        self.written = self.written.max(self.n_past + n);
        let (kr, vr) = (self.dtype.row_bytes(self.layout.shape.k_width), self.dtype.row_bytes(self.layout.shape.v_width));
        self.stage_k.resize(n * kr, 0);
        self.stage_v.resize(n * vr, 0);
        Ok(())
    }

    /// The batch in progress, or an empty one (a view of what is held) outside a batch.
    fn plan(&self) -> Batch {
        self.batch.unwrap_or_else(|| {
            let sinks = self.n_past.min(self.n_sink);
            Batch { n: 0, evict: 0, sinks_view: sinks, q0_global: self.global_held(), shift: self.evicted - self.rebase }
        })
    }

    /// RoPE position (in the stored frame) of the batch's first token: new queries and keys
    /// are rotated at `rope_pos0() + i`.
    pub fn rope_pos0(&self) -> usize {
        self.n_past - self.rebase
    }

    /// Encodes the batch's keys and values for `layer` (f32 rows of `k_width` / `v_width`).
    pub fn stage(&mut self, _layer: usize, k: &[f32], v: &[f32]) {
        let Some(b) = self.batch else { return };
        let (kw, vw) = (self.layout.shape.k_width, self.layout.shape.v_width);
        let (kr, vr) = (self.dtype.row_bytes(kw), self.dtype.row_bytes(vw));
        for r in 0..b.n {
            encode_row(self.dtype, &k[r * kw..(r + 1) * kw], &mut self.stage_k[r * kr..(r + 1) * kr]);
            encode_row(self.dtype, &v[r * vw..(r + 1) * vw], &mut self.stage_v[r * vr..(r + 1) * vr]);
        }
    }

    /// Index, in [`view`](Self::view)`(layer)`, of the batch's first query.
    pub fn query_pos0(&self, layer: usize) -> usize {
        let b = self.plan();
        let l = &self.layers[layer];
        if l.global {
            b.q0_global
        } else {
            self.local_held(l.cap)
        }
    }

    /// What attention reads for `layer`: held positions (sinks first, then the window, oldest
    /// first; the tokens this batch evicts excluded), then the batch's rows.
    pub fn view(&self, layer: usize) -> LayerView<'_> {
        let b = self.plan();
        let l = &self.layers[layer];
        let q0 = self.query_pos0(layer);
        let sinks = if l.global { b.sinks_view } else { 0 };
        let rot = (l.global && b.shift != 0 && sinks > 0).then(|| (&self.layout.ropes[layer], &self.sink_cs[layer][..]));
        // Absolute position of the first window entry of the view.
        let first = if l.global { self.n_sink + self.evicted + b.evict } else { self.n_past - q0 };
        LayerView { c: self, l, q0, sinks, first, n: b.n, rot }
    }

    fn slot(&self, l: &LayerStore, abs: usize) -> usize {
        if !l.global {
            abs % l.cap
        } else if abs < self.n_sink {
            abs
        } else {
            self.n_sink + (abs - self.n_sink) % (l.cap - self.n_sink)
        }
    }

    /// Copies the batch's staged rows into `layer`'s slots (after its attention ran).
    pub fn store(&mut self, layer: usize) {
        let Some(b) = self.batch else { return };
        let (kr, vr) = (self.dtype.row_bytes(self.layout.shape.k_width), self.dtype.row_bytes(self.layout.shape.v_width));
        let cap = self.layers[layer].cap;
        if cap == 0 {
            return;
        }
        // A ring keeps only its last `cap` positions (window layers; global ones never get more).
        let from = b.n.saturating_sub(cap);
        for r in from..b.n {
            let slot = self.slot(&self.layers[layer], self.n_past + r);
            let l = &mut self.layers[layer];
            l.k.row_mut(slot).copy_from_slice(&self.stage_k[r * kr..(r + 1) * kr]);
            l.v.row_mut(slot).copy_from_slice(&self.stage_v[r * vr..(r + 1) * vr]);
        }
    }

    /// Makes the batch part of the cache (every layer has stored it).
    pub fn commit(&mut self) {
        if let Some(b) = self.batch.take() {
            self.dropped += self.drops(&b);
            self.n_past += b.n;
            self.evicted += b.evict;
        }
    }

    /// Tokens the batch pushes out of any ring.
    fn drops(&self, b: &Batch) -> usize {
        let local = self
            .layers
            .iter()
            .filter(|l| !l.global)
            .map(|l| (self.local_held(l.cap) + b.n).saturating_sub(l.cap))
            .max()
            .unwrap_or(0);
        b.evict.max(local)
    }

    /// Drops an unfinished batch. Returns `false` when the batch had already overwritten held
    /// positions (a full ring): the cache cannot be restored and is cleared.
    pub fn abort(&mut self) -> bool {
        match self.batch.take() {
            Some(b) if self.drops(&b) > 0 => {
                self.clear();
                false
            }
            _ => true,
        }
    }

    /// The current state, to [`restore`](Self::restore) after a failed multi-batch prefill.
    pub fn mark(&self) -> KvMark {
        KvMark { n_past: self.n_past, evicted: self.evicted, dropped: self.dropped }
    }

    /// Goes back to `mark` if nothing held at that point was evicted or overwritten since
    /// (returns `true`); otherwise clears the cache and returns `false`.
    pub fn restore(&mut self, mark: KvMark) -> bool {
        self.batch = None;
        if self.dropped == mark.dropped && self.evicted == mark.evicted && mark.n_past <= self.n_past {
            self.n_past = mark.n_past;
            true
        } else {
            self.clear();
            false
        }
    }

    /// Forgets every position (storage stays allocated for reuse).
    pub fn clear(&mut self) {
        self.batch = None;
        self.n_past = 0;
        self.evicted = 0;
        self.rebase = 0;
        self.dropped = 0;
        self.written = 0;
    }

    /// Goes back to holding the first `n` positions only, exactly as a fresh prefill of them
    /// would leave the cache (their rows are those it would write: every row depends only on
    /// the positions before it). Returns `false`, changing nothing, when the cache cannot:
    /// - `n` is past what is held;
    /// - tokens were evicted (policy `window-sinks` past its budget): the held window is the
    ///   bounded cache's own continuation of the conversation, and a fresh run would have
    ///   evicted other tokens, so only going forward (`n == n_past`) is served;
    /// - a ring has taken more positions than it has slots since the cache was cleared (a
    ///   sliding-window layer past its window, e.g. 512 positions for Gemma 3's local layers):
    ///   it overwrote positions that a query after `n` would read.
    ///
    /// On `false` the caller clears the cache and prefills from the start.
    pub fn truncate(&mut self, n: usize) -> bool {
        if !self.can_truncate(n) {
            return false;
        }
        self.n_past = n;
        true
    }

    /// Whether [`truncate`](Self::truncate)`(n)` would succeed.
    pub fn can_truncate(&self, n: usize) -> bool {
        n == self.n_past || (n < self.n_past && self.can_roll_back())
    }

    /// Whether the cache can go back to any earlier position: no batch in progress, nothing
    /// evicted, no ring wrapped.
    pub fn can_roll_back(&self) -> bool {
        self.batch.is_none() && self.evicted == 0 && self.layers.iter().all(|l| self.written <= l.cap)
    }

    /// Re-rotates every held non-sink key by `−delta` and moves the stored frame by `delta`, so
    /// that it starts again where the compacted positions do. Sinks keep their rotation (their
    /// read-time shift drops by `delta`).
    fn rebase_now(&mut self, delta: usize) {
        let (kw, kr) = (self.layout.shape.k_width, self.dtype.row_bytes(self.layout.shape.k_width));
        let hd = self.layout.head_dim_k;
        let mut row = vec![0.0f32; kw];
        for il in 0..self.layers.len() {
            let rope = &self.layout.ropes[il];
            let mut cs = vec![0.0f32; rope.n_rot];
            rope.angles(delta, &mut cs);
            cs.iter_mut().skip(1).step_by(2).for_each(|s| *s = -*s);
            let l = &self.layers[il];
            let (lo, hi) = if l.global {
                (self.n_sink.max(self.n_sink + self.evicted), self.n_past)
            } else {
                (self.n_past - self.local_held(l.cap), self.n_past)
            };
            for abs in lo..hi {
                let slot = self.slot(&self.layers[il], abs);
                let bytes = self.layers[il].k.row_mut(slot);
                debug_assert_eq!(bytes.len(), kr);
                decode_row(self.dtype, bytes, &mut row);
                rope.apply(&mut row, hd, &cs);
                encode_row(self.dtype, &row, bytes);
            }
        }
        self.rebase += delta;
        self.rebases += 1;
    }

    // ── accounting ───────────────────────────────────────────────────────────────────────────

    /// Bytes the held positions occupy.
    pub fn bytes_used(&self) -> usize {
        let row = self.layout.shape.row_bytes(self.dtype);
        self.layers.iter().map(|l| if l.global { self.global_held() } else { self.local_held(l.cap) } * row).sum()
    }

    /// Bytes of K/V storage at full occupancy.
    pub fn budget_bytes(&self) -> usize {
        let row = self.layout.shape.row_bytes(self.dtype);
        self.layers.iter().map(|l| l.cap * row).sum()
    }

    /// Bytes allocated for K/V storage (pages written so far; `budget_bytes` at most).
    pub fn bytes_allocated(&self) -> usize {
        self.layers.iter().map(|l| l.k.allocated() + l.v.allocated()).sum()
    }

    /// Bytes allocated once `tokens` positions have been processed (the pages they reach).
    pub fn allocated_at(&self, tokens: usize) -> u64 {
        self.layout.shape.allocated_at(self.dtype, self.budget, tokens)
    }

    /// Bytes of the batch staging buffers (scratch, sized by the largest batch seen).
    pub fn scratch_bytes(&self) -> usize {
        self.stage_k.capacity() + self.stage_v.capacity() + self.sink_cs.iter().map(|c| 4 * c.capacity()).sum::<usize>()
    }

    /// Bytes one more held token costs while no layer is full: K + V in every layer.
    pub fn bytes_per_token(&self) -> usize {
        self.layout.shape.row_bytes(self.dtype) * self.layers.len()
    }

    pub fn stats(&self) -> KvStats {
        let row = self.layout.shape.row_bytes(self.dtype);
        let mut by_kind = Vec::new();
        for global in [true, false] {
            let ls: Vec<(usize, &LayerStore)> = self.layers.iter().enumerate().filter(|(_, l)| l.global == global).collect();
            if ls.is_empty() {
                continue;
            }
            let held: Vec<usize> = ls.iter().map(|(_, l)| if global { self.global_held() } else { self.local_held(l.cap) }).collect();
            by_kind.push(KvKindStats {
                kind: if global { "global" } else { "local" },
                layers: ls.len(),
                window: if global { None } else { self.layout.shape.windows[ls[0].0] },
                tokens_held: held.iter().copied().max().unwrap_or(0),
                capacity_tokens: ls.iter().map(|(_, l)| l.cap).max().unwrap_or(0),
                bytes: held.iter().sum::<usize>() * row,
                budget_bytes: ls.iter().map(|(_, l)| l.cap * row).sum(),
                bytes_per_token: ls.len() * row,
            });
        }
        KvStats {
            tokens_held: self.len(),
            evicted: self.evicted,
            bytes: self.bytes_used(),
            budget_bytes: self.budget_bytes(),
            allocated_bytes: self.bytes_allocated(),
            budget_tokens: self.budget,
            n_past: self.n_past,
            sinks: self.n_sink,
            dtype: self.dtype.name(),
            policy: self.policy.name(),
            rebases: self.rebases,
            by_kind,
        }
    }
}

/// One layer's view for attention: held positions in attention order, then the batch.
pub struct LayerView<'a> {
    c: &'a KvCache,
    l: &'a LayerStore,
    /// Held positions in the view (the batch's rows follow).
    q0: usize,
    /// Leading sink entries (global layers).
    sinks: usize,
    /// Absolute position of view entry `sinks`.
    first: usize,
    n: usize,
    /// Rotation applied to sink keys as they are read: the layer's RoPE and (cos, sin).
    rot: Option<(&'a Rope, &'a [f32])>,
}

impl LayerView<'_> {
    #[inline]
    fn row<'b>(&'b self, idx: usize, pages: &'b Pages, stage: &'b [u8], row_bytes: usize) -> &'b [u8] {
        if idx < self.sinks {
            pages.row(idx)
        } else if idx < self.q0 {
            pages.row(self.c.slot(self.l, self.first + (idx - self.sinks)))
        } else {
            let r = idx - self.q0;
            &stage[r * row_bytes..(r + 1) * row_bytes]
        }
    }
}

impl KvRead for LayerView<'_> {
    fn len(&self) -> usize {
        self.q0 + self.n
    }

    fn read_k(&self, start: usize, n: usize, dst: &mut [f32]) {
        let kw = self.c.layout.shape.k_width;
        let kr = self.c.dtype.row_bytes(kw);
        for (i, out) in dst[..n * kw].chunks_exact_mut(kw).enumerate() {
            let idx = start + i;
            decode_row(self.c.dtype, self.row(idx, &self.l.k, &self.c.stage_k, kr), out);
            if idx < self.sinks {
                if let Some((rope, cs)) = self.rot {
                    rope.apply(out, self.c.layout.head_dim_k, cs);
                }
            }
        }
    }

    fn read_v(&self, start: usize, n: usize, dst: &mut [f32]) {
        let vw = self.c.layout.shape.v_width;
        let vr = self.c.dtype.row_bytes(vw);
        for (i, out) in dst[..n * vw].chunks_exact_mut(vw).enumerate() {
            decode_row(self.c.dtype, self.row(start + i, &self.l.v, &self.c.stage_v, vr), out);
        }
    }

    fn k_f16(&self, idx: usize) -> Option<&[u8]> {
        // A rotated sink key is not its stored row (`read_k` rotates it as it reads).
        let rotated = idx < self.sinks && self.rot.is_some();
        (matches!(self.c.dtype, KvDtype::F16) && !rotated).then(|| self.row(idx, &self.l.k, &self.c.stage_k, self.c.dtype.row_bytes(self.c.layout.shape.k_width)))
    }

    fn v_f16(&self, idx: usize) -> Option<&[u8]> {
        matches!(self.c.dtype, KvDtype::F16).then(|| self.row(idx, &self.l.v, &self.c.stage_v, self.c.dtype.row_bytes(self.c.layout.shape.v_width)))
    }
}

#[cfg(test)]
mod tests;
