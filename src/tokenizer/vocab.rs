//! The vocabulary: token texts in one arena, scores, attributes, and a text → id index.
//!
//! Built once from a 262k-entry GGUF array, so it avoids one allocation per token: texts are
//! copied into a single `String`, and the index is an open-addressing table of ids that hashes
//! and compares arena slices (no `HashMap<String, _>`).

use super::error::TokenizerError;

/// Token attributes, as llama.cpp derives them from `tokenizer.ggml.token_type`
/// (1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte) and from token text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TokenAttr(pub u16);

impl TokenAttr {
    pub const UNDEFINED: TokenAttr = TokenAttr(0);
    pub const UNKNOWN: TokenAttr = TokenAttr(1 << 0);
    pub const UNUSED: TokenAttr = TokenAttr(1 << 1);
    pub const NORMAL: TokenAttr = TokenAttr(1 << 2);
    pub const CONTROL: TokenAttr = TokenAttr(1 << 3);
    pub const USER_DEFINED: TokenAttr = TokenAttr(1 << 4);
    pub const BYTE: TokenAttr = TokenAttr(1 << 5);

    /// The attribute for a GGUF token type; unknown type numbers read as UNDEFINED, as in llama.cpp.
    pub fn from_token_type(t: i32) -> TokenAttr {
        match t {
            1 => TokenAttr::NORMAL,
            2 => TokenAttr::UNKNOWN,
            3 => TokenAttr::CONTROL,
            4 => TokenAttr::USER_DEFINED,
            5 => TokenAttr::UNUSED,
            6 => TokenAttr::BYTE,
            _ => TokenAttr::UNDEFINED,
        }
    }

    pub fn has(self, other: TokenAttr) -> bool {
        self.0 & other.0 != 0
    }

    pub fn with(self, other: TokenAttr) -> TokenAttr {
        TokenAttr(self.0 | other.0)
    }

    /// Whether only special parsing recognises this token's text (llama.cpp's test: CONTROL or
    /// UNKNOWN, whatever else it has — an end-of-generation token the file marks USER_DEFINED,
    /// such as Gemma's `</s>`, is made CONTROL too).
    pub fn needs_special_parsing(self) -> bool {
        self.has(TokenAttr::CONTROL.with(TokenAttr::UNKNOWN))
    }
}

/// Token texts, scores and attributes by id, plus the text → id index.
pub struct Vocab {
    arena: String,
    /// `offsets[i]..offsets[i + 1]` is token i's text in `arena`.
    offsets: Vec<u32>,
    pub(super) scores: Vec<f32>,
    pub(super) attrs: Vec<TokenAttr>,
    index: TextIndex,
}

impl Vocab {
    /// Builds the vocabulary. Empty token texts become `[EMPTY_<id>]` as llama.cpp does; two
    /// tokens with the same text are an error (llama.cpp aborts on them).
    pub fn new(
        texts: &[String],
        scores: Vec<f32>,
        attrs: Vec<TokenAttr>,
    ) -> Result<Vocab, TokenizerError> {
        let n = texts.len();
        if n == 0 || n >= u32::MAX as usize {
            return Err(TokenizerError::BadVocabSize { n_tokens: n });
        }
        debug_assert!(scores.len() == n && attrs.len() == n);
        let mut arena = String::with_capacity(texts.iter().map(String::len).sum());
        let mut offsets = Vec::with_capacity(n + 1);
        offsets.push(0u32);
        for (i, t) in texts.iter().enumerate() {
            if t.is_empty() {
                use std::fmt::Write;
                let _ = write!(arena, "[EMPTY_{i}]");
            } else {
                arena.push_str(t);
            }
            // Offsets are u32 to halve their size; 4 GiB of token text is no real vocabulary.
            let end = u32::try_from(arena.len())
                .map_err(|_| TokenizerError::BadVocabSize { n_tokens: n })?;
            offsets.push(end);
        }
        let mut vocab = Vocab {
            arena,
            offsets,
            scores,
            attrs,
            index: TextIndex::with_capacity(0, None),
        };
        vocab.index = TextIndex::build(n, &vocab.arena, &vocab.offsets).map_err(|(first_id, id)| TokenizerError::DuplicateToken {
            id,
            first_id,
            text: vocab.text(id).to_string(),
        })?;
        Ok(vocab)
    }

    pub fn len(&self) -> usize {
        self.attrs.len()
    }

    /// Token `id`'s text; `id` must be in range.
    pub fn text(&self, id: u32) -> &str {
        let (a, b) = (self.offsets[id as usize], self.offsets[id as usize + 1]);
        &self.arena[a as usize..b as usize]
    }

    pub fn get_text(&self, id: u32) -> Option<&str> {
        ((id as usize) < self.len()).then(|| self.text(id))
    }

    pub fn id(&self, text: &str) -> Option<u32> {
        self.index.get(text, &self.arena, &self.offsets)
    }

