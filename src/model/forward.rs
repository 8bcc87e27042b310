//! The forward pass shared by every architecture: a batch of tokens goes through each layer
//! together (batched prefill), keys/values land in the KV cache, and logits are computed only
//! for the rows asked for.

use crate::exec::Exec;
use crate::kv::KvCache;
use crate::ops::{attention_on, gelu_mul_in_place, matmul_on, rms_norm_in_place, rms_norm_into, silu, AttentionParams};
use crate::ops::screen::{screened_head, Ask, ScreenScratch, Screened};
use crate::ops::{AttentionScratch, MatmulScratch};

use super::scratch::{self, Widths};
use super::{Activation, Model, ModelError};

/// Which positions of a batch get logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogitRows<'a> {
    /// None: only fill the KV cache.
    None,
    /// The batch's last position (generation).
    Last,
    /// Every position (teacher-forced scoring).
    All,
    /// These batch-relative positions, in this order.
    Rows(&'a [usize]),
}

/// Buffers reused across forward passes (grown to the largest batch seen, never shrunk), and
/// the executor the pass splits its matmuls and attention over.
#[derive(Default, Debug)]
pub struct ForwardScratch {
    exec: Exec,
    x: Vec<f32>,
    xn: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    att: Vec<f32>,
    tmp: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    cs: Vec<f32>,
    sel: Vec<usize>,
    mm: MatmulScratch,
    attn: AttentionScratch,
    screen: ScreenScratch,
}

