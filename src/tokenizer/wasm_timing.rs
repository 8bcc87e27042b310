//! The tokenizer in WebAssembly (wasm-bindgen-test under Node): building Gemma's 262k-token
//! vocabulary from the parsed header, and tokenizing 100 KB of English, timed.
//!
//!   cargo test --release --target wasm32-unknown-unknown --lib tokenizer::wasm_timing
//!
//! A unit test rather than tests/*.rs because integration tests would also build the native
//! CLI binary for wasm. The model is read with Node's `fs` (only the header); without it the
//! test says "skipped" and passes.

use crate::gguf::{parse_header, HeaderStatus};
use crate::tokenizer::{DecodeOptions, Tokenizer};
use wasm_bindgen::prelude::*;
use wasm_bindgen_test::*;

#[wasm_bindgen(module = "fs")]
extern "C" {
    #[wasm_bindgen(js_name = openSync, catch)]
    fn open_sync(path: &str, flags: &str) -> Result<f64, JsValue>;
    #[wasm_bindgen(js_name = readSync, catch)]
    fn read_sync(
        fd: f64,
        buf: &mut [u8],
        offset: f64,
        length: f64,
        position: f64,
    ) -> Result<f64, JsValue>;
    #[wasm_bindgen(js_name = closeSync)]
    fn close_sync(fd: f64);
}

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = performance)]
    fn now() -> f64;
    #[wasm_bindgen(js_namespace = console)]
    fn log(s: &str);
}

const MODEL: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/models/gemma-3-270m-q4_k_m.gguf"
);

/// Reads the first `len` bytes of `path`.
fn read_prefix(fd: f64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    let n = read_sync(fd, &mut buf, 0.0, len as f64, 0.0).expect("read") as usize;
    buf.truncate(n);
    buf
}

fn gemma() -> Option<Tokenizer> {
    let Ok(fd) = open_sync(MODEL, "r") else {
        log(&format!("skipped: real model not present at {MODEL}"));
        return None;
    };
    let mut want = 8 << 20;
    let header = loop {
        let prefix = read_prefix(fd, want);
        match parse_header(&prefix).expect("header") {
            HeaderStatus::Complete(h) => break h,
            HeaderStatus::NeedMore { total_bytes_needed } => want = total_bytes_needed as usize,
        }
    };
    close_sync(fd);
    let t0 = now();
    let tok = Tokenizer::from_gguf(&header).expect("tokenizer");
    let ms = now() - t0;
    log(&format!(
        "wasm: gemma tokenizer built from the parsed header in {ms:.1} ms ({} tokens)",
        tok.vocab_size()
    ));
    assert!(ms < 2000.0, "building the tokenizer took {ms:.1} ms");
    Some(tok)
}

#[wasm_bindgen_test]
fn gemma_builds_and_tokenizes_in_wasm() {
    let Some(tok) = gemma() else { return };
    // Same ids as llama.cpp (see tests/tokenizer_llamacpp.rs for the full corpus).
    assert_eq!(tok.encode("Hello world", true, false), vec![2, 9259, 1902]);
    assert_eq!(
        tok.encode("<start_of_turn>user\nhi<end_of_turn>", false, true),
        vec![105, 2364, 107, 2202, 106]
    );
    let sentence =
        "Small models can run entirely inside a browser tab without sending data anywhere. ";
    let text = sentence.repeat(100_000 / sentence.len() + 1);
    let t0 = now();
    let ids = tok.encode(&text, true, false);
    let ms = now() - t0;
    log(&format!(
        "wasm: {} bytes -> {} tokens in {ms:.1} ms",
        text.len(),
        ids.len()
    ));
    assert!(ms < 2000.0, "tokenizing 100 KB took {ms:.1} ms");
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
