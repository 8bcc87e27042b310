//! The GGUF container: data model (`types`), the encoding of each header item and the size
//! limits (`item`), the one header reader (`stream`: streaming, in a full mode for the loader
//! and a low-memory mode for the memory ledger), whole-header checks (`validate`), its entry
//! points on bytes at hand (`parse`) and for finding a header's end (`scan`), the streaming
//! loader (`load`, `store`), native file access (`file`) and a writer for synthetic test
//! models (`write`).

mod error;
mod file_type;
#[cfg(not(target_arch = "wasm32"))]
mod file;
mod item;
mod load;
mod parse;
mod scan;
mod store;
mod stream;
mod types;
mod validate;
mod write;

pub use error::GgufError;
pub use file_type::file_type_name;
#[cfg(not(target_arch = "wasm32"))]
pub use file::{load_file, read_header_file};
pub use load::{load_bytes, LoadProgress, StreamLoader};
pub use parse::{parse_file, parse_header, HeaderStatus};
pub use validate::validate_file_size;
pub use item::{MAX_ARRAY_DEPTH, MAX_DIMS, MAX_HEADER_BYTES, MAX_KEY_BYTES, MAX_TENSOR_NAME_BYTES};
pub use scan::{HeaderScanner, ScanStatus};
pub use store::TensorStore;
pub use stream::{HeaderStream, Keep, StreamObserver, StreamStatus};
pub use types::*;
pub use write::GgufWriter;
