//! SentencePiece-style tokenization (`tokenizer.ggml.model = llama`), as llama.cpp's SPM
//! session does it: start from single characters, repeatedly merge the adjacent pair whose
//! concatenation is a vocabulary token with the highest score (the left-most pair on ties),
//! then emit each remaining piece as its token, or as byte tokens `<0xNN>` when it is none.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::vocab::Vocab;

#[derive(Clone, Copy)]
struct Symbol {
    start: u32,
    len: u32,
    prev: i32,
    next: i32,
}

struct Bigram {
    score: f32,
    left: u32,
    right: u32,
    size: u32,
}

impl PartialEq for Bigram {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl Ord for Bigram {
    /// BinaryHeap pops the greatest: highest score first, then the left-most pair.
    fn cmp(&self, o: &Self) -> Ordering {
        self.score.total_cmp(&o.score).then(o.left.cmp(&self.left))
    }
}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// Reusable buffers for one encode call.
#[derive(Default)]
pub struct SpmSession {
    symbols: Vec<Symbol>,
    heap: BinaryHeap<Bigram>,
}

impl SpmSession {
    /// Tokenizes `text` (already whitespace-escaped), appending to `out`. `byte_tokens[b]` is
    /// the id of `<0xBB>` (or of the one-byte text), or `fallback` when the vocabulary has none.
    pub fn encode(
        &mut self,
        vocab: &Vocab,
        text: &str,
        byte_tokens: &[u32; 256],
        out: &mut Vec<u32>,
    ) {
        let symbols = &mut self.symbols;
        let heap = &mut self.heap;
        symbols.clear();
        heap.clear();
        let n_chars = text.chars().count();
        for (i, (start, c)) in text.char_indices().enumerate() {
            let next = if i + 1 == n_chars { -1 } else { i as i32 + 1 };
            symbols.push(Symbol {
                start: start as u32,
                len: c.len_utf8() as u32,
                prev: i as i32 - 1,
                next,
            });
        }
        for i in 1..symbols.len() {
            push_bigram(vocab, text, symbols, heap, i as i32 - 1, i as i32);
        }
        while let Some(bg) = heap.pop() {
            let (l, r) = (bg.left as usize, bg.right as usize);
            let (ls, rs) = (symbols[l], symbols[r]);
            // Skip pairs outdated by an earlier merge.
            if ls.len == 0 || rs.len == 0 || ls.len + rs.len != bg.size {
                continue;
            }
            symbols[l].len += rs.len;
            symbols[l].next = rs.next;
            symbols[r].len = 0;
            if rs.next >= 0 {
                symbols[rs.next as usize].prev = l as i32;
            }
            push_bigram(vocab, text, symbols, heap, ls.prev, l as i32);
            push_bigram(vocab, text, symbols, heap, l as i32, rs.next);
        }
        if symbols.is_empty() {
            return;
        }
        let mut i = 0i32;
        while i >= 0 {
            let s = symbols[i as usize];
            let piece = &text[s.start as usize..(s.start + s.len) as usize];
            match vocab.id(piece) {
                Some(id) => out.push(id),
                // Only a single character can fail to be a token (merges only make tokens).
                None => out.extend(
                    piece
                        .bytes()
                        .map(|b| byte_tokens[b as usize])
                        .filter(|&id| id != u32::MAX),
                ),
            }
            i = s.next;
        }
    }
}

fn push_bigram(
    vocab: &Vocab,
    text: &str,
    symbols: &[Symbol],
    heap: &mut BinaryHeap<Bigram>,
    l: i32,
    r: i32,
) {
    if l < 0 || r < 0 {
        return;
    }
    let (ls, rs) = (symbols[l as usize], symbols[r as usize]);
    let size = ls.len + rs.len;
    // Adjacent symbols are adjacent in the text, so the pair's text is one slice.
    let merged = &text[ls.start as usize..(ls.start + size) as usize];
    if let Some(id) = vocab.id(merged) {
        heap.push(Bigram {
            score: vocab.score(id),
            left: l as u32,
            right: r as u32,
            size,
        });
    }
}
