//! Bad input never panics and never gets past validation: truncations and random corruption
//! of the real model's header, and crafted headers for each rule, each with its error code.

mod common;
mod gguf_common;

use std::io::Read;
use std::time::Instant;

use edgellm::gguf::{
    parse_file, parse_header, validate_file_size, GgmlType, GgufError, GgufWriter, HeaderScanner,
    HeaderStatus, ScanStatus, Value,
};
use gguf_common::{synthetic_model, Raw, Rng};

const FILE_LEN: u64 = 253_113_024;
const DATA_OFFSET: u64 = 6_525_120;

fn real_header() -> Option<Vec<u8>> {
    let path = common::real_model()?;
    let mut buf = Vec::new();
    std::fs::File::open(path).unwrap().take(DATA_OFFSET).read_to_end(&mut buf).unwrap();
    Some(buf)
}

/// The error code of parsing `bytes` as a whole file (must be an error).
fn code(bytes: &[u8]) -> &'static str {
    match parse_file(bytes) {
        Ok(h) => panic!("accepted: {} tensors, {} keys", h.tensors.len(), h.metadata.len()),
        Err(e) => e.code(),
    }
}

/// Where `needle` first occurs in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).position(|w| w == needle).expect("pattern present")
}

fn put_u32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// The end of the real header's tensor index (the unpadded header length).
fn header_len(bytes: &[u8]) -> u64 {
    match HeaderScanner::new().scan(bytes).unwrap() {
        ScanStatus::Complete { header_len } => header_len,
        other => panic!("{other:?}"),
    }
}

#[test]
fn truncated_real_header_needs_more_or_is_truncated() {
    let Some(bytes) = real_header() else { return };
    let len = header_len(&bytes);
    let mut cuts: Vec<u64> = (0..8192).collect();
    let mut rng = Rng::new(7);
    cuts.extend((0..400).map(|_| rng.below(len)));
    cuts.extend([len - 1, len - 8, len - 12, len - 20]);
    for cut in cuts {
        let prefix = &bytes[..cut as usize];
        match parse_header(prefix) {
            Ok(HeaderStatus::NeedMore { total_bytes_needed }) => {
                assert!(total_bytes_needed > cut && total_bytes_needed <= len, "cut {cut}");
            }
            other => panic!("cut {cut}: {other:?}"),
        }
        match parse_file(prefix) {
            Err(GgufError::Truncated { needed, available }) => {
                assert_eq!(available, cut);
                assert!(needed > cut && needed <= len);
            }
            other => panic!("cut {cut}: {other:?}"),
        }
    }
}

#[test]
fn real_file_cut_inside_the_data_is_out_of_bounds() {
    let Some(bytes) = real_header() else { return };
    let HeaderStatus::Complete(h) = parse_header(&bytes).unwrap() else { panic!() };
    assert_eq!(validate_file_size(&h, FILE_LEN), Ok(()));
    let mut rng = Rng::new(11);
    for _ in 0..300 {
        let cut = DATA_OFFSET + rng.below(FILE_LEN - DATA_OFFSET);
        let e = validate_file_size(&h, cut).unwrap_err();
        assert!(
            matches!(e, GgufError::TensorOutOfBounds { file_len: Some(n), start, len, .. }
                if n == cut && start + len > cut),
            "cut {cut}: {e:?}"
        );
    }
}

