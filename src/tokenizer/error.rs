//! The tokenizer layer's error type. Every variant has a stable `code()` so the JS side can
//! branch on it; messages name the metadata key or token id a person would need to fix.

use std::fmt;

#[derive(Clone, Debug, PartialEq)]
pub enum TokenizerError {
    /// A required metadata key is absent (e.g. `tokenizer.ggml.tokens`, or scores for SPM).
    MissingKey { key: &'static str },
    /// A metadata key holds the wrong value type (e.g. scores stored as strings).
    WrongType {
        key: &'static str,
        expected: &'static str,
    },
    /// A per-token array whose length differs from the number of tokens.
    LengthMismatch {
        key: &'static str,
        len: usize,
        n_tokens: usize,
    },
    /// `tokenizer.ggml.model` names a tokenizer we do not implement.
    UnsupportedModel { model: String },
    /// `tokenizer.ggml.pre` names a pre-tokenizer split we do not implement.
    UnsupportedPreTokenizer { pre: String },
    /// The vocabulary has no tokens, or more than fit in a u32 id.
    BadVocabSize { n_tokens: usize },
    /// Two tokens share the same text (llama.cpp refuses such vocabularies too).
    DuplicateToken {
        id: u32,
        first_id: u32,
        text: String,
    },
    /// A special-token id key (bos/eos/...) points outside the vocabulary.
    BadSpecialTokenId {
        key: &'static str,
        id: u64,
        n_tokens: usize,
    },
    /// A `tokenizer.ggml.merges` entry is not "left right", or names text that is no token.
    BadMerge {
        index: usize,
        merge: String,
        reason: &'static str,
    },
    /// A token typed BYTE whose text is not `<0xHH>`.
    BadByteToken { id: u32, text: String },
    /// A NaN score: SPM merges order pairs by score, and NaN has no order (the merges, and so
    /// the tokens, would be arbitrary).
    BadScore { id: u32 },
    /// The special tokens' texts (CONTROL, USER_DEFINED, UNKNOWN) hold more bytes in all than
    /// the matcher takes (`special::MAX_SPECIAL_TEXT_BYTES`): its trie holds a node per byte.
    SpecialTextTooLarge { bytes: usize, limit: usize },
    /// A token id passed to decode is outside the vocabulary.
    InvalidTokenId { id: u32, n_tokens: usize },
    /// The chat template failed to parse or render.
    ChatTemplate { message: String },
    /// The chat template ran out of fuel (instructions) before it finished: a template that
    /// loops too long for its conversation.
    ChatTemplateTooCostly { fuel: u64 },
    /// The chat template's filters and methods walked or built more data than one rendering
    /// may (`template_work`): the same class of error as running out of fuel.
    ChatTemplateTooMuchWork { units: u64 },
    /// The chat template's output grew past its limit.
    ChatTemplateOutputTooLarge { limit: usize },
    /// More distinct special-token texts in message contents than can be kept literal.
    ChatTemplateTooManyLiterals,
}

impl TokenizerError {
    /// A stable identifier, safe to match on from JavaScript.
    pub fn code(&self) -> &'static str {
        use TokenizerError::*;
        match self {
            MissingKey { .. } => "TOKENIZER_MISSING_KEY",
            WrongType { .. } => "TOKENIZER_WRONG_TYPE",
            LengthMismatch { .. } => "TOKENIZER_LENGTH_MISMATCH",
            UnsupportedModel { .. } => "TOKENIZER_UNSUPPORTED_MODEL",
            UnsupportedPreTokenizer { .. } => "TOKENIZER_UNSUPPORTED_PRE",
            BadVocabSize { .. } => "TOKENIZER_BAD_VOCAB_SIZE",
            DuplicateToken { .. } => "TOKENIZER_DUPLICATE_TOKEN",
            BadSpecialTokenId { .. } => "TOKENIZER_BAD_SPECIAL_TOKEN_ID",
            BadMerge { .. } => "TOKENIZER_BAD_MERGE",
            BadByteToken { .. } => "TOKENIZER_BAD_BYTE_TOKEN",
            BadScore { .. } => "TOKENIZER_BAD_SCORE",
            SpecialTextTooLarge { .. } => "TOKENIZER_SPECIAL_TOO_LARGE",
            InvalidTokenId { .. } => "TOKENIZER_INVALID_TOKEN_ID",
            ChatTemplate { .. } => "CHAT_TEMPLATE_ERROR",
            ChatTemplateTooCostly { .. } | ChatTemplateTooMuchWork { .. } => "CHAT_TEMPLATE_TOO_COSTLY",
            ChatTemplateOutputTooLarge { .. } => "CHAT_TEMPLATE_OUTPUT_TOO_LARGE",
            ChatTemplateTooManyLiterals => "CHAT_TEMPLATE_TOO_MANY_LITERALS",
        }
    }
}