/// What the output head makes of the selected rows.
pub(crate) enum HeadOut<'a> {
    /// Every logit of every selected row (`n_rows × n_vocab`).
    Logits(&'a mut Vec<f32>),
    /// The head's input: the final normalized hidden rows (`n_rows × n_embd`).
    Hidden(&'a mut Vec<f32>),
    /// The screened head on the one selected row (see `ops::screen`); the dense buffer gets
    /// every logit when the screen falls back, and also otherwise with `check` (the full head
    /// computed too, to check the screen against).
    Screened { ask: Ask<'a>, out: &'a mut Screened, dense: &'a mut Vec<f32>, check: bool },
}

impl ForwardScratch {
    /// Empty buffers; work split over `exec`'s threads.
    pub fn new(exec: Exec) -> ForwardScratch {
        ForwardScratch { exec, ..ForwardScratch::default() }
    }

    pub fn exec(&self) -> &Exec {
        &self.exec
    }

    pub fn set_exec(&mut self, exec: Exec) {
        self.exec = exec;
    }

    /// Bytes currently allocated.
    pub fn bytes(&self) -> usize {
        let f = [&self.x, &self.xn, &self.q, &self.k, &self.v, &self.att, &self.tmp, &self.gate, &self.up, &self.cs];
        4 * f.iter().map(|v| v.capacity()).sum::<usize>()
            + 8 * self.sel.capacity()
            + self.mm.bytes()
            + self.attn.bytes()
            + self.screen.bytes()
    }
}

fn add_bias(x: &mut [f32], b: &Option<Vec<f32>>) {
    if let Some(b) = b {
        for row in x.chunks_exact_mut(b.len()) {
            row.iter_mut().zip(b).for_each(|(v, &c)| *v += c);
        }
    }
}

fn add_in_place(x: &mut [f32], y: &[f32]) {
    x.iter_mut().zip(y).for_each(|(a, &b)| *a += b);
}

/// Keeps rows `sel` of `buf` (rows of `w`), compacted to the front in that order.
fn gather_rows(buf: &mut Vec<f32>, w: usize, sel: &[usize], tmp: &mut Vec<f32>) {
    tmp.clear();
    for &r in sel {
        tmp.extend_from_slice(&buf[r * w..(r + 1) * w]);
    }
    std::mem::swap(buf, tmp);
}

impl Model {
    /// Runs `tokens` (the positions after those `kv` has processed) through the model, adds
    /// their keys and values to `kv` (which may evict old ones, by its policy), and writes
    /// `rows`' logits (`n_rows × n_vocab`, row-major) to `logits`.
    ///
    /// On error the cache is left as it was (checked before any work).
    pub fn forward(
        &self,
        tokens: &[u32],
        kv: &mut KvCache,
        s: &mut ForwardScratch,
        rows: LogitRows<'_>,
        logits: &mut Vec<f32>,
    ) -> Result<(), ModelError> {
        self.run(tokens, kv, s, rows, HeadOut::Logits(logits))
    }

    /// One decode step through the screened head (`ops::screen`): `out` gets the candidate
    /// tokens for `need` and their exact logits (bit-equal to [`forward`](Self::forward)'s).
    /// When the screen falls back (`out.fell_back`), `dense` gets every logit instead; with
    /// `check`, always (the full head computed as well, to check the screen against).
    /// `BAD_REQUEST` when the model has no screened head ([`Model::has_screened_head`]).
    #[allow(clippy::too_many_arguments)]
    pub fn forward_screened(
        &self,
        token: u32,
        kv: &mut KvCache,
        s: &mut ForwardScratch,
        ask: Ask<'_>,
        out: &mut Screened,
        dense: &mut Vec<f32>,
        check: bool,
    ) -> Result<(), ModelError> {
        if !self.has_screened_head() {
            return Err(ModelError::BadRequest("this model's output head is not screened".into()));
        }
        self.run(&[token], kv, s, LogitRows::Last, HeadOut::Screened { ask, out, dense, check })
    }

    pub(crate) fn run(&self, tokens: &[u32], kv: &mut KvCache, s: &mut ForwardScratch, rows: LogitRows<'_>, head: HeadOut<'_>) -> Result<(), ModelError> {
        let n = tokens.len();
        if n == 0 {
            return Err(ModelError::BadRequest("empty batch".into()));
        }
        let n_vocab = self.hparams.n_vocab;
        if let Some(&id) = tokens.iter().find(|&&id| id as usize >= n_vocab) {
            return Err(ModelError::BadTokenId { id, n_vocab });
        }
        s.sel.clear();
        match rows {
            LogitRows::None => {}
            LogitRows::Last => s.sel.push(n - 1),
            LogitRows::All => s.sel.extend(0..n),
            LogitRows::Rows(r) => {
                if let Some(&bad) = r.iter().find(|&&i| i >= n) {
                    return Err(ModelError::BadRequest(format!("logits asked for row {bad} of a {n}-token batch")));
                }
                s.sel.extend_from_slice(r);
            }
        }
        let lay = kv.layout();
        if lay.n_layer() != self.layers.len()
            || kv.kv_widths() != self.hparams.kv_widths()
            || lay.shape.windows.iter().zip(&lay.ropes).zip(&self.layers).any(|((&w, r), l)| w != l.window || *r != l.rope)
        {
            return Err(ModelError::BadRequest("KV cache was made for another model".into()));
        }
        kv.begin(n)?;
        match self.forward_inner(tokens, kv, s, head) {
            Ok(()) => {
                kv.commit();
                Ok(())
            }
            Err(e) => {
                // A NaN or infinite value (`NonFinite`: corrupt weights) is the one failure
                // past the checks above: the batch's keys and values are dropped; if a full
                // ring was already overwritten, the cache is cleared rather than left
                // inconsistent.
                kv.abort();
                Err(e)
            }
        }
    }

    fn forward_inner(&self, tokens: &[u32], kv: &mut KvCache, s: &mut ForwardScratch, head: HeadOut<'_>) -> Result<(), ModelError> {
        let hp = &self.hparams;
        let d = hp.n_embd;
        let n = tokens.len();
        // RoPE position of the first token (the cache's stored frame; see `kv`).
        let pos0 = kv.rope_pos0();
        let (qw, kw) = (hp.n_head * hp.head_dim_k, hp.n_head_kv * hp.head_dim_k);
        let aw = hp.n_head * hp.head_dim_v;
        let ForwardScratch { exec, x, xn, q, k, v, att, tmp, gate, up, cs, sel, mm, attn, screen } = s;

        let widths = Widths::of(hp);
        scratch::embed(&widths, n, x, cs);
        for (t, &id) in tokens.iter().enumerate() {
            let row = &mut x[t * d..(t + 1) * d];
            self.tok_embd.dequantize_row(id as usize, row)?;
            if let Some(sc) = self.cfg.embd_scale {
                row.iter_mut().for_each(|v| *v *= sc);
            }
        }
        let all_rows = sel.len() == n && sel.iter().enumerate().all(|(i, &r)| i == r);

        let mut n_cur = n;
        let last = self.layers.len() - 1;
        for (il, l) in self.layers.iter().enumerate() {
            // Attention block.
            scratch::attention_in(&widths, n_cur, xn, q, k, v);
            rms_norm_into(x, xn, &l.attn_norm, hp.rms_eps);
            matmul_on(exec, &l.wq, xn, q, mm)?;
            matmul_on(exec, &l.wk, xn, k, mm)?;
            matmul_on(exec, &l.wv, xn, v, mm)?;
            add_bias(q, &l.bq);
            add_bias(k, &l.bk);
            add_bias(v, &l.bv);
            if let Some(w) = &l.q_norm {
                rms_norm_in_place(q, w, hp.rms_eps);
            }
            if let Some(w) = &l.k_norm {
                rms_norm_in_place(k, w, hp.rms_eps);
            }
            for t in 0..n_cur {
                l.rope.angles(pos0 + t, cs);
                l.rope.apply(&mut q[t * qw..(t + 1) * qw], hp.head_dim_k, cs);
                l.rope.apply(&mut k[t * kw..(t + 1) * kw], hp.head_dim_k, cs);
            }
            kv.stage(il, k, v);
            // gemma scales the queries (llama.cpp: ggml_scale before attention), the others
            // scale q·k inside the softmax; the two round differently against the f16 cache.
            let scale = if self.cfg.scale_queries {
                q.iter_mut().for_each(|x| *x *= hp.attn_scale);
                1.0
            } else {
                hp.attn_scale
            };
            let params = AttentionParams {
                n_head: hp.n_head,
                n_head_kv: hp.n_head_kv,
                head_dim_k: hp.head_dim_k,
                head_dim_v: hp.head_dim_v,
                scale,
                window: l.window,
            };
            scratch::attention_out(&widths, n_cur, att);
            attention_on(exec, &params, q, kv.query_pos0(il), &kv.view(il), att, attn);
            kv.store(il);

            if il == last && !all_rows {
                // Only the rows that get logits need the rest of the last layer.
                if sel.is_empty() {
                    match head {
                        HeadOut::Logits(l) | HeadOut::Hidden(l) => l.clear(),
                        HeadOut::Screened { .. } => {}
                    }
                    return Ok(());
                }
                gather_rows(att, aw, sel, tmp);
                gather_rows(x, d, sel, tmp);
                n_cur = sel.len();
            }

            scratch::projection(&widths, n_cur, tmp);
            matmul_on(exec, &l.wo, att, tmp, mm)?;
            add_bias(tmp, &l.bo);
            if let Some(w) = &l.post_attn_norm {
                rms_norm_in_place(tmp, w, hp.rms_eps);
            }
            add_in_place(x, tmp);

            // Feed-forward block.
            scratch::ffn_in(&widths, n_cur, xn, gate, up);
            rms_norm_into(x, xn, &l.ffn_norm, hp.rms_eps);
            matmul_on(exec, &l.ffn_gate, xn, gate, mm)?;
            matmul_on(exec, &l.ffn_up, xn, up, mm)?;
            add_bias(gate, &l.ffn_gate_b);
            add_bias(up, &l.ffn_up_b);
            match self.cfg.act {
                Activation::Silu => gate.iter_mut().zip(up.iter()).for_each(|(g, &u)| *g = silu(*g) * u),
                Activation::GeluTanh => gelu_mul_in_place(gate, up),
            }
            matmul_on(exec, &l.ffn_down, gate, tmp, mm)?;
            add_bias(tmp, &l.ffn_down_b);
            if let Some(w) = &l.post_ffn_norm {
                rms_norm_in_place(tmp, w, hp.rms_eps);
            }
            add_in_place(x, tmp);
        }

        // Output head on the selected rows.
        scratch::head_norm(&widths, n_cur, xn);
        rms_norm_into(x, xn, &self.output_norm, hp.rms_eps);
        // NaN or infinity anywhere in the layers reaches every value here (norms and attention
        // spread it): one check per row, before anything is reported or kept.
        if xn.iter().any(|v| !v.is_finite()) {
            return Err(ModelError::NonFinite("the output head's input".into()));
        }
        let out_w = self.head();
        match head {
            HeadOut::Logits(logits) => {
                scratch::head(&widths, n_cur, hp.n_vocab, xn, logits);
                matmul_on(exec, out_w, xn, logits, mm)?;
                if let Some(cap) = hp.final_logit_softcap {
                    logits.iter_mut().for_each(|v| *v = crate::ops::math::tanh_f32(*v / cap) * cap);
                }
                if logits.iter().any(|v| !v.is_finite()) {
                    return Err(ModelError::NonFinite("a logit".into()));
                }
            }
            HeadOut::Hidden(out) => {
                out.clear();
                out.extend_from_slice(xn);
            }
            HeadOut::Screened { ask, out, dense, check } => {
                // `forward_screened` checked the head (no soft-capping: the screen's threshold
                // is on the raw dot).
                screened_head(exec, out_w, &xn[..d], ask, screen, out, dense)?;
                if check && !out.fell_back {
                    dense.resize(hp.n_vocab, 0.0);
                    matmul_on(exec, out_w, &xn[..d], dense, mm)?;
                }
            }
        }
        Ok(())
    }
}