/// Random corruption of the real header, in three populations: the metadata before the
/// vocabulary, the tensor index at the end, and anywhere. Each case must parse or fail with a
/// typed error; the test would fail on a panic.
fn flip_real_header(seed: u64, cases: usize, region: fn(&mut Rng, u64) -> u64) {
    let Some(bytes) = real_header() else { return };
    let len = header_len(&bytes);
    let mut rng = Rng::new(seed);
    let mut work = bytes.clone();
    let (mut ok, mut need_more, mut codes) = (0, 0, std::collections::BTreeMap::new());
    for _ in 0..cases {
        let n_flips = 1 + rng.below(3) as usize;
        let positions: Vec<usize> = (0..n_flips).map(|_| region(&mut rng, len) as usize).collect();
        for &p in &positions {
            work[p] ^= 1 + rng.below(255) as u8;
        }
        match parse_header(&work) {
            Ok(HeaderStatus::Complete(h)) => {
                ok += 1;
                // Whatever got through is internally consistent.
                assert!(h.data_offset % h.alignment == 0);
                for t in &h.tensors {
                    assert!(t.offset % h.alignment == 0 && (1..=4).contains(&t.dims.len()));
                }
            }
            Ok(HeaderStatus::NeedMore { total_bytes_needed }) => {
                assert!(total_bytes_needed > work.len() as u64);
                need_more += 1;
            }
            Err(e) => *codes.entry(e.code()).or_insert(0) += 1,
        }
        for &p in &positions {
            work[p] = bytes[p];
        }
    }
    eprintln!("seed {seed}: {ok} parsed, {need_more} need more, errors {codes:?}");
    assert!(!codes.is_empty(), "corruption never detected");
}

#[test]
fn random_flips_in_the_leading_metadata() {
    // The first 2 KiB hold every key before the vocabulary and the vocabulary's array header.
    flip_real_header(1, 1500, |rng, _| rng.below(2048));
}

#[test]
fn random_flips_in_the_tensor_index() {
    // 236 tensor infos of ~50 bytes each end the header.
    flip_real_header(2, 300, |rng, len| len - 1 - rng.below(16 * 1024));
}

#[test]
fn random_flips_anywhere_in_the_header() {
    flip_real_header(3, 200, |rng, len| rng.below(len));
}

