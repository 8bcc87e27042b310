//! Byte-level BPE (`tokenizer.ggml.model = gpt2`): GPT-2's byte ↔ unicode mapping, the merge
//! table from `tokenizer.ggml.merges`, and the merge loop of llama.cpp's BPE session.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use super::error::TokenizerError;
use super::pretokenize::{self, PreTokenizer};
use super::vocab::{mix64, Vocab};

const NONE: u32 = u32::MAX;

/// GPT-2's reversible byte → code point mapping: printable Latin-1 bytes map to themselves,
/// the other 68 bytes to U+0100.. in byte order, so every byte is a visible character.
pub const BYTE_CHARS: [char; 256] = build_byte_chars();

/// The inverse for code points below U+0144 (no byte maps higher); 0xFFFF where none maps.
const CHAR_BYTES: [u16; 0x144] = build_char_bytes();

const fn is_printable_byte(cp: u32) -> bool {
    (cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF)
}

const fn build_byte_chars() -> [char; 256] {
    let mut t = ['\0'; 256];
    let mut n = 0u32;
    let mut b = 0u32;
    while b < 256 {
        let cp = if is_printable_byte(b) {
            b
        } else {
            n += 1;
            0x100 + n - 1
        };
        t[b as usize] = match char::from_u32(cp) {
            Some(c) => c,
            None => '\0',
        };
        b += 1;
    }
    t
}

const fn build_char_bytes() -> [u16; 0x144] {
    let chars = build_byte_chars();
    let mut t = [0xFFFFu16; 0x144];
    let mut b = 0;
    while b < 256 {
        t[chars[b] as usize] = b as u16;
        b += 1;
    }
    t
}

/// The inverse of [`byte_to_char`]; `None` for code points no byte maps to.
pub fn char_to_byte(c: char) -> Option<u8> {
    match CHAR_BYTES.get(c as usize) {
        Some(&b) if b != 0xFFFF => Some(b as u8),
        _ => None,
    }
}

/// A hasher for u64 keys (merge pairs): `mix64` of the key under a secret offset. `mix64` alone
/// is invertible, so a crafted merge list could choose pairs that share one bucket (quadratic
/// load); the offset, drawn once per process, keeps the buckets unpredictable. Lookups are
/// exact whatever the offset: only the table's layout depends on it.
#[derive(Default)]
pub struct U64Hasher(u64);

fn merge_key_offset() -> u64 {
    static OFFSET: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *OFFSET.get_or_init(|| super::vocab::secret_keys().0)
}

impl Hasher for U64Hasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = mix64(self.0 ^ b as u64);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = mix64(v ^ merge_key_offset());
    }
}

type U64Map<V> = HashMap<u64, V, BuildHasherDefault<U64Hasher>>;

/// (left id, right id) → (rank, id of the merged text or NONE).
pub struct Merges {
    map: U64Map<(u32, u32)>,
}

