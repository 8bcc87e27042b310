//! Tokenizers read from GGUF metadata, matching llama.cpp token for token.
//!
//! - `tokenizer.ggml.model = llama`: SentencePiece-style, score-driven merges with byte
//!   fallback (Gemma, Llama 2, TinyLlama) — [`spm`].
//! - `tokenizer.ggml.model = gpt2`: byte-level BPE with merge ranks and the pre-tokenizer named
//!   by `tokenizer.ggml.pre` (Llama 3, Qwen 2, SmolLM) — [`bpe`], [`pretokenize`].
//!
//! Special tokens follow llama.cpp: CONTROL tokens (e.g. `<start_of_turn>`) are recognised in
//! text only when special parsing is on; USER_DEFINED tokens (e.g. Gemma's `[multimodal]`) are
//! always recognised ([`special`]). Decoding and streaming decoding are in [`decode`], chat
//! templates in [`chat_template`].

mod bpe;
pub mod chat_template;
mod decode;
mod error;
mod literal;
mod load;
mod pretokenize;
mod special;
mod template_chains;
mod template_filters;
#[cfg(test)]
mod template_hostile;
mod template_consts;
mod template_program;
mod template_work;
mod spm;
mod unicode;
mod unicode_table;
mod vocab;
// Reads the model with Node's `fs`: not in the relaxed-SIMD build, whose tests run in Chromium
// (Node 20's relaxed SIMD is a pre-standard draft that computes other results).
#[cfg(all(test, target_arch = "wasm32", not(target_feature = "relaxed-simd")))]
mod wasm_timing;

pub use chat_template::{ChatMessage, ChatTemplate, ContentSpecials};
pub use decode::{DecodeOptions, DecodeState, StreamDecoder};
pub use error::TokenizerError;
// The GGUF vocabulary keys (also read by the memory ledger's header skimmer).
pub use load::{KEY_MERGES, KEY_SCORES, KEY_TOKENS, KEY_TOKEN_TYPE};
pub use pretokenize::PreTokenizer;
pub use special::Fragment;
pub use vocab::TokenAttr;

use bpe::BpeModel;
use special::SpecialMatcher;
use spm::SpmSession;
use vocab::Vocab;

/// Which algorithm the vocabulary uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenizerKind {
    /// SentencePiece-style (`tokenizer.ggml.model = llama`).
    Spm,
    /// Byte-level BPE (`tokenizer.ggml.model = gpt2`) with its pre-tokenizer.
    Bpe(PreTokenizer),
}

enum Kind {
    Spm,
    Bpe(BpeModel),
}

/// Behaviour switches read from metadata (with llama.cpp's per-model defaults).
#[derive(Clone, Copy, Debug)]
struct Settings {
    add_bos: bool,
    add_eos: bool,
    /// SPM: prefix a space to the text (and to text after a special token); decoding strips it.
    add_space_prefix: bool,
    /// BPE: llama.cpp's `clean_up_tokenization_spaces` on decode.
    clean_spaces: bool,
}

#[derive(Clone, Copy, Debug, Default)]
struct SpecialIds {
    bos: Option<u32>,
    eos: Option<u32>,
    eot: Option<u32>,
    eom: Option<u32>,
    unk: Option<u32>,
    sep: Option<u32>,
    pad: Option<u32>,
    fim_pad: Option<u32>,
}

/// A tokenizer built from GGUF metadata. Immutable and cheap to share.
pub struct Tokenizer {
    vocab: Vocab,
    kind: Kind,
    settings: Settings,
    ids: SpecialIds,
    /// End-of-generation ids, sorted.
    eog: Vec<u32>,
    special: SpecialMatcher,
    /// SPM byte-fallback token for each byte (u32::MAX: none).
    byte_tokens: [u32; 256],
    chat_template: Option<String>,
    architecture: Option<String>,
}

impl Tokenizer {
    /// Text to token ids, as llama.cpp's `llama_tokenize(text, add_special, parse_special)`.
    ///
    /// - `add_special`: add BOS (and EOS) where the metadata asks for them
    ///   (`tokenizer.ggml.add_bos_token` / `add_eos_token`).
    /// - `parse_special`: recognise CONTROL-token text such as `<start_of_turn>` as one token.
    ///   USER_DEFINED tokens are recognised either way.
    pub fn encode(&self, text: &str, add_special: bool, parse_special: bool) -> Vec<u32> {
        self.encode_restoring(text, add_special, parse_special, &literal::Literals::default())
    }

