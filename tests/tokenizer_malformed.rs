//! Malformed vocabularies give typed errors, never panics.

use edgellm::gguf::{Array, GgufHeader, GgufWriter, Value};
use edgellm::tokenizer::{DecodeOptions, Tokenizer, TokenizerError};

fn header(kv: Vec<(&str, Value)>) -> GgufHeader {
    GgufHeader {
        version: 3,
        metadata: kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        tensors: Vec::new(),
        alignment: 32,
        data_offset: 0,
    }
}

fn strings(v: &[&str]) -> Value {
    Value::Array(Array::String(v.iter().map(|s| s.to_string()).collect()))
}

const SPM_TOKENS: &[&str] = &["<unk>", "<s>", "</s>", "<0x41>", "▁", "a", "b", "ab", "▁ab"];

/// A small valid SPM vocabulary, as key/value pairs to tamper with.
fn spm() -> Vec<(&'static str, Value)> {
    let n = SPM_TOKENS.len();
    vec![
        ("tokenizer.ggml.model", Value::String("llama".into())),
        ("tokenizer.ggml.tokens", strings(SPM_TOKENS)),
        (
            "tokenizer.ggml.scores",
            Value::Array(Array::F32((0..n).map(|i| -(i as f32)).collect())),
        ),
        (
            "tokenizer.ggml.token_type",
            Value::Array(Array::I32(vec![2, 3, 3, 6, 1, 1, 1, 1, 1])),
        ),
        ("tokenizer.ggml.bos_token_id", Value::U32(1)),
        ("tokenizer.ggml.eos_token_id", Value::U32(2)),
    ]
}

/// A small valid byte-level BPE vocabulary.
fn bpe() -> Vec<(&'static str, Value)> {
    vec![
        ("tokenizer.ggml.model", Value::String("gpt2".into())),
        ("tokenizer.ggml.pre", Value::String("gpt-2".into())),
        (
            "tokenizer.ggml.tokens",
            strings(&["a", "b", "ab", "Ġ", "Ġab", "<|endoftext|>"]),
        ),
        ("tokenizer.ggml.merges", strings(&["a b", "Ġ ab"])),
        ("tokenizer.ggml.bos_token_id", Value::U32(5)),
        ("tokenizer.ggml.eos_token_id", Value::U32(5)),
    ]
}

