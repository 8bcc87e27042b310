//! Token ids back to text, as llama.cpp's `token_to_piece` and `detokenize` do it, plus a
//! streaming decoder whose pieces concatenate to exactly the whole decode.

use super::bpe::char_to_byte;
use super::error::TokenizerError;
use super::load::parse_byte_token;
use super::vocab::TokenAttr;
use super::{Kind, Tokenizer};

/// Options of [`Tokenizer::decode`], named after llama.cpp's `llama_detokenize` arguments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Drop a leading BOS / trailing EOS when the vocabulary adds them (`add_bos`/`add_eos`).
    pub remove_special: bool,
    /// Render CONTROL and UNKNOWN tokens as their text (otherwise they render as nothing).
    pub unparse_special: bool,
}

impl Tokenizer {
    /// Appends token `id`'s bytes. `special`: render CONTROL/UNKNOWN tokens; `lstrip`: drop
    /// that many leading spaces. `id` must be in range.
    pub(super) fn append_piece(&self, id: u32, special: bool, lstrip: usize, out: &mut Vec<u8>) {
        let attr = self.vocab.attr(id);
        let start = out.len();
        let text = self.vocab.text(id);
        if attr.has(TokenAttr::CONTROL.with(TokenAttr::UNKNOWN)) {
            if special {
                out.extend_from_slice(text.as_bytes());
            }
        } else if attr.has(TokenAttr::USER_DEFINED) {
            out.extend_from_slice(text.as_bytes());
        } else if attr.has(TokenAttr::NORMAL) {
            match self.kind {
                // SentencePiece marks spaces with U+2581.
                Kind::Spm => {
                    let mut rest = text;
                    while let Some(i) = rest.find('\u{2581}') {
                        out.extend_from_slice(rest[..i].as_bytes());
                        out.push(b' ');
                        rest = &rest[i + '\u{2581}'.len_utf8()..];
                    }
                    out.extend_from_slice(rest.as_bytes());
                }
                // Byte-level BPE: each character stands for one byte.
                Kind::Bpe(_) => {
                    for c in text.chars() {
                        match char_to_byte(c) {
                            Some(b) => out.push(b),
                            None => {
                                // llama.cpp's marker for a character no byte maps to.
                                out.extend_from_slice(b"[UNK_BYTE_0x");
                                let mut buf = [0u8; 4];
                                for b in c.encode_utf8(&mut buf).bytes() {
                                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                                }
                                out.extend_from_slice(text.as_bytes());
                                out.push(b']');
                            }
                        }
                    }
                }
            }
        } else if attr.has(TokenAttr::BYTE) {
            // Validated when the vocabulary was loaded.
            if let Some(b) = parse_byte_token(text) {
                out.push(b);
            }
        }
        // UNUSED-only and UNDEFINED tokens render as nothing.
        let n_spaces = out[start..]
            .iter()
            .take(lstrip)
            .take_while(|&&b| b == b' ')
            .count();
        out.drain(start..start + n_spaces);
    }

    fn check_id(&self, id: u32) -> Result<(), TokenizerError> {
        if (id as usize) < self.vocab.len() {
            Ok(())
        } else {
            Err(TokenizerError::InvalidTokenId {
                id,
                n_tokens: self.vocab.len(),
            })
        }
    }

    /// Token `id`'s bytes as llama.cpp's `llama_token_to_piece(.., lstrip = 0, special)`.
    /// `special` renders CONTROL/UNKNOWN tokens as their text (else they are empty).
    pub fn token_to_piece(&self, id: u32, special: bool) -> Result<Vec<u8>, TokenizerError> {
        self.token_to_piece_lstrip(id, special, 0)
    }

    /// As [`token_to_piece`](Self::token_to_piece), dropping up to `lstrip` leading spaces
    /// (llama.cpp's `lstrip` argument: 1 removes the space SPM prefixed to a first word).
    pub fn token_to_piece_lstrip(
        &self,
        id: u32,
        special: bool,
        lstrip: usize,
    ) -> Result<Vec<u8>, TokenizerError> {
        self.check_id(id)?;
        let mut out = Vec::new();
        self.append_piece(id, special, lstrip, &mut out);
        Ok(out)
    }

