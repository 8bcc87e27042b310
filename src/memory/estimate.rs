//! The estimate: each term of `M_peak = M_weights + M_KV + M_act + M_runtime`, and the load
//! peak, from a GGUF header and the session options, before anything is allocated.
//!
//! - **weights**: the tensor bytes as stored (weights stay in their block format).
//! - **kv**: [`kv_cache_bytes`] at the KV budget: every layer stores K and V rows of its
//!   width for `min(window, tokens)` positions (Gemma's local layers hold only their window).
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

use crate::gguf::GgufHeader;
use crate::model::{HParams, ModelError};
use crate::ops::attention::{KV_CHUNK, SCORE_BUDGET};

use super::skim::HeaderStats;
use super::wasm32;

/// wasm memory right after the module is instantiated (static data + 1 MiB stack), as measured
/// for this crate's release build in Chromium and Node (20 pages). The ledger reports the
/// measured figure of the running module beside it.
pub const MODULE_BYTES: u64 = 20 * 65536;

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
}

impl Default for EstimateOptions {
    fn default() -> Self {
        EstimateOptions { kv_tokens: 4096, kv_dtype: KvElem::F16, batch: 64, sampling: true, load_chunk: 4 << 20 }
    }
}

/// The model's shape as far as memory is concerned.
#[derive(Clone, Debug)]
pub struct ModelGeometry {
    pub hparams: HParams,
    pub n_vocab: usize,
    /// Per layer: its sliding window (`None`: global attention).
    pub windows: Vec<Option<usize>>,
    /// Per layer: activation-row bytes of wq, wk, wv, wo, gate, up, down (the quantized copy of
    /// an input row each matmul makes).
    pub act_rows: Vec<[usize; 7]>,
    /// Activation-row bytes of the output projection.
    pub out_act_row: usize,
    /// Tensor bytes as stored.
    pub weight_bytes: u64,
}

fn act_row(h: &GgufHeader, name: &str, n_in: usize) -> usize {
    h.tensor(name)
        .map(|t| {
            let act = crate::quant::vec_dot_type(t.ggml_type);
            crate::quant::row_bytes(act, n_in).unwrap_or(4 * n_in)
        })
        .unwrap_or(4 * n_in)
}

impl ModelGeometry {
    /// From a header (a full one or the skimmer's light one).
    pub fn from_header(h: &GgufHeader) -> Result<ModelGeometry, ModelError> {
        let embd = h.tensor("token_embd.weight").ok_or_else(|| ModelError::MissingTensor("token_embd.weight".into()))?;
        if embd.dims.len() != 2 {
            return Err(ModelError::BadTensorShape { name: "token_embd.weight".into(), expected: vec![0, 0], got: embd.dims.clone() });
        }
        let n_vocab = embd.dims[1] as usize;
        let hp = HParams::from_header(h, n_vocab)?;
        let d = hp.n_embd;
        let aw = hp.n_head * hp.head_dim_v;
        let windows = (0..hp.n_layer).map(|il| if hp.swa_layers.get(il).copied().unwrap_or(false) { hp.sliding_window } else { None }).collect();
        let act_rows = (0..hp.n_layer)
            .map(|il| {
                let n = |s: &str| format!("blk.{il}.{s}.weight");
                [
                    act_row(h, &n("attn_q"), d),
                    act_row(h, &n("attn_k"), d),
                    act_row(h, &n("attn_v"), d),
                    act_row(h, &n("attn_output"), aw),
                    act_row(h, &n("ffn_gate"), d),
                    act_row(h, &n("ffn_up"), d),
                    act_row(h, &n("ffn_down"), hp.n_ff),
                ]
            })
            .collect();
        let out_name = if h.tensor("output.weight").is_some() { "output.weight" } else { "token_embd.weight" };
        let out_act_row = act_row(h, out_name, d);
        let weight_bytes = h.tensor_data_bytes();
        Ok(ModelGeometry { hparams: hp, n_vocab, windows, act_rows, out_act_row, weight_bytes })
    }

    /// Bytes of K + V one layer stores per position.
    pub fn kv_row_bytes(&self, dtype: KvElem) -> usize {
        let (kw, vw) = self.hparams.kv_widths();
        dtype.row_bytes(kw) + dtype.row_bytes(vw)
    }
}