    /// `encode`, with each text piece (between special tokens) passed through
    /// `literals.restore` before it is tokenized (see `literal`).
    pub(crate) fn encode_restoring(&self, text: &str, add_special: bool, parse_special: bool, literals: &literal::Literals) -> Vec<u32> {
        let fragments = self.special.partition(text, parse_special);
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && self.settings.add_bos {
            out.extend(self.ids.bos);
        }
        match &self.kind {
            Kind::Spm => {
                let mut session = SpmSession::default();
                let mut escaped = String::new();
                // The space prefix goes before the first text, and before text that follows
                // a special token.
                let mut prev_special = true;
                for f in fragments {
                    match f {
                        Fragment::Text(t) => {
                            let t = literals.restore(t);
                            escaped.clear();
                            if self.settings.add_space_prefix && prev_special {
                                escaped.push('\u{2581}');
                            }
                            for c in t.chars() {
                                escaped.push(if c == ' ' { '\u{2581}' } else { c });
                            }
                            session.encode(&self.vocab, &escaped, &self.byte_tokens, &mut out);
                            prev_special = false;
                        }
                        Fragment::Token(id) => {
                            out.push(id);
                            prev_special = true;
                        }
                    }
                }
            }
            Kind::Bpe(bpe) => {
                for f in fragments {
                    match f {
                        Fragment::Text(t) => bpe.encode(&self.vocab, &literals.restore(t), &mut out),
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
        }
        if add_special && self.settings.add_eos {
            out.extend(self.ids.eos);
        }
        out
    }

    /// How the text splits around special tokens (what `encode` tokenizes piece by piece).
    pub fn partition<'a>(&self, text: &'a str, parse_special: bool) -> Vec<Fragment<'a>> {
        self.special.partition(text, parse_special)
    }

    pub fn kind(&self) -> TokenizerKind {
        match &self.kind {
            Kind::Spm => TokenizerKind::Spm,
            Kind::Bpe(b) => TokenizerKind::Bpe(b.pre),
        }
    }

    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// Token `id`'s text as stored in the vocabulary (e.g. "▁the", "Ġthe", "<0x0A>").
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.vocab.get_text(id)
    }

    /// The id of the token whose stored text is exactly `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.vocab.id(text)
    }

    pub fn token_attr(&self, id: u32) -> Option<TokenAttr> {
        ((id as usize) < self.vocab.len()).then(|| self.vocab.attr(id))
    }

    pub fn token_score(&self, id: u32) -> Option<f32> {
        ((id as usize) < self.vocab.len()).then(|| self.vocab.score(id))
    }

    pub fn bos_id(&self) -> Option<u32> {
        self.ids.bos
    }
    pub fn eos_id(&self) -> Option<u32> {
        self.ids.eos
    }
    /// End of turn (Gemma's `<end_of_turn>`, Llama 3's `<|eot_id|>`, ChatML's `<|im_end|>`).
    pub fn eot_id(&self) -> Option<u32> {
        self.ids.eot
    }
    pub fn unk_id(&self) -> Option<u32> {
        self.ids.unk
    }
    pub fn pad_id(&self) -> Option<u32> {
        self.ids.pad
    }
    pub fn sep_id(&self) -> Option<u32> {
        self.ids.sep
    }

    /// Whether `encode(.., add_special = true, ..)` prepends BOS.
    pub fn add_bos(&self) -> bool {
        self.settings.add_bos
    }
    /// Whether `encode(.., add_special = true, ..)` appends EOS.
    pub fn add_eos(&self) -> bool {
        self.settings.add_eos
    }
    pub fn add_space_prefix(&self) -> bool {
        self.settings.add_space_prefix
    }

    /// Whether generation must stop at `id` (llama.cpp's `llama_vocab_is_eog`): EOS, EOT,
    /// EOM, and tokens llama.cpp recognises by text (e.g. `<end_of_turn>`, `<|im_end|>`).
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    /// All end-of-generation ids, sorted.
    pub fn eog_ids(&self) -> &[u32] {
        &self.eog
    }

    /// `tokenizer.chat_template` from the file, if any.
    pub fn chat_template(&self) -> Option<&str> {
        self.chat_template.as_deref()
    }

    /// `general.architecture` (used to pick a built-in chat template).
    pub fn architecture(&self) -> Option<&str> {
        self.architecture.as_deref()
    }

    /// Number of BPE merges (0 for SPM).
    pub fn n_merges(&self) -> usize {
        match &self.kind {
            Kind::Spm => 0,
            Kind::Bpe(b) => b.merges.len(),
        }
    }

    /// Number of special tokens matched in text (CONTROL, USER_DEFINED, UNKNOWN).
    pub fn n_special_tokens(&self) -> usize {
        self.special.len()
    }
}
