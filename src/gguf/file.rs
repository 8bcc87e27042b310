//! Native file access: the same streaming path as the browser, fed from `std::fs`.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use super::error::GgufError;
use super::load::StreamLoader;
use super::store::TensorStore;
use super::stream::{HeaderStream, Keep, StreamStatus};
use super::types::GgufHeader;

/// Chunk size for whole-file loads: large enough for few syscalls, small enough that the one
/// chunk buffer is noise beside the weights.
const LOAD_CHUNK: usize = 4 << 20;
/// The read size when only the header is wanted: most headers without a big vocabulary fit in
/// one, a large vocabulary takes a few, and reading past the header's end costs little.
const HEADER_READ_CHUNK: usize = 256 << 10;

fn io_error(path: &Path, e: std::io::Error) -> GgufError {
    GgufError::Io { kind: e.kind(), message: format!("{}: {e}", path.display()) }
}

fn open(path: &Path) -> Result<(File, u64), GgufError> {
    let f = File::open(path).map_err(|e| io_error(path, e))?;
    let len = f.metadata().map_err(|e| io_error(path, e))?.len();
    Ok((f, len))
}

/// Loads every tensor of a GGUF file, reading it in chunks through `StreamLoader`.
pub fn load_file(path: impl AsRef<Path>) -> Result<TensorStore, GgufError> {
    let path = path.as_ref();
    let (mut f, len) = open(path)?;
    let mut loader = StreamLoader::new(Some(len));
    let mut chunk = vec![0u8; LOAD_CHUNK];
    loop {
        let n = match f.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_error(path, e)),
        };
        loader.push(&chunk[..n])?;
    }
    loader.finish()
}

/// Reads and validates only the header, streaming it through the header reader (no buffer of
/// the header's bytes), and checks that every tensor lies inside the file. Returns the header
/// and the file's length.
pub fn read_header_file(path: impl AsRef<Path>) -> Result<(GgufHeader, u64), GgufError> {
    let path = path.as_ref();
    let (mut f, len) = open(path)?;
    let mut stream = HeaderStream::new(Keep::ALL, ());
    let mut chunk = vec![0u8; HEADER_READ_CHUNK];
    loop {
        let needed = stream.bytes_needed();
        if needed > len {
            return Err(GgufError::Truncated { needed, available: len });
        }
        let n = match f.read(&mut chunk) {
            // The file shrank while we read it.
            Ok(0) => return Err(GgufError::Truncated { needed, available: stream.bytes_received() }),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_error(path, e)),
        };
        if let StreamStatus::Complete { .. } = stream.push(&chunk[..n])? {
            let (header, _, ()) = stream.finish(Some(len))?;
            return Ok((header, len));
        }
    }
}