    /// The bytes of `llama_detokenize(ids, remove_special, unparse_special)`.
    pub fn decode_bytes(
        &self,
        ids: &[u32],
        opts: DecodeOptions,
    ) -> Result<Vec<u8>, TokenizerError> {
        for &id in ids {
            self.check_id(id)?;
        }
        let mut ids = ids;
        // SPM strips the space it prefixed to the first word, unless a BOS was removed.
        let mut remove_space = self.settings.add_space_prefix;
        if opts.remove_special && self.settings.add_bos {
            if let Some((&first, rest)) = ids.split_first() {
                if Some(first) == self.ids.bos {
                    remove_space = false;
                    ids = rest;
                }
            }
        }
        if opts.remove_special && self.settings.add_eos {
            if let Some((&last, rest)) = ids.split_last() {
                if Some(last) == self.ids.eos {
                    ids = rest;
                }
            }
        }
        let mut out = Vec::new();
        for &id in ids {
            self.append_piece(id, opts.unparse_special, remove_space as usize, &mut out);
            remove_space = false;
        }
        if self.settings.clean_spaces {
            out = clean_spaces(&out);
        }
        Ok(out)
    }

    /// [`decode_bytes`](Self::decode_bytes) as text; byte sequences that are not UTF-8 become
    /// U+FFFD (as JavaScript's TextDecoder would render them).
    pub fn decode(&self, ids: &[u32], opts: DecodeOptions) -> Result<String, TokenizerError> {
        Ok(String::from_utf8_lossy(&self.decode_bytes(ids, opts)?).into_owned())
    }

    /// A decoder for generated tokens, one at a time.
    pub fn stream_decoder(&self, opts: DecodeOptions) -> StreamDecoder<'_> {
        StreamDecoder { tok: self, state: self.decode_state(opts) }
    }

    /// The state of a [`StreamDecoder`] without the borrow of the tokenizer: for a decoder
    /// that lives across calls (a step-wise generation), each step lends the tokenizer.
    pub fn decode_state(&self, opts: DecodeOptions) -> DecodeState {
        DecodeState {
            opts,
            seen_first: false,
            remove_space: self.settings.add_space_prefix,
            held_eos: None,
            raw: Vec::new(),
            clean_run: 0,
            pending: Vec::new(),
        }
    }
}

/// llama.cpp's `clean_up_tokenization_spaces` passes (BPE vocabularies whose pre-tokenizer asks
/// for it): drop the space before `?!.,`; turn " ' " into "'"; join " 's", " 'm", " 're", " 've".
pub fn clean_spaces(text: &[u8]) -> Vec<u8> {
    // Pass 1: " ?", " !", " .", " ,".
    let mut t1: Vec<u8> = Vec::with_capacity(text.len());
    for (i, &x) in text.iter().enumerate() {
        if i > 0 && text[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            t1.pop();
        }
        t1.push(x);
    }
    // Pass 2: a lone apostrophe between spaces loses both spaces. The skipped space is
    // remembered so that the character after it does not see a space before it.
    let mut t2: Vec<u8> = Vec::with_capacity(t1.len());
    let mut cleared = usize::MAX;
    let mut i = 0;
    while i < t1.len() {
        let x = t1[i];
        if i > 0 {
            let prev = if i - 1 == cleared { 0 } else { t1[i - 1] };
            if x == b'\'' && i + 1 < t1.len() && prev == b' ' && t1[i + 1] == b' ' {
                t2.pop();
                i += 1;
                cleared = i;
            }
        }
        t2.push(x);
        i += 1;
    }
    // Pass 3: contractions " 's", " 'm", " 're", " 've" (but not " 't", " 'd", " 'll").
    let mut t3: Vec<u8> = Vec::with_capacity(t2.len());
    let n = t2.len();
    for i in 0..n {
        let x = t2[i];
        if i > 0 && t2[i - 1] == b' ' && x == b'\'' && i + 1 < n {
            let x1 = t2[i + 1];
            if x1 == b's' || x1 == b'm' {
                t3.pop();
            } else if i + 2 < n {
                let x2 = t2[i + 2];
                if (x1 == b'r' && x2 == b'e') || (x1 == b'v' && x2 == b'e') {
                    t3.pop();
                }
            }
        }
        t3.push(x);
    }
    t3
}

/// Decodes generated tokens one at a time. Each [`push`](Self::push) returns the text that is
/// now final: a token that ends inside a UTF-8 character returns nothing until the character
/// completes, and (for vocabularies that clean up spaces) text whose clean-up depends on what
/// follows waits for it. The pushes' results followed by [`finish`](Self::finish) concatenate
/// to exactly `decode(all ids)`.
pub struct StreamDecoder<'t> {
    tok: &'t Tokenizer,
    state: DecodeState,
}

impl StreamDecoder<'_> {
    /// Adds one token; returns the text that became final.
    pub fn push(&mut self, id: u32) -> Result<String, TokenizerError> {
        self.state.push(self.tok, id)
    }

    /// Ends the stream: returns whatever text was still held back.
    pub fn finish(mut self) -> String {
        self.state.finish(self.tok)
    }
}

