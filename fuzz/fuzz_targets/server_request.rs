//! The server's request parser and validation (`/v1/chat/completions`, `/v1/completions`
//! bodies): any bytes give a parsed request or an OpenAI-shaped error.
#![no_main]

use edgellm::server::openai::{parse, Kind, Limits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&k, body)) = data.split_first() else { return };
    let kind = if k & 1 == 0 { Kind::Chat } else { Kind::Completion };
    if let Err(e) = parse(kind, body, Limits { max_tokens: 1 + (k as usize) * 64 }) {
        let _ = e.body();
    }
});
