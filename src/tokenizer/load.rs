//! Building a [`Tokenizer`] from GGUF metadata, with llama.cpp's defaults and its text-based
//! rules for end-of-generation tokens.
//!
//! Not followed: llama.cpp's rules by model *name* that strip white space beside special tokens
//! (`general.name` containing "phi-3": right of every special token; `<mask>` / `[MASK]` of
//! jina-v2 and modern-bert: left of it). Those architectures are not run here; a file of a
//! supported architecture under such a name tokenizes without the stripping.

use super::bpe::{BpeModel, Merges};
use super::error::TokenizerError;
use super::pretokenize::PreTokenizer;
use super::special::SpecialMatcher;
use super::vocab::{TokenAttr, Vocab};
use super::{Kind, Settings, SpecialIds, Tokenizer};
use crate::gguf::{Array, GgufHeader, Value};

pub const KEY_MODEL: &str = "tokenizer.ggml.model";
pub const KEY_PRE: &str = "tokenizer.ggml.pre";
pub const KEY_TOKENS: &str = "tokenizer.ggml.tokens";
pub const KEY_SCORES: &str = "tokenizer.ggml.scores";
pub const KEY_TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
pub const KEY_MERGES: &str = "tokenizer.ggml.merges";
pub const KEY_CHAT_TEMPLATE: &str = "tokenizer.chat_template";

/// Token texts that llama.cpp treats as end-of-generation wherever they appear in a vocabulary
/// (it also forces them to CONTROL).
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

/// Texts llama.cpp recognises as the end-of-turn token when no `eot_token_id` is given.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const EOM_TEXTS: &[&str] = &["<|eom_id|>"];
const FIM_PRE_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF_TEXTS: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID_TEXTS: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD_TEXTS: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];

fn str_array<'h>(
    h: &'h GgufHeader,
    key: &'static str,
) -> Result<Option<&'h [String]>, TokenizerError> {
    match h.get(key) {
        None => Ok(None),
        Some(Value::Array(Array::String(v))) => Ok(Some(v)),
        Some(_) => Err(TokenizerError::WrongType {
            key,
            expected: "an array of strings",
        }),
    }
}

fn bool_key(h: &GgufHeader, key: &'static str) -> Result<Option<bool>, TokenizerError> {
    match h.get(key) {
        None => Ok(None),
        Some(v) => v.as_bool().map(Some).ok_or(TokenizerError::WrongType {
            key,
            expected: "a bool",
        }),
    }
}

/// A token-id key, checked against the vocabulary (llama.cpp only warns; a bad id here means a
/// broken file, and generation would misbehave, so we refuse it).
fn id_key(h: &GgufHeader, key: &'static str, n: usize) -> Result<Option<u32>, TokenizerError> {
    let Some(v) = h.get(key) else { return Ok(None) };
    let id = v.as_u64().ok_or(TokenizerError::WrongType {
        key,
        expected: "an unsigned integer",
    })?;
    if id >= n as u64 {
        return Err(TokenizerError::BadSpecialTokenId {
            key,
            id,
            n_tokens: n,
        });
    }
    Ok(Some(id as u32))
}

fn pre_tokenizer(pre: &str) -> Result<(PreTokenizer, bool, bool, bool), TokenizerError> {
    // (split, ignore_merges, add_bos default, clean_spaces), per llama.cpp's pre-type table.
    Ok(match pre {
        "" | "default" => (PreTokenizer::Default, false, false, true),
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0"
        | "lfm2" | "jina-v5-nano" => (PreTokenizer::Llama3, true, true, true),
        "dbrx" | "smaug-bpe" => (PreTokenizer::Llama3, false, false, true),
        "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es" | "jina-v2-de"
        | "a.x-4.0" | "mellum" | "modern-bert" | "mpt" | "olmo" | "jais" | "exaone4" => {
            (PreTokenizer::Gpt2, false, false, true)
        }
        // GPT-2's split, but decoded without the space clean-up. (jina-v1-en, jina-v2-code and
        // roberta-bpe are GPT-2's too, but llama.cpp adds a separator token for them: refused.)
        "trillion" | "granite-docling" => (PreTokenizer::Gpt2, false, false, false),
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "hunyuan" | "solar-open" => {
            (PreTokenizer::Qwen2, false, false, false)
        }
        "stablelm2" | "megrez" => (PreTokenizer::Qwen2, false, false, true),
        "smollm" | "command-r" => (PreTokenizer::SmolLm, false, false, false),
        "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" | "mellum2" => {
            (PreTokenizer::SmolLm, false, false, true)
        }
        other => {
            return Err(TokenizerError::UnsupportedPreTokenizer {
                pre: other.to_string(),
            })
        }
    })
}

