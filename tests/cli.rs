//! The native CLI's argument handling (clap): `--help` for the tool and every subcommand,
//! clear errors and a non-zero exit for unknown options, missing and bad values. No model is
//! loaded (every case fails or prints help before a file is opened), but for the last test, which
//! runs the tiny model into a pipe that closes.

use std::process::{Command, Output};

fn edgellm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_edgellm")).args(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Each subcommand and options its help must name (the names scripts and tests call).
const COMMANDS: [(&str, &[&str]); 7] = [
    ("inspect", &["--json", "--estimate", "--ctx", "--kv-dtype", "--batch"]),
    (
        "generate",
        &[
            "--model", "--prompt", "--ids", "--max-tokens", "--temperature", "--top-k", "--top-p", "--min-p", "--repeat-penalty", "--seed", "--stop", "--chat",
            "--ignore-eos", "--json", "--trace", "--head", "--threads", "--kv-tokens", "--kv-bytes", "--kv-dtype", "--kv-sinks", "--kv-policy",
        ],
    ),
    ("perplexity", &["--model", "--file", "--max-tokens", "--chunk", "--tail-from", "--json", "--threads", "--kv-tokens", "--kv-policy"]),
    ("logits", &["--model", "--ids", "--all-positions", "--top", "--json", "--threads"]),
    ("tokenize", &["--model", "--text", "--special", "--no-bos", "--json"]),
    ("detokenize", &["--model", "--ids", "--special", "--json"]),
    (
        "serve",
        &[
            "--model", "--port", "--host", "--api-key", "--cors-origin", "--queue", "--max-tokens", "--max-prompt-tokens", "--max-body-bytes", "--max-connections",
            "--model-id", "--allowed-host", "--body-timeout-ms", "--send-timeout-ms", "--max-prefill-ms", "--watts-per-busy-core", "--threads",
            "--kv-tokens", "--kv-bytes", "--kv-dtype", "--kv-sinks", "--kv-policy",
        ],
    ),
];