/// Bytes of KV storage when the cache holds `tokens` positions: `Σ_layers min(tokens, window)
/// × (K row + V row)`. At the budget this is the cache's full allocation (the `kv` module's
/// `KvLayout::bytes_at` is the same sum).
pub fn kv_cache_bytes(windows: &[Option<usize>], row_bytes: usize, tokens: usize) -> u64 {
    windows.iter().map(|w| (w.map_or(tokens, |w| w.min(tokens)) * row_bytes) as u64).sum()
}

/// The largest budget in tokens whose KV storage fits in `bytes` (the `kv` module's
/// `tokens_for_bytes`).
pub fn kv_tokens_for_bytes(windows: &[Option<usize>], row_bytes: usize, bytes: u64) -> usize {
    if row_bytes == 0 || windows.is_empty() {
        return 0;
    }
    let (mut lo, mut hi) = (0usize, (bytes / row_bytes as u64) as usize + 1);
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        if kv_cache_bytes(windows, row_bytes, mid) <= bytes {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

/// A `Vec`'s capacity as `resize`/`extend` grow it (the standard library's amortized rule:
/// `max(2 × cap, needed)`, at least 4 elements, 8 for bytes).
#[derive(Clone, Copy, Debug, Default)]
struct Cap {
    cap: usize,
    elem: usize,
}

impl Cap {
    fn of(elem: usize) -> Cap {
        Cap { cap: 0, elem }
    }

    fn need(&mut self, len: usize) {
        if len > self.cap {
            let min = if self.elem == 1 { 8 } else if self.elem <= 1024 { 4 } else { 1 };
            self.cap = (2 * self.cap).max(len).max(min);
        }
    }

    fn bytes(&self) -> u64 {
        (self.cap * self.elem) as u64
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
        self.forward + self.logits + self.sampler + self.kv_staging
    }

    /// Replays the forward pass's buffer sizing for a prompt that fills `kv_tokens` in batches
    /// of `batch` (each batch ends with the last row's logits, as the host's prefill chunks
    /// do), then one decode step.
    pub fn new(g: &ModelGeometry, o: &EstimateOptions) -> ScratchPlan {
        let hp = &g.hparams;
        let d = hp.n_embd;
        let (qw, kw, vw) = (hp.n_head * hp.head_dim_k, hp.n_head_kv * hp.head_dim_k, hp.n_head_kv * hp.head_dim_v);
        let aw = hp.n_head * hp.head_dim_v;
        let nh = hp.n_head;
        let b = o.kv_tokens.max(1);
        let batch = o.batch.clamp(1, b);
        // ForwardScratch { x, xn, q, k, v, att, tmp, gate, up, cs, sel, mm, attn }.
        let (mut x, mut xn, mut q, mut k, mut v) = (Cap::of(4), Cap::of(4), Cap::of(4), Cap::of(4), Cap::of(4));
        let (mut att, mut tmp, mut gate, mut up, mut cs) = (Cap::of(4), Cap::of(4), Cap::of(4), Cap::of(4), Cap::of(4));
        let mut sel = Cap::of(std::mem::size_of::<usize>());
        let mut act = Cap::of(1);
        let (mut aq, mut ak, mut av, mut scores) = (Cap::of(4), Cap::of(4), Cap::of(4), Cap::of(4));
        let mut out = Cap::of(4);
        let mut logits = Cap::of(4);
        let (mut stage_k, mut stage_v) = (Cap::of(1), Cap::of(1));
        let kr = o.kv_dtype.row_bytes(kw);
        let vr = o.kv_dtype.row_bytes(vw);
        let last = hp.n_layer.saturating_sub(1);

        let mut n_past = 0usize;
        let mut forward = |n: usize, n_past: usize| {
            sel.need(1);
            stage_k.need(n * kr);
            stage_v.need(n * vr);
            x.need(n * d);
            cs.need(hp.n_rot);
            let all_rows = n == 1;
            let mut n_cur = n;
            for il in 0..hp.n_layer {
                let ab = g.act_rows[il];
                xn.need(n_cur * d);
                q.need(n_cur * qw);
                k.need(n_cur * kw);
                v.need(n_cur * vw);
                act.need(n_cur * ab[0]);
                act.need(n_cur * ab[1]);
                act.need(n_cur * ab[2]);
                att.need(n_cur * aw);
                // attention(): the rounded queries, one chunk of keys and values, the scores
                // of each tile of queries.
                aq.need(n_cur * qw);
                ak.need(KV_CHUNK * kw);
                av.need(KV_CHUNK * vw);
                let (q0, w) = match g.windows[il] {
                    Some(w) => (n_past.min(w.min(b)), Some(w)),
                    None => (n_past.min(b - n_cur.min(b)), None),
                };
                let lo = |pos: usize| w.map_or(0, |w| (pos + 1).saturating_sub(w));
                let span_max = (q0 + n_cur) - lo(q0 + n_cur - 1).min(lo(q0));
                let tile = (SCORE_BUDGET / (nh * span_max).max(1)).clamp(1, n_cur);
                let mut t0 = 0;
                while t0 < n_cur {
                    let t1 = (t0 + tile).min(n_cur);
                    let span = (q0 + t1) - lo(q0 + t0);
                    scores.need((t1 - t0) * nh * span);
                    t0 = t1;
                }
                if il == last && !all_rows {
                    // gather_rows(att), gather_rows(x): each swaps its buffer with `tmp`.
                    tmp.need(aw);
                    std::mem::swap(&mut att, &mut tmp);
                    tmp.need(d);
                    std::mem::swap(&mut x, &mut tmp);
                    n_cur = 1;
                }
                tmp.need(n_cur * d);
                act.need(n_cur * ab[3]);
                xn.need(n_cur * d);
                gate.need(n_cur * hp.n_ff);
                up.need(n_cur * hp.n_ff);
                act.need(n_cur * ab[4]);
                act.need(n_cur * ab[5]);
                act.need(n_cur * ab[6]);
            }
            xn.need(n_cur * d);
            out.need(n_cur * g.n_vocab);
            act.need(n_cur * g.out_act_row);
            // The session swaps its output row with the current logits after each pass.
            std::mem::swap(&mut out, &mut logits);
        };
        // The prompt, then one decode step.
        let prompt = b.saturating_sub(1).max(1);
        while n_past < prompt {
            let n = batch.min(prompt - n_past);
            forward(n, n_past);
            n_past += n;
        }
        forward(1, n_past);
        let f = [x, xn, q, k, v, att, tmp, gate, up, cs].iter().map(Cap::bytes).sum::<u64>()
            + sel.bytes()
            + act.bytes()
            + [aq, ak, av, scores].iter().map(Cap::bytes).sum::<u64>();
        let sampler = if o.sampling { (8 * g.n_vocab) as u64 } else { 0 };
        ScratchPlan { forward: f, logits: out.bytes() + logits.bytes(), sampler, kv_staging: stage_k.bytes() + stage_v.bytes() }
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
}

impl RuntimeParts {
    pub fn total(&self) -> u64 {
        self.module + self.header + self.tokenizer + self.model + self.fragmentation
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
    /// `max(total, load_peak)`: what admission compares with the budget.
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
        let row = g.kv_row_bytes(o.kv_dtype);
        let kv = kv_cache_bytes(&g.windows, row, o.kv_tokens);
        let act = ScratchPlan::new(g, o);
        let hp = &g.hparams;
        // Per layer: the Layer struct with its seven Weight structs and norm vectors.
        let model = (hp.n_layer as u64) * 512 + 1024;
        let header = stats.parsed_heap_bytes;
        let tokenizer = tokenizer_bytes(stats);
        let frag = FRAGMENTATION_MIN + (g.weight_bytes as f64 * FRAGMENTATION_FRACTION) as u64;
        let runtime = RuntimeParts { module: MODULE_BYTES, header, tokenizer, model, fragmentation: frag };
        let weights = g.weight_bytes;
        let activations = act.total();
        let runtime_total = runtime.total();
        let total = weights + kv + activations + runtime_total;
        // Loading: the header is buffered (its capacity doubling) and parsed while the buffer is
        // alive, one pushed chunk beside them; then tensors fill the buffer's hole (so do the
        // later chunk copies, when they fit in it) and memory grows to the weights + runtime.
        let header_buf = stats.header_len.next_power_of_two();
        let header_phase = MODULE_BYTES + header_buf + header + o.load_chunk;
        let load_transient = o.load_chunk.saturating_sub(header_buf);
        let load_end = weights + runtime_total + load_transient;
        let load_peak = header_phase.max(load_end);
        Estimate {
            weights,
            kv,
            activations,
            runtime: runtime_total,
            total,
            load_peak,
            peak: total.max(load_peak),
            kv_tokens: o.kv_tokens,
            kv_dtype: o.kv_dtype,
            kv_bytes_per_token: (row * g.windows.len()) as u64,
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