impl Merges {
    /// Parses "left right" entries. llama.cpp splits at the first space after the first byte (so
    /// a left part may itself be a space); both parts must be tokens. A repeated pair keeps its
    /// first (lowest) rank, as llama.cpp's `emplace` does.
    pub fn new(entries: &[String], vocab: &Vocab) -> Result<Merges, TokenizerError> {
        let mut map: U64Map<(u32, u32)> = U64Map::default();
        map.reserve(entries.len());
        let mut joined = String::new();
        for (rank, e) in entries.iter().enumerate() {
            let bad = |reason| TokenizerError::BadMerge {
                index: rank,
                merge: e.clone(),
                reason,
            };
            let split_at = e
                .char_indices()
                .skip(1)
                .find(|&(_, c)| c == ' ')
                .map(|(i, _)| i)
                .ok_or_else(|| bad("no space separating the two parts"))?;
            let (left, right) = (&e[..split_at], &e[split_at + 1..]);
            if right.is_empty() {
                return Err(bad("empty right part"));
            }
            let l = vocab
                .id(left)
                .ok_or_else(|| bad("left part is not a token"))?;
            let r = vocab
                .id(right)
                .ok_or_else(|| bad("right part is not a token"))?;
            joined.clear();
            joined.push_str(left);
            joined.push_str(right);
            let merged = vocab.id(&joined).unwrap_or(NONE);
            let rank = u32::try_from(rank).map_err(|_| bad("too many merges"))?;
            map.entry(pair_key(l, r)).or_insert((rank, merged));
        }
        Ok(Merges { map })
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    fn get(&self, l: u32, r: u32) -> Option<(u32, u32)> {
        self.map.get(&pair_key(l, r)).copied()
    }
}

fn pair_key(l: u32, r: u32) -> u64 {
    (l as u64) << 32 | r as u64
}

#[derive(Clone, Copy)]
struct Symbol {
    start: u32,
    len: u32,
    prev: i32,
    next: i32,
    /// The token whose text this symbol currently spells, or NONE.
    id: u32,
}

#[derive(PartialEq, Eq)]
struct Bigram {
    rank: u32,
    left: u32,
    right: u32,
    size: u32,
    merged: u32,
}

impl Ord for Bigram {
    /// BinaryHeap pops the greatest: lowest rank first, then the leftmost pair.
    fn cmp(&self, o: &Self) -> Ordering {
        o.rank.cmp(&self.rank).then(o.left.cmp(&self.left))
    }
}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

pub struct BpeModel {
    pub merges: Merges,
    pub pre: PreTokenizer,
    /// llama3-style vocabularies emit a whole pre-tokenized word directly when it is a token.
    pub ignore_merges: bool,
}

impl BpeModel {
    /// Tokenizes one raw-text fragment, appending ids to `out`.
    pub fn encode(&self, vocab: &Vocab, text: &str, out: &mut Vec<u32>) {
        let cps: Vec<u32> = text.chars().map(|c| c as u32).collect();
        let mut word = String::new();
        let mut symbols: Vec<Symbol> = Vec::new();
        let mut heap = BinaryHeap::new();
        let mut byte_start = 0usize;
        let mut cp_start = 0usize;
        for n_cps in pretokenize::split(self.pre, &cps) {
            // The word's UTF-8 bytes, each mapped to its printable character.
            let n_bytes: usize = cps[cp_start..cp_start + n_cps]
                .iter()
                .map(|&c| char::from_u32(c).map_or(0, char::len_utf8))
                .sum();
            word.clear();
            for &b in &text.as_bytes()[byte_start..byte_start + n_bytes] {
                word.push(BYTE_CHARS[b as usize]);
            }
            cp_start += n_cps;
            byte_start += n_bytes;

            if self.ignore_merges {
                if let Some(id) = vocab.id(&word) {
                    out.push(id);
                    continue;
                }
            }
            self.merge_word(vocab, &word, &mut symbols, &mut heap);
            for s in symbols.iter().filter(|s| s.len > 0) {
                if s.id != NONE {
                    out.push(s.id);
                } else {
                    // Not a token: llama.cpp looks each byte of the (encoded) text up as a
                    // one-byte token and drops those that are none.
                    let piece = &word.as_bytes()[s.start as usize..(s.start + s.len) as usize];
                    for &b in piece {
                        if b < 0x80 {
                            if let Some(id) = vocab.id(std::str::from_utf8(&[b]).unwrap_or("")) {
                                out.push(id);
                            }
                        }
                    }
                }
            }
        }
    }

    fn merge_word(
        &self,
        vocab: &Vocab,
        word: &str,
        symbols: &mut Vec<Symbol>,
        heap: &mut BinaryHeap<Bigram>,
    ) {
        symbols.clear();
        heap.clear();
        let n_chars = word.chars().count();
        for (i, (start, c)) in word.char_indices().enumerate() {
            let len = c.len_utf8();
            let id = vocab.id(&word[start..start + len]).unwrap_or(NONE);
            let next = if i + 1 == n_chars { -1 } else { i as i32 + 1 };
            symbols.push(Symbol {
                start: start as u32,
                len: len as u32,
                prev: i as i32 - 1,
                next,
                id,
            });
        }
        for i in 1..symbols.len() {
            self.push_bigram(symbols, heap, i as i32 - 1, i as i32);
        }
        while let Some(bg) = heap.pop() {
            let (l, r) = (bg.left as usize, bg.right as usize);
            let (ls, rs) = (symbols[l], symbols[r]);
            // Skip pairs outdated by an earlier merge.
            if ls.len == 0 || rs.len == 0 || ls.len + rs.len != bg.size {
                continue;
            }
            symbols[l].len += rs.len;
            symbols[l].id = bg.merged;
            symbols[l].next = rs.next;
            symbols[r].len = 0;
            if rs.next >= 0 {
                symbols[rs.next as usize].prev = l as i32;
            }
            self.push_bigram(symbols, heap, ls.prev, l as i32);
            self.push_bigram(symbols, heap, l as i32, rs.next);
        }
    }

    fn push_bigram(&self, symbols: &[Symbol], heap: &mut BinaryHeap<Bigram>, l: i32, r: i32) {
        if l < 0 || r < 0 {
            return;
        }
        let (ls, rs) = (symbols[l as usize], symbols[r as usize]);
        if ls.id == NONE || rs.id == NONE {
            return;
        }
        if let Some((rank, merged)) = self.merges.get(ls.id, rs.id) {
            heap.push(Bigram {
                rank,
                left: l as u32,
                right: r as u32,
                size: ls.len + rs.len,
                merged,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_mapping_round_trips() {
        let t = BYTE_CHARS;
        assert_eq!(t[b' ' as usize], 'Ġ');
        assert_eq!(t[b'\n' as usize], 'Ċ');
        assert_eq!(t[b'a' as usize], 'a');
        assert_eq!(t[0], '\u{100}');
        assert_eq!(t[0xAD], '\u{143}');
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(t[b as usize]), Some(b));
        }
        assert_eq!(char_to_byte('中'), None);
        let distinct: std::collections::HashSet<char> = t.iter().copied().collect();
        assert_eq!(distinct.len(), 256);
    }
}
