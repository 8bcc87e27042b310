//! The estimate: each term of `M_peak = M_weights + M_KV + M_act + M_runtime`, and the load
//! peak, from a GGUF header and the session options, before anything is allocated.
//!
//! - **weights**: the tensor bytes as stored (weights stay in their block format).
//! - **kv**: the cache's own sizing (`kv::KvShape::bytes_at`) at the KV budget: every layer
//!   stores K and V rows of its width for `min(window, tokens)` positions (Gemma's local layers
//!   hold only their window).
//! - **activations**: [`ScratchPlan`] replays the forward pass's buffer sizing (the same
//!   `resize` calls in the same order, with `Vec`'s growth rule) for a prompt that fills the KV
//!   budget in batches of `batch` tokens, then one decode step; plus the session's two
//!   vocabulary-sized logit rows, the sampler's candidate list and the KV staging rows.
//! - **runtime**: the module (static data + stack, measured), the parsed header the model keeps
//!   (its metadata: the vocabulary's strings are most of it), the tokenizer's tables, the
//!   model's small per-layer vectors, and a fragmentation margin.
//! - **load peak**: what wasm memory reaches by the end of a load (it never shrinks): the steady
//!   runtime + weights, one pushed chunk, and the header buffer's doubling slack.

use serde::{Deserialize, Serialize};

use std::collections::HashMap;

use crate::gguf::{GgufHeader, TensorInfo};
use crate::kv::KvShape;
use crate::limits::mul;
use crate::model::validate::{hparams_of, tensor_index};
use crate::model::scratch::{self, Buffer, Widths};
use crate::model::{HParams, ModelError};
use crate::ops::attention::{KV_CHUNK, SCORE_BUDGET};

use super::skim::HeaderStats;
use super::wasm32;

/// wasm memory right after the module is instantiated (static data + 1 MiB stack), as measured
/// for this crate's release builds in Chromium, Firefox and Node (25 pages; it was 20 before the
/// module grew, and the estimate was short by the difference: `tests/js/kv.test.js` now checks
/// it against the running module's `module_bytes`). The ledger reports the measured figure of
/// the running module beside it.
pub const MODULE_BYTES: u64 = 25 * 65536;

/// Fragmentation margin of the runtime term: free space the allocator keeps between live
/// blocks (pieces of the header buffer's hole and of freed chunk copies that later blocks did
/// not fill). Measured on Gemma 3 270M: 0.1 to 0.5 MiB after load. The margin is 512 KiB plus 0.1 % of
/// the weights (more tensors, more churn).
pub const FRAGMENTATION_MIN: u64 = 512 << 10;
pub const FRAGMENTATION_FRACTION: f64 = 0.001;

/// Elements of the KV cache: the `kv` module's own type (f16, or int8 in blocks of 32 with an
/// f16 scale each), so the ledger's row sizes are the cache's by construction.
pub use crate::kv::KvDtype as KvElem;

/// What sizes the KV cache and the activations: the session's settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EstimateOptions {
    /// KV budget in tokens (positions the global layers hold).
    pub kv_tokens: usize,
    pub kv_dtype: KvElem,
    /// Prompt tokens per forward pass (the host's prefill chunk).
    pub batch: usize,
    /// Count the sampler's candidate list (`n_vocab` entries; greedy decoding does not need it).
    pub sampling: bool,
    /// Bytes of one chunk pushed to the loader (each is copied into wasm memory once).
    pub load_chunk: u64,
    /// Threads the forward pass runs on: each beyond the first has its own stack.
    #[serde(default = "one_thread")]
    pub threads: usize,
}

fn one_thread() -> usize {
    1
}

impl Default for EstimateOptions {
    fn default() -> Self {
        EstimateOptions { kv_tokens: 4096, kv_dtype: KvElem::F16, batch: 64, sampling: true, load_chunk: 4 << 20, threads: 1 }
    }
}

impl EstimateOptions {
    /// The caller-supplied sizes within the engine's limits (`crate::limits`).
    pub fn check(&self) -> Result<(), crate::limits::LimitError> {
        crate::limits::check_context("kv tokens", self.kv_tokens)?;
        crate::limits::check_batch("batch", self.batch)?;
        crate::limits::check_range("load_chunk", self.load_chunk, 1, 1 << 32)?;
        crate::limits::check_range("threads", self.threads as u64, 1, crate::limits::MAX_THREADS as u64)
    }
}

