//! Behaviour llama.cpp defines beyond plain tokenization: BOS/EOS per metadata, CONTROL vs
//! USER_DEFINED tokens, end-of-generation ids, decode options and streaming decode.

mod common;

use edgellm::tokenizer::{DecodeOptions, PreTokenizer, Tokenizer, TokenizerKind};

fn load(path: std::path::PathBuf) -> Tokenizer {
    let (h, _) = edgellm::gguf::read_header_file(path).unwrap();
    Tokenizer::from_gguf(&h).unwrap()
}

fn gemma() -> Option<Tokenizer> {
    common::real_model().map(load)
}

const PLAIN: DecodeOptions = DecodeOptions {
    remove_special: false,
    unparse_special: false,
};

/// Pushes ids one at a time; returns each push's text and the final flush.
fn stream(tok: &Tokenizer, ids: &[u32], opts: DecodeOptions) -> (Vec<String>, String) {
    let mut d = tok.stream_decoder(opts);
    let pieces = ids.iter().map(|&id| d.push(id).unwrap()).collect();
    (pieces, d.finish())
}

#[test]
fn gemma_special_tokens_and_bos() {
    let Some(t) = gemma() else { return };
    assert_eq!(t.kind(), TokenizerKind::Spm);
    assert_eq!(
        (t.bos_id(), t.eos_id(), t.eot_id()),
        (Some(2), Some(1), Some(106))
    );
    assert!(t.add_bos() && !t.add_eos() && !t.add_space_prefix());
    // BOS per metadata, once; nothing for an empty string without it.
    assert_eq!(t.encode("Hello world", true, false), vec![2, 9259, 1902]);
    assert_eq!(t.encode("Hello world", false, false), vec![9259, 1902]);
    assert_eq!(t.encode("", true, false), vec![2]);
    assert_eq!(t.encode("", false, true), Vec::<u32>::new());
    // CONTROL text is one token only with special parsing; USER_DEFINED always.
    assert_eq!(t.encode("<start_of_turn>", false, true), vec![105]);
    assert!(!t.encode("<start_of_turn>", false, false).contains(&105));
    assert_eq!(t.encode("[multimodal]", false, false), vec![5]);
    assert_eq!(t.encode("<start_of_image>", false, false), vec![255999]);
    // "</s>" is USER_DEFINED in the file, but llama.cpp makes it an end-of-generation CONTROL
    // token, so it needs special parsing too.
    assert_eq!(t.encode("</s>", false, true), vec![212]);
    assert_ne!(t.encode("</s>", false, false), vec![212]);
    assert_eq!(t.eog_ids(), &[1, 106, 212]);
    assert!(t.is_eog(1) && t.is_eog(106) && !t.is_eog(2) && !t.is_eog(105));
}

#[test]
fn gemma_pieces_and_decode_options() {
    let Some(t) = gemma() else { return };
    assert_eq!(t.token_to_piece(9259, false).unwrap(), b"Hello");
    assert_eq!(t.token_to_piece(1902, false).unwrap(), b" world");
    assert_eq!(t.token_to_piece(248, false).unwrap(), b"\n"); // <0x0A>
    assert_eq!(t.token_to_piece(105, false).unwrap(), b"");
    assert_eq!(t.token_to_piece(105, true).unwrap(), b"<start_of_turn>");
    assert_eq!(t.token_to_piece(5, false).unwrap(), b"[multimodal]"); // user-defined: always
    let ids = [2, 9259, 1902, 1];
    assert_eq!(t.decode(&ids, PLAIN).unwrap(), "Hello world");
    let special = DecodeOptions {
        remove_special: false,
        unparse_special: true,
    };
    assert_eq!(t.decode(&ids, special).unwrap(), "<bos>Hello world<eos>");
    // remove_special drops the leading BOS (add_bos) but not EOS (add_eos is false).
    let both = DecodeOptions {
        remove_special: true,
        unparse_special: true,
    };
    assert_eq!(t.decode(&ids, both).unwrap(), "Hello world<eos>");
}

#[test]
fn stream_decoder_waits_for_whole_characters() {
    let Some(t) = gemma() else { return };
    // U+10FFFF has no token: four byte tokens.
    let ids = t.encode("\u{10FFFF}", false, false);
    assert_eq!(ids, vec![482, 381, 429, 429]);
    let (pieces, rest) = stream(&t, &ids, PLAIN);
    assert_eq!(pieces, ["", "", "", "\u{10FFFF}"]);
    assert_eq!(rest, "");
    // Cut off inside the character: the flush gives what the whole decode gives.
    let (pieces, rest) = stream(&t, &ids[..2], PLAIN);
    assert_eq!(pieces, ["", ""]);
    assert_eq!(rest, "\u{FFFD}");
    assert_eq!(t.decode(&ids[..2], PLAIN).unwrap(), "\u{FFFD}");
    // A byte that can never start a character is replaced at once.
    let (pieces, _) = stream(&t, &[t.token_id("<0xFF>").unwrap(), 9259], PLAIN);
    assert_eq!(pieces, ["\u{FFFD}", "Hello"]);
}