#[test]
fn help_lists_every_command() {
    for args in [&["--help"][..], &["help"], &["-h"]] {
        let o = edgellm(args);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        let text = stdout(&o);
        for (cmd, _) in COMMANDS {
            assert!(text.lines().any(|l| l.trim_start().starts_with(&format!("{cmd} "))), "{args:?} does not list {cmd}:\n{text}");
        }
    }
    // No command: the help on stderr, and a usage error's exit.
    let o = edgellm(&[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("generate"), "{}", stderr(&o));
}

#[test]
fn every_subcommand_has_help_naming_its_options() {
    for (cmd, options) in COMMANDS {
        for args in [vec![cmd, "--help"], vec!["help", cmd]] {
            let o = edgellm(&args);
            assert!(o.status.success(), "{args:?}: {}", stderr(&o));
            let text = stdout(&o);
            assert!(text.contains(&format!("Usage: edgellm {cmd}")), "{args:?}:\n{text}");
            for opt in options {
                assert!(text.contains(opt), "{args:?} does not name {opt}:\n{text}");
            }
        }
    }
    // Defaults shown are the server's own (`ServerConfig::new`).
    let text = stdout(&edgellm(&["serve", "--help"]));
    assert!(text.contains("[default: 8080]") && text.contains("[default: 127.0.0.1]"), "{text}");
}

#[test]
fn unknown_options_and_commands_are_usage_errors() {
    for (cmd, _) in COMMANDS {
        let model: &[&str] = if cmd == "inspect" { &["m.gguf"] } else { &["--model", "m.gguf"] };
        let o = edgellm(&[&[cmd][..], model, &["--bogus"]].concat());
        assert_eq!(o.status.code(), Some(2), "{cmd}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains("unexpected argument '--bogus'") && err.contains(&format!("Usage: edgellm {cmd}")), "{cmd}: {err}");
        assert!(o.stdout.is_empty());
    }
    // A near miss is named.
    let err = stderr(&edgellm(&["generate", "--model", "m", "--max-token", "3"]));
    assert!(err.contains("--max-tokens"), "{err}");
    let o = edgellm(&["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unrecognized subcommand 'frobnicate'"), "{}", stderr(&o));
}

#[test]
fn missing_and_bad_values_are_usage_errors() {
    for (args, says) in [
        (&["generate", "--prompt", "hi"][..], "--model <M>"),
        (&["generate", "--model", "m"], "--prompt"),
        (&["generate", "--model", "m", "--prompt", "hi", "--ids", "1"], "cannot be used with"),
        (&["generate", "--model", "m", "--ids", "1,x"], "bad id \"x\""),
        (&["generate", "--model", "m", "--prompt", "hi", "--max-tokens", "many"], "--max-tokens <N>"),
        (&["generate", "--model", "m", "--prompt", "hi", "--max-tokens"], "a value is required"),
        (&["generate", "--model", "m", "--prompt", "hi", "--head", "half"], "possible values: auto, full, checked, off"),
        (&["generate", "--model", "m", "--prompt", "hi", "--kv-dtype", "f8"], "\"f8\" is not f16 or q8"),
        (&["perplexity", "--model", "m", "--file", "f", "--kv-policy", "lru"], "\"lru\" is not window-sinks or error"),
        (&["inspect"], "<model.gguf>"),
        (&["inspect", "m.gguf", "--ctx", "8"], "--estimate"),
        (&["logits", "--model", "m"], "--ids"),
        (&["serve", "--model", "m", "--port", "65536"], "--port"),
    ] {
        let o = edgellm(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.starts_with("error: ") && err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn equals_form_and_repeated_options_are_accepted() {
    // Both parse; the run then fails on the missing file (exit 1, the engine's typed error).
    for args in [
        &["generate", "--model=/nonexistent.gguf", "--prompt=hi", "--max-tokens=2"][..],
        &["serve", "--model", "/nonexistent.gguf", "--cors-origin", "http://a", "--cors-origin=http://b", "--port", "0"],
    ] {
        let o = edgellm(args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
    }
    let err = stderr(&edgellm(&["generate", "--model=/nonexistent.gguf", "--prompt=hi"]));
    assert!(err.starts_with("edgellm generate: ") && err.contains("GGUF_IO"), "{err}");
}

/// A reader that goes away (`edgellm logits … | head -c 10`) ends the command quietly, as other
/// Unix tools end: no panic message, no backtrace (it panicked in `println!` before).
#[test]
fn a_closed_output_pipe_ends_the_command_without_a_panic() {
    use std::io::Read;
    use std::process::Stdio;
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny_llama.gguf");
    // Far more than a pipe's buffer (64 positions × 300 lines), so the writes outlive the reader.
    let ids = (1..=64).map(|i| (i * 5).to_string()).collect::<Vec<_>>().join(",");
    let mut child = Command::new(env!("CARGO_BIN_EXE_edgellm"))
        .args(["logits", "--model", model, "--ids", &ids, "--all-positions", "--top", "300"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 10];
    child.stdout.take().unwrap().read_exact(&mut first).unwrap(); // then the pipe is closed
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.status.success() || out.status.code().is_none(), "{:?}: {err}", out.status);
}

/// `generate` leaves the room the prompt leaves by the rule the worker and the server apply
/// (`generate::room_after`): a 248-token prompt in tiny_llama's 256 positions gets 8 tokens,
/// one filling the context is refused, and a KV budget with policy `error` bounds it the same way.
#[test]
fn generate_stops_where_the_server_would() {
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny_llama.gguf");
    let ids = |n: usize| (0..n).map(|i| (3 + i % 200).to_string()).collect::<Vec<_>>().join(",");
    let run = |n: usize, extra: &[&str]| {
        let ids = ids(n);
        let mut args = vec!["generate", "--model", model, "--ids", &ids, "--max-tokens", "20", "--temperature", "0", "--ignore-eos", "--json", "--threads", "1"];
        args.extend_from_slice(extra);
        edgellm(&args)
    };
    let generated = |o: &Output| {
        assert!(o.status.success(), "{}", stderr(o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (v["ids"].as_array().unwrap().len(), v["finish_reason"].as_str().unwrap().to_string())
    };
    assert_eq!(generated(&run(248, &[])), (8, "length".to_string()));
    assert_eq!(generated(&run(200, &[])), (20, "length".to_string()));
    let full = run(256, &[]);
    assert_eq!(full.status.code(), Some(1));
    assert!(stderr(&full).contains("PROMPT_TOO_LONG"), "{}", stderr(&full));
    assert_eq!(generated(&run(90, &["--kv-tokens", "100", "--kv-policy", "error"])), (10, "length".to_string()));
    assert!(stderr(&run(100, &["--kv-tokens", "100", "--kv-policy", "error"])).contains("PROMPT_OVER_KV_BUDGET"));
}
