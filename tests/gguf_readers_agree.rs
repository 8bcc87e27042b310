//! The GGUF header reader in its two modes — the loader's (`gguf::parse_header`, `HeaderStream` keeping all) and
//! the memory ledger's streaming skimmer (`memory::HeaderSkimmer`) — apply one set of item
//! rules (`gguf/item.rs`): a hostile header gets the same typed error from both, whether the
//! skimmer is fed it whole or a byte at a time. The skimmer is gguf's streaming reader
//! (`gguf::HeaderStream`) with limits; with `Keep::ALL` the same reader returns the header the
//! loader's parser does.

mod common;

use edgellm::gguf::{parse_file, parse_header, HeaderStatus, HeaderStream, Keep, StreamStatus};
use edgellm::memory::HeaderSkimmer;

fn u32le(v: u32) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

fn u64le(v: u64) -> Vec<u8> {
    v.to_le_bytes().to_vec()
}

fn string(s: &[u8]) -> Vec<u8> {
    [u64le(s.len() as u64), s.to_vec()].concat()
}

/// A key/value pair of type id `ty` with the value's encoded bytes.
fn kv(key: &[u8], ty: u32, value: Vec<u8>) -> Vec<u8> {
    [string(key), u32le(ty), value].concat()
}

/// A tensor info: name, dims, ggml type id, offset.
fn tensor(name: &[u8], dims: &[u64], ty: u32, offset: u64) -> Vec<u8> {
    let mut b = [string(name), u32le(dims.len() as u32)].concat();
    for d in dims {
        b.extend(u64le(*d));
    }
    [b, u32le(ty), u64le(offset)].concat()
}

fn file(version: u32, n_tensors: u64, n_kv: u64, body: &[Vec<u8>]) -> Vec<u8> {
    [b"GGUF".to_vec(), u32le(version), u64le(n_tensors), u64le(n_kv), body.concat()].concat()
}

fn loader_code(bytes: &[u8]) -> String {
    match parse_header(bytes) {
        Ok(HeaderStatus::Complete(_)) => "OK".into(),
        Ok(HeaderStatus::NeedMore { .. }) => "NEED_MORE".into(),
        Err(e) => e.code().into(),
    }
}

fn skimmer_code(bytes: &[u8], chunk: usize) -> String {
    let mut s = HeaderSkimmer::new();
    for c in bytes.chunks(chunk) {
        if let Err(e) = s.push(c) {
            return e.code().into();
        }
    }
    match s.finish(None) {
        Ok(_) => "OK".into(),
        Err(e) => e.code().into(),
    }
}

