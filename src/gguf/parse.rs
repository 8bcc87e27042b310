//! The header as a whole: `parse_header` on whatever prefix of the file has arrived (too short,
//! it says how many bytes it needs in total), `parse_file` on a whole file in memory. Both are
//! the streaming reader (`stream.rs`) keeping everything, fed in one push, so every header
//! the crate reads — loader, parser, memory ledger — goes through one reader and one set of
//! item rules (`item.rs`).

use super::error::GgufError;
use super::stream::{HeaderStream, Keep, StreamStatus};
use super::types::GgufHeader;

/// The outcome of parsing a prefix of a GGUF file.
#[derive(Clone, Debug, PartialEq)]
pub enum HeaderStatus {
    Complete(GgufHeader),
    /// The prefix is too short: at least this many bytes (counted from the start of the file)
    /// are needed before trying again. Never more than the header's true length.
    NeedMore {
        total_bytes_needed: u64,
    },
}

/// Parses the header from a prefix of a GGUF file (which may also be the whole file).
pub fn parse_header(prefix: &[u8]) -> Result<HeaderStatus, GgufError> {
    read(prefix, None)
}

/// Parses a complete file held in memory: a short input is `GGUF_TRUNCATED`, and every tensor's
/// data must lie inside `file`.
pub fn parse_file(file: &[u8]) -> Result<GgufHeader, GgufError> {
    match read(file, Some(file.len() as u64))? {
        HeaderStatus::NeedMore { total_bytes_needed } => {
            Err(GgufError::Truncated { needed: total_bytes_needed, available: file.len() as u64 })
        }
        HeaderStatus::Complete(header) => Ok(header),
    }
}

fn read(bytes: &[u8], file_len: Option<u64>) -> Result<HeaderStatus, GgufError> {
    let mut stream = HeaderStream::new(Keep::ALL, ());
    match stream.push(bytes)? {
        StreamStatus::NeedMore { .. } => {
            Ok(HeaderStatus::NeedMore { total_bytes_needed: stream.bytes_needed() })
        }
        StreamStatus::Complete { .. } => {
            stream.finish(file_len).map(|(header, _, ())| HeaderStatus::Complete(header))
        }
    }
}