impl Tokenizer {
    /// Builds the tokenizer from a parsed GGUF header. Only metadata is read; any way of
    /// obtaining the header (streamed prefix, file, synthetic) works.
    pub fn from_gguf(h: &GgufHeader) -> Result<Tokenizer, TokenizerError> {
        let model = match h.get(KEY_MODEL) {
            None => return Err(TokenizerError::MissingKey { key: KEY_MODEL }),
            Some(v) => v.as_str().ok_or(TokenizerError::WrongType {
                key: KEY_MODEL,
                expected: "a string",
            })?,
        };
        let texts =
            str_array(h, KEY_TOKENS)?.ok_or(TokenizerError::MissingKey { key: KEY_TOKENS })?;
        let n = texts.len();
        if n == 0 || n >= u32::MAX as usize {
            return Err(TokenizerError::BadVocabSize { n_tokens: n });
        }
        let is_spm = match model {
            "llama" => true,
            "gpt2" => false,
            other => {
                return Err(TokenizerError::UnsupportedModel {
                    model: other.to_string(),
                })
            }
        };

        // Scores drive SPM merges, so SPM requires them; BPE ignores them.
        let scores: Vec<f32> = match h.get(KEY_SCORES) {
            None if is_spm => return Err(TokenizerError::MissingKey { key: KEY_SCORES }),
            None => vec![0.0; n],
            Some(Value::Array(Array::F32(v))) => {
                check_len(KEY_SCORES, v.len(), n).map(|_| v.clone())?
            }
            Some(Value::Array(Array::I32(v))) => {
                check_len(KEY_SCORES, v.len(), n)?;
                v.iter().map(|&s| s as f32).collect()
            }
            Some(_) => {
                return Err(TokenizerError::WrongType {
                    key: KEY_SCORES,
                    expected: "an array of f32 or i32",
                })
            }
        };
        if let Some(id) = scores.iter().position(|s| s.is_nan()) {
            return Err(TokenizerError::BadScore { id: id as u32 });
        }
        let mut attrs: Vec<TokenAttr> = match h.get(KEY_TOKEN_TYPE) {
            None => vec![TokenAttr::NORMAL; n],
            Some(Value::Array(Array::I32(v))) => {
                check_len(KEY_TOKEN_TYPE, v.len(), n)?;
                v.iter().map(|&t| TokenAttr::from_token_type(t)).collect()
            }
            Some(_) => {
                return Err(TokenizerError::WrongType {
                    key: KEY_TOKEN_TYPE,
                    expected: "an array of i32",
                })
            }
        };
        for (id, t) in texts.iter().enumerate() {
            if attrs[id].has(TokenAttr::BYTE) && parse_byte_token(t).is_none() {
                return Err(TokenizerError::BadByteToken {
                    id: id as u32,
                    text: t.clone(),
                });
            }
        }
        // Per-text attribute fixes below need the index, so build the vocabulary first and
        // patch its attributes in place.
        let mut vocab = Vocab::new(texts, scores, std::mem::take(&mut attrs))?;

        // Settings: llama.cpp's defaults per model and pre-tokenizer, then metadata overrides.
        let (kind, mut settings, mut ids) = if is_spm {
            let s = Settings {
                add_bos: true,
                add_eos: false,
                add_space_prefix: true,
                clean_spaces: false,
            };
            let ids = SpecialIds {
                bos: Some(1),
                eos: Some(2),
                unk: Some(0),
                ..SpecialIds::default()
            };
            (Kind::Spm, s, ids)
        } else {
            let pre_name = match h.get(KEY_PRE) {
                None => "default",
                Some(v) => v.as_str().ok_or(TokenizerError::WrongType {
                    key: KEY_PRE,
                    expected: "a string",
                })?,
            };
            let (pre, ignore_merges, add_bos, clean_spaces) = pre_tokenizer(pre_name)?;
            let merges = match str_array(h, KEY_MERGES)? {
                Some(m) => Merges::new(m, &vocab)?,
                None => return Err(TokenizerError::MissingKey { key: KEY_MERGES }),
            };
            let s = Settings {
                add_bos,
                add_eos: false,
                add_space_prefix: false,
                clean_spaces,
            };
            let ids = SpecialIds {
                bos: Some(11),
                eos: Some(11),
                ..SpecialIds::default()
            };
            (
                Kind::Bpe(BpeModel {
                    merges,
                    pre,
                    ignore_merges,
                }),
                s,
                ids,
            )
        };
        // Default ids outside the vocabulary are disabled, as in llama.cpp.
        for id in [&mut ids.bos, &mut ids.eos, &mut ids.unk] {
            if id.is_some_and(|i| i as usize >= n) {
                *id = None;
            }
        }
        let keys: [(&'static str, &mut Option<u32>); 8] = [
            ("tokenizer.ggml.bos_token_id", &mut ids.bos),
            ("tokenizer.ggml.eos_token_id", &mut ids.eos),
            ("tokenizer.ggml.eot_token_id", &mut ids.eot),
            ("tokenizer.ggml.eom_token_id", &mut ids.eom),
            ("tokenizer.ggml.unknown_token_id", &mut ids.unk),
            ("tokenizer.ggml.seperator_token_id", &mut ids.sep),
            ("tokenizer.ggml.padding_token_id", &mut ids.pad),
            ("tokenizer.ggml.fim_pad_token_id", &mut ids.fim_pad),
        ];
        for (key, slot) in keys {
            if let Some(id) = id_key(h, key, n)? {
                *slot = Some(id);
            }
        }
        let mut fim_rep = id_key(h, "tokenizer.ggml.fim_rep_token_id", n)?;
        let mut fim_sep = id_key(h, "tokenizer.ggml.fim_sep_token_id", n)?;
        // FIM prefix/suffix/middle only matter here because auto-detecting them forces CONTROL.
        let mut fim_pre = id_key(h, "tokenizer.ggml.fim_pre_token_id", n)?.or(id_key(
            h,
            "tokenizer.ggml.prefix_token_id",
            n,
        )?);
        let mut fim_suf = id_key(h, "tokenizer.ggml.fim_suf_token_id", n)?.or(id_key(
            h,
            "tokenizer.ggml.suffix_token_id",
            n,
        )?);
        let mut fim_mid = id_key(h, "tokenizer.ggml.fim_mid_token_id", n)?.or(id_key(
            h,
            "tokenizer.ggml.middle_token_id",
            n,
        )?);
        if let Some(b) = bool_key(h, "tokenizer.ggml.add_bos_token")? {
            settings.add_bos = b;
        }
        if let Some(b) = bool_key(h, "tokenizer.ggml.add_eos_token")? {
            settings.add_eos = b;
        }
        if let Some(b) = bool_key(h, "tokenizer.ggml.add_space_prefix")? {
            settings.add_space_prefix = b;
        }
        if settings.add_bos && ids.bos.is_none() {
            return Err(TokenizerError::MissingKey {
                key: "tokenizer.ggml.bos_token_id",
            });
        }
        if settings.add_eos && ids.eos.is_none() {
            return Err(TokenizerError::MissingKey {
                key: "tokenizer.ggml.eos_token_id",
            });
        }

        // Auto-detected special tokens (by text) become CONTROL, as llama.cpp forces them.
        let detect = |slot: &mut Option<u32>, texts: &[&str], vocab: &mut Vocab| {
            if slot.is_none() {
                // llama.cpp takes the first candidate in its hash map's (unspecified) order;
                // we take the first in list order, which puts the specific markers first.
                if let Some(id) = texts.iter().find_map(|t| vocab.id(t)) {
                    *slot = Some(id);
                    vocab.attrs[id as usize] = vocab.attrs[id as usize].with(TokenAttr::CONTROL);
                }
            }
        };
        detect(&mut ids.eot, EOT_TEXTS, &mut vocab);
        detect(&mut ids.eom, EOM_TEXTS, &mut vocab);
        detect(&mut fim_pre, FIM_PRE_TEXTS, &mut vocab);
        detect(&mut fim_suf, FIM_SUF_TEXTS, &mut vocab);
        detect(&mut fim_mid, FIM_MID_TEXTS, &mut vocab);
        detect(&mut ids.fim_pad, FIM_PAD_TEXTS, &mut vocab);
        detect(&mut fim_rep, FIM_REP_TEXTS, &mut vocab);
        detect(&mut fim_sep, FIM_SEP_TEXTS, &mut vocab);

        // CONTROL tokens named "...unused..." are UNUSED too.
        for id in 0..n {
            let a = vocab.attrs[id];
            if a.has(TokenAttr::CONTROL) && vocab.text(id as u32).contains("unused") {
                vocab.attrs[id] = a.with(TokenAttr::UNUSED);
            }
        }

        // End-of-generation set.
        let mut eog: Vec<u32> = [ids.fim_pad, fim_rep, fim_sep]
            .into_iter()
            .flatten()
            .collect();
        for t in EOG_TEXTS {
            if let Some(id) = vocab.id(t) {
                eog.push(id);
                vocab.attrs[id as usize] = vocab.attrs[id as usize].with(TokenAttr::CONTROL);
            }
        }
        // gpt-oss renders these always.
        for t in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
            if let Some(id) = vocab.id(t) {
                vocab.attrs[id as usize] = TokenAttr::USER_DEFINED;
            }
        }
        eog.extend([ids.eos, ids.eot, ids.eom].into_iter().flatten());
        eog.sort_unstable();
        eog.dedup();
        // gpt-oss / solar-open: "<|end|>" ends a message, not the generation.
        let has =
            |t: &str, eog: &[u32], vocab: &Vocab| vocab.id(t).is_some_and(|id| eog.contains(&id));
        if let Some(end) = vocab.id("<|end|>").filter(|id| eog.contains(id)) {
            let ret = has("<|return|>", &eog, &vocab);
            let call = has("<|call|>", &eog, &vocab) || has("<|calls|>", &eog, &vocab);
            let flush = has("<|flush|>", &eog, &vocab);
            if (ret && call) || (call && flush) {
                eog.retain(|&i| i != end);
                vocab.attrs[end as usize] = TokenAttr::USER_DEFINED;
            }
        }
        // Gemma 4 / PaddleOCR: "</s>" is not EOG when "<|tool_response>" is.
        if has("<|tool_response>", &eog, &vocab) {
            if let Some(s) = vocab.id("</s>").filter(|id| eog.contains(id)) {
                eog.retain(|&i| i != s);
                vocab.attrs[s as usize] = TokenAttr::NORMAL;
            }
        }

        // Byte fallback for SPM: "<0xNN>", else the one-byte text, else the unknown token
        // (llama.cpp would throw here; a vocabulary without byte tokens is rare).
        let mut byte_tokens = [u32::MAX; 256];
        if is_spm {
            for (b, slot) in byte_tokens.iter_mut().enumerate() {
                let hex = format!("<0x{b:02X}>");
                *slot = vocab
                    .id(&hex)
                    .or_else(|| {
                        std::str::from_utf8(&[b as u8])
                            .ok()
                            .and_then(|s| vocab.id(s))
                    })
                    .or(ids.unk)
                    .unwrap_or(u32::MAX);
            }
        }

        let special = SpecialMatcher::new(&vocab)?;
        // A template that is not a string is a broken file (llama.cpp asserts on it), not a
        // model without a template: refused rather than silently replaced by the built-in one.
        let chat_template = match h.get(KEY_CHAT_TEMPLATE) {
            None => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(TokenizerError::WrongType { key: KEY_CHAT_TEMPLATE, expected: "a string" }),
        };
        let architecture = h.architecture().map(str::to_string);
        Ok(Tokenizer {
            vocab,
            kind,
            settings,
            ids,
            eog,
            special,
            byte_tokens,
            chat_template,
            architecture,
        })
    }
}

