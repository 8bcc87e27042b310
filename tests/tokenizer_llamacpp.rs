//! Token ids and decoded text identical to llama.cpp (node-llama-cpp 3.21.1), on the committed
//! corpus, for the real models (Gemma 3, SmolLM2 135M Instruct) and the synthetic BPE
//! vocabularies.
//!
//! Fixtures: tests/data/tok_corpus.json (tools/tokenizer/make_corpus.py) and
//! tests/data/tok_expected_*.json (tools/tokenizer/gen_expected.mjs).

mod common;

use std::path::Path;

use edgellm::tokenizer::{DecodeOptions, Tokenizer};
use serde_json::Value;

fn corpus() -> Vec<String> {
    let text = std::fs::read_to_string(common::data("tok_corpus.json")).expect("corpus");
    serde_json::from_str(&text).expect("corpus json")
}

fn expected(name: &str) -> Value {
    let text = std::fs::read_to_string(common::data(&format!("tok_expected_{name}.json")))
        .expect("expected fixture");
    serde_json::from_str(&text).expect("fixture json")
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("ids")
        .iter()
        .map(|x| x.as_u64().expect("id") as u32)
        .collect()
}

fn load(path: &Path) -> Tokenizer {
    let (header, _) = edgellm::gguf::read_header_file(path).expect("header");
    Tokenizer::from_gguf(&header).expect("tokenizer")
}

const PLAIN: DecodeOptions = DecodeOptions {
    remove_special: false,
    unparse_special: false,
};
const SPECIAL: DecodeOptions = DecodeOptions {
    remove_special: false,
    unparse_special: true,
};

/// Compares every corpus string; returns a summary line and panics with the first
/// differences if any.
fn check_against_llamacpp(tok: &Tokenizer, name: &str, single_eot_candidate: bool) {
    let corpus = corpus();
    let exp = expected(name);
    let cases = exp["cases"].as_array().expect("cases");
    assert_eq!(
        cases.len(),
        corpus.len(),
        "fixture out of date: regenerate it"
    );
    assert_eq!(exp["n_vocab"].as_u64(), Some(tok.vocab_size() as u64));
    assert_eq!(exp["bos"].as_u64().map(|v| v as u32), tok.bos_id(), "bos");
    assert_eq!(exp["eos"].as_u64().map(|v| v as u32), tok.eos_id(), "eos");
    // llama.cpp picks the end-of-turn token by walking a hash map when the file does not name
    // it; with several candidates (the synthetic vocabularies have three) the choice is
    // arbitrary, so only a single-candidate vocabulary must agree exactly.
    let want_eot = exp["eot"].as_u64().map(|v| v as u32);
    if single_eot_candidate {
        assert_eq!(want_eot, tok.eot_id(), "eot");
    } else {
        assert!(
            tok.eot_id().is_some_and(|id| tok.is_eog(id)),
            "eot must end generation"
        );
    }
    assert_eq!(exp["add_bos"].as_bool(), Some(tok.add_bos()), "add_bos");
    assert_eq!(exp["add_eos"].as_bool(), Some(tok.add_eos()), "add_eos");
    assert_eq!(ids(&exp["eog"]), tok.eog_ids(), "end-of-generation ids");
    for pair in exp["attrs"].as_array().expect("attrs") {
        let id = pair[0].as_u64().unwrap() as u32;
        let bits = pair[1].as_u64().unwrap() as u16;
        assert_eq!(
            tok.token_attr(id).map(|a| a.0),
            Some(bits),
            "attributes of token {id}"
        );
    }

    let mut failures = Vec::new();
    let (mut same_ids, mut same_text, mut round_trips, mut ours_round_trip) = (0, 0, 0, 0);
    for (s, case) in corpus.iter().zip(cases) {
        let want_plain = ids(&case[0]);
        let want_special = ids(&case[1]);
        let got_plain = tok.encode(s, false, false);
        let got_special = tok.encode(s, false, true);
        if got_plain == want_plain && got_special == want_special {
            same_ids += 1;
        } else {
            failures.push(format!(
                "{s:?}\n  parse_special=false want {want_plain:?}\n                     got  {got_plain:?}\n  parse_special=true  want {want_special:?}\n                     got  {got_special:?}"
            ));
            continue;
        }
        let texts = [
            tok.decode(&want_plain, PLAIN).unwrap(),
            tok.decode(&want_special, SPECIAL).unwrap(),
            tok.decode(&want_special, PLAIN).unwrap(),
        ];
        let want_texts = [
            case[2].as_str().unwrap(),
            case[3].as_str().unwrap(),
            case[4].as_str().unwrap(),
        ];
        // Decoding with BOS in front (SPM then keeps the space it would strip).
        let with_bos = match (tok.bos_id(), case[5].as_str()) {
            (Some(bos), Some(want)) => {
                let mut v = vec![bos];
                v.extend(&want_plain);
                tok.decode(&v, PLAIN).unwrap() == want
            }
            (None, None) => true,
            _ => false,
        };
        if texts.iter().zip(want_texts).all(|(a, b)| a == b) && with_bos {
            same_text += 1;
        } else {
            failures.push(format!(
                "decode of {s:?}: want {want_texts:?}\n  got {texts:?}"
            ));
        }
        // Round trip: wherever llama.cpp gives the input back, we must too.
        if want_texts[0] == s {
            round_trips += 1;
            if texts[0] == *s {
                ours_round_trip += 1;
            }
        }
        // Streaming decode concatenates to the whole decode.
        for (ids, opts) in [(&want_plain, PLAIN), (&want_special, SPECIAL)] {
            let mut dec = tok.stream_decoder(opts);
            let mut streamed = String::new();
            for &id in ids {
                streamed.push_str(&dec.push(id).unwrap());
            }
            streamed.push_str(&dec.finish());
            if streamed != tok.decode(ids, opts).unwrap() {
                failures.push(format!("stream decode of {s:?} differs: {streamed:?}"));
            }
        }
    }
    eprintln!(
        "{name}: {same_ids}/{} strings with identical ids (parse_special off and on), \
         {same_text}/{same_ids} identical decodes; llama.cpp round-trips {round_trips}, we round-trip {ours_round_trip} of those",
        corpus.len()
    );
    if !failures.is_empty() {
        panic!(
            "{} differences from llama.cpp in {name}:\n{}",
            failures.len(),
            failures[..failures.len().min(12)].join("\n")
        );
    }
    assert_eq!(round_trips, ours_round_trip);
}

