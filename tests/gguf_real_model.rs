//! The real model's header: structure, metadata and tensor index, checked against facts read
//! from the same file with Python's `gguf.GGUFReader` (gguf-py), and the `inspect` command.

mod common;

use std::collections::BTreeMap;
use std::io::Read;
use std::time::Instant;

use edgellm::gguf::{
    parse_header, read_header_file, Array, GgmlType, GgufHeader, HeaderScanner, HeaderStatus,
    ScanStatus,
};

const FILE_LEN: u64 = 253_113_024;
const DATA_OFFSET: u64 = 6_525_120;

/// The first `n` bytes of the file.
fn prefix(path: &std::path::Path, n: u64) -> Vec<u8> {
    let mut buf = Vec::new();
    std::fs::File::open(path).unwrap().take(n).read_to_end(&mut buf).unwrap();
    buf
}

fn header_bytes() -> Option<Vec<u8>> {
    let path = common::real_model()?;
    Some(prefix(&path, DATA_OFFSET))
}

fn parse(bytes: &[u8]) -> GgufHeader {
    match parse_header(bytes).unwrap() {
        HeaderStatus::Complete(h) => h,
        other => panic!("header incomplete: {other:?}"),
    }
}

#[test]
fn header_matches_gguf_py() {
    let Some(path) = common::real_model() else { return };
    let (h, len) = read_header_file(&path).unwrap();
    assert_eq!(len, FILE_LEN);
    assert_eq!(h.version, 3);
    assert_eq!(h.alignment, 32);
    assert_eq!(h.data_offset, DATA_OFFSET);
    assert_eq!(h.metadata.len(), 33);
    assert_eq!(h.tensors.len(), 236);
    assert_eq!(h.data_end(), FILE_LEN, "the last tensor ends at the end of the file");

    // Counts and bytes by type, as gguf-py reports them.
    let mut by_type: BTreeMap<GgmlType, (u64, u64)> = BTreeMap::new();
    for t in &h.tensors {
        let e = by_type.entry(t.ggml_type).or_default();
        e.0 += 1;
        e.1 += t.n_bytes();
    }
    let expected: BTreeMap<GgmlType, (u64, u64)> = [
        (GgmlType::F32, (109, 223_744)),
        (GgmlType::Q8_0, (10, 179_824_640)),
        (GgmlType::Q5_0, (81, 43_591_680)),
        (GgmlType::Q4_K, (27, 13_271_040)),
        (GgmlType::Q6_K, (9, 9_676_800)),
    ]
    .into_iter()
    .collect();
    assert_eq!(by_type, expected);
    assert_eq!(h.tensor_data_bytes(), 246_587_904);

    // A few tensors: ggml dimension order, type, offset relative to the data section.
    let t = h.tensor("output_norm.weight").unwrap();
    assert_eq!((&t.dims[..], t.ggml_type, t.offset), (&[640][..], GgmlType::F32, 0));
    let t = h.tensor("token_embd.weight").unwrap();
    assert_eq!((&t.dims[..], t.ggml_type, t.offset), (&[640, 262_144][..], GgmlType::Q8_0, 2560));
    assert_eq!(t.n_bytes(), 178_257_920);
    let t = h.tensor("blk.5.ffn_down.weight").unwrap();
    assert_eq!(
        (&t.dims[..], t.ggml_type, t.offset),
        (&[2048, 640][..], GgmlType::Q4_K, 198_489_088)
    );

    // Metadata values.
    assert_eq!(h.architecture(), Some("gemma3"));
    assert_eq!(h.get_str("general.name"), Some("Gemma 3 270m"));
    for (key, v) in [
        ("gemma3.context_length", 32768),
        ("gemma3.embedding_length", 640),
        ("gemma3.block_count", 18),
        ("gemma3.feed_forward_length", 2048),
        ("gemma3.attention.head_count", 4),
        ("gemma3.attention.head_count_kv", 1),
        ("gemma3.attention.key_length", 256),
        ("gemma3.attention.value_length", 256),
        ("gemma3.attention.sliding_window", 512),
        ("tokenizer.ggml.bos_token_id", 2),
        ("tokenizer.ggml.eos_token_id", 1),
        ("general.file_type", 15),
    ] {
        assert_eq!(h.get_u64(key), Some(v), "{key}");
    }
    assert_eq!(h.get_f64("gemma3.rope.freq_base"), Some(1_000_000.0));
    assert_eq!(h.get_f64("gemma3.attention.layer_norm_rms_epsilon"), Some(1e-6f32 as f64));
    assert_eq!(h.get_bool("tokenizer.ggml.add_bos_token"), Some(true));
    assert_eq!(h.get_str("tokenizer.ggml.model"), Some("llama"));
    match h.get_array("general.tags") {
        Some(Array::String(tags)) => {
            assert_eq!(tags, &["gemma3", "gemma", "google", "text-generation"])
        }
        other => panic!("general.tags: {other:?}"),
    }

    // The vocabulary.
    let Some(Array::String(tokens)) = h.get_array("tokenizer.ggml.tokens") else {
        panic!("tokens are not a string array")
    };
    assert_eq!(tokens.len(), 262_144);
    assert_eq!(&tokens[..5], &["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"]);
    assert_eq!(tokens[106], "<end_of_turn>");
    assert_eq!(tokens[262_143], "<unused6241>");
    let Some(Array::F32(scores)) = h.get_array("tokenizer.ggml.scores") else { panic!("scores") };
    assert_eq!((scores.len(), scores[0], scores[1000]), (262_144, -1000.0, -506.0));
    let Some(Array::I32(types)) = h.get_array("tokenizer.ggml.token_type") else { panic!("types") };
    assert_eq!((types.len(), types[5]), (262_144, 4));

    // The in-memory parser agrees with the file reader.
    assert_eq!(parse(&prefix(&path, DATA_OFFSET)), h);
}

