//! Speed: building the tokenizer from a parsed header, and tokenizing 100 KB of English.
//! Bounds are generous (shared CI machines); the figures are printed for the record.

mod common;

use std::time::Instant;

use edgellm::tokenizer::{DecodeOptions, Tokenizer};

/// About 100 KB of English prose, built from the corpus' prose sentences in a shifting order.
fn english_100k() -> String {
    let corpus: Vec<String> =
        serde_json::from_str(&std::fs::read_to_string(common::data("tok_corpus.json")).unwrap())
            .unwrap();
    let prose: Vec<&str> = corpus[..24].iter().map(String::as_str).collect();
    let mut text = String::new();
    let mut i = 0usize;
    while text.len() < 100_000 {
        text.push_str(prose[(i * 7 + i / prose.len()) % prose.len()]);
        text.push_str(if i % 5 == 4 { "\n\n" } else { " " });
        i += 1;
    }
    text
}

fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut best = f64::MAX;
    let mut out = None;
    for _ in 0..runs {
        let t = Instant::now();
        let r = f();
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
        out = Some(r);
    }
    (best, out.unwrap())
}

#[test]
fn gemma_vocabulary_builds_fast() {
    let Some(model) = common::real_model() else {
        return;
    };
    let (header, _) = edgellm::gguf::read_header_file(model).unwrap();
    let (ms, tok) = best_of(3, || Tokenizer::from_gguf(&header).unwrap());
    eprintln!(
        "gemma tokenizer built from the parsed header in {ms:.1} ms ({} tokens)",
        tok.vocab_size()
    );
    assert!(ms < 2000.0, "building the tokenizer took {ms:.1} ms");
}

#[test]
fn gemma_tokenizes_100kb_of_english_quickly() {
    let Some(model) = common::real_model() else {
        return;
    };
    let (header, _) = edgellm::gguf::read_header_file(model).unwrap();
    let tok = Tokenizer::from_gguf(&header).unwrap();
    let text = english_100k();
    let (ms, ids) = best_of(5, || tok.encode(&text, true, false));
    eprintln!(
        "gemma: {} bytes -> {} tokens in {ms:.1} ms",
        text.len(),
        ids.len()
    );
    assert!(ms < 1000.0, "tokenizing 100 KB took {ms:.1} ms");
    let (ms_special, ids_special) = best_of(5, || tok.encode(&text, true, true));
    eprintln!("gemma with special parsing: {ms_special:.1} ms");
    assert_eq!(ids, ids_special, "no special-token text in plain English");
    let back = tok
        .decode(
            &ids,
            DecodeOptions {
                remove_special: true,
                unparse_special: false,
            },
        )
        .unwrap();
    assert_eq!(back, text);
}

#[test]
fn bpe_tokenizes_100kb_of_english_quickly() {
    let (header, _) =
        edgellm::gguf::read_header_file(common::data("tok_bpe_llama_bpe.gguf")).unwrap();
    let tok = Tokenizer::from_gguf(&header).unwrap();
    let text = english_100k();
    let (ms, ids) = best_of(5, || tok.encode(&text, false, false));
    eprintln!(
        "llama-bpe (synthetic, 2k merges): {} bytes -> {} tokens in {ms:.1} ms",
        text.len(),
        ids.len()
    );
    assert!(ms < 1000.0, "tokenizing 100 KB took {ms:.1} ms");
}