/// The model's shape as far as memory is concerned.
#[derive(Clone, Debug)]
pub struct ModelGeometry {
    pub hparams: HParams,
    pub n_vocab: usize,
    /// The KV cache's sizes (row widths, each layer's window), as the cache computes them.
    pub kv: KvShape,
    /// Per layer: activation-row bytes of wq, wk, wv, wo, gate, up, down (the quantized copy of
    /// an input row each matmul makes).
    pub act_rows: Vec<[usize; 7]>,
    /// Activation-row bytes of the output projection.
    pub out_act_row: usize,
    /// Tensor bytes as stored.
    pub weight_bytes: u64,
    /// The screened output head's scratch (`ops::screen::scratch_bytes`; 0 without one).
    pub head_screen_bytes: u64,
}

fn act_row(index: &HashMap<&str, &TensorInfo>, name: &str, n_in: usize) -> usize {
    index
        .get(name)
        .map(|t| {
            let act = crate::quant::vec_dot_type(t.ggml_type);
            crate::quant::row_bytes(act, n_in).unwrap_or(4 * n_in)
        })
        .unwrap_or(4 * n_in)
}

impl ModelGeometry {
    /// From a header (a full one or the skimmer's light one). The hyper-parameters are checked
    /// against the tensor index first (`model::validate`), so nothing here is sized by a value
    /// the tensors do not back.
    pub fn from_header(h: &GgufHeader) -> Result<ModelGeometry, ModelError> {
        let hp = hparams_of(h)?;
        let n_vocab = hp.n_vocab;
        let index = tensor_index(h);
        let d = hp.n_embd;
        let aw = hp.n_head * hp.head_dim_v;
        let kv = hp.kv_shape();
        let act_rows = (0..hp.n_layer)
            .map(|il| {
                let n = |s: &str| format!("blk.{il}.{s}.weight");
                [
                    act_row(&index, &n("attn_q"), d),
                    act_row(&index, &n("attn_k"), d),
                    act_row(&index, &n("attn_v"), d),
                    act_row(&index, &n("attn_output"), aw),
                    act_row(&index, &n("ffn_gate"), d),
                    act_row(&index, &n("ffn_up"), d),
                    act_row(&index, &n("ffn_down"), hp.n_ff),
                ]
            })
            .collect();
        let out_name = if index.contains_key("output.weight") { "output.weight" } else { "token_embd.weight" };
        let out_act_row = act_row(&index, out_name, d);
        let weight_bytes = h.tensor_data_bytes();
        let screened = index.get(out_name).is_some_and(|t| crate::model::head_screen::applies(t.ggml_type, &hp));
        let head_screen_bytes = if screened { crate::ops::screen::scratch_bytes(d, n_vocab) as u64 } else { 0 };
        Ok(ModelGeometry { hparams: hp, n_vocab, kv, act_rows, out_act_row, weight_bytes, head_screen_bytes })
    }
}

/// `Σ terms`, saturating (a saturated figure is refused by any budget, never wrapped).
fn sum(terms: &[u64]) -> u64 {
    terms.iter().fold(0u64, |t, &x| t.saturating_add(x))
}

/// A `Vec`'s capacity as `resize`/`extend` grow it (the standard library's amortized rule:
/// `max(2 × cap, needed)`, at least 4 elements, 8 for bytes). In u64 and saturating: a figure
/// from hostile sizes is refused by the budget, never wrapped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Cap {
    cap: u64,
    elem: u64,
}

/// The forward pass sizes its buffers through `model::scratch`; here that sizes the model.
impl Buffer for Cap {
    fn size(&mut self, len: u64) {
        self.need(len);
    }
}

impl Cap {
    fn of(elem: usize) -> Cap {
        Cap { cap: 0, elem: elem as u64 }
    }

    /// Grows to hold `len` elements; whether it grew.
    fn need(&mut self, len: u64) -> bool {
        if len <= self.cap {
            return false;
        }
        let min = if self.elem == 1 { 8 } else if self.elem <= 1024 { 4 } else { 1 };
        self.cap = self.cap.saturating_mul(2).max(len).max(min);
        true
    }