/// The scanner walks the real header chunk by chunk, never asks for more than the header's
/// length, and stateless parsing of spread-out prefixes agrees with it.
#[test]
fn real_header_parses_incrementally() {
    let Some(bytes) = header_bytes() else { return };
    let header_len = match HeaderScanner::new().scan(&bytes).unwrap() {
        ScanStatus::Complete { header_len } => header_len,
        other => panic!("{other:?}"),
    };
    assert_eq!(header_len.div_ceil(32) * 32, DATA_OFFSET);

    // 64 KiB chunks through one resumable scanner.
    let mut scanner = HeaderScanner::new();
    let mut chunks = 0;
    for end in (0..bytes.len()).step_by(65_536).skip(1).chain([bytes.len()]) {
        chunks += 1;
        match scanner.scan(&bytes[..end]).unwrap() {
            ScanStatus::NeedMore { total_bytes_needed } => {
                assert!(total_bytes_needed > end as u64 && total_bytes_needed <= header_len);
            }
            ScanStatus::Complete { header_len: n } => {
                assert_eq!(n, header_len);
                assert!(end as u64 >= header_len);
            }
        }
    }
    assert!(chunks > 90);

    let mut last = 0;
    for i in 0..300u64 {
        let n = (header_len - 1) * i / 299;
        match parse_header(&bytes[..n as usize]).unwrap() {
            HeaderStatus::NeedMore { total_bytes_needed } => {
                assert!(total_bytes_needed > n && total_bytes_needed <= header_len, "prefix {n}");
                assert!(total_bytes_needed >= last);
                last = total_bytes_needed;
            }
            HeaderStatus::Complete(_) => panic!("prefix {n} < {header_len} completed"),
        }
    }
}

/// Parsing the 6.5 MB header (262,144 token strings) takes tens of milliseconds at most.
#[test]
fn real_header_parse_time() {
    let Some(bytes) = header_bytes() else { return };
    let mut best = f64::MAX;
    for _ in 0..10 {
        let t = Instant::now();
        let h = parse(&bytes);
        best = best.min(t.elapsed().as_secs_f64());
        assert_eq!(h.tensors.len(), 236);
    }
    let t = Instant::now();
    let mut scanner = HeaderScanner::new();
    assert!(matches!(scanner.scan(&bytes).unwrap(), ScanStatus::Complete { .. }));
    let scan = t.elapsed().as_secs_f64();
    eprintln!(
        "real header: parse {:.1} ms (best of 10), structure scan alone {:.1} ms",
        best * 1e3,
        scan * 1e3
    );
    // A loose bound that only a pathological (e.g. quadratic) parser would miss.
    assert!(best < 1.0, "parsing the header took {best} s");
}

#[test]
fn inspect_json_reports_the_real_model() {
    let Some(path) = common::real_model() else { return };
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_edgellm"))
        .args(["inspect", path.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["architecture"], "gemma3");
    assert_eq!(j["name"], "Gemma 3 270m");
    assert_eq!(j["file_bytes"], FILE_LEN);
    assert_eq!(j["version"], 3);
    assert_eq!(j["tensor_count"], 236);
    assert_eq!(j["weight_bytes"], 246_587_904u64);
    assert_eq!(j["tokenizer"]["model"], "llama");
    assert_eq!(j["tokenizer"]["vocab_size"], 262_144);
    assert_eq!(j["hparams"]["context_length"], 32768);
    assert_eq!(j["hparams"]["attention.head_count_kv"], 1);
    assert_eq!(j["hparams"]["attention.layer_norm_rms_epsilon"], 1e-6);
    assert_eq!(j["hparams"]["rope.freq_base"], 1e6);
    let by_type = j["by_type"].as_object().unwrap();
    let mut types: Vec<&str> = by_type.keys().map(String::as_str).collect();
    types.sort();
    assert_eq!(types, ["F32", "Q4_K", "Q5_0", "Q6_K", "Q8_0"]);
    assert_eq!(by_type["F32"]["count"], 109);
    assert_eq!(by_type["Q8_0"]["bytes"], 179_824_640u64);

    let text = std::process::Command::new(env!("CARGO_BIN_EXE_edgellm"))
        .args(["inspect", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(text.status.success());
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("gemma3") && text.contains("262144 tokens") && text.contains("Q6_K"));
}
