//! Writer → parser round trips on synthetic files, and incremental parsing of every prefix.

mod gguf_common;

use edgellm::gguf::{
    parse_file, parse_header, validate_file_size, Array, GgmlType, GgufError, GgufHeader,
    GgufWriter, HeaderScanner, HeaderStatus, ScanStatus, Value,
};
use gguf_common::{every_value_type, synthetic_model, synthetic_tensors};

fn complete(status: HeaderStatus) -> GgufHeader {
    match status {
        HeaderStatus::Complete(h) => h,
        other => panic!("expected a complete header, got {other:?}"),
    }
}

/// Rewrites a parsed file with the writer: the bytes must come out identical.
fn rewrite(header: &GgufHeader, file: &[u8]) -> Vec<u8> {
    let mut w = GgufWriter::with_version(header.version);
    for (k, v) in &header.metadata {
        w.metadata(k.clone(), v.clone());
    }
    for t in &header.tensors {
        let start = (header.data_offset + t.offset) as usize;
        let data = file[start..start + t.n_bytes() as usize].to_vec();
        w.tensor(t.name.clone(), &t.dims, t.ggml_type, data);
    }
    w.to_bytes().unwrap()
}

#[test]
fn round_trip_every_value_type_and_tensor_layout() {
    for version in [2, 3] {
        for alignment in [None, Some(1), Some(8), Some(64), Some(4096)] {
            let (file, datas) = synthetic_model(version, alignment);
            let h = parse_file(&file).unwrap();
            let align = alignment.map_or(32, |a| a as u64);
            assert_eq!(h.version, version);
            assert_eq!(h.alignment, align);

            let mut expected = every_value_type();
            if let Some(a) = alignment {
                expected.push(("general.alignment".into(), Value::U32(a)));
            }
            assert_eq!(h.metadata, expected, "metadata v{version} align {alignment:?}");

            let spec = synthetic_tensors();
            assert_eq!(h.tensors.len(), spec.len());
            assert_eq!(h.data_offset % align, 0);
            for ((t, (name, dims, ty)), data) in h.tensors.iter().zip(&spec).zip(&datas) {
                assert_eq!((t.name.as_str(), &t.dims, t.ggml_type), (*name, dims, *ty));
                assert_eq!(t.offset % align, 0, "{name} misaligned");
                assert_eq!(t.n_bytes(), data.len() as u64);
                let start = (h.data_offset + t.offset) as usize;
                assert_eq!(&file[start..start + data.len()], &data[..], "{name} bytes");
            }
            assert!(h.data_end() <= file.len() as u64);
            assert_eq!(rewrite(&h, &file), file, "rewrite v{version} align {alignment:?}");
        }
    }
}

#[test]
fn typed_getters_read_the_synthetic_metadata() {
    let (file, _) = synthetic_model(3, None);
    let h = parse_file(&file).unwrap();
    assert_eq!(h.architecture(), Some("synth"));
    assert_eq!(h.get_u64("t.u32"), Some(4_000_000_000));
    assert_eq!(h.get_u64("t.i8"), None, "negative value is not a u64");
    assert_eq!(h.get_f64("t.f64"), Some(std::f64::consts::PI));
    assert_eq!(h.get_bool("t.bool_true"), Some(true));
    assert_eq!(h.get_str("t.string_empty"), Some(""));
    match h.get_array("t.a.nested_mixed") {
        Some(Array::Array(inner)) => {
            assert_eq!(inner.len(), 3);
            assert_eq!(
                inner[2],
                Array::Array(vec![Array::Bool(vec![true]), Array::I64(vec![-9, 9])])
            );
        }
        other => panic!("nested array decoded as {other:?}"),
    }
    assert_eq!(h.tensor("blk.0.empty").map(|t| t.n_bytes()), Some(0));
}

/// Every prefix of the file: `NeedMore` below the header's length, never asking for more than
/// the header's true length and never less as the prefix grows; `Complete` from there on.
#[test]
fn every_prefix_needs_more_until_the_header_is_complete() {
    for alignment in [None, Some(64)] {
        let (file, _) = synthetic_model(3, alignment);
        let full = parse_file(&file).unwrap();
        let header_len = (0..=file.len())
            .find(|&n| matches!(parse_header(&file[..n]), Ok(HeaderStatus::Complete(_))))
            .expect("some prefix completes the header");
        // The header ends where the tensor index ends; the data section starts at the next
        // multiple of the alignment.
        assert_eq!(full.data_offset, (header_len as u64).div_ceil(full.alignment) * full.alignment);

        let mut scanner = HeaderScanner::new();
        let mut last_needed = 0;
        for n in 0..=file.len() {
            let status = parse_header(&file[..n]).unwrap();
            let resumed = scanner.scan(&file[..n]).unwrap();
            if n < header_len {
                let HeaderStatus::NeedMore { total_bytes_needed } = status else {
                    panic!("prefix {n} < {header_len} completed")
                };
                assert!(total_bytes_needed > n as u64, "prefix {n}: asks for {total_bytes_needed}");
                assert!(total_bytes_needed <= header_len as u64, "prefix {n} overshoots");
                assert!(total_bytes_needed >= last_needed, "prefix {n}: need went down");
                last_needed = total_bytes_needed;
                assert_eq!(resumed, ScanStatus::NeedMore { total_bytes_needed }, "prefix {n}");
            } else {
                assert_eq!(complete(status), full, "prefix {n}");
                assert_eq!(resumed, ScanStatus::Complete { header_len: header_len as u64 });
            }
        }
    }
}

