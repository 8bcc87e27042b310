//! The tokenizers (SPM and each byte-level BPE pre-tokenizer of the fixtures): any text,
//! encoded with and without special parsing, decoded back, and any ids decoded.
#![no_main]

use std::sync::OnceLock;

use edgellm::tokenizer::{DecodeOptions, Tokenizer};
use libfuzzer_sys::fuzz_target;

const FILES: [&[u8]; 7] = [
    include_bytes!("../../tests/data/tok_spm_llama.gguf"),
    include_bytes!("../../tests/data/tok_bpe_default.gguf"),
    include_bytes!("../../tests/data/tok_bpe_gpt_2.gguf"),
    include_bytes!("../../tests/data/tok_bpe_llama_bpe.gguf"),
    include_bytes!("../../tests/data/tok_bpe_qwen2.gguf"),
    include_bytes!("../../tests/data/tok_bpe_smollm.gguf"),
    include_bytes!("../../tests/data/tiny_gemma3.gguf"),
];

fn tokenizers() -> &'static [Tokenizer] {
    static T: OnceLock<Vec<Tokenizer>> = OnceLock::new();
    T.get_or_init(|| {
        FILES
            .iter()
            .map(|f| match edgellm::gguf::parse_header(f).unwrap() {
                edgellm::gguf::HeaderStatus::Complete(h) => Tokenizer::from_gguf(&h).unwrap(),
                _ => unreachable!("fixtures are complete"),
            })
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else { return };
    let tok = &tokenizers()[pick as usize % FILES.len()];
    let text = String::from_utf8_lossy(rest);
    let ids = tok.encode(&text, pick & 0x10 != 0, pick & 0x20 != 0);
    let opts = DecodeOptions { remove_special: pick & 0x40 != 0, unparse_special: pick & 0x80 != 0 };
    let _ = tok.decode(&ids, opts);
    // Raw ids, in and out of range.
    let raw: Vec<u32> = rest.chunks(3).map(|c| c.iter().fold(0u32, |a, &b| a << 8 | b as u32)).collect();
    let _ = tok.decode(&raw, opts);
});