    /// `need(step × p)` for `p = from..=to` in order, in O(log) steps: only the needs that
    /// outgrow the capacity change it, and the first such `p` is `cap / step + 1`.
    fn need_linear(&mut self, step: u64, from: u64, to: u64) {
        if step == 0 {
            return;
        }
        loop {
            let p = (self.cap / step).saturating_add(1).max(from);
            // (A saturated capacity cannot grow: stop there too.)
            if p > to || !self.need(step.saturating_mul(p)) {
                break;
            }
        }
    }

    fn bytes(&self) -> u64 {
        self.cap.saturating_mul(self.elem)
    }
}

/// The buffers of a forward pass whose sizes depend only on the batch (everything but the
/// attention scores), as `ForwardScratch`, the session and the KV cache size them.
#[derive(Clone, Debug, PartialEq)]
struct PassBuffers {
    x: Cap,
    xn: Cap,
    q: Cap,
    k: Cap,
    v: Cap,
    att: Cap,
    tmp: Cap,
    gate: Cap,
    up: Cap,
    cs: Cap,
    sel: Cap,
    act: Cap,
    aq: Cap,
    ak: Cap,
    av: Cap,
    out: Cap,
    logits: Cap,
    stage_k: Cap,
    stage_v: Cap,
}

impl PassBuffers {
    fn new() -> PassBuffers {
        let f = Cap::of(4);
        PassBuffers {
            x: f,
            xn: f,
            q: f,
            k: f,
            v: f,
            att: f,
            tmp: f,
            gate: f,
            up: f,
            cs: f,
            sel: Cap::of(std::mem::size_of::<usize>()),
            act: Cap::of(1),
            aq: f,
            ak: f,
            av: f,
            out: f,
            logits: f,
            stage_k: Cap::of(1),
            stage_v: Cap::of(1),
        }
    }

    /// One forward pass of `n` tokens: the forward pass's own sizing calls
    /// (`model::scratch`), in its order, plus what its operators, the session and the KV cache
    /// size (attention scores aside); whether any buffer grew.
    fn pass(&mut self, g: &ModelGeometry, o: &EstimateOptions, n: usize) -> bool {
        let hp = &g.hparams;
        let w = Widths::of(hp);
        let (kw, vw) = hp.kv_widths();
        let last = hp.n_layer.saturating_sub(1);
        let before = self.bytes();
        self.sel.need(1);
        self.stage_k.need(mul(n, o.kv_dtype.row_bytes(kw)));
        self.stage_v.need(mul(n, o.kv_dtype.row_bytes(vw)));
        scratch::embed(&w, n, &mut self.x, &mut self.cs);
        let all_rows = n == 1;
        let mut n_cur = n;
        for il in 0..hp.n_layer {
            let ab = g.act_rows[il];
            scratch::attention_in(&w, n_cur, &mut self.xn, &mut self.q, &mut self.k, &mut self.v);
            for a in &ab[..3] {
                self.act.need(mul(n_cur, *a));
            }
            scratch::attention_out(&w, n_cur, &mut self.att);
            // attention(): the rounded queries, one chunk of keys and values (its scores are
            // `scores_cap`'s).
            self.aq.need((n_cur as u64).saturating_mul(w.q));
            self.ak.need(mul(KV_CHUNK, kw));
            self.av.need(mul(KV_CHUNK, vw));
            if il == last && !all_rows {
                // gather_rows(att), gather_rows(x) of the one row that gets logits: each swaps
                // its buffer with `tmp`.
                self.tmp.need(w.att);
                std::mem::swap(&mut self.att, &mut self.tmp);
                self.tmp.need(w.d);
                std::mem::swap(&mut self.x, &mut self.tmp);
                n_cur = 1;
            }
            scratch::projection(&w, n_cur, &mut self.tmp);
            self.act.need(mul(n_cur, ab[3]));
            scratch::ffn_in(&w, n_cur, &mut self.xn, &mut self.gate, &mut self.up);
            for a in &ab[4..] {
                self.act.need(mul(n_cur, *a));
            }
        }
        scratch::head(&w, n_cur, g.n_vocab, &mut self.xn, &mut self.out);
        self.act.need(mul(n_cur, g.out_act_row));
        // The session swaps its output row with the current logits after each pass.
        std::mem::swap(&mut self.out, &mut self.logits);
        // A pass only grows or permutes buffers: it grew iff the total did.
        self.bytes() > before
    }