#[test]
fn hostile_headers_get_the_same_code_from_both_readers() {
    let u32_kv = kv(b"a.n", 4, u32le(7));
    let t_ok = tensor(b"w", &[32], 0, 0);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("sound", file(3, 1, 1, &[u32_kv.clone(), t_ok.clone()]), "OK"),
        ("magic", [b"GGUX".to_vec(), file(3, 0, 0, &[])[4..].to_vec()].concat(), "GGUF_BAD_MAGIC"),
        ("version", file(4, 0, 0, &[]), "GGUF_UNSUPPORTED_VERSION"),
        ("tensor count", file(3, 1 << 40, 0, &[]), "GGUF_COUNT_TOO_LARGE"),
        ("metadata count", file(3, 0, 1 << 40, &[]), "GGUF_COUNT_TOO_LARGE"),
        // Each count fits alone; together they pass the header limit.
        ("both counts", file(3, 10_000_000, 20_000_000, &[]), "GGUF_HEADER_TOO_LARGE"),
        ("empty key", file(3, 0, 1, &[kv(b"", 4, u32le(1))]), "GGUF_BAD_KEY"),
        ("long key", file(3, 0, 1, &[u64le(70_000), vec![b'k'; 64]]), "GGUF_BAD_KEY"),
        ("duplicate key", file(3, 0, 2, &[u32_kv.clone(), u32_kv.clone()]), "GGUF_DUPLICATE_KEY"),
        ("value type", file(3, 0, 1, &[kv(b"a.x", 99, u32le(1))]), "GGUF_UNKNOWN_VALUE_TYPE"),
        ("bool", file(3, 0, 1, &[kv(b"a.b", 7, vec![2])]), "GGUF_INVALID_BOOL"),
        ("bool array", file(3, 0, 1, &[kv(b"a.b", 9, [u32le(7), u64le(3), vec![1, 0, 5]].concat())]), "GGUF_INVALID_BOOL"),
        ("string length", file(3, 0, 1, &[kv(b"a.s", 8, u64le(1 << 40))]), "GGUF_COUNT_TOO_LARGE"),
        ("utf8", file(3, 0, 1, &[kv(b"a.s", 8, string(&[b'o', 0xff, b'k']))]), "GGUF_INVALID_UTF8"),
        ("array length", file(3, 0, 1, &[kv(b"a.v", 9, [u32le(4), u64le(1 << 40)].concat())]), "GGUF_COUNT_TOO_LARGE"),
        ("array elem type", file(3, 0, 1, &[kv(b"a.v", 9, [u32le(42), u64le(1)].concat())]), "GGUF_UNKNOWN_VALUE_TYPE"),
        (
            "array depth",
            file(3, 0, 1, &[kv(b"a.v", 9, [(0..9).flat_map(|_| [u32le(9), u64le(1)].concat()).collect::<Vec<u8>>(), u32le(4), u64le(0)].concat())]),
            "GGUF_ARRAY_TOO_DEEP",
        ),
        ("alignment", file(3, 0, 1, &[kv(b"general.alignment", 4, u32le(48))]), "GGUF_BAD_ALIGNMENT"),
        ("empty tensor name", file(3, 1, 0, &[tensor(b"", &[32], 0, 0)]), "GGUF_BAD_TENSOR_NAME"),
        ("long tensor name", file(3, 1, 0, &[tensor(&[b'n'; 65], &[32], 0, 0)]), "GGUF_BAD_TENSOR_NAME"),
        ("tensor name utf8", file(3, 1, 0, &[tensor(&[0xc3, 0x28], &[32], 0, 0)]), "GGUF_INVALID_UTF8"),
        ("no dims", file(3, 1, 0, &[tensor(b"w", &[], 0, 0)]), "GGUF_BAD_DIM_COUNT"),
        ("five dims", file(3, 1, 0, &[tensor(b"w", &[1, 1, 1, 1, 32], 0, 0)]), "GGUF_BAD_DIM_COUNT"),
        ("tensor type", file(3, 1, 0, &[tensor(b"w", &[32], 999, 0)]), "GGUF_UNKNOWN_TENSOR_TYPE"),
        ("duplicate tensor", file(3, 2, 0, &[t_ok.clone(), tensor(b"w", &[32], 0, 128)]), "GGUF_DUPLICATE_TENSOR"),
        ("misaligned", file(3, 1, 0, &[tensor(b"w", &[32], 0, 4)]), "GGUF_MISALIGNED_TENSOR"),
    ];
    for (what, bytes, want) in cases {
        assert_eq!(loader_code(&bytes), want, "{what}: the loader's reader");
        for chunk in [1, 7, bytes.len().max(1)] {
            assert_eq!(skimmer_code(&bytes, chunk), want, "{what}: the skimmer in chunks of {chunk}");
        }
    }
}

#[test]
fn the_streaming_reader_keeping_all_returns_the_parsers_header() {
    let mut files: Vec<_> = std::fs::read_dir(common::data("")).unwrap().map(|e| e.unwrap().path()).collect();
    files.retain(|p| p.extension().is_some_and(|x| x == "gguf"));
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    for path in files {
        let bytes = std::fs::read(&path).unwrap();
        let want = parse_file(&bytes).unwrap();
        for chunk in [1, 333, bytes.len()] {
            let mut r = HeaderStream::new(Keep::ALL, ());
            let mut status = StreamStatus::NeedMore { bytes_received: 0 };
            for c in bytes.chunks(chunk) {
                status = r.push(c).unwrap();
                if let StreamStatus::Complete { .. } = status {
                    break;
                }
            }
            let StreamStatus::Complete { header_len } = status else { panic!("{path:?}: {status:?}") };
            let (got, len, ()) = r.finish(Some(bytes.len() as u64)).unwrap();
            assert_eq!(got, want, "{path:?} in chunks of {chunk}");
            assert_eq!(len, header_len);
            assert!(want.data_offset >= len && want.data_offset - len < want.alignment, "{path:?}");
        }
    }
}
