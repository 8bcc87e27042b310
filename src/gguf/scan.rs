//! Where a header ends, in a growing prefix of the file: how many more bytes a fetcher must get.
//!
//! `HeaderScanner` is the streaming reader (`stream.rs`) keeping no values, fed the part of the
//! prefix it has not seen yet, so finding the end walks every item by the same rules as the
//! full read and holds at most one partial item.

use super::error::GgufError;
use super::stream::{HeaderStream, Keep, StreamStatus};

/// Keep neither strings nor arrays: only the structure matters here.
const KEEP_NOTHING: Keep = Keep { string_bytes: 0, array_len: 0, nested: false };

/// Where the scanner stands: the header's length, or how many bytes it needs at least.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanStatus {
    /// The header (up to the end of the tensor index, before alignment padding) is this long.
    Complete { header_len: u64 },
    /// The prefix must be at least this long (in total) for the scan to make progress.
    NeedMore { total_bytes_needed: u64 },
}

/// A resumable scan over a growing prefix of a GGUF file.
///
/// Call `scan` with the whole prefix received so far (always the same buffer, longer each time);
/// it resumes where the previous call stopped. After an error it keeps returning that error.
#[derive(Debug)]
pub struct HeaderScanner {
    stream: HeaderStream<()>,
    done: Option<u64>,
    failed: Option<GgufError>,
}

impl Default for HeaderScanner {
    fn default() -> Self {
        Self::new()
    }
}

impl HeaderScanner {
    pub fn new() -> Self {
        HeaderScanner { stream: HeaderStream::new(KEEP_NOTHING, ()), done: None, failed: None }
    }

    /// Advances over `prefix` (the file's first bytes, as many as have arrived).
    pub fn scan(&mut self, prefix: &[u8]) -> Result<ScanStatus, GgufError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        if let Some(header_len) = self.done {
            return Ok(ScanStatus::Complete { header_len });
        }
        let seen = self.stream.bytes_received() as usize;
        let fresh = prefix.get(seen..).unwrap_or_default();
        match self.stream.push(fresh) {
            Ok(StreamStatus::Complete { header_len }) => {
                self.done = Some(header_len);
                Ok(ScanStatus::Complete { header_len })
            }
            Ok(StreamStatus::NeedMore { .. }) => {
                Ok(ScanStatus::NeedMore { total_bytes_needed: self.stream.bytes_needed() })
            }
            Err(e) => {
                self.failed = Some(e.clone());
                Err(e)
            }
        }
    }
}
