//! Chat templates: minijinja renders like llama.cpp's Jinja engine (fixtures from
//! tools/tokenizer/gen_chat_expected.mjs), built-in fallbacks, and the single-BOS rule.

mod common;

use edgellm::tokenizer::chat_template::BuiltinTemplate;
use edgellm::tokenizer::{ChatMessage, ChatTemplate, Tokenizer};
use serde_json::Value;

fn json(name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(common::data(name)).unwrap()).unwrap()
}

fn conversations(cases: &Value) -> Vec<Vec<ChatMessage>> {
    serde_json::from_value(cases["conversations"].clone()).unwrap()
}

#[test]
fn jinja_renders_like_llamacpp() {
    let cases = json("tok_chat_cases.json");
    let convs = conversations(&cases);
    let expected = json("tok_chat_expected.json");
    let results = expected["results"].as_array().unwrap();
    assert_eq!(
        results.len(),
        cases["templates"].as_object().unwrap().len() * convs.len() * 2
    );
    let mut errors_seen = 0;
    for r in results {
        let name = r["template"].as_str().unwrap();
        let source = cases["templates"][name].as_str().unwrap();
        let t = ChatTemplate::Jinja {
            source: source.to_string(),
            bos_token: "<BOS>".into(),
            eos_token: "<EOS>".into(),
            strip_bos: false,
            strip_eos: false,
        };
        let conv = &convs[r["conversation"].as_u64().unwrap() as usize];
        let add_gen = r["add_generation_prompt"].as_bool().unwrap();
        let got = t.apply(conv, add_gen);
        match r["output"].as_str() {
            Some(want) => assert_eq!(
                got.as_deref().map_err(|e| e.to_string()),
                Ok(want),
                "{name} conv {} gen {add_gen}",
                r["conversation"]
            ),
            None => {
                errors_seen += 1;
                let e = got.expect_err("llama.cpp raised an error here");
                assert_eq!(e.code(), "CHAT_TEMPLATE_ERROR");
            }
        }
    }
    assert!(errors_seen > 0, "the fixture exercises raise_exception");
}

fn spm_tokenizer() -> Tokenizer {
    let (h, _) = edgellm::gguf::read_header_file(common::data("tok_spm_llama.gguf")).unwrap();
    Tokenizer::from_gguf(&h).unwrap()
}

#[test]
fn file_template_strips_bos_so_encoding_adds_exactly_one() {
    let tok = spm_tokenizer();
    assert!(tok.chat_template().is_some());
    assert!(matches!(
        ChatTemplate::for_tokenizer(&tok),
        ChatTemplate::Jinja { .. }
    ));
    let conv = vec![
        ChatMessage::new("system", "Be kind."),
        ChatMessage::new("user", "Hi"),
    ];
    let text = tok.apply_chat_template(&conv, true).unwrap();
    assert_eq!(text, "[INST] <<SYS>>\nBe kind.\n<</SYS>>\n\nHi [/INST]");
    let ids = tok.encode_chat(&conv, true).unwrap();
    assert_eq!(ids[0], 1);
    assert_ne!(ids[1], 1, "double BOS");
    assert_eq!(ids, tok.encode(&text, true, true));
    // An assistant turn ends with EOS text, parsed as the EOS token.
    let conv2 = vec![
        ChatMessage::new("user", "Hi"),
        ChatMessage::new("assistant", "Hello"),
    ];
    let ids2 = tok.encode_chat(&conv2, false).unwrap();
    assert_eq!(ids2.iter().filter(|&&i| i == 1).count(), 1);
    assert_eq!(ids2.last(), Some(&2));
}

#[test]
fn gemma_falls_back_to_builtin_turn_format() {
    let Some(model) = common::real_model() else {
        return;
    };
    let (h, _) = edgellm::gguf::read_header_file(model).unwrap();
    let tok = Tokenizer::from_gguf(&h).unwrap();
    assert_eq!(tok.chat_template(), None, "the file carries no template");
    assert_eq!(
        ChatTemplate::for_tokenizer(&tok),
        ChatTemplate::Builtin(BuiltinTemplate::Gemma)
    );
    let conv = vec![
        ChatMessage::new("system", "You are a pirate."),
        ChatMessage::new("user", "Hello"),
        ChatMessage::new("assistant", "Arr."),
        ChatMessage::new("user", "Bye"),
    ];
    let text = tok.apply_chat_template(&conv, true).unwrap();
    assert_eq!(
        text,
        "<start_of_turn>user\nYou are a pirate.\n\nHello<end_of_turn>\n<start_of_turn>model\nArr.<end_of_turn>\n\
         <start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n"
    );
    let ids = tok.encode_chat(&conv, true).unwrap();
    assert_eq!(
        &ids[..2],
        &[2, 105],
        "one <bos>, then <start_of_turn> as one token"
    );
    assert_eq!(ids.iter().filter(|&&i| i == 2).count(), 1);
    assert_eq!(
        ids.iter().filter(|&&i| i == 106).count(),
        3,
        "<end_of_turn> per finished turn"
    );
    assert_eq!(
        &ids[ids.len() - 3..],
        &[105, 4368, 107],
        "ends with <start_of_turn>model\\n"
    );
    assert!(tok.is_eog(106), "<end_of_turn> stops generation");

    // Where Gemma's own template does not trim, a simple conversation renders the same as a
    // Gemma-style Jinja template under llama.cpp (minus the BOS text it writes).
    let cases = json("tok_chat_cases.json");
    let expected = json("tok_chat_expected.json");
    let conv0 = &conversations(&cases)[0];
    for r in expected["results"].as_array().unwrap() {
        if r["template"] == "gemma_style" && r["conversation"] == 0 {
            let want = r["output"].as_str().unwrap().strip_prefix("<BOS>").unwrap();
            let add_gen = r["add_generation_prompt"].as_bool().unwrap();
            assert_eq!(BuiltinTemplate::Gemma.render(conv0, add_gen), want);
        }
    }
}