impl fmt::Display for TokenizerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use TokenizerError::*;
        match self {
            MissingKey { key } => write!(f, "metadata key {key} is missing"),
            WrongType { key, expected } => write!(f, "metadata key {key} should be {expected}"),
            LengthMismatch { key, len, n_tokens } => {
                write!(
                    f,
                    "{key} has {len} entries but the vocabulary has {n_tokens} tokens"
                )
            }
            UnsupportedModel { model } => write!(f, "unsupported tokenizer model {}", shown(model)),
            UnsupportedPreTokenizer { pre } => {
                write!(f, "unsupported pre-tokenizer {} (tokenizer.ggml.pre)", shown(pre))
            }
            BadVocabSize { n_tokens } => write!(f, "vocabulary size {n_tokens} is not usable"),
            DuplicateToken { id, first_id, text } => {
                write!(
                    f,
                    "token {id} repeats the text {} of token {first_id}",
                    shown(text)
                )
            }
            BadSpecialTokenId { key, id, n_tokens } => {
                write!(
                    f,
                    "{key} = {id} is outside the vocabulary of {n_tokens} tokens"
                )
            }
            BadMerge {
                index,
                merge,
                reason,
            } => {
                write!(f, "tokenizer.ggml.merges[{index}] = {}: {reason}", shown(merge))
            }
            BadByteToken { id, text } => {
                write!(
                    f,
                    "token {id} is typed BYTE but its text {} is not <0xHH>",
                    shown(text)
                )
            }
            BadScore { id } => write!(f, "token {id}'s score (tokenizer.ggml.scores) is NaN"),
            SpecialTextTooLarge { bytes, limit } => {
                write!(f, "the special tokens' texts hold {bytes} bytes; at most {limit} are supported")
            }
            InvalidTokenId { id, n_tokens } => {
                write!(
                    f,
                    "token id {id} is outside the vocabulary of {n_tokens} tokens"
                )
            }
            ChatTemplate { message } => write!(f, "chat template: {message}"),
            ChatTemplateTooCostly { fuel } => {
                write!(f, "chat template: rendering took more than {fuel} template instructions")
            }
            ChatTemplateTooMuchWork { units } => {
                write!(f, "chat template: its filters and methods walked or built more than {units} elements or bytes")
            }
            ChatTemplateOutputTooLarge { limit } => {
                write!(f, "chat template: the rendered prompt grew past {limit} bytes")
            }
            ChatTemplateTooManyLiterals => {
                write!(f, "chat template: too many distinct special-token texts in message contents")
            }
        }
    }
}

impl std::error::Error for TokenizerError {}

/// A text from the file, quoted, for a message: at most 64 characters of it (a hostile file's
/// 1 MiB token would otherwise be the whole error line).
fn shown(text: &str) -> String {
    const MAX: usize = 64;
    match text.char_indices().nth(MAX) {
        None => format!("{text:?}"),
        Some((cut, _)) => format!("{:?}… ({} bytes)", &text[..cut], text.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_from_the_file_are_clipped_in_messages() {
        let e = TokenizerError::BadByteToken { id: 3, text: "é".repeat(1 << 20) };
        let m = e.to_string();
        assert!(m.len() < 200 && m.contains("(2097152 bytes)"), "{m}");
        let e = TokenizerError::BadByteToken { id: 3, text: "<0xZZ>".into() };
        assert_eq!(e.to_string(), "token 3 is typed BYTE but its text \"<0xZZ>\" is not <0xHH>");
    }
}
