//! Tokenizers read from GGUF metadata.