/// Patches to the real header's own fields.
#[test]
fn crafted_patches_of_the_real_header() {
    let Some(bytes) = real_header() else { return };
    // The bytes hold only the header, so judge them with `parse_header`.
    let patch = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut b = bytes.clone();
        f(&mut b);
        match parse_header(&b) {
            Ok(HeaderStatus::Complete(_)) => panic!("patched header accepted"),
            Ok(HeaderStatus::NeedMore { .. }) => "NEED_MORE",
            Err(e) => e.code(),
        }
    };
    assert_eq!(patch(&|b| b[0] = b'X'), "GGUF_BAD_MAGIC");
    assert_eq!(patch(&|b| put_u32(b, 4, 1)), "GGUF_UNSUPPORTED_VERSION");
    assert_eq!(patch(&|b| put_u32(b, 4, 4)), "GGUF_UNSUPPORTED_VERSION");
    assert_eq!(patch(&|b| put_u64(b, 8, 1 << 62)), "GGUF_COUNT_TOO_LARGE");
    assert_eq!(patch(&|b| put_u64(b, 16, 1 << 62)), "GGUF_COUNT_TOO_LARGE");
    assert_eq!(patch(&|b| put_u64(b, 16, u64::MAX)), "GGUF_COUNT_TOO_LARGE");
    // One tensor more than the index holds: the zero padding after it reads as an empty name.
    assert_eq!(patch(&|b| put_u64(b, 8, 237)), "GGUF_BAD_TENSOR_NAME");

    // The vocabulary's array header: key, value type 9, element type 8, count.
    let key = b"tokenizer.ggml.tokens";
    let arr = find(&bytes, key) + key.len();
    assert_eq!(&bytes[arr..arr + 8], &[9, 0, 0, 0, 8, 0, 0, 0]);
    assert_eq!(patch(&|b| put_u64(b, arr + 8, 1 << 61)), "GGUF_COUNT_TOO_LARGE");
    assert_eq!(patch(&|b| put_u32(b, arr + 4, 13)), "GGUF_UNKNOWN_VALUE_TYPE");
    assert_eq!(patch(&|b| put_u32(b, arr, 99)), "GGUF_UNKNOWN_VALUE_TYPE");
    // The first token's length: huge, then just past the header's size limit.
    assert_eq!(patch(&|b| put_u64(b, arr + 16, u64::MAX)), "GGUF_COUNT_TOO_LARGE");
    assert_eq!(patch(&|b| put_u64(b, arr + 16, 600 << 20)), "GGUF_COUNT_TOO_LARGE");
    // The first token "<pad>" with an invalid UTF-8 byte.
    assert_eq!(&bytes[arr + 24..arr + 29], b"<pad>");
    assert_eq!(patch(&|b| b[arr + 25] = 0xFF), "GGUF_INVALID_UTF8");

    // The first tensor info: name, n_dims, dims, type, offset.
    let name = b"output_norm.weight";
    let mut pat = (name.len() as u64).to_le_bytes().to_vec();
    pat.extend_from_slice(name);
    let info = find(&bytes, &pat) + pat.len();
    assert_eq!(&bytes[info..info + 4], &1u32.to_le_bytes(), "one dimension");
    let (dims, ty, off) = (info + 4, info + 12, info + 16);
    assert_eq!(patch(&|b| put_u32(b, info, 5)), "GGUF_BAD_DIM_COUNT");
    assert_eq!(patch(&|b| put_u32(b, info, 0)), "GGUF_BAD_DIM_COUNT");
    assert_eq!(patch(&|b| put_u32(b, ty, 4)), "GGUF_UNKNOWN_TENSOR_TYPE");
    assert_eq!(patch(&|b| put_u32(b, ty, u32::MAX)), "GGUF_UNKNOWN_TENSOR_TYPE");
    assert_eq!(patch(&|b| put_u32(b, ty, GgmlType::Q4_K.id())), "GGUF_PARTIAL_BLOCK");
    assert_eq!(patch(&|b| put_u64(b, dims, 1 << 62)), "GGUF_DIMS_OVERFLOW");
    assert_eq!(patch(&|b| put_u64(b, dims, u64::MAX)), "GGUF_DIMS_OVERFLOW");
    assert_eq!(patch(&|b| put_u64(b, off, 4)), "GGUF_MISALIGNED_TENSOR");
    // Offset 2560 is token_embd.weight's: the two overlap.
    assert_eq!(patch(&|b| put_u64(b, off, 2560)), "GGUF_OVERLAPPING_TENSORS");
    assert_eq!(patch(&|b| put_u64(b, off, u64::MAX - 31)), "GGUF_TENSOR_OUT_OF_BOUNDS");
    // A far but representable offset passes the header and fails against the file length.
    let mut b = bytes.clone();
    put_u64(&mut b, off, 1 << 40);
    let HeaderStatus::Complete(h) = parse_header(&b).unwrap() else { panic!() };
    assert_eq!(validate_file_size(&h, FILE_LEN).unwrap_err().code(), "GGUF_TENSOR_OUT_OF_BOUNDS");
    assert_eq!(patch(&|b| b[info - 1] = 0xFF), "GGUF_INVALID_UTF8");
}