/// What a [`StreamDecoder`] holds between tokens, owned: every call is given the tokenizer
/// that made it ([`Tokenizer::decode_state`]). O(1) per token: nothing is decoded twice.
#[derive(Clone, Debug)]
pub struct DecodeState {
    opts: DecodeOptions,
    seen_first: bool,
    remove_space: bool,
    /// An EOS that `remove_special` drops if it turns out to be the last token: (id, lstrip).
    held_eos: Option<(u32, bool)>,
    /// Raw bytes whose space clean-up is not yet decided (clean-up vocabularies only).
    raw: Vec<u8>,
    /// How many bytes at the end of `raw` are neither ' ' nor '\''.
    clean_run: usize,
    /// Final bytes not yet returned because they end inside a UTF-8 character.
    pending: Vec<u8>,
}

impl DecodeState {
    /// Adds one token; returns the text that became final.
    pub fn push(&mut self, tok: &Tokenizer, id: u32) -> Result<String, TokenizerError> {
        tok.check_id(id)?;
        let s = &tok.settings;
        let first = !self.seen_first;
        self.seen_first = true;
        if first && self.opts.remove_special && s.add_bos && Some(id) == tok.ids.bos {
            self.remove_space = false;
            return Ok(String::new());
        }
        let mut piece = Vec::new();
        if let Some((eos, lstrip)) = self.held_eos.take() {
            // Not the last token after all.
            tok
                .append_piece(eos, self.opts.unparse_special, lstrip as usize, &mut piece);
        }
        let lstrip = std::mem::replace(&mut self.remove_space, false);
        if self.opts.remove_special && s.add_eos && Some(id) == tok.ids.eos {
            self.held_eos = Some((id, lstrip));
        } else {
            tok
                .append_piece(id, self.opts.unparse_special, lstrip as usize, &mut piece);
        }
        self.accept(tok, &piece);
        Ok(self.take_text(false))
    }

    /// Ends the stream: returns whatever text was still held back (the state is then that of
    /// an ended stream: push no more).
    pub fn finish(&mut self, tok: &Tokenizer) -> String {
        if tok.settings.clean_spaces {
            let raw = std::mem::take(&mut self.raw);
            self.pending.extend(clean_spaces(&raw));
        }
        self.take_text(true)
    }

    fn accept(&mut self, tok: &Tokenizer, piece: &[u8]) {
        if !tok.settings.clean_spaces {
            self.pending.extend_from_slice(piece);
            return;
        }
        // Clean-up decisions look at most three bytes past a space or apostrophe, so text
        // before four "quiet" bytes is decided independently of anything that follows.
        let mut split = None;
        for &b in piece {
            self.raw.push(b);
            self.clean_run = if b == b' ' || b == b'\'' {
                0
            } else {
                self.clean_run + 1
            };
            if self.clean_run >= 4 {
                split = Some(self.raw.len());
            }
        }
        if let Some(k) = split {
            self.pending.extend(clean_spaces(&self.raw[..k]));
            self.raw.drain(..k);
            self.clean_run = self.clean_run.min(self.raw.len());
        }
    }

    /// Returns the complete UTF-8 text in `pending`; invalid sequences become U+FFFD. An
    /// incomplete final character waits, unless `end`.
    fn take_text(&mut self, end: bool) -> String {
        let mut text = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    text.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    text.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            text.push('\u{FFFD}');
                            rest = &after[n..];
                        }
                        None if end => {
                            text.push('\u{FFFD}');
                            rest = &[];
                            break;
                        }
                        None => {
                            rest = after;
                            break;
                        }
                    }
                }
            }
        }
        let keep = rest.len();
        let drop = self.pending.len() - keep;
        self.pending.drain(..drop);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::clean_spaces;

    fn clean(s: &str) -> String {
        String::from_utf8(clean_spaces(s.as_bytes())).unwrap()
    }

    #[test]
    fn clean_up_passes() {
        assert_eq!(clean("Hello , world !"), "Hello, world!");
        assert_eq!(clean("a ' b"), "a'b");
        assert_eq!(clean("it 's I 'm we 're you 've"), "it's I'm we're you've");
        assert_eq!(clean("don 't I 'd we 'll"), "don 't I 'd we 'll");
        assert_eq!(clean(" ."), ".");
        assert_eq!(clean(""), "");
        // The space after a lone apostrophe is gone, so the next apostrophe stays as it is.
        assert_eq!(clean("x ' ' y"), "x'' y");
    }
}