fn check_len(key: &'static str, len: usize, n: usize) -> Result<(), TokenizerError> {
    if len != n {
        return Err(TokenizerError::LengthMismatch {
            key,
            len,
            n_tokens: n,
        });
    }
    Ok(())
}

/// The byte of a `<0xHH>` token.
pub fn parse_byte_token(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2 {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod pre_table_tests {
    use super::*;

    /// Entries of llama.cpp's pre-tokenizer table that a metadata differential found read
    /// differently: (name, split, clean_spaces).
    #[test]
    fn pre_tokenizer_names_as_llama_cpp_reads_them() {
        let cases = [
            ("trillion", PreTokenizer::Gpt2, false),
            ("granite-docling", PreTokenizer::Gpt2, false),
            ("gpt-2", PreTokenizer::Gpt2, true),
            ("hunyuan", PreTokenizer::Qwen2, false),
            ("solar-open", PreTokenizer::Qwen2, false),
            ("stablelm2", PreTokenizer::Qwen2, true),
            ("megrez", PreTokenizer::Qwen2, true),
        ];
        for (name, split, clean) in cases {
            let (p, ignore_merges, add_bos, clean_spaces) = pre_tokenizer(name).unwrap();
            assert_eq!((p, clean_spaces), (split, clean), "{name}");
            assert!(!ignore_merges && !add_bos, "{name}");
        }
    }
}