/// One crafted file: `(description, bytes, expected code)`.
fn crafted_cases() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let mut cases = Vec::new();
    let mut add = |what, r: &mut Raw, code| cases.push((what, std::mem::take(&mut r.0), code));

    add("bad magic", Raw::default().bytes(b"GGML").u32(3), "GGUF_BAD_MAGIC");
    add("empty file", &mut Raw::default(), "GGUF_TRUNCATED");
    for v in [0, 1, 4, 0x0300_0000, u32::MAX] {
        add("version", &mut Raw::header(v, 0, 0), "GGUF_UNSUPPORTED_VERSION");
    }
    add("tensor count 2^62", &mut Raw::header(3, 1 << 62, 0), "GGUF_COUNT_TOO_LARGE");
    add("tensor count max", &mut Raw::header(3, u64::MAX, 0), "GGUF_COUNT_TOO_LARGE");
    add("kv count 2^62", &mut Raw::header(3, 0, 1 << 62), "GGUF_COUNT_TOO_LARGE");
    add(
        "kv count 2^60, 100 bytes",
        Raw::header(3, 0, 1 << 60).bytes(&[0; 100]),
        "GGUF_COUNT_TOO_LARGE",
    );
    add(
        "counts together too large",
        &mut Raw::header(3, 10_000_000, 20_000_000),
        "GGUF_HEADER_TOO_LARGE",
    );
    add("kv count 1000, little data", Raw::header(3, 0, 1000).kv_u32("a.b", 1), "GGUF_TRUNCATED");
    add(
        "tensor count 1000, one tensor",
        Raw::header(3, 1000, 0).tensor("t", &[32], 0, 0),
        "GGUF_TRUNCATED",
    );

    // Keys.
    add("empty key", Raw::header(3, 0, 1).str("").u32(4).u32(0), "GGUF_BAD_KEY");
    add("key length 2^62", Raw::header(3, 0, 1).u64(1 << 62).bytes(b"abc"), "GGUF_BAD_KEY");
    add("key length 65536", Raw::header(3, 0, 1).u64(65_536).bytes(&[b'a'; 100]), "GGUF_BAD_KEY");
    add(
        "key not UTF-8",
        Raw::header(3, 0, 1).u64(2).bytes(&[0xC3, 0x28]).u32(4).u32(0),
        "GGUF_INVALID_UTF8",
    );
    add(
        "duplicate key",
        Raw::header(3, 0, 2).kv_u32("a.b", 1).kv_u32("a.b", 2),
        "GGUF_DUPLICATE_KEY",
    );

    // Values.
    for id in [13, 255, u32::MAX] {
        add(
            "unknown value type",
            Raw::header(3, 0, 1).str("k").u32(id).u32(0),
            "GGUF_UNKNOWN_VALUE_TYPE",
        );
        add(
            "unknown element type",
            Raw::header(3, 0, 1).str("k").u32(9).u32(id).u64(0),
            "GGUF_UNKNOWN_VALUE_TYPE",
        );
    }
    add(
        "string length 2^62",
        Raw::header(3, 0, 1).str("k").u32(8).u64(1 << 62),
        "GGUF_COUNT_TOO_LARGE",
    );
    add(
        "string length max",
        Raw::header(3, 0, 1).str("k").u32(8).u64(u64::MAX),
        "GGUF_COUNT_TOO_LARGE",
    );
    add(
        "string length 100 MiB, 3 bytes",
        Raw::header(3, 0, 1).str("k").u32(8).u64(100 << 20).bytes(b"abc"),
        "GGUF_TRUNCATED",
    );
    add(
        "string not UTF-8",
        Raw::header(3, 0, 1).str("k").u32(8).u64(1).bytes(&[0x80]),
        "GGUF_INVALID_UTF8",
    );
    add("bool 2", Raw::header(3, 0, 1).str("k").u32(7).bytes(&[2]), "GGUF_INVALID_BOOL");
    add(
        "bool array with 7",
        Raw::header(3, 0, 1).str("k").u32(9).u32(7).u64(3).bytes(&[1, 0, 7]),
        "GGUF_INVALID_BOOL",
    );
    for (elem, count) in
        [(4, 1u64 << 62), (4, u64::MAX), (10, 1 << 61), (8, 1 << 62), (9, 1 << 62), (0, u64::MAX)]
    {
        add(
            "array length",
            Raw::header(3, 0, 1).str("k").u32(9).u32(elem).u64(count),
            "GGUF_COUNT_TOO_LARGE",
        );
    }
    add(
        "u32 array 1000, 8 bytes",
        Raw::header(3, 0, 1).str("k").u32(9).u32(4).u64(1000).u64(0),
        "GGUF_TRUNCATED",
    );
    add(
        "string array 1000, 1 string",
        Raw::header(3, 0, 1).str("k").u32(9).u32(8).u64(1000).str("x"),
        "GGUF_TRUNCATED",
    );
    let mut deep = Raw::header(3, 0, 1);
    deep.str("k").u32(9);
    for _ in 0..9 {
        deep.u32(9).u64(1);
    }
    deep.u32(4).u64(0);
    add("arrays nested 10 deep", &mut deep, "GGUF_ARRAY_TOO_DEEP");

    // Alignment.
    let align = |v: &mut Raw| {
        let mut r = Raw::header(3, 1, 1);
        r.bytes(&v.0).tensor("t", &[8], 0, 0).data(64, 32);
        r
    };
    add(
        "alignment 0",
        &mut align(Raw::default().kv_u32("general.alignment", 0)),
        "GGUF_BAD_ALIGNMENT",
    );
    add(
        "alignment 48",
        &mut align(Raw::default().kv_u32("general.alignment", 48)),
        "GGUF_BAD_ALIGNMENT",
    );
    add(
        "alignment u64",
        &mut align(Raw::default().str("general.alignment").u32(10).u64(32)),
        "GGUF_BAD_ALIGNMENT",
    );
    add(
        "alignment string",
        &mut align(Raw::default().str("general.alignment").u32(8).str("32")),
        "GGUF_BAD_ALIGNMENT",
    );

    // Tensor infos.
    let one = |name: &str, dims: &[u64], ty: u32, off: u64| {
        let mut r = Raw::header(3, 1, 0);
        r.tensor(name, dims, ty, off).data(32, 4096);
        r
    };
    add("empty tensor name", &mut one("", &[8], 0, 0), "GGUF_BAD_TENSOR_NAME");
    add("65-byte tensor name", &mut one(&"x".repeat(65), &[8], 0, 0), "GGUF_BAD_TENSOR_NAME");
    add("0 dims", &mut one("t", &[], 0, 0), "GGUF_BAD_DIM_COUNT");
    add("5 dims", &mut one("t", &[1, 1, 1, 1, 1], 0, 0), "GGUF_BAD_DIM_COUNT");
    add("n_dims max", Raw::header(3, 1, 0).str("t").u32(u32::MAX).u64(1), "GGUF_BAD_DIM_COUNT");
    add("dims product overflows", &mut one("t", &[1 << 32, 1 << 32], 0, 0), "GGUF_DIMS_OVERFLOW");
    add("dim beyond i64", &mut one("t", &[1 << 63], 0, 0), "GGUF_DIMS_OVERFLOW");
    add("bytes overflow", &mut one("t", &[1 << 62], 0, 0), "GGUF_DIMS_OVERFLOW");
    add(
        "4 dims overflow",
        &mut one("t", &[1 << 16, 1 << 16, 1 << 16, 1 << 16], 0, 0),
        "GGUF_DIMS_OVERFLOW",
    );
    add("partial Q8_0 block", &mut one("t", &[33], 8, 0), "GGUF_PARTIAL_BLOCK");
    add("partial Q4_K row", &mut one("t", &[128, 2], 12, 0), "GGUF_PARTIAL_BLOCK");
    for id in [4, 5, 31, 99, u32::MAX] {
        add("unknown tensor type", &mut one("t", &[32], id, 0), "GGUF_UNKNOWN_TENSOR_TYPE");
    }
    add("misaligned offset", &mut one("t", &[8], 0, 16), "GGUF_MISALIGNED_TENSOR");
    add("offset past the end", &mut one("t", &[8], 0, 1 << 20), "GGUF_TENSOR_OUT_OF_BOUNDS");
    add("offset overflows", &mut one("t", &[8], 0, u64::MAX - 31), "GGUF_TENSOR_OUT_OF_BOUNDS");
    add("data beyond file", &mut one("t", &[2048], 0, 0), "GGUF_TENSOR_OUT_OF_BOUNDS");
    let two = |a: (&str, u64, u64), b: (&str, u64, u64)| {
        let mut r = Raw::header(3, 2, 0);
        r.tensor(a.0, &[a.1], 0, a.2).tensor(b.0, &[b.1], 0, b.2).data(32, 4096);
        r
    };
    add("same offset", &mut two(("a", 8, 0), ("b", 8, 0)), "GGUF_OVERLAPPING_TENSORS");
    add("starts inside", &mut two(("a", 16, 0), ("b", 8, 32)), "GGUF_OVERLAPPING_TENSORS");
    add(
        "starts inside, listed first",
        &mut two(("b", 8, 32), ("a", 16, 0)),
        "GGUF_OVERLAPPING_TENSORS",
    );
    add("duplicate name", &mut two(("a", 8, 0), ("a", 8, 32)), "GGUF_DUPLICATE_TENSOR");
    add(
        "tensor name not UTF-8",
        Raw::header(3, 1, 0).u64(1).bytes(&[0xFE]).u32(1).u64(8).u32(0).u64(0).data(32, 64),
        "GGUF_INVALID_UTF8",
    );
    cases
}