    pub fn score(&self, id: u32) -> f32 {
        self.scores[id as usize]
    }

    pub fn attr(&self, id: u32) -> TokenAttr {
        self.attrs[id as usize]
    }
}

/// An open-addressing hash table of token ids keyed by their arena text (linear probing).
///
/// The fast hash is not keyed, so a crafted vocabulary can put every text in one probe chain
/// (n²/2 comparisons to build: a hang). A build whose longest probe passes [`MAX_PROBE`]
/// starts over with SipHash under keys no file can know ([`secret_keys`]); real vocabularies
/// never need it (their longest probe is a few dozen slots at this load factor).
struct TextIndex {
    /// `id + 1`, or 0 for an empty slot.
    slots: Vec<u32>,
    mask: usize,
    /// SipHash keys, once the fast hash met a crafted vocabulary.
    keys: Option<(u64, u64)>,
}

/// Longest probe the fast hash may need while building before the index is rebuilt keyed.
const MAX_PROBE: usize = 256;

impl TextIndex {
    /// The index of the texts of ids `0..n`; `Err(first, dup)` for two ids with one text.
    fn build(n: usize, arena: &str, offsets: &[u32]) -> Result<TextIndex, (u32, u32)> {
        let mut ix = TextIndex::with_capacity(n, None);
        if ix.insert_all(n, arena, offsets)? {
            return Ok(ix);
        }
        ix = TextIndex::with_capacity(n, Some(secret_keys()));
        ix.insert_all(n, arena, offsets)?;
        Ok(ix)
    }

    fn with_capacity(n: usize, keys: Option<(u64, u64)>) -> TextIndex {
        // Load factor <= 0.5 keeps probe sequences short.
        let cap = (n * 2).next_power_of_two().max(16);
        TextIndex { slots: vec![0; cap], mask: cap - 1, keys }
    }

    fn hash(&self, key: &[u8]) -> u64 {
        match self.keys {
            None => hash_bytes(key),
            Some((k0, k1)) => {
                use std::hash::Hasher;
                #[allow(deprecated)] // std's one keyed SipHash; the replacement is unstable.
                let mut h = std::hash::SipHasher::new_with_keys(k0, k1);
                h.write(key);
                h.finish()
            }
        }
    }

    fn slice<'a>(arena: &'a str, offsets: &[u32], id: u32) -> &'a [u8] {
        let (a, b) = (offsets[id as usize], offsets[id as usize + 1]);
        &arena.as_bytes()[a as usize..b as usize]
    }

    /// Inserts ids `0..n`: `Ok(false)` when an unkeyed probe ran past [`MAX_PROBE`] (the index
    /// is then incomplete), `Err((first, dup))` for a repeated text.
    fn insert_all(&mut self, n: usize, arena: &str, offsets: &[u32]) -> Result<bool, (u32, u32)> {
        for id in 0..n as u32 {
            let key = Self::slice(arena, offsets, id);
            let mut i = self.hash(key) as usize & self.mask;
            let mut probes = 0;
            loop {
                match self.slots[i] {
                    0 => {
                        self.slots[i] = id + 1;
                        break;
                    }
                    s if Self::slice(arena, offsets, s - 1) == key => return Err((s - 1, id)),
                    _ => i = (i + 1) & self.mask,
                }
                probes += 1;
                if probes > MAX_PROBE && self.keys.is_none() {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }

    fn get(&self, text: &str, arena: &str, offsets: &[u32]) -> Option<u32> {
        let key = text.as_bytes();
        let mut i = self.hash(key) as usize & self.mask;
        loop {
            match self.slots[i] {
                0 => return None,
                s if Self::slice(arena, offsets, s - 1) == key => return Some(s - 1),
                _ => i = (i + 1) & self.mask,
            }
        }
    }
}

/// Hash keys no file can predict: the OS's randomness through std's `RandomState` natively,
/// JavaScript's `Math.random` in wasm (std has no source of randomness there).
pub(super) fn secret_keys() -> (u64, u64) {
    #[cfg(not(target_arch = "wasm32"))]
    {
        use std::hash::{BuildHasher, Hasher};
        let s = std::collections::hash_map::RandomState::new();
        let draw = |tag: u64| {
            let mut h = s.build_hasher();
            h.write_u64(tag);
            h.finish()
        };
        (draw(0), draw(1))
    }
    #[cfg(target_arch = "wasm32")]
    {
        let word = || ((js_sys::Math::random() * 4294967296.0) as u64) << 32 | (js_sys::Math::random() * 4294967296.0) as u64;
        (word(), word())
    }
}

/// A fast non-cryptographic hash of a byte string (word-at-a-time multiply-rotate, then a
/// murmur3 finalizer so the low bits used for the slot index are well mixed).
pub(super) fn hash_bytes(bytes: &[u8]) -> u64 {
    const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
    let mut h: u64 = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut buf = [0u8; 8];
        buf[..rest.len()].copy_from_slice(rest);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(buf)).wrapping_mul(K);
    }
    mix64(h)
}