    /// Bytes of every buffer's capacity.
    fn bytes(&self) -> u64 {
        let b = self;
        let all = [b.x, b.xn, b.q, b.k, b.v, b.att, b.tmp, b.gate, b.up, b.cs, b.sel, b.act, b.aq, b.ak, b.av, b.out, b.logits, b.stage_k, b.stage_v];
        sum(&all.iter().map(Cap::bytes).collect::<Vec<_>>())
    }

    /// `count` passes of `n` tokens. Once six passes in a row grow nothing, the rest cannot
    /// either: a pass only permutes buffers (`att`/`tmp`/`x` in a 3-cycle, `out`/`logits` in a
    /// 2-cycle), so six quiet passes have shown every buffer in every role, and any multiple of
    /// six passes more is the identity. The cost is independent of `count`.
    fn passes(&mut self, g: &ModelGeometry, o: &EstimateOptions, n: usize, count: usize) {
        const PERIOD: usize = 6;
        let (mut done, mut quiet) = (0, 0);
        while done < count {
            if quiet >= PERIOD {
                done += (count - done) / PERIOD * PERIOD;
                quiet = 0;
                continue;
            }
            quiet = if self.pass(g, o, n) { 0 } else { quiet + 1 };
            done += 1;
        }
    }
}

/// The attention-score buffer over the run: `attention()` holds the scores of one tile of
/// queries against the keys they see. Layers of one window ask for the same sizes in a pass,
/// so each distinct window (in layer order) is replayed once per pass; a window layer whose
/// span stopped moving asks for what it asked before; and with one query per tile the sizes
/// grow by `n_head` per position, which [`Cap::need_linear`] jumps over. The cost depends on
/// neither the context nor the layer count.
fn scores_cap(g: &ModelGeometry, b: usize, batch: usize, prompt: usize) -> Cap {
    let nh = g.hparams.n_head;
    let mut kinds: Vec<Option<usize>> = Vec::new();
    for w in &g.kv.windows {
        if !kinds.contains(w) {
            kinds.push(*w);
        }
    }
    let mut s = Cap::of(4);
    let one_per_tile = |n_past: usize, n: usize| SCORE_BUDGET as u64 / mul(nh, n_past + n).max(1) <= 1;
    let mut n_past = 0usize;
    while n_past < prompt {
        let n = batch.min(prompt - n_past);
        let settled = |w: &Option<usize>| w.is_some_and(|w| n_past >= w.min(b).saturating_add(batch) && n == batch);
        // From here on every full pass asks for `n_head × position` (one query per tile, every
        // window layer settled or wider than the budget): all of them in one jump.
        let only_growing_spans = kinds.iter().all(|w| settled(w) || w.map_or(true, |w| w >= b));
        if n == batch && one_per_tile(n_past, n) && only_growing_spans {
            let m = (prompt - n_past) / batch;
            if kinds.iter().any(|w| !settled(w)) {
                s.need_linear(nh as u64, n_past as u64 + 1, (n_past + m * batch) as u64);
            }
            n_past += m * batch;
            continue;
        }
        for w in kinds.iter().filter(|w| !settled(w)) {
            tile_scores(&mut s, nh, b, *w, n, n_past);
        }
        n_past += n;
    }
    for w in &kinds {
        tile_scores(&mut s, nh, b, *w, 1, n_past);
    }
    s
}