#[test]
fn crafted_headers_fail_with_their_code() {
    for (what, bytes, expected) in crafted_cases() {
        let t = Instant::now();
        let got = code(&bytes);
        assert_eq!(got, expected, "{what}");
        assert!(t.elapsed().as_millis() < 100, "{what} took {:?}", t.elapsed());
    }
}

#[test]
fn control_cases_for_the_crafted_headers_parse() {
    // The same builders with valid values are accepted, so each crafted failure is the field's.
    let mut ok = Raw::header(3, 2, 1);
    ok.kv_u32("general.alignment", 64)
        .tensor("a", &[16], 0, 0)
        .tensor("b", &[8], 0, 64)
        .data(64, 128);
    let h = parse_file(&ok.0).unwrap();
    assert_eq!((h.alignment, h.tensors.len(), h.data_offset % 64), (64, 2, 0));

    let mut deep = Raw::header(3, 0, 1);
    deep.str("k").u32(9);
    for _ in 0..7 {
        deep.u32(9).u64(1);
    }
    deep.u32(4).u64(0);
    parse_file(&deep.0).expect("arrays nested 8 deep are allowed");

    let mut four = Raw::header(3, 1, 0);
    four.tensor("t", &[32, 1, 2, 1], 8, 0).data(32, 68);
    assert_eq!(parse_file(&four.0).unwrap().tensors[0].n_bytes(), 68);
}