/// murmur3's 64-bit finalizer.
pub(super) fn mix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab(texts: &[&str]) -> Result<Vocab, TokenizerError> {
        let texts: Vec<String> = texts.iter().map(|s| s.to_string()).collect();
        let n = texts.len();
        Vocab::new(&texts, vec![0.0; n], vec![TokenAttr::NORMAL; n])
    }

    #[test]
    fn lookup_both_ways() {
        let v = vocab(&["a", "b", "ab", "▁the", "", "longer than eight bytes"]).unwrap();
        assert_eq!(v.id("ab"), Some(2));
        assert_eq!(v.id("▁the"), Some(3));
        assert_eq!(v.id("longer than eight bytes"), Some(5));
        assert_eq!(v.id("abc"), None);
        assert_eq!(v.id(""), None);
        assert_eq!(v.text(4), "[EMPTY_4]");
        assert_eq!(v.id("[EMPTY_4]"), Some(4));
        assert_eq!(v.get_text(6), None);
    }

    #[test]
    fn duplicate_text_is_an_error() {
        let err = vocab(&["a", "b", "a"]).err().unwrap();
        assert_eq!(err.code(), "TOKENIZER_DUPLICATE_TOKEN");
        assert_eq!(
            err,
            TokenizerError::DuplicateToken {
                id: 2,
                first_id: 0,
                text: "a".into()
            }
        );
    }

    #[test]
    fn empty_vocab_is_an_error() {
        assert_eq!(vocab(&[]).err().unwrap().code(), "TOKENIZER_BAD_VOCAB_SIZE");
    }

    #[test]
    fn many_tokens_all_found() {
        let texts: Vec<String> = (0..50_000).map(|i| format!("t{i}")).collect();
        let n = texts.len();
        let v = Vocab::new(&texts, vec![0.0; n], vec![TokenAttr::NORMAL; n]).unwrap();
        for (i, t) in texts.iter().enumerate() {
            assert_eq!(v.id(t), Some(i as u32));
        }
        assert_eq!(v.id("t50000"), None);
    }

    /// The inverse of [`mix64`] (each step is invertible: a shift-xor by ≥ half the width, and a
    /// multiplication by an odd constant).
    fn unmix64(mut h: u64) -> u64 {
        let inv = |k: u64| {
            // Newton's iteration for the inverse of an odd number mod 2^64.
            let mut x = k;
            for _ in 0..6 {
                x = x.wrapping_mul(2u64.wrapping_sub(k.wrapping_mul(x)));
            }
            x
        };
        h ^= h >> 33;
        h = h.wrapping_mul(inv(0xc4ce_b9fe_1a85_ec53));
        h ^= h >> 33;
        h = h.wrapping_mul(inv(0xff51_afd7_ed55_8ccd));
        h ^= h >> 33;
        h
    }

    #[test]
    fn a_vocabulary_crafted_to_collide_builds_in_linear_time() {
        // 8-byte ASCII texts whose fast hashes share their low 24 bits (one slot in any table
        // up to 2^24): built by inverting the hash, as a hostile file could. Unkeyed, the build
        // was n²/2 text comparisons; now the index starts over keyed and stays fast.
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let kinv = {
            let mut x = K;
            for _ in 0..6 {
                x = x.wrapping_mul(2u64.wrapping_sub(K.wrapping_mul(x)));
            }
            x
        };
        let start = (8u64).rotate_left(5);
        let mut texts = Vec::new();
        let mut j = 0u64;
        while texts.len() < 30_000 {
            j += 1;
            let w = unmix64(j << 24).wrapping_mul(kinv) ^ start;
            let b = w.to_le_bytes();
            if b.iter().all(|&c| (0x20..0x7f).contains(&c)) {
                let t = String::from_utf8(b.to_vec()).unwrap();
                assert_eq!(hash_bytes(t.as_bytes()) & 0xff_ffff, 0);
                texts.push(t);
            }
        }
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let t0 = std::time::Instant::now();
        let v = vocab(&refs).unwrap();
        let took = t0.elapsed();
        assert!(v.index.keys.is_some(), "the crafted texts made the build start over keyed");
        assert!(took < std::time::Duration::from_secs(5), "{took:?}");
        for (i, t) in refs.iter().enumerate().step_by(997) {
            assert_eq!(v.id(t), Some(i as u32));
        }
        assert_eq!(v.id("absent!!"), None);
        // A real-looking vocabulary keeps the fast, deterministic hash.
        let plain: Vec<String> = (0..30_000).map(|i| format!("t{i}")).collect();
        let plain: Vec<&str> = plain.iter().map(String::as_str).collect();
        assert!(vocab(&plain).unwrap().index.keys.is_none());
    }
}
