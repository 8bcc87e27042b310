//! Splitting input text around special-token text, exactly as llama.cpp's
//! `tokenizer_st_partition` does.
//!
//! llama.cpp takes the special tokens (CONTROL, USER_DEFINED and UNKNOWN attributes) longest
//! first, and for each one cuts every occurrence out of the text fragments that earlier, longer
//! tokens left behind (leftmost first, non-overlapping). CONTROL and UNKNOWN tokens only take
//! part when special parsing is on; USER_DEFINED tokens always do.
//!
//! Scanning the text once per special token would cost 6,400 passes for Gemma. Instead,
//! occurrences are considered in llama.cpp's order — by token priority (longest text first),
//! then left to right — and each is accepted unless it overlaps text already taken. A heap
//! holds, for every position, the best occurrence starting there that could still fit (found
//! with a byte trie), so memory stays linear even for long runs of spaces or newlines, which
//! Gemma has dozens of nested special tokens for. The result is identical.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::error::TokenizerError;
use super::vocab::{TokenAttr, Vocab};

/// A piece of input after partitioning: raw text to run the tokenizer on, or a special token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fragment<'a> {
    Text(&'a str),
    Token(u32),
}

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Node {
    first_child: u32,
    next_sibling: u32,
    byte: u8,
    /// Whether the token ending here needs special parsing (CONTROL / UNKNOWN).
    needs_parse_special: bool,
    /// The token whose text ends at this node, or NONE.
    token: u32,
    /// Its position in llama.cpp's processing order (longest text first).
    rank: u32,
}

pub struct SpecialMatcher {
    nodes: Vec<Node>,
    /// Child of the root for each first byte (the root fans out widely; deeper nodes don't).
    root: Box<[u32; 256]>,
    /// (token id, text length) by rank.
    by_rank: Vec<(u32, u32)>,
}

/// Most bytes the special tokens' texts may hold in all. The trie holds a node (20 bytes) per
/// byte of text, so this bounds it at 20 MiB; real vocabularies hold kilobytes (Gemma 3's
/// ~6,000 control tokens about 80 KB), and a hostile one holding megabytes of "special" text
/// would otherwise grow the trie far past the memory ledger's estimate.
pub const MAX_SPECIAL_TEXT_BYTES: usize = 1 << 20;

impl SpecialMatcher {
    pub fn new(vocab: &Vocab) -> Result<SpecialMatcher, TokenizerError> {
        let special = TokenAttr::CONTROL
            .with(TokenAttr::USER_DEFINED)
            .with(TokenAttr::UNKNOWN);
        let mut ids: Vec<u32> = (0..vocab.len() as u32)
            .filter(|&id| vocab.attr(id).has(special))
            .collect();
        // Longest text first. llama.cpp's std::sort leaves equal lengths in unspecified order;
        // ties can only matter for overlapping equal-length tokens, and we take the lower id.
        ids.sort_by(|&a, &b| {
            vocab
                .text(b)
                .len()
                .cmp(&vocab.text(a).len())
                .then(a.cmp(&b))
        });

        let bytes: usize = ids.iter().map(|&id| vocab.text(id).len()).sum();
        if bytes > MAX_SPECIAL_TEXT_BYTES {
            return Err(TokenizerError::SpecialTextTooLarge { bytes, limit: MAX_SPECIAL_TEXT_BYTES });
        }
        let mut m = SpecialMatcher {
            nodes: Vec::new(),
            root: Box::new([NONE; 256]),
            by_rank: Vec::with_capacity(ids.len()),
        };
        for (rank, &id) in ids.iter().enumerate() {
            let attr = vocab.attr(id);
            let needs = attr.needs_special_parsing();
            m.insert(vocab.text(id).as_bytes(), id, rank as u32, needs);
            m.by_rank.push((id, vocab.text(id).len() as u32));
        }
        Ok(m)
    }

    /// Number of tokens the matcher knows (llama.cpp's "special tokens cache size").
    pub fn len(&self) -> usize {
        self.by_rank.len()
    }

    fn new_node(&mut self, byte: u8) -> u32 {
        self.nodes.push(Node {
            first_child: NONE,
            next_sibling: NONE,
            byte,
            needs_parse_special: false,
            token: NONE,
            rank: NONE,
        });
        (self.nodes.len() - 1) as u32
    }

    fn child(&self, node: u32, byte: u8) -> u32 {
        let mut c = self.nodes[node as usize].first_child;
        while c != NONE && self.nodes[c as usize].byte != byte {
            c = self.nodes[c as usize].next_sibling;
        }
        c
    }