/// The score sizes one layer of window `window` asks for in a pass of `n_cur` tokens after
/// `n_past` (as `ops::attention` tiles its queries).
fn tile_scores(s: &mut Cap, nh: usize, b: usize, window: Option<usize>, n_cur: usize, n_past: usize) {
    let (q0, w) = match window {
        Some(w) => (n_past.min(w.min(b)), Some(w)),
        None => (n_past.min(b - n_cur.min(b)), None),
    };
    let lo = |pos: usize| w.map_or(0, |w| (pos + 1).saturating_sub(w));
    let span_max = (q0 + n_cur) - lo(q0 + n_cur - 1).min(lo(q0));
    let tile = (SCORE_BUDGET as u64 / mul(nh, span_max).max(1)).clamp(1, n_cur as u64) as usize;
    if tile == 1 {
        // Query q0 + t sees min(q0 + t + 1, window) keys: non-decreasing, so only the growing
        // part can grow the buffer.
        let top = w.map_or(q0 + n_cur, |w| (q0 + n_cur).min(w));
        s.need_linear(nh as u64, (q0 + 1).min(top) as u64, top as u64);
        return;
    }
    let mut t0 = 0;
    while t0 < n_cur {
        let t1 = (t0 + tile).min(n_cur);
        let span = (q0 + t1) - lo(q0 + t0);
        s.need(mul(t1 - t0, nh).saturating_mul(span as u64));
        t0 = t1;
    }
}

/// The buffers of one session, as the forward pass sizes them.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ScratchPlan {
    /// `ForwardScratch` (hidden states, q/k/v, attention output, FFN, quantized activations,
    /// attention scores and key/value chunks).
    pub forward: u64,
    /// The session's two logit rows (current and next).
    pub logits: u64,
    /// The sampler's candidate list.
    pub sampler: u64,
    /// The KV cache's staging rows for one batch.
    pub kv_staging: u64,
}

impl ScratchPlan {
    pub fn total(&self) -> u64 {
        sum(&[self.forward, self.logits, self.sampler, self.kv_staging])
    }

    /// Replays the forward pass's buffer sizing for a prompt that fills `kv_tokens` in batches
    /// of `batch` (each batch ends with the last row's logits, as the host's prefill chunks
    /// do), then one decode step. Exact, in a time independent of `kv_tokens` and of
    /// `batch` (see `PassBuffers::passes` and `scores_cap`).
    pub fn new(g: &ModelGeometry, o: &EstimateOptions) -> ScratchPlan {
        let b = o.kv_tokens.max(1);
        let batch = o.batch.clamp(1, b);
        // The prompt, then one decode step.
        let prompt = b.saturating_sub(1).max(1);
        let mut bufs = PassBuffers::new();
        bufs.passes(g, o, batch, prompt / batch);
        if prompt % batch > 0 {
            bufs.pass(g, o, prompt % batch);
        }
        bufs.pass(g, o, 1);
        let scores = scores_cap(g, b, batch, prompt);
        let PassBuffers { x, xn, q, k, v, att, tmp, gate, up, cs, sel, act, aq, ak, av, out, logits, stage_k, stage_v } = bufs;
        let caps = |caps: &[Cap]| sum(&caps.iter().map(Cap::bytes).collect::<Vec<_>>());
        // Attention splits its heads over the threads: each part beyond the first has its own
        // key/value chunks and the scores of its heads, counted here as a whole head set's
        // (an upper bound; exact for one thread).
        let extra_parts = crate::exec::split(g.hparams.n_head, 1, o.threads).len().saturating_sub(1);
        let per_part = caps(&[ak, av, scores]);
        let forward = sum(&[
            caps(&[x, xn, q, k, v, att, tmp, gate, up, cs, sel, act, aq, ak, av, scores]),
            mul(extra_parts, 1).saturating_mul(per_part),
            g.head_screen_bytes,
        ]);
        let sampler = if o.sampling { mul(8, g.n_vocab) } else { 0 };
        ScratchPlan { forward, logits: caps(&[out, logits]), sampler, kv_staging: caps(&[stage_k, stage_v]) }
    }
}

/// The runtime term's parts.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RuntimeParts {
    pub module: u64,
    /// The parsed header the model keeps (metadata, tensor index).
    pub header: u64,
    pub tokenizer: u64,
    /// The model's own vectors and structures beyond the weight bytes.
    pub model: u64,
    pub fragmentation: u64,
    /// The executor's workers' stacks (`threads - 1` of `limits::WORKER_STACK_BYTES`; their
    /// attention scratch is in the activations term).
    pub thread_stacks: u64,
    /// The screened head's calibration KV cache, left as free heap after load.
    pub calibration: u64,
}

