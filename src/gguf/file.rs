//! Native file access: the same streaming path as the browser, fed from `std::fs`.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use super::error::GgufError;
use super::load::StreamLoader;
use super::parse::decode_header;
use super::scan::{HeaderScanner, ScanStatus};
use super::store::TensorStore;
use super::types::GgufHeader;
use super::validate::validate_file_size;

/// Chunk size for whole-file loads: large enough for few syscalls, small enough that the one
/// chunk buffer is noise beside the weights.
const LOAD_CHUNK: usize = 4 << 20;
/// The first read when only the header is wanted; most headers without a big vocabulary fit.
const HEADER_FIRST_READ: u64 = 256 << 10;
/// How much further to read each time the header needs more, so a large vocabulary takes a
/// few reads rather than one per string.
const HEADER_READ_STEP: u64 = 1 << 20;

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

/// Reads and validates only the header (a growing prefix of the file), and checks that every
/// tensor lies inside the file. Returns the header and the file's length.
pub fn read_header_file(path: impl AsRef<Path>) -> Result<(GgufHeader, u64), GgufError> {
    let path = path.as_ref();
    let (f, len) = open(path)?;
    let mut reader = f.take(0);
    let mut buf = Vec::new();
    let mut scanner = HeaderScanner::new();
    let mut target = HEADER_FIRST_READ.min(len);
    loop {
        let have = buf.len() as u64;
        // Exact growth: the buffer never holds more than the bytes asked for.
        buf.reserve_exact(target.saturating_sub(have) as usize);
        reader.set_limit(target.saturating_sub(have));
        reader.read_to_end(&mut buf).map_err(|e| io_error(path, e))?;
        let at_eof = (buf.len() as u64) < target || buf.len() as u64 >= len;
        match scanner.scan(&buf)? {
            ScanStatus::Complete { header_len } => {
                let header = decode_header(&buf[..header_len as usize])?;
                validate_file_size(&header, len)?;
                return Ok((header, len));
            }
            ScanStatus::NeedMore { total_bytes_needed } => {
                if total_bytes_needed > len {
                    return Err(GgufError::Truncated {
                        needed: total_bytes_needed,
                        available: len,
                    });
                }
                if at_eof {
                    // The file shrank while we read it.
                    let available = buf.len() as u64;
                    return Err(GgufError::Truncated { needed: total_bytes_needed, available });
                }
                target = total_bytes_needed.max(buf.len() as u64 + HEADER_READ_STEP).min(len);
            }
        }
    }
}
