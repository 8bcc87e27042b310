//! Message contents kept literal through a chat template: the text a user (or a tool) wrote is
//! tokenized as text, so typing `<start_of_turn>` or `<|im_end|>` cannot forge a turn, while
//! the template's own markup keeps its special tokens.
//!
//! How, for any template (Jinja or built-in) and whatever it does to the content (trims it,
//! slices it, upper-cases it): before rendering, every special-token text in a protected
//! content (and every character of the placeholder range, so nothing can pose as one) is
//! replaced by a placeholder, one private-use character per distinct text (plane 15, U+F0000..).
//! The rendered prompt is split around special tokens as usual; the placeholders sit inside
//! the text pieces (they are not token text) and are put back there, so their original text is
//! tokenized as plain text in place, exactly as `encode(content, parse_special = false)` would.

use std::borrow::Cow;
use std::collections::HashMap;

use super::error::TokenizerError;
use super::special::Fragment;
use super::vocab::TokenAttr;
use super::Tokenizer;

const BASE: u32 = 0xF0000;
/// Plane 15's private-use code points (U+F0000..=U+FFFFD).
const COUNT: u32 = 0xFFFE;

fn is_placeholder(c: char) -> bool {
    (BASE..BASE + COUNT).contains(&(c as u32))
}

/// The texts the placeholders of one rendering stand for.
#[derive(Default)]
pub(crate) struct Literals {
    texts: Vec<String>,
    /// Each text's index in `texts`: a content can hold every placeholder-range character, and
    /// a scan of `texts` per character would be quadratic in the content's length.
    index: HashMap<String, usize>,
}

impl Literals {
    fn placeholder(&mut self, text: &str) -> Result<char, TokenizerError> {
        let i = match self.index.get(text) {
            Some(&i) => i,
            None if self.texts.len() >= COUNT as usize => return Err(TokenizerError::ChatTemplateTooManyLiterals),
            None => {
                self.texts.push(text.to_string());
                self.index.insert(text.to_string(), self.texts.len() - 1);
                self.texts.len() - 1
            }
        };
        u32::try_from(i)
            .ok()
            .filter(|&i| i < COUNT)
            .and_then(|i| char::from_u32(BASE + i))
            .ok_or(TokenizerError::ChatTemplateTooManyLiterals)
    }

    /// `content` with its special-token texts (those only special parsing would recognise:
    /// CONTROL, UNKNOWN) and placeholder-range characters replaced by placeholders.
    pub fn protect(&mut self, tok: &Tokenizer, content: &str) -> Result<String, TokenizerError> {
        let mut out = String::with_capacity(content.len());
        for f in tok.partition(content, true) {
            match f {
                Fragment::Text(t) => {
                    for c in t.chars() {
                        if is_placeholder(c) {
                            out.push(self.placeholder(c.encode_utf8(&mut [0; 4]))?);
                        } else {
                            out.push(c);
                        }
                    }
                }
                Fragment::Token(id) => {
                    let text = tok.token_text(id).unwrap_or_default();
                    // The same test as the special-token split's: a token that is USER_DEFINED
                    // in the file but CONTROL as well (Gemma's `</s>`, an end-of-generation
                    // token) is kept literal too.
                    if tok.token_attr(id).is_some_and(TokenAttr::needs_special_parsing) {
                        out.push(self.placeholder(text)?);
                    } else {
                        out.push_str(text);
                    }
                }
            }
        }
        Ok(out)
    }

    /// A text piece of the rendered prompt with its placeholders put back.
    pub fn restore<'s>(&self, piece: &'s str) -> Cow<'s, str> {
        if self.texts.is_empty() || !piece.chars().any(is_placeholder) {
            return Cow::Borrowed(piece);
        }
        let mut out = String::with_capacity(piece.len());
        for c in piece.chars() {
            match self.texts.get((c as u32).wrapping_sub(BASE) as usize).filter(|_| is_placeholder(c)) {
                Some(t) => out.push_str(t),
                None => out.push(c),
            }
        }
        Cow::Owned(out)
    }
}