impl RuntimeParts {
    pub fn total(&self) -> u64 {
        sum(&[self.module, self.header, self.tokenizer, self.model, self.fragmentation, self.thread_stacks, self.calibration])
    }
}

/// Bytes of the tokenizer built from a header with these statistics.
pub fn tokenizer_bytes(s: &HeaderStats) -> u64 {
    let n = s.n_tokens;
    if n == 0 {
        return 0;
    }
    let arena = wasm32::alloc(s.token_bytes + s.n_empty_tokens * 14);
    let offsets = wasm32::vec_bytes(4 * (n + 1));
    let scores = wasm32::vec_bytes(4 * n);
    let attrs = wasm32::vec_bytes(2 * n);
    let index = wasm32::vec_bytes(4 * (2 * n).next_power_of_two().max(16));
    // Special-token trie: about two nodes per special token (shared prefixes), 20 bytes each,
    // grown by doubling; the root table; (id, length) by rank.
    let nodes = (2 * s.n_special_tokens).max(1).next_power_of_two().max(4);
    let special = wasm32::vec_bytes(20 * nodes) + wasm32::alloc(1024) + wasm32::vec_bytes(8 * s.n_special_tokens);
    // BPE merges: a hash map of (left, right) → (rank, merged), 16-byte entries.
    let merges = if s.n_merges > 0 {
        let buckets = (s.n_merges * 8 / 7).max(1).next_power_of_two().max(4);
        wasm32::alloc(buckets * 17 + 16)
    } else {
        0
    };
    arena + offsets + scores + attrs + index + special + merges
}

/// Every figure of the estimate (bytes).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Estimate {
    pub weights: u64,
    pub kv: u64,
    pub activations: u64,
    pub runtime: u64,
    /// `weights + kv + activations + runtime`: the steady peak during generation.
    pub total: u64,
    /// What wasm memory reaches by the end of a load.
    pub load_peak: u64,
    /// `max(load_peak, total + load_transient)`: what admission compares with the budget. The
    /// load's last chunk leaves `load_transient` bytes free inside wasm memory, and the step
    /// guard counts every new byte as growth (it cannot know that a KV page will find a free
    /// hole big enough), so a model admitted under a budget can run up to its KV budget under it.
    pub peak: u64,
    pub kv_tokens: usize,
    pub kv_dtype: KvElem,
    /// KV bytes one more held token costs while no layer is full (all layers).
    pub kv_bytes_per_token: u64,
    pub batch: usize,
    pub activation_parts: ScratchPlan,
    pub runtime_parts: RuntimeParts,
    /// Load-time transient beyond the steady state: the part of a pushed chunk's copy that does
    /// not fit in the header buffer's hole.
    pub load_transient: u64,
}

impl Estimate {
    /// Estimates every term for a model with this geometry and header statistics.
    pub fn new(g: &ModelGeometry, stats: &HeaderStats, o: &EstimateOptions) -> Estimate {
        let row = g.kv.row_bytes(o.kv_dtype);
        let kv = g.kv.bytes_at(o.kv_dtype, o.kv_tokens);
        let act = ScratchPlan::new(g, o);
        let hp = &g.hparams;
        // Per layer: the Layer struct with its seven Weight structs and norm vectors.
        let model = mul(hp.n_layer, 512) + 1024;
        let header = stats.parsed_heap_bytes;
        let tokenizer = tokenizer_bytes(stats);
        let frag = FRAGMENTATION_MIN + (g.weight_bytes as f64 * FRAGMENTATION_FRACTION) as u64;
        let thread_stacks = mul(o.threads.saturating_sub(1), crate::limits::WORKER_STACK_BYTES);
        // A screened head's load-time calibration pass: its KV cache is freed, but wasm memory
        // never shrinks and later blocks do not always fill that hole (measured in Chromium:
        // runtime after load 19.49 or 21.65 MB against 19.38 without this part).
        let calibration = if g.head_screen_bytes > 0 { g.kv.bytes_at(KvElem::F16, crate::model::head_screen::CALIBRATION_TOKENS) } else { 0 };
        let runtime = RuntimeParts { module: MODULE_BYTES, header, tokenizer, model, fragmentation: frag, thread_stacks, calibration };
        let weights = g.weight_bytes;
        let activations = act.total();
        let runtime_total = runtime.total();
        let total = sum(&[weights, kv, activations, runtime_total]);
        // Loading: the header is buffered (its capacity doubling) and parsed while the buffer is
        // alive, one pushed chunk beside them; then tensors fill the buffer's hole (so do the
        // later chunk copies, when they fit in it) and memory grows to the weights + runtime.
        let header_buf = stats.header_len.checked_next_power_of_two().unwrap_or(u64::MAX);
        let header_phase = sum(&[MODULE_BYTES, header_buf, header, o.load_chunk]);
        let load_transient = o.load_chunk.saturating_sub(header_buf);
        let load_end = sum(&[weights, runtime_total, load_transient]);
        let load_peak = header_phase.max(load_end);
        Estimate {
            weights,
            kv,
            activations,
            runtime: runtime_total,
            total,
            load_peak,
            peak: load_peak.max(total.saturating_add(load_transient)),
            kv_tokens: o.kv_tokens,
            kv_dtype: o.kv_dtype,
            kv_bytes_per_token: mul(row, g.kv.n_layer()),
            batch: o.batch,
            activation_parts: act,
            runtime_parts: runtime,
            load_transient,
        }
    }

