//! The GGUF container: data model (`types`), incremental validating parser (`parse`),
//! and a writer for synthetic test models (`write`).

mod types;

pub use types::*;
