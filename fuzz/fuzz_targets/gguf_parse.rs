//! The GGUF container: header parse of any prefix, and the full streamed load (index
//! validation, tensor placement) of the whole input. Typed errors only.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = edgellm::gguf::parse_header(data);
    if let Ok(store) = edgellm::gguf::load_bytes(data) {
        let _ = store.header.tensor_data_bytes();
    }
});
