//! BPE pre-tokenizers: how `tokenizer.ggml.pre` cuts text into words before merges run.
//!
//! Each split works on a list of pieces (code point ranges) and refines it, as llama.cpp's
//! `unicode_regex_split` applies its list of expressions one after another. The expressions
//! are hand-written matchers (no regex engine in the wasm binary); each states the pattern it
//! implements. Where llama.cpp runs an expression through `std::regex` over "collapsed" text
//! (every non-ASCII code point replaced by a byte naming its category), the matcher tests the
//! same classes: an ASCII character as itself, any other code point by its category.

use super::unicode::{Cat, Flags};

/// The split selected by `tokenizer.ggml.pre`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreTokenizer {
    /// "default" (and a missing key): `[\p{P}\$\+<=>\^~\|]+`, then the GPT-2 expression, then
    /// `\p{N}+`, then `[0-9][0-9][0-9]`.
    Default,
    /// "gpt-2" and relatives: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`.
    Gpt2,
    /// "llama3" / "llama-bpe": `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
    /// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`.
    Llama3,
    /// "qwen2": as Llama3 but single digits (`\p{N}`).
    Qwen2,
    /// "smollm", "starcoder", "refact", "command-r", ...: `\p{N}` then the GPT-2 expression.
    SmolLm,
}

/// Splits `cps` (one fragment's code points) into word lengths (in code points).
pub fn split(pre: PreTokenizer, cps: &[u32]) -> Vec<usize> {
    let flags: Vec<Flags> = cps.iter().map(|&c| Flags::of(c)).collect();
    let text = Text { cps, flags: &flags };
    let all = vec![cps.len()];
    match pre {
        PreTokenizer::Default => {
            let p = text.refine(&all, |t, a, b, out| t.runs(a, b, out, is_default_punct));
            let p = text.refine(&p, |t, a, b, out| t.gpt2(a, b, out));
            let p = text.refine(&p, |t, a, b, out| t.runs(a, b, out, is_collapsed_number));
            text.refine(&p, |t, a, b, out| t.ascii_digit_triples(a, b, out))
        }
        PreTokenizer::Gpt2 => text.refine(&all, |t, a, b, out| t.gpt2(a, b, out)),
        PreTokenizer::Llama3 => text.refine(&all, |t, a, b, out| t.llama3(a, b, out, 3)),
        PreTokenizer::Qwen2 => text.refine(&all, |t, a, b, out| t.llama3(a, b, out, 1)),
        PreTokenizer::SmolLm => {
            let p = text.refine(&all, |t, a, b, out| {
                t.singles(a, b, out, is_collapsed_number)
            });
            text.refine(&p, |t, a, b, out| t.gpt2(a, b, out))
        }
    }
}

/// `[\p{P}\$\+<=>\^~\|]` over collapsed text: ASCII punctuation and symbols except '`', or a
/// non-ASCII, non-space code point of category P.
fn is_default_punct(cp: u32, f: Flags) -> bool {
    if cp < 128 {
        (cp as u8).is_ascii_punctuation() && cp != '`' as u32
    } else {
        !f.whitespace && f.cat == Some(Cat::Punctuation)
    }
}

/// `\p{N}` over collapsed text: ASCII digits, or a non-ASCII, non-space code point of category N.
fn is_collapsed_number(cp: u32, f: Flags) -> bool {
    if cp < 128 {
        (cp as u8).is_ascii_digit()
    } else {
        !f.whitespace && f.cat == Some(Cat::Number)
    }
}

const OUT_OF_RANGE: u32 = u32::MAX;

struct Text<'a> {
    cps: &'a [u32],
    flags: &'a [Flags],
}

/// Collects word lengths for one piece `[start, end)`.
struct Words<'o> {
    out: &'o mut Vec<usize>,
    prev_end: usize,
}

impl Words<'_> {
    /// Ends a word at `end` (empty words are dropped); returns its length.
    fn add(&mut self, end: usize) -> usize {
        let len = end - self.prev_end;
        if len > 0 {
            self.out.push(len);
        }
        self.prev_end = end;
        len
    }
}

