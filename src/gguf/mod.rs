//! The GGUF container: data model (`types`), a resumable structure scan (`scan`), the
//! validating header parser (`parse`, `validate`), the streaming loader (`load`, `store`),
//! native file access (`file`) and a writer for synthetic test models (`write`).

mod error;
mod file_type;
#[cfg(not(target_arch = "wasm32"))]
mod file;
mod item;
mod load;
mod parse;
mod scan;
mod store;
mod types;
mod validate;
mod write;

pub use error::GgufError;
pub use file_type::file_type_name;
#[cfg(not(target_arch = "wasm32"))]
pub use file::{load_file, read_header_file};
pub use load::{load_bytes, LoadProgress, StreamLoader};
pub use parse::{parse_file, parse_header, validate_file_size, HeaderStatus};
pub(crate) use validate::validate_tensors;
// The byte-level rules every header reader shares (this module's scanner and parser and the
// memory ledger's streaming skimmer): the items' encodings (`item.rs`), count caps, key and
// alignment checks.
pub(crate) use parse::{alignment_of, check_keys};
pub(crate) use item::{
    array_head, check_bools, check_counts, check_key_len, check_magic, check_n_dims, check_string_len, check_tensor_name_len,
    check_version, le_u32, le_u64, scalar, tensor_info, tensor_info_len, utf8, value_type, FIXED_HEADER_BYTES,
};
pub use scan::{
    HeaderScanner, ScanStatus, MAX_ARRAY_DEPTH, MAX_DIMS, MAX_HEADER_BYTES, MAX_KEY_BYTES,
    MAX_TENSOR_NAME_BYTES,
};
pub use store::TensorStore;
pub use types::*;
pub use write::GgufWriter;