fn set(
    mut kv: Vec<(&'static str, Value)>,
    key: &'static str,
    v: Value,
) -> Vec<(&'static str, Value)> {
    kv.retain(|(k, _)| *k != key);
    kv.push((key, v));
    kv
}

fn without(mut kv: Vec<(&'static str, Value)>, key: &str) -> Vec<(&'static str, Value)> {
    kv.retain(|(k, _)| *k != key);
    kv
}

fn err(kv: Vec<(&'static str, Value)>) -> TokenizerError {
    match Tokenizer::from_gguf(&header(kv)) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}

#[test]
fn the_valid_baselines_load_and_work() {
    let t = Tokenizer::from_gguf(&header(spm())).unwrap();
    assert_eq!(t.encode("ab ab", true, false), vec![1, 8, 8]);
    // "c" is no token and has no byte token: it falls back to <unk>; "A" uses <0x41>.
    assert_eq!(t.encode("A", false, false), vec![4, 3]);
    let t = Tokenizer::from_gguf(&header(bpe())).unwrap();
    assert_eq!(t.encode("ab ab", false, false), vec![2, 4]);
    assert_eq!(t.n_merges(), 2);
}

#[test]
fn missing_keys() {
    assert_eq!(
        err(without(spm(), "tokenizer.ggml.model")).code(),
        "TOKENIZER_MISSING_KEY"
    );
    assert_eq!(
        err(without(spm(), "tokenizer.ggml.tokens")).code(),
        "TOKENIZER_MISSING_KEY"
    );
    // SPM merges are driven by scores: without them the vocabulary is unusable.
    assert_eq!(
        err(without(spm(), "tokenizer.ggml.scores")),
        TokenizerError::MissingKey {
            key: "tokenizer.ggml.scores"
        }
    );
    assert_eq!(
        err(without(bpe(), "tokenizer.ggml.merges")),
        TokenizerError::MissingKey {
            key: "tokenizer.ggml.merges"
        }
    );
}

#[test]
fn wrong_types() {
    let e = err(set(
        spm(),
        "tokenizer.ggml.tokens",
        Value::Array(Array::I32(vec![1, 2])),
    ));
    assert_eq!(e.code(), "TOKENIZER_WRONG_TYPE");
    let e = err(set(spm(), "tokenizer.ggml.scores", strings(SPM_TOKENS)));
    assert_eq!(e.code(), "TOKENIZER_WRONG_TYPE");
    let e = err(set(
        spm(),
        "tokenizer.ggml.token_type",
        Value::Array(Array::F32(vec![1.0; 9])),
    ));
    assert_eq!(e.code(), "TOKENIZER_WRONG_TYPE");
    let e = err(set(spm(), "tokenizer.ggml.model", Value::U32(1)));
    assert_eq!(e.code(), "TOKENIZER_WRONG_TYPE");
    let e = err(set(
        spm(),
        "tokenizer.ggml.bos_token_id",
        Value::String("1".into()),
    ));
    assert_eq!(e.code(), "TOKENIZER_WRONG_TYPE");
    let e = err(set(spm(), "tokenizer.ggml.add_bos_token", Value::U8(1)));
    assert_eq!(e.code(), "TOKENIZER_WRONG_TYPE");
    let e = err(set(
        bpe(),
        "tokenizer.ggml.merges",
        Value::Array(Array::U32(vec![1])),
    ));
    assert_eq!(e.code(), "TOKENIZER_WRONG_TYPE");
}

#[test]
fn wrong_array_lengths() {
    let short = Value::Array(Array::F32(vec![0.0; SPM_TOKENS.len() - 1]));
    assert_eq!(
        err(set(spm(), "tokenizer.ggml.scores", short)),
        TokenizerError::LengthMismatch {
            key: "tokenizer.ggml.scores",
            len: 8,
            n_tokens: 9
        }
    );
    let long = Value::Array(Array::I32(vec![1; SPM_TOKENS.len() + 3]));
    assert_eq!(
        err(set(spm(), "tokenizer.ggml.token_type", long)).code(),
        "TOKENIZER_LENGTH_MISMATCH"
    );
    assert_eq!(
        err(set(spm(), "tokenizer.ggml.tokens", strings(&[]))).code(),
        "TOKENIZER_BAD_VOCAB_SIZE"
    );
}

#[test]
fn invalid_special_token_ids() {
    assert_eq!(
        err(set(spm(), "tokenizer.ggml.bos_token_id", Value::U32(9))),
        TokenizerError::BadSpecialTokenId {
            key: "tokenizer.ggml.bos_token_id",
            id: 9,
            n_tokens: 9
        }
    );
    let e = err(set(
        spm(),
        "tokenizer.ggml.eos_token_id",
        Value::U64(u64::MAX),
    ));
    assert_eq!(e.code(), "TOKENIZER_BAD_SPECIAL_TOKEN_ID");
    let e = err(set(spm(), "tokenizer.ggml.eos_token_id", Value::I32(-1)));
    assert_eq!(e.code(), "TOKENIZER_WRONG_TYPE");
    let e = err(set(bpe(), "tokenizer.ggml.eot_token_id", Value::U32(6)));
    assert_eq!(e.code(), "TOKENIZER_BAD_SPECIAL_TOKEN_ID");
    // BOS is to be added, but no BOS id is known (the SPM default 1 is outside a 1-token vocab).
    let tiny = vec![
        ("tokenizer.ggml.model", Value::String("llama".into())),
        ("tokenizer.ggml.tokens", strings(&["a"])),
        ("tokenizer.ggml.scores", Value::Array(Array::F32(vec![0.0]))),
    ];
    assert_eq!(err(tiny).code(), "TOKENIZER_MISSING_KEY");
}

#[test]
fn bad_merges() {
    let e = err(set(
        bpe(),
        "tokenizer.ggml.merges",
        strings(&["a b", "a zz"]),
    ));
    assert_eq!(
        e,
        TokenizerError::BadMerge {
            index: 1,
            merge: "a zz".into(),
            reason: "right part is not a token"
        }
    );
    let e = err(set(bpe(), "tokenizer.ggml.merges", strings(&["q b"])));
    assert_eq!(e.code(), "TOKENIZER_BAD_MERGE");
    let e = err(set(bpe(), "tokenizer.ggml.merges", strings(&["ab"])));
    assert_eq!(e.code(), "TOKENIZER_BAD_MERGE");
    let e = err(set(bpe(), "tokenizer.ggml.merges", strings(&["a "])));
    assert_eq!(e.code(), "TOKENIZER_BAD_MERGE");
}

#[test]
fn bad_tokens() {
    let dup = set(
        spm(),
        "tokenizer.ggml.tokens",
        strings(&["<unk>", "<s>", "</s>", "<0x41>", "▁", "a", "b", "a", "▁ab"]),
    );
    assert_eq!(
        err(dup),
        TokenizerError::DuplicateToken {
            id: 7,
            first_id: 5,
            text: "a".into()
        }
    );
    let bad_byte = set(
        spm(),
        "tokenizer.ggml.tokens",
        strings(&["<unk>", "<s>", "</s>", "<0xZZ>", "▁", "a", "b", "ab", "▁ab"]),
    );
    assert_eq!(err(bad_byte).code(), "TOKENIZER_BAD_BYTE_TOKEN");
    // A NaN score has no order for SPM's merges: refused, naming the token. Infinities order
    // (a -inf score is a token never merged into) and are kept.
    let mut scores: Vec<f32> = (0..SPM_TOKENS.len()).map(|i| -(i as f32)).collect();
    scores[6] = f32::NAN;
    assert_eq!(err(set(spm(), "tokenizer.ggml.scores", Value::Array(Array::F32(scores.clone())))), TokenizerError::BadScore { id: 6 });
    scores[6] = f32::NEG_INFINITY;
    assert!(Tokenizer::from_gguf(&header(set(spm(), "tokenizer.ggml.scores", Value::Array(Array::F32(scores))))).is_ok());
}

#[test]
fn unsupported_models_and_pre_tokenizers() {
    assert_eq!(
        err(set(
            spm(),
            "tokenizer.ggml.model",
            Value::String("t5".into())
        )),
        TokenizerError::UnsupportedModel { model: "t5".into() }
    );
    assert_eq!(
        err(set(
            bpe(),
            "tokenizer.ggml.pre",
            Value::String("no-such-pre".into())
        ))
        .code(),
        "TOKENIZER_UNSUPPORTED_PRE"
    );
}

#[test]
fn invalid_ids_in_decode() {
    let t = Tokenizer::from_gguf(&header(spm())).unwrap();
    let e = t.decode(&[5, 9], DecodeOptions::default()).unwrap_err();
    assert_eq!(e, TokenizerError::InvalidTokenId { id: 9, n_tokens: 9 });
    assert_eq!(
        t.token_to_piece(u32::MAX, true).unwrap_err().code(),
        "TOKENIZER_INVALID_TOKEN_ID"
    );
    let mut s = t.stream_decoder(DecodeOptions::default());
    assert_eq!(
        s.push(100).unwrap_err().code(),
        "TOKENIZER_INVALID_TOKEN_ID"
    );
}

#[test]
fn invalid_utf8_token_text_is_refused_by_the_container_parser() {
    // GGUF strings must be UTF-8; the parser refuses a vocabulary that is not, with a typed
    // error, before the tokenizer sees it.
    let mut w = GgufWriter::new();
    w.metadata("general.architecture", Value::String("llama".into()));
    w.metadata("tokenizer.ggml.model", Value::String("llama".into()));
    w.metadata("tokenizer.ggml.tokens", strings(&["<unk>", "QQ\u{7f}QQ"]));
    let mut bytes = w.to_bytes().unwrap();
    let at = bytes.windows(5).position(|b| b == b"QQ\x7fQQ").unwrap();
    bytes[at + 2] = 0xFF;
    let e = edgellm::gguf::parse_file(&bytes).unwrap_err();
    assert_eq!(e.code(), "GGUF_INVALID_UTF8");
}

/// Deterministic pseudo-random headers built from valid and invalid pieces: loading returns
/// Ok or a typed error, and a loaded tokenizer encodes and decodes odd text without panicking.
#[test]
fn random_malformed_headers_never_panic() {
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let token_pool = [
        "a", "b", "ab", "▁", "▁a", "<s>", "</s>", "<0x0A>", "<0x41>", "Ġ", "Ġa", "", "\n", "<|x|>",
        "中", "😀",
    ];
    let texts = [
        "",
        "a b",
        "<s>ab</s>",
        "\n\nab",
        "😀中 a",
        "ab ab ab",
        "<|x|>Ġ",
        "  ",
    ];
    let (mut ok, mut errs) = (0, 0);
    for _ in 0..3000 {
        let n = (next() % 10) as usize;
        let toks: Vec<&str> = (0..n)
            .map(|_| token_pool[(next() % token_pool.len() as u64) as usize])
            .collect();
        let mut kv: Vec<(&'static str, Value)> = Vec::new();
        kv.push((
            "tokenizer.ggml.model",
            Value::String(if next() % 2 == 0 { "llama" } else { "gpt2" }.into()),
        ));
        kv.push(("tokenizer.ggml.tokens", strings(&toks)));
        // Mostly the right length, sometimes one short or one long.
        let deltas = [0i64, 0, 0, 0, 0, -1, 1];
        let ls = (n as i64 + deltas[(next() % 7) as usize]).max(0) as usize;
        let lt = (n as i64 + deltas[(next() % 7) as usize]).max(0) as usize;
        if next() % 8 != 0 {
            kv.push((
                "tokenizer.ggml.scores",
                Value::Array(Array::F32((0..ls).map(|i| i as f32).collect())),
            ));
        }
        if next() % 2 == 0 {
            kv.push((
                "tokenizer.ggml.token_type",
                Value::Array(Array::I32(
                    (0..lt).map(|_| (next() % 8) as i32 - 1).collect(),
                )),
            ));
        }
        if next() % 2 == 0 {
            let merges: Vec<String> = (0..(next() % 4))
                .map(|_| {
                    format!(
                        "{} {}",
                        token_pool[(next() % 6) as usize],
                        token_pool[(next() % 6) as usize]
                    )
                })
                .collect();
            kv.push(("tokenizer.ggml.merges", Value::Array(Array::String(merges))));
        }
        for key in [
            "tokenizer.ggml.bos_token_id",
            "tokenizer.ggml.eos_token_id",
            "tokenizer.ggml.unknown_token_id",
        ] {
            if next() % 2 == 0 {
                kv.push((key, Value::U32((next() % 12) as u32)));
            }
        }
        if next() % 2 == 0 {
            kv.push(("tokenizer.ggml.add_bos_token", Value::Bool(next() % 2 == 0)));
        }
        if next() % 3 == 0 {
            kv.push((
                "tokenizer.ggml.pre",
                Value::String(
                    ["default", "llama-bpe", "qwen2", "smollm", "gpt-2", "x"]
                        [(next() % 6) as usize]
                        .into(),
                ),
            ));
        }
        match Tokenizer::from_gguf(&header(kv)) {
            Ok(t) => {
                ok += 1;
                for s in texts {
                    for (add, special) in [(false, false), (true, true)] {
                        let ids = t.encode(s, add, special);
                        let _ = t
                            .decode(
                                &ids,
                                DecodeOptions {
                                    remove_special: add,
                                    unparse_special: special,
                                },
                            )
                            .unwrap();
                        let mut d = t.stream_decoder(DecodeOptions::default());
                        for &id in &ids {
                            d.push(id).unwrap();
                        }
                        d.finish();
                    }
                }
            }
            Err(e) => {
                errs += 1;
                assert!(e.code().starts_with("TOKENIZER_"), "{e}");
            }
        }
    }
    eprintln!("{ok} headers loaded, {errs} refused");
    assert!(
        ok > 50 && errs > 50,
        "both outcomes exercised: {ok} ok, {errs} errors"
    );
}

/// A chat template that is not a string is a broken file: refused, not replaced by the built-in
/// template as if the file had none. An empty string is a file without a template.
#[test]
fn a_chat_template_of_the_wrong_type_is_refused() {
    for v in [Value::U32(7), strings(&["{{ messages }}"])] {
        assert_eq!(err(set(spm(), "tokenizer.chat_template", v)).code(), "TOKENIZER_WRONG_TYPE");
    }
    let t = Tokenizer::from_gguf(&header(set(spm(), "tokenizer.chat_template", Value::String(String::new())))).unwrap();
    assert_eq!(t.chat_template(), Some(""));
}