impl Text<'_> {
    /// Applies `f` to every current piece, collecting the refined pieces.
    fn refine(
        &self,
        pieces: &[usize],
        f: impl Fn(&Self, usize, usize, &mut Vec<usize>),
    ) -> Vec<usize> {
        let mut out = Vec::with_capacity(pieces.len() * 2);
        let mut start = 0;
        for &len in pieces {
            f(self, start, start + len, &mut out);
            start += len;
        }
        out
    }

    /// Maximal runs of code points matching `pred` are words, and so is each gap between them
    /// (a `[...]+` expression under llama.cpp's regex split).
    fn runs(&self, a: usize, b: usize, out: &mut Vec<usize>, pred: fn(u32, Flags) -> bool) {
        let mut w = Words { out, prev_end: a };
        let mut i = a;
        while i < b {
            if pred(self.cps[i], self.flags[i]) {
                w.add(i);
                while i < b && pred(self.cps[i], self.flags[i]) {
                    i += 1;
                }
                w.add(i);
            } else {
                i += 1;
            }
        }
        w.add(b);
    }

    /// Every code point matching `pred` is a word of its own; gaps are words too (`[...]`).
    fn singles(&self, a: usize, b: usize, out: &mut Vec<usize>, pred: fn(u32, Flags) -> bool) {
        let mut w = Words { out, prev_end: a };
        for i in a..b {
            if pred(self.cps[i], self.flags[i]) {
                w.add(i);
                w.add(i + 1);
            }
        }
        w.add(b);
    }

    /// `[0-9][0-9][0-9]`: left to right, each three consecutive ASCII digits are a word.
    fn ascii_digit_triples(&self, a: usize, b: usize, out: &mut Vec<usize>) {
        let digit = |i: usize| (self.cps[i] as u8).is_ascii_digit() && self.cps[i] < 128;
        let mut w = Words { out, prev_end: a };
        let mut i = a;
        while i + 3 <= b {
            if digit(i) && digit(i + 1) && digit(i + 2) {
                w.add(i);
                w.add(i + 3);
                i += 3;
            } else {
                i += 1;
            }
        }
        w.add(b);
    }

    /// The GPT-2 expression, implemented as llama.cpp's hand-written matcher does.
    fn gpt2(&self, a: usize, b: usize, out: &mut Vec<usize>) {
        let cpt = |p: usize| {
            if p >= a && p < b {
                self.cps[p]
            } else {
                OUT_OF_RANGE
            }
        };
        let fl = |p: usize| {
            if p >= a && p < b {
                self.flags[p]
            } else {
                Flags::NONE
            }
        };
        let mut w = Words { out, prev_end: a };
        let mut pos = a;
        while pos < b {
            let c = cpt(pos);
            let f = fl(pos);
            // 's|'t|'re|'ve|'m|'ll|'d
            if c == '\'' as u32 && pos + 1 < b {
                let n = cpt(pos + 1);
                if [b's', b't', b'm', b'd'].iter().any(|&x| n == x as u32) {
                    pos += w.add(pos + 2);
                    continue;
                }
                if pos + 2 < b {
                    let nn = cpt(pos + 2);
                    if is_two_letter_suffix(n, nn) {
                        pos += w.add(pos + 3);
                        continue;
                    }
                }
            }
            let mut f2 = if c == ' ' as u32 { fl(pos + 1) } else { f };
            // ' ?\p{L}+', ' ?\p{N}+'
            if f2.letter() || f2.number() {
                let letter = f2.letter();
                pos += (c == ' ' as u32) as usize;
                while if letter { f2.letter() } else { f2.number() } {
                    pos += 1;
                    f2 = fl(pos);
                }
                w.add(pos);
                continue;
            }
            // ' ?[^\s\p{L}\p{N}]+'
            let other = |f: Flags| !(f.whitespace || f.letter() || f.number()) && f.present();
            if other(f2) {
                pos += (c == ' ' as u32) as usize;
                while other(f2) {
                    pos += 1;
                    f2 = fl(pos);
                }
                w.add(pos);
                continue;
            }
            let mut n_ws = 0;
            while fl(pos + n_ws).whitespace {
                n_ws += 1;
            }
            // '\s+(?!\S)': leave the last space to prefix the next word.
            if n_ws > 1 && cpt(pos + n_ws) != OUT_OF_RANGE {
                pos += n_ws - 1;
                w.add(pos);
                continue;
            }
            // '\s+'
            if n_ws > 0 {
                pos += n_ws;
                w.add(pos);
                continue;
            }
            pos += 1;
            w.add(pos);
        }
    }

    /// The Llama 3 expression (`max_digits` = 3) and Qwen 2's (`max_digits` = 1).
    fn llama3(&self, a: usize, b: usize, out: &mut Vec<usize>, max_digits: usize) {
        let cpt = |p: usize| {
            if p >= a && p < b {
                self.cps[p]
            } else {
                OUT_OF_RANGE
            }
        };
        let fl = |p: usize| {
            if p >= a && p < b {
                self.flags[p]
            } else {
                Flags::NONE
            }
        };
        let is_rn = |c: u32| c == '\r' as u32 || c == '\n' as u32;
        let mut w = Words { out, prev_end: a };
        let mut pos = a;
        while pos < b {
            let c = cpt(pos);
            let f = fl(pos);
            // (?i:'s|'t|'re|'ve|'m|'ll|'d)
            if c == '\'' as u32 && pos + 1 < b {
                let n = ascii_lower(cpt(pos + 1));
                if [b's', b't', b'm', b'd'].iter().any(|&x| n == x as u32) {
                    pos += w.add(pos + 2);
                    continue;
                }
                if pos + 2 < b {
                    let nn = ascii_lower(cpt(pos + 2));
                    if is_two_letter_suffix(n, nn) {
                        pos += w.add(pos + 3);
                        continue;
                    }
                }
            }
            // [^\r\n\p{L}\p{N}]?\p{L}+
            if !(is_rn(c) || f.number()) && (f.letter() || fl(pos + 1).letter()) {
                pos += 1;
                while fl(pos).letter() {
                    pos += 1;
                }
                w.add(pos);
                continue;
            }
            // \p{N}{1,3} (or \p{N})
            if f.number() {
                let mut ini = pos;
                while fl(pos).number() {
                    pos += 1;
                    if pos - ini >= max_digits {
                        w.add(pos);
                        ini = pos;
                    }
                }
                w.add(pos);
                continue;
            }
            // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
            let mut f2 = if c == ' ' as u32 { fl(pos + 1) } else { f };
            let other = |f: Flags| !(f.whitespace || f.letter() || f.number());
            if other(f2) && f.present() {
                pos += (c == ' ' as u32) as usize;
                while other(f2) && f2.present() {
                    pos += 1;
                    f2 = fl(pos);
                }
                while is_rn(cpt(pos)) {
                    pos += 1;
                }
                w.add(pos);
                continue;
            }
            let mut n_ws = 0;
            let mut last_rn_end = 0;
            while fl(pos + n_ws).whitespace {
                if is_rn(cpt(pos + n_ws)) {
                    last_rn_end = pos + n_ws + 1;
                }
                n_ws += 1;
            }
            // \s*[\r\n]+
            if last_rn_end > 0 {
                pos = last_rn_end;
                w.add(pos);
                continue;
            }
            // \s+(?!\S)
            if n_ws > 1 && cpt(pos + n_ws) != OUT_OF_RANGE {
                pos += n_ws - 1;
                w.add(pos);
                continue;
            }
            // \s+
            if n_ws > 0 {
                pos += n_ws;
                w.add(pos);
                continue;
            }
            pos += 1;
            w.add(pos);
        }
    }
}