    fn insert(&mut self, text: &[u8], id: u32, rank: u32, needs_parse_special: bool) {
        let Some((&first, rest)) = text.split_first() else {
            return;
        };
        let mut node = self.root[first as usize];
        if node == NONE {
            node = self.new_node(first);
            self.root[first as usize] = node;
        }
        for &b in rest {
            let mut c = self.child(node, b);
            if c == NONE {
                c = self.new_node(b);
                let parent = &mut self.nodes[node as usize];
                let old_first = parent.first_child;
                parent.first_child = c;
                self.nodes[c as usize].next_sibling = old_first;
            }
            node = c;
        }
        let n = &mut self.nodes[node as usize];
        // Texts are unique (the vocabulary rejects duplicates), so each end node gets one token.
        n.token = id;
        n.rank = rank;
        n.needs_parse_special = needs_parse_special;
    }

    /// The rank of the longest eligible special token that starts at `bytes[start]` and is at
    /// most `limit` bytes long. (At one position, longer means higher priority.)
    fn longest_at(
        &self,
        bytes: &[u8],
        start: usize,
        limit: usize,
        parse_special: bool,
    ) -> Option<u32> {
        let end_max = bytes.len().min(start + limit);
        let mut best = None;
        let mut node = self.root[bytes[start] as usize];
        let mut end = start + 1;
        while node != NONE && end <= end_max {
            let n = &self.nodes[node as usize];
            if n.token != NONE && (parse_special || !n.needs_parse_special) {
                best = Some(n.rank);
            }
            if end == end_max {
                break;
            }
            node = self.child(node, bytes[end]);
            end += 1;
        }
        best
    }