#[test]
fn writer_built_bad_files_are_rejected() {
    let mut w = GgufWriter::new();
    w.metadata("a", Value::U8(1)).metadata("a", Value::U8(2));
    assert_eq!(code(&w.to_bytes().unwrap()), "GGUF_DUPLICATE_KEY");

    let mut w = GgufWriter::new();
    w.tensor("t", &[4], GgmlType::F32, vec![0; 16]).tensor("t", &[4], GgmlType::F32, vec![0; 16]);
    assert_eq!(code(&w.to_bytes().unwrap()), "GGUF_DUPLICATE_TENSOR");

    let mut w = GgufWriter::new();
    w.metadata("", Value::U8(1));
    assert_eq!(code(&w.to_bytes().unwrap()), "GGUF_BAD_KEY");
}

/// Random corruption of a small synthetic file with every value type, including nested arrays.
#[test]
fn random_flips_in_a_synthetic_file() {
    let (file, _) = synthetic_model(3, None);
    let mut rng = Rng::new(5);
    let mut errors = 0;
    for _ in 0..20_000 {
        let mut b = file.clone();
        for _ in 0..1 + rng.below(4) {
            let p = rng.below(b.len() as u64) as usize;
            b[p] ^= 1 + rng.below(255) as u8;
        }
        if rng.below(4) == 0 {
            b.truncate(rng.below(b.len() as u64) as usize);
        }
        errors += parse_file(&b).is_err() as u32;
    }
    assert!(errors > 1000, "only {errors} corruptions detected");
}