/// A scanner fed in irregular steps agrees with one-shot parsing, and jumping straight to the
/// needed length never skips past the header.
#[test]
fn resumed_scan_jumping_to_the_needed_length_finds_the_header() {
    let (file, _) = synthetic_model(2, None);
    let header = parse_file(&file).unwrap();
    let mut scanner = HeaderScanner::new();
    let mut n = 0u64;
    let mut steps = 0;
    let header_len = loop {
        match scanner.scan(&file[..n as usize]).unwrap() {
            ScanStatus::NeedMore { total_bytes_needed } => {
                assert!(total_bytes_needed > n);
                n = total_bytes_needed;
                steps += 1;
            }
            ScanStatus::Complete { header_len } => break header_len,
        }
    };
    assert_eq!(n, header_len, "the last request was exactly the header's end");
    assert!(steps > 50, "one request per field expected, got {steps}");
    assert_eq!(header.data_offset, header_len.div_ceil(32) * 32);
}

#[test]
fn whole_file_checks_report_truncation_and_out_of_bounds_data() {
    let (file, _) = synthetic_model(3, None);
    let h = parse_file(&file).unwrap();
    // Cut inside the header: truncated.
    let e = parse_file(&file[..100]).unwrap_err();
    assert_eq!(e.code(), "GGUF_TRUNCATED");
    assert!(matches!(e, GgufError::Truncated { available: 100, needed } if needed > 100));
    // Cut inside the data: the header parses, but the last tensor lies past the end.
    let end = h.data_end();
    assert_eq!(validate_file_size(&h, end), Ok(()));
    let e = validate_file_size(&h, end - 1).unwrap_err();
    assert_eq!(e.code(), "GGUF_TENSOR_OUT_OF_BOUNDS");
    let e = parse_file(&file[..end as usize - 1]).unwrap_err();
    assert_eq!(e.code(), "GGUF_TENSOR_OUT_OF_BOUNDS");
}

#[test]
fn writer_refuses_what_it_cannot_lay_out() {
    let mut w = GgufWriter::new();
    w.tensor("t", &[32], GgmlType::Q8_0, vec![0; 33]);
    assert!(matches!(
        w.to_bytes(),
        Err(GgufError::TensorDataSize { expected: 34, actual: 33, .. })
    ));

    let mut w = GgufWriter::new();
    w.tensor("t", &[31], GgmlType::Q8_0, vec![0; 34]);
    assert_eq!(w.to_bytes().unwrap_err().code(), "GGUF_TENSOR_DATA_SIZE", "partial block");

    assert_eq!(
        GgufWriter::with_version(1).to_bytes().unwrap_err().code(),
        "GGUF_UNSUPPORTED_VERSION"
    );

    let mut w = GgufWriter::new();
    w.metadata("general.alignment", Value::U32(48));
    assert_eq!(w.to_bytes().unwrap_err().code(), "GGUF_BAD_ALIGNMENT");
}

#[test]
fn an_empty_model_round_trips() {
    let file = GgufWriter::new().to_bytes().unwrap();
    assert_eq!(file.len(), 32, "24-byte header padded to the alignment");
    let h = parse_file(&file).unwrap();
    assert_eq!((h.metadata.len(), h.tensors.len(), h.data_offset), (0, 0, 32));
    // Without padding the file is still a complete header with nothing to load.
    assert_eq!(parse_file(&file[..24]).unwrap(), h);
}

#[test]
fn error_codes_are_distinct_and_messages_nonempty() {
    use std::collections::HashSet;
    let errors = [
        GgufError::BadMagic { found: b"GGML".to_vec() },
        GgufError::UnsupportedVersion { version: 0x0300_0000 },
        GgufError::Truncated { needed: 10, available: 5 },
        GgufError::HeaderTooLarge { needed: 1 << 40, limit: 1 << 29 },
        GgufError::CountTooLarge { what: "tensor count", count: 1 << 62, max: 10 },
        GgufError::InvalidUtf8 { what: "key", offset: 3 },
        GgufError::UnknownValueType { id: 13, offset: 40 },
        GgufError::InvalidBool { value: 2, offset: 40 },
        GgufError::ArrayTooDeep { max_depth: 8, offset: 0 },
        GgufError::BadKey { key: String::new(), reason: "empty" },
        GgufError::DuplicateKey { key: "a".into() },
        GgufError::BadAlignment { reason: "0".into() },
        GgufError::BadTensorName { name: String::new(), reason: "empty" },
        GgufError::DuplicateTensor { name: "t".into() },
        GgufError::UnknownTensorType { tensor: "t".into(), id: 99 },
        GgufError::BadDimCount { tensor: "t".into(), n_dims: 5 },
        GgufError::DimsOverflow { tensor: "t".into() },
        GgufError::PartialBlock { tensor: "t".into(), row_len: 33, block_size: 32 },
        GgufError::MisalignedTensor { tensor: "t".into(), offset: 3, alignment: 32 },
        GgufError::OverlappingTensors { first: "a".into(), second: "b".into() },
        GgufError::TensorOutOfBounds { tensor: "t".into(), start: 1, len: 2, file_len: Some(2) },
        GgufError::TensorDataSize { tensor: "t".into(), expected: 1, actual: 2 },
        GgufError::StreamTooLong { expected: 1, received: 2 },
        GgufError::AllocFailed { bytes: 1 << 40 },
        GgufError::Io { kind: std::io::ErrorKind::NotFound, message: "x".into() },
    ];
    let codes: HashSet<_> = errors.iter().map(GgufError::code).collect();
    assert_eq!(codes.len(), errors.len(), "every variant has its own code");
    for e in &errors {
        assert!(e.code().starts_with("GGUF_"));
        assert!(!e.to_string().is_empty());
    }
    assert!(errors[1].to_string().contains("big-endian"), "{}", errors[1]);
}