    /// Splits `text` into raw-text fragments and special tokens.
    pub fn partition<'a>(&self, text: &'a str, parse_special: bool) -> Vec<Fragment<'a>> {
        let bytes = text.as_bytes();
        if bytes.is_empty() {
            return Vec::new();
        }
        // The best candidate at every position, popped in (priority, position) order.
        let initial: Vec<Reverse<(u32, u32)>> = (0..bytes.len())
            .filter_map(|p| {
                self.longest_at(bytes, p, bytes.len(), parse_special)
                    .map(|r| Reverse((r, p as u32)))
            })
            .collect();
        if initial.is_empty() {
            return vec![Fragment::Text(text)];
        }
        let mut heap = BinaryHeap::from(initial);
        let mut taken = vec![false; bytes.len()];
        let mut accepted: Vec<(u32, u32, u32)> = Vec::new(); // (start, len, id)
        while let Some(Reverse((rank, p))) = heap.pop() {
            let start = p as usize;
            if taken[start] {
                continue; // nothing starting inside taken text can fit
            }
            let (id, len) = self.by_rank[rank as usize];
            let span = start..start + len as usize;
            match span.clone().find(|&i| taken[i]) {
                None => {
                    taken[span].iter_mut().for_each(|t| *t = true);
                    accepted.push((p, len, id));
                }
                // Overlaps: the next candidate here is the longest that stops before the
                // taken text (taken text only grows, so longer ones can never fit).
                Some(q) => {
                    if let Some(r) = self.longest_at(bytes, start, q - start, parse_special) {
                        heap.push(Reverse((r, p)));
                    }
                }
            }
        }
        // Fragments in text order.
        accepted.sort_unstable();
        let mut out = Vec::with_capacity(accepted.len() * 2 + 1);
        let mut pos = 0usize;
        for (start, len, id) in accepted {
            let start = start as usize;
            if start > pos {
                out.push(Fragment::Text(&text[pos..start]));
            }
            out.push(Fragment::Token(id));
            pos = start + len as usize;
        }
        if pos < bytes.len() {
            out.push(Fragment::Text(&text[pos..]));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(tokens: &[(&str, TokenAttr)]) -> Vocab {
        let texts: Vec<String> = tokens.iter().map(|t| t.0.to_string()).collect();
        let attrs = tokens.iter().map(|t| t.1).collect();
        Vocab::new(&texts, vec![0.0; texts.len()], attrs).unwrap()
    }

    const C: TokenAttr = TokenAttr::CONTROL;
    const U: TokenAttr = TokenAttr::USER_DEFINED;
    const N: TokenAttr = TokenAttr::NORMAL;

    #[test]
    fn control_needs_parse_special_user_defined_does_not() {
        let v = vocab(&[("<s>", C), ("[x]", U), ("a", N)]);
        let m = SpecialMatcher::new(&v).unwrap();
        assert_eq!(m.len(), 2);
        use Fragment::*;
        assert_eq!(
            m.partition("a<s>b[x]c", false),
            vec![Text("a<s>b"), Token(1), Text("c")]
        );
        assert_eq!(
            m.partition("a<s>b[x]c", true),
            vec![Text("a"), Token(0), Text("b"), Token(1), Text("c")]
        );
        assert_eq!(m.partition("<s><s>", true), vec![Token(0), Token(0)]);
        assert_eq!(m.partition("", true), vec![]);
        assert_eq!(m.partition("plain", true), vec![Text("plain")]);
    }

    #[test]
    fn longer_tokens_claim_text_first_even_when_further_right() {
        // llama.cpp processes "bcd" (longer) before "ab": "abcd" -> "a" + <bcd>, not <ab> + "cd".
        let v = vocab(&[("ab", U), ("bcd", U)]);
        let m = SpecialMatcher::new(&v).unwrap();
        use Fragment::*;
        assert_eq!(m.partition("abcd", false), vec![Text("a"), Token(1)]);
        assert_eq!(
            m.partition("ab bcd", false),
            vec![Token(0), Text(" "), Token(1)]
        );
    }

    #[test]
    fn a_shorter_token_fits_where_a_longer_one_overlaps() {
        // "cdef" (first by id among the longest) takes 2..6; "abcd" then overlaps it, and the
        // next candidate at 0 is the shorter "ab", which fits.
        let v = vocab(&[("cdef", U), ("abcd", U), ("ab", U), ("e", U)]);
        let m = SpecialMatcher::new(&v).unwrap();
        use Fragment::*;
        assert_eq!(m.partition("abcdef", false), vec![Token(2), Token(0)]);
        assert_eq!(
            m.partition("abcd e", false),
            vec![Token(1), Text(" "), Token(3)]
        );
    }

    /// Megabytes of special text (a hostile vocabulary: the trie holds a node per byte) are a
    /// typed error before any node is made; the limit itself is taken.
    #[test]
    fn special_text_past_its_limit_is_refused() {
        let half = MAX_SPECIAL_TEXT_BYTES / 2;
        let (a, b, c) = ("a".repeat(half), "b".repeat(half), "c");
        let at_limit = vocab(&[(&a, TokenAttr::CONTROL), (&b, TokenAttr::USER_DEFINED), ("x", TokenAttr::NORMAL)]);
        assert_eq!(SpecialMatcher::new(&at_limit).unwrap().len(), 2);
        let past = vocab(&[(&a, TokenAttr::CONTROL), (&b, TokenAttr::USER_DEFINED), (c, TokenAttr::UNKNOWN)]);
        let e = SpecialMatcher::new(&past).err().unwrap();
        assert_eq!(e.code(), "TOKENIZER_SPECIAL_TOO_LARGE");
        assert!(e.to_string().contains(&format!("{} bytes", MAX_SPECIAL_TEXT_BYTES + 1)), "{e}");
        // Long normal tokens are not the matcher's: no limit from it.
        let normal = vocab(&[(&a, TokenAttr::NORMAL), (&b, TokenAttr::NORMAL), (c, TokenAttr::NORMAL)]);
        assert_eq!(SpecialMatcher::new(&normal).unwrap().len(), 0);
    }

    #[test]
    fn long_runs_stay_linear() {
        let texts: Vec<String> = (1..=31).map(|n| " ".repeat(n)).collect();
        let tokens: Vec<(&str, TokenAttr)> =
            texts.iter().skip(1).map(|t| (t.as_str(), U)).collect();
        let m = SpecialMatcher::new(&vocab(&tokens)).unwrap();
        let run = " ".repeat(100_000);
        let parts = m.partition(&run, false);
        // 3225 runs of 31 spaces, then 25 spaces (a token of its own).
        assert_eq!(parts.len(), 100_000 / 31 + 1);
        assert!(parts.iter().all(|f| matches!(f, Fragment::Token(_))));
    }

    #[test]
    fn runs_split_leftmost_non_overlapping() {
        let v = vocab(&[("\n", U), ("\n\n", U), ("\n\n\n", U)]);
        let m = SpecialMatcher::new(&v).unwrap();
        use Fragment::*;
        // Seven newlines: two "\n\n\n" then one "\n".
        assert_eq!(
            m.partition("\n\n\n\n\n\n\n", false),
            vec![Token(2), Token(2), Token(0)]
        );
        assert_eq!(
            m.partition("x\n\ny\n", false),
            vec![Text("x"), Token(1), Text("y"), Token(0)]
        );
    }
}