#[test]
fn spm_space_prefix_round_trip() {
    let t = load(common::data("tok_spm_llama.gguf"));
    assert!(t.add_space_prefix());
    let ids = t.encode("Hello world", true, false);
    assert_eq!(ids[0], 1);
    assert!(
        t.token_text(ids[1]).unwrap().starts_with('\u{2581}'),
        "space prefixed to the first word"
    );
    // The first token's prefixed space is stripped; with BOS in front llama.cpp keeps it,
    // and with remove_special the BOS is dropped and the space kept, as llama.cpp does.
    assert_eq!(t.decode(&ids[1..], PLAIN).unwrap(), "Hello world");
    assert_eq!(t.decode(&ids, PLAIN).unwrap(), " Hello world");
    let rm = DecodeOptions {
        remove_special: true,
        unparse_special: false,
    };
    assert_eq!(t.decode(&ids, rm).unwrap(), " Hello world");
    let first = t.token_to_piece(ids[1], false).unwrap();
    assert_eq!(first[0], b' ');
    assert_eq!(
        t.token_to_piece_lstrip(ids[1], false, 1).unwrap(),
        &first[1..]
    );
    // After a special token the space prefix is added again.
    let with_special = t.encode("<s>Hi", false, true);
    assert_eq!(with_special[0], 1);
    assert!(t
        .token_text(with_special[1])
        .unwrap()
        .starts_with('\u{2581}'));
    for (ids, opts) in [(&ids[..], PLAIN), (&ids[1..], PLAIN), (&ids[..], rm)] {
        let (pieces, rest) = stream(&t, ids, opts);
        assert_eq!(pieces.concat() + &rest, t.decode(ids, opts).unwrap());
    }
}

#[test]
fn bpe_bos_follows_metadata_and_pre_tokenizer() {
    let llama3 = load(common::data("tok_bpe_llama_bpe.gguf"));
    assert_eq!(llama3.kind(), TokenizerKind::Bpe(PreTokenizer::Llama3));
    let bos = llama3.token_id("<|begin_of_text|>").unwrap();
    assert_eq!(llama3.bos_id(), Some(bos));
    assert_eq!(llama3.encode("hi", true, false)[0], bos);
    assert_eq!(
        llama3.encode("hi", true, false)[1..],
        llama3.encode("hi", false, false)[..]
    );
    let qwen = load(common::data("tok_bpe_qwen2.gguf"));
    assert_eq!(qwen.kind(), TokenizerKind::Bpe(PreTokenizer::Qwen2));
    assert!(!qwen.add_bos());
    assert_eq!(
        qwen.encode("hi", true, false),
        qwen.encode("hi", false, false)
    );
    // <|im_end|> and <|eot_id|> end generation; <|im_start|> does not.
    assert!(qwen.is_eog(qwen.token_id("<|im_end|>").unwrap()));
    assert!(qwen.is_eog(qwen.token_id("<|eot_id|>").unwrap()));
    assert!(!qwen.is_eog(qwen.token_id("<|im_start|>").unwrap()));
}

/// Random id sequences (including partial UTF-8, spaces and apostrophes that the clean-up of
/// BPE vocabularies rewrites): the streamed pieces always concatenate to the whole decode.
#[test]
fn stream_decode_equals_whole_decode_on_random_ids() {
    let mut vocabs = vec![
        load(common::data("tok_bpe_default.gguf")),
        load(common::data("tok_bpe_qwen2.gguf")),
        load(common::data("tok_spm_llama.gguf")),
    ];
    vocabs.extend(gemma());
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for t in &vocabs {
        // Bias towards interesting ids: spaces, apostrophes, punctuation, byte tokens.
        let interesting: Vec<u32> = [
            " ", "'", "Ġ", "Ġ'", "'s", ".", ",", "?", "Ġ.", "Ġ,", "▁", "<0xF0>", "<0x9F>",
            "<0x98>", "<0x80>", "<0xE4>", "s", "re",
        ]
        .iter()
        .filter_map(|s| t.token_id(s))
        .collect();
        for round in 0..400 {
            let len = (next() % 24) as usize;
            let ids: Vec<u32> = (0..len)
                .map(|_| {
                    if !interesting.is_empty() && next() % 2 == 0 {
                        interesting[(next() % interesting.len() as u64) as usize]
                    } else {
                        (next() % t.vocab_size() as u64) as u32
                    }
                })
                .collect();
            for opts in [
                PLAIN,
                DecodeOptions {
                    remove_special: true,
                    unparse_special: true,
                },
                DecodeOptions {
                    remove_special: false,
                    unparse_special: true,
                },
            ] {
                let (pieces, rest) = stream(t, &ids, opts);
                assert_eq!(
                    pieces.concat() + &rest,
                    t.decode(&ids, opts).unwrap(),
                    "round {round} ids {ids:?}"
                );
            }
        }
    }
}