fn is_two_letter_suffix(n: u32, nn: u32) -> bool {
    let (r, e, v, l) = ('r' as u32, 'e' as u32, 'v' as u32, 'l' as u32);
    (n == r && nn == e) || (n == v && nn == e) || (n == l && nn == l)
}

/// Case folding for the contraction suffixes. Only ASCII letters lower-case to s, t, m, d, r,
/// v, e or l, so ASCII folding is exact here.
fn ascii_lower(c: u32) -> u32 {
    if ('A' as u32..='Z' as u32).contains(&c) {
        c + 32
    } else {
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(pre: PreTokenizer, s: &str) -> Vec<String> {
        let cps: Vec<u32> = s.chars().map(|c| c as u32).collect();
        let chars: Vec<char> = s.chars().collect();
        let mut out = Vec::new();
        let mut i = 0;
        for len in split(pre, &cps) {
            out.push(chars[i..i + len].iter().collect());
            i += len;
        }
        assert_eq!(i, chars.len(), "pieces must cover the text");
        out
    }

    #[test]
    fn gpt2_words() {
        assert_eq!(
            words(PreTokenizer::Gpt2, "Hello world's  best 123!!\n"),
            ["Hello", " world", "'s", " ", " best", " 123", "!!", "\n"]
        );
    }

    #[test]
    fn llama3_words() {
        assert_eq!(
            words(PreTokenizer::Llama3, "I'M 12345 ok?\n\n  x"),
            ["I", "'M", " ", "123", "45", " ok", "?\n\n", " ", " x"]
        );
        assert_eq!(
            words(PreTokenizer::Qwen2, "a 123"),
            ["a", " ", "1", "2", "3"]
        );
    }

    #[test]
    fn default_words() {
        assert_eq!(
            words(PreTokenizer::Default, "x=1234567, `y`"),
            ["x", "=", "123", "456", "7", ",", " `", "y", "`"]
        );
    }
}