    /// From a fully parsed header (`header_len`: bytes of the header in the file).
    pub fn from_header(h: &GgufHeader, header_len: u64, o: &EstimateOptions) -> Result<Estimate, ModelError> {
        let g = ModelGeometry::from_header(h)?;
        Ok(Estimate::new(&g, &HeaderStats::of(h, header_len), o))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Arch, RopeScaling};

    /// The forward pass's sizing replayed position by position, as the plan did before it
    /// learned to skip: the reference the fast plan must equal exactly.
    fn naive(g: &ModelGeometry, o: &EstimateOptions) -> (u64, u64, u64) {
        let hp = &g.hparams;
        let b = o.kv_tokens.max(1);
        let batch = o.batch.clamp(1, b);
        let prompt = b.saturating_sub(1).max(1);
        let mut bufs = PassBuffers::new();
        let mut scores = Cap::of(4);
        let mut n_past = 0;
        let mut run = |bufs: &mut PassBuffers, n: usize, n_past: usize| {
            bufs.pass(g, o, n);
            for il in 0..hp.n_layer {
                let (q0, w) = match g.kv.windows[il] {
                    Some(w) => (n_past.min(w.min(b)), Some(w)),
                    None => (n_past.min(b - n.min(b)), None),
                };
                let lo = |pos: usize| w.map_or(0, |w| (pos + 1).saturating_sub(w));
                let span_max = (q0 + n) - lo(q0 + n - 1).min(lo(q0));
                let tile = (SCORE_BUDGET / (hp.n_head * span_max).max(1)).clamp(1, n);
                let mut t0 = 0;
                while t0 < n {
                    let t1 = (t0 + tile).min(n);
                    scores.need(((t1 - t0) * hp.n_head * ((q0 + t1) - lo(q0 + t0))) as u64);
                    t0 = t1;
                }
            }
        };
        while n_past < prompt {
            let n = batch.min(prompt - n_past);
            run(&mut bufs, n, n_past);
            n_past += n;
        }
        run(&mut bufs, 1, n_past);
        let p = &bufs;
        let f = [p.x, p.xn, p.q, p.k, p.v, p.att, p.tmp, p.gate, p.up, p.cs, p.sel, p.act, p.aq, p.ak, p.av, scores];
        (f.iter().map(Cap::bytes).sum(), p.out.bytes() + p.logits.bytes(), p.stage_k.bytes() + p.stage_v.bytes())
    }

