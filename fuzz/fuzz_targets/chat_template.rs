//! Chat template rendering: a template source and a conversation from the input, rendered
//! under fuel and the output limit, then tokenized with contents kept literal.
#![no_main]

use std::sync::OnceLock;

use edgellm::tokenizer::{ChatMessage, ChatTemplate, ContentSpecials, Tokenizer};
use libfuzzer_sys::fuzz_target;

fn tokenizer() -> &'static Tokenizer {
    static T: OnceLock<Tokenizer> = OnceLock::new();
    T.get_or_init(|| match edgellm::gguf::parse_header(include_bytes!("../../tests/data/tiny_qwen2.gguf")).unwrap() {
        edgellm::gguf::HeaderStatus::Complete(h) => Tokenizer::from_gguf(&h).unwrap(),
        _ => unreachable!(),
    })
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // "template \0 role \0 content \0 role \0 content ..."
    let mut parts = text.split('\0');
    let source = parts.next().unwrap_or_default().to_string();
    let rest: Vec<&str> = parts.collect();
    let messages: Vec<ChatMessage> = rest.chunks(2).map(|c| ChatMessage::new(c[0], c.get(1).copied().unwrap_or(""))).collect();
    let t = ChatTemplate::Jinja { source, bos_token: "<s>".into(), eos_token: "</s>".into(), strip_bos: true, strip_eos: false };
    let _ = t.encode(tokenizer(), &messages, true, ContentSpecials::Literal);
    let _ = edgellm::tokenizer::chat_template::BuiltinTemplate::Gemma.render(&messages, true);
});
