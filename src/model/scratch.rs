//! The sizes of the forward pass's buffers, written once: `forward.rs` sizes its buffers with
//! these calls, and the memory ledger (`memory::estimate::ScratchPlan`) replays the very same
//! calls on its capacity model of each buffer, so the two cannot size a buffer differently.
//! (What the pass's operators size inside themselves — the matmul's quantized activation row,
//! attention's key/value chunks and scores — and the row gathering of the last layer are the
//! ledger's own replay; see there.)

use super::HParams;

/// A buffer the pass resizes: a `Vec` in the forward pass, the ledger's capacity model there.
/// Lengths are u64 so that the ledger's replay of hostile declared sizes saturates instead of
/// wrapping on wasm32.
pub trait Buffer {
    fn size(&mut self, len: u64);
}

impl<T: Clone + Default> Buffer for Vec<T> {
    #[inline]
    fn size(&mut self, len: u64) {
        self.resize(len as usize, T::default());
    }
}

/// Widths of a model's activation rows (values per token).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Widths {
    /// Hidden state (`n_embd`).
    pub d: u64,
    /// Queries, keys, values (all heads).
    pub q: u64,
    pub k: u64,
    pub v: u64,
    /// Attention output (`n_head × head_dim_v`).
    pub att: u64,
    /// Feed-forward hidden.
    pub ff: u64,
    /// RoPE angles of one position.
    pub rot: u64,
}

impl Widths {
    pub fn of(hp: &HParams) -> Widths {
        let w = |x: usize| x as u64;
        let (k, v) = hp.kv_widths();
        Widths {
            d: w(hp.n_embd),
            q: w(hp.n_head).saturating_mul(w(hp.head_dim_k)),
            k: w(k),
            v: w(v),
            att: w(hp.n_head).saturating_mul(w(hp.head_dim_v)),
            ff: w(hp.n_ff),
            rot: w(hp.n_rot),
        }
    }
}

fn rows(n: usize, width: u64) -> u64 {
    (n as u64).saturating_mul(width)
}

/// The pass's start, `n` tokens: their embeddings and one position's RoPE angles.
pub fn embed(w: &Widths, n: usize, x: &mut impl Buffer, cs: &mut impl Buffer) {
    x.size(rows(n, w.d));
    cs.size(w.rot);
}

/// A layer's attention input for `n` rows: the normed hidden state, queries, keys, values.
pub fn attention_in(w: &Widths, n: usize, xn: &mut impl Buffer, q: &mut impl Buffer, k: &mut impl Buffer, v: &mut impl Buffer) {
    xn.size(rows(n, w.d));
    q.size(rows(n, w.q));
    k.size(rows(n, w.k));
    v.size(rows(n, w.v));
}

/// A layer's attention output for `n` rows.
pub fn attention_out(w: &Widths, n: usize, att: &mut impl Buffer) {
    att.size(rows(n, w.att));
}

/// The attention projection's output (`tmp`) for `n` rows.
pub fn projection(w: &Widths, n: usize, tmp: &mut impl Buffer) {
    tmp.size(rows(n, w.d));
}

/// A layer's feed-forward input for `n` rows: the normed hidden state, gate and up.
pub fn ffn_in(w: &Widths, n: usize, xn: &mut impl Buffer, gate: &mut impl Buffer, up: &mut impl Buffer) {
    xn.size(rows(n, w.d));
    gate.size(rows(n, w.ff));
    up.size(rows(n, w.ff));
}

/// The final norm's rows for `n` positions (whatever the head then computes from them).
pub fn head_norm(w: &Widths, n: usize, xn: &mut impl Buffer) {
    xn.size(rows(n, w.d));
}

/// The output head for `n` rows: the final norm and `n_vocab` logits per row.
pub fn head(w: &Widths, n: usize, n_vocab: usize, xn: &mut impl Buffer, logits: &mut impl Buffer) {
    head_norm(w, n, xn);
    logits.size(rows(n, n_vocab as u64));
}