    fn geometry(n_layer: usize, n_head: usize, window: Option<usize>, period: usize) -> ModelGeometry {
        let swa_layers: Vec<bool> = (0..n_layer).map(|il| window.is_some() && il % period != period - 1).collect();
        let hparams = HParams {
            arch: Arch::Gemma3,
            n_vocab: 300,
            n_ctx_train: 0,
            n_embd: 64,
            n_layer,
            n_ff: 96,
            n_head,
            n_head_kv: 1,
            head_dim_k: 16,
            head_dim_v: 16,
            n_rot: 16,
            rms_eps: 1e-6,
            rope_base: 1e4,
            rope_scaling: RopeScaling::None,
            rope_base_swa: None,
            sliding_window: window,
            swa_layers: swa_layers.clone(),
            attn_scale: 0.25,
            final_logit_softcap: None,
        };
        // Layers with different activation rows, so the per-layer replay matters.
        let act_rows = (0..n_layer).map(|il| [34 + 2 * (il % 3), 34, 34, 68, 34, 34, 36 * (1 + il % 2)]).collect();
        let kv = hparams.kv_shape();
        ModelGeometry { hparams, n_vocab: 300, kv, act_rows, out_act_row: 34, weight_bytes: 1000, head_screen_bytes: 0 }
    }

    #[test]
    fn fast_plan_equals_the_position_by_position_replay() {
        let mut cases = 0;
        for (n_layer, n_head, window, period) in [(1, 1, None, 1), (4, 2, None, 1), (7, 4, Some(24), 3), (6, 8, Some(5), 6), (5, 64, Some(300), 2)] {
            let g = geometry(n_layer, n_head, window, period);
            for kv_tokens in [1, 2, 3, 17, 64, 65, 200, 513, 5000, 40_000] {
                for batch in [1, 2, 7, 64, 512] {
                    for kv_dtype in [KvElem::F16, KvElem::Q8] {
                        let o = EstimateOptions { kv_tokens, batch, kv_dtype, ..EstimateOptions::default() };
                        let p = ScratchPlan::new(&g, &o);
                        assert_eq!((p.forward, p.logits, p.kv_staging), naive(&g, &o), "{n_layer} layers, {n_head} heads, window {window:?}, {kv_tokens} tokens, batch {batch}");
                        cases += 1;
                    }
                }
            }
        }
        assert_eq!(cases, 500);
    }

    #[test]
    fn plan_cost_does_not_grow_with_declared_sizes() {
        // 4 M tokens in batches of one: position by position this is millions of layer passes;
        // the plan takes a few hundred. Counted, not timed: the passes that grow nothing are
        // skipped six at a time, the score sizes jump.
        let g = geometry(4096, 64, Some(512), 6);
        let o = EstimateOptions { kv_tokens: crate::limits::MAX_CONTEXT_TOKENS, batch: 1, ..EstimateOptions::default() };
        let t = std::time::Instant::now();
        let p = ScratchPlan::new(&g, &o);
        assert!(p.forward > 0);
        // Not a speed test: the position-by-position replay of this is ~10^13 steps (hours on
        // any machine), the plan a few hundred passes; a minute separates the two anywhere.
        assert!(t.elapsed() < std::time::Duration::from_secs(60), "{:?}", t.elapsed());
        // Saturated figures, never wrapped.
        let huge = EstimateOptions { kv_tokens: usize::MAX, batch: usize::MAX, load_chunk: u64::MAX, ..EstimateOptions::default() };
        let e = Estimate::new(&g, &HeaderStats::default(), &huge);
        assert!(e.peak >= e.total && e.total >= e.kv && e.kv > 0);
    }

    #[test]
    fn each_thread_beyond_the_first_adds_a_worker_stack_and_an_attention_part() {
        let g = geometry(4, 2, None, 1);
        let at = |threads| Estimate::new(&g, &HeaderStats::default(), &EstimateOptions { threads, ..EstimateOptions::default() });
        let (one, three) = (at(1), at(3));
        assert_eq!(one.runtime_parts.thread_stacks, 0);
        assert_eq!(three.runtime_parts.thread_stacks, 2 * crate::limits::WORKER_STACK_BYTES as u64);
        assert_eq!(three.total - one.total, three.runtime_parts.thread_stacks + (three.activations - one.activations));
        // Attention's extra part (2 heads: two parts at most), at most a whole head set's.
        assert!(three.activations > one.activations);
        assert_eq!(at(14).activations, at(2).activations, "no more parts than heads");
        let bad = EstimateOptions { threads: 0, ..EstimateOptions::default() };
        assert_eq!(bad.check().unwrap_err().code(), "INVALID_REQUEST");
    }
}