#[test]
fn gemma_matches_llamacpp() {
    let Some(model) = common::real_model() else {
        return;
    };
    let tok = load(&model);
    check_against_llamacpp(&tok, "gemma", true);
}

/// The chat model's real byte-level BPE vocabulary (49,152 tokens, `smollm` pre-tokenizer,
/// ChatML specials). The file names no end-of-turn token and has two candidates
/// (`<|endoftext|>` 0, `<|im_end|>` 2): llama.cpp's pick (0) is its hash-map order; both end
/// generation, and the end-of-generation set is checked exactly.
#[test]
fn smollm2_matches_llamacpp() {
    let Some(model) = common::chat_model() else {
        return;
    };
    let tok = load(&model);
    check_against_llamacpp(&tok, "smollm2", false);
}

#[test]
fn bpe_default_matches_llamacpp() {
    check_against_llamacpp(
        &load(&common::data("tok_bpe_default.gguf")),
        "bpe_default",
        false,
    );
}

#[test]
fn bpe_gpt2_matches_llamacpp() {
    check_against_llamacpp(
        &load(&common::data("tok_bpe_gpt_2.gguf")),
        "bpe_gpt_2",
        false,
    );
}

#[test]
fn bpe_llama3_matches_llamacpp() {
    check_against_llamacpp(
        &load(&common::data("tok_bpe_llama_bpe.gguf")),
        "bpe_llama_bpe",
        false,
    );
}

#[test]
fn bpe_qwen2_matches_llamacpp() {
    check_against_llamacpp(
        &load(&common::data("tok_bpe_qwen2.gguf")),
        "bpe_qwen2",
        false,
    );
}

#[test]
fn bpe_smollm_matches_llamacpp() {
    check_against_llamacpp(
        &load(&common::data("tok_bpe_smollm.gguf")),
        "bpe_smollm",
        false,
    );
}

#[test]
fn spm_llama2_style_matches_llamacpp() {
    // add_space_prefix = true, <unk>/<s>/</s> at 0/1/2, a USER_DEFINED token.
    let tok = load(&common::data("tok_spm_llama.gguf"));
    assert!(tok.add_space_prefix());
    check_against_llamacpp(&tok, "spm_llama", true);
}
