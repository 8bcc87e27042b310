//! `edgellm inspect` on synthetic files (the real model is covered in gguf_real_model.rs).

use std::path::PathBuf;
use std::process::{Command, Output};

use edgellm::gguf::{Array, GgmlType, GgufWriter, Value};

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let p = std::env::temp_dir().join(format!("edgellm-{}-{name}", std::process::id()));
    std::fs::write(&p, bytes).unwrap();
    p
}

fn inspect(path: &PathBuf, json: bool) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_edgellm"));
    c.arg("inspect").arg(path);
    if json {
        c.arg("--json");
    }
    c.output().unwrap()
}

fn tiny_llama() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.metadata("general.architecture", Value::String("llama".into()))
        .metadata("general.name", Value::String("tiny".into()))
        .metadata("llama.context_length", Value::U32(2048))
        .metadata("llama.embedding_length", Value::U64(64))
        .metadata("llama.attention.head_count", Value::Array(Array::I32(vec![4, 4, 2])))
        .metadata("llama.attention.layer_norm_rms_epsilon", Value::F32(1e-5))
        .metadata("llama.rope.freq_base", Value::F32(10000.0))
        .metadata("tokenizer.ggml.model", Value::String("gpt2".into()))
        .metadata("tokenizer.ggml.tokens", Value::Array(Array::String(vec!["a".into(); 300])))
        .tensor("a", &[64, 2], GgmlType::Q8_0, vec![1; 136])
        .tensor("b", &[64], GgmlType::F32, vec![2; 256])
        .tensor("c", &[32, 4], GgmlType::Q8_0, vec![3; 136]);
    w.to_bytes().unwrap()
}

#[test]
fn json_report_of_a_synthetic_model() {
    let path = temp_file("tiny.gguf", &tiny_llama());
    let out = inspect(&path, true);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["architecture"], "llama");
    assert_eq!(j["name"], "tiny");
    assert_eq!(j["version"], 3);
    assert_eq!(j["file_bytes"], std::fs::metadata(&path).unwrap().len());
    assert_eq!(j["hparams"]["context_length"], 2048);
    assert_eq!(j["hparams"]["embedding_length"], 64);
    assert_eq!(j["hparams"]["attention.head_count"], serde_json::json!([4, 4, 2]));
    assert_eq!(j["hparams"]["attention.layer_norm_rms_epsilon"], 1e-5);
    assert_eq!(j["hparams"]["rope.freq_base"], 10000.0);
    assert_eq!(j["tokenizer"]["model"], "gpt2");
    assert_eq!(j["tokenizer"]["vocab_size"], 300);
    assert_eq!(j["tensor_count"], 3);
    assert_eq!(j["by_type"]["Q8_0"], serde_json::json!({"count": 2, "bytes": 272}));
    assert_eq!(j["by_type"]["F32"], serde_json::json!({"count": 1, "bytes": 256}));
    assert_eq!(j["weight_bytes"], 528);

    let text = inspect(&path, false);
    assert!(text.status.success());
    let text = String::from_utf8(text.stdout).unwrap();
    for want in ["llama", "tiny", "context_length", "300 tokens", "Q8_0", "528 bytes"] {
        assert!(text.contains(want), "{want:?} missing from:\n{text}");
    }
    std::fs::remove_file(path).unwrap();
}

#[test]
fn bad_files_and_arguments_fail_with_a_message() {
    let mut file = tiny_llama();
    let data_end = edgellm::gguf::parse_file(&file).unwrap().data_end() as usize;
    let truncated = temp_file("truncated.gguf", &file[..data_end - 1]);
    let out = inspect(&truncated, true);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("GGUF_TENSOR_OUT_OF_BOUNDS"));

    file[0] = b'X';
    let bad = temp_file("bad.gguf", &file);
    let out = inspect(&bad, false);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("GGUF_BAD_MAGIC"));

    let out = Command::new(env!("CARGO_BIN_EXE_edgellm")).args(["inspect"]).output().unwrap();
    assert!(!out.status.success());
    let out = Command::new(env!("CARGO_BIN_EXE_edgellm"))
        .args(["inspect", "x", "--bogus"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let out = inspect(&PathBuf::from("/nonexistent.gguf"), false);
    assert!(String::from_utf8_lossy(&out.stderr).contains("GGUF_IO"));
    std::fs::remove_file(truncated).unwrap();
    std::fs::remove_file(bad).unwrap();
}
