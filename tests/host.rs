//! The host driver (`edgellm::host`), which the wasm surface wraps 1:1: streaming load with the
//! SHA-256 on the way, refusals from the header alone, and step-wise generation that must equal
//! `Session::generate` (and so the native CLI) token for token and character for character.

mod common;

use std::sync::Arc;

use edgellm::engine::{GenerateOptions, Session, SessionOptions};
use edgellm::gguf::{GgmlType, GgufWriter, Value};
use edgellm::generate::StopHold;
use edgellm::host::{GenerateRequest, Host};
use edgellm::model::Model;
use edgellm::tokenizer::{ChatMessage, Tokenizer};

const MODEL_SHA256: &str = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818";

fn load_host(path: &std::path::Path, chunk: usize) -> Host {
    let bytes = std::fs::read(path).unwrap();
    let mut h = Host::new();
    h.load_begin(bytes.len() as u64, None);
    let mut header_ready = 0;
    for c in bytes.chunks(chunk) {
        let s = h.load_push(c).unwrap();
        header_ready += s.header_ready as usize;
    }
    assert_eq!(header_ready, 1, "the header is reported ready exactly once");
    h.load_finish().unwrap();
    h
}

/// Drives the host the way the JS worker does; returns (text, ids, finish_reason, streamed).
fn run(h: &mut Host, req: &GenerateRequest) -> (String, Vec<u32>, String, String) {
    h.generate_begin(req, 0.0).unwrap();
    while !h.prefill_chunk().unwrap().done {}
    let mut streamed = String::new();
    let mut finish = None;
    for _ in 0..10_000 {
        let ev = h.decode_step().unwrap();
        streamed.push_str(&ev.text);
        if let Some(f) = ev.finish_reason {
            finish = Some(f.as_str().to_string());
            break;
        }
    }
    let r = h.generate_end(1.0).unwrap();
    assert_eq!(r.finish_reason, finish.as_deref().unwrap());
    (r.text, r.ids, r.finish_reason.to_string(), streamed)
}

fn completion(prompt: &str, max_tokens: usize, stop: &[&str]) -> GenerateRequest {
    GenerateRequest {
        kind: Some("completion".into()),
        prompt: Some(prompt.into()),
        max_tokens: Some(max_tokens),
        temperature: Some(0.0),
        stop: Some(stop.iter().map(|s| s.to_string()).collect()),
        ..Default::default()
    }
}

#[test]
fn real_model_load_and_generation_match_session_generate() {
    let Some(path) = common::real_model() else { return };
    let mut h = load_host(&path, 1 << 20);
    let info = h.model_info().unwrap().clone();
    assert_eq!(info.sha256, MODEL_SHA256);
    assert_eq!(info.architecture, "gemma3");
    assert_eq!(info.quantization.as_deref(), Some("Q4_K_M"));
    assert_eq!(info.file_size, std::fs::metadata(&path).unwrap().len());

    // The reference: Session::generate, as the CLI runs it.
    let model = Arc::new(Model::load_file(&path).unwrap());
    let tok = Tokenizer::from_gguf(model.header()).unwrap();
    let reference = |ids: &[u32], max_tokens: usize, stop: &[&str]| {
        let mut s = Session::new(model.clone(), SessionOptions::for_model(&model));
        let opts = GenerateOptions { max_tokens, stop: stop.iter().map(|s| s.to_string()).collect(), stop_on_eog: true };
        let mut streamed = String::new();
        let g = s.generate(ids, &tok, &opts, &mut |t| {
            streamed.push_str(t);
            true
        });
        let g = g.unwrap();
        assert_eq!(streamed, g.text);
        g
    };

    let prompt = "The capital of France is";
    let want = reference(&tok.encode(prompt, true, true), 8, &[]);
    let (text, ids, finish, streamed) = run(&mut h, &completion(prompt, 8, &[]));
    assert_eq!(ids, want.ids);
    assert_eq!(text, want.text);
    assert_eq!(streamed, text, "streamed deltas concatenate to the text");
    assert_eq!(finish, want.finish_reason.as_str());

    // A stop string inside the output: cut before it, finish "stop", same as the reference.
    let (text2, _, finish2, streamed2) = run(&mut h, &completion(prompt, 8, &[" of"]));
    let want2 = reference(&tok.encode(prompt, true, true), 8, &[" of"]);
    assert_eq!(text2, want2.text);
    assert_eq!(finish2, "stop");
    assert_eq!(streamed2, text2);
    assert!(!text2.contains(" of"));

    // Chat: the template is applied (same ids as the tokenizer's encode_chat).
    let msgs = vec![ChatMessage::new("user", "Say hi")];
    let want3 = reference(&tok.encode_chat(&msgs, true).unwrap(), 4, &[]);
    let req = GenerateRequest { kind: Some("chat".into()), messages: Some(msgs), max_tokens: Some(4), temperature: Some(0.0), ..Default::default() };
    let (text3, ids3, _, _) = run(&mut h, &req);
    assert_eq!((text3, ids3), (want3.text, want3.ids));

    // A second run of the first request gives the same (the session is reset per request).
    let (again, _, _, _) = run(&mut h, &completion(prompt, 8, &[]));
    assert_eq!(again, want.text);

    // A prompt longer than the context is refused before any model call.
    let long = "word ".repeat(info.max_context + 10);
    let e = h.generate_begin(&completion(&long, 4, &[]), 0.0).unwrap_err();
    assert_eq!(e.code, "PROMPT_TOO_LONG");

    // Unload frees the model; generation then reports MODEL_NOT_LOADED.
    h.unload();
    assert_eq!(h.generate_begin(&completion(prompt, 4, &[]), 0.0).unwrap_err().code, "MODEL_NOT_LOADED");
}

/// CPU time per phase from the host's CPU clock, and energy = CPU time × the power model.
#[test]
fn generations_report_cpu_time_and_energy_per_phase() {
    let Some(path) = common::real_model() else { return };
    let mut h = load_host(&path, 1 << 20);
    h.set_cpu_clock(edgellm::work::CpuClock::process());
    assert_eq!(h.power_model(), edgellm::work::PowerModel::default());
    assert_eq!(h.set_power_model(edgellm::work::PowerModel { watts_per_busy_core: -1.0 }).unwrap_err().code, "INVALID_REQUEST");
    h.set_power_model(edgellm::work::PowerModel::new(4.0).unwrap()).unwrap();
    let req = completion("The capital of France is", 6, &[]);
    h.generate_begin(&req, 0.0).unwrap();
    while !h.prefill_chunk().unwrap().done {}
    while h.decode_step().unwrap().finish_reason.is_none() {}
    let c = h.generate_end(1.0).unwrap().compute;
    assert_eq!(c.cpu_clock, "process-cpu");
    assert_eq!(c.watts_per_busy_core, 4.0);
    assert!(c.cpu_ms.prefill > 0.0 && c.cpu_ms.decode > 0.0, "{c:?}");
    for (cpu, e) in [(c.cpu_ms.prefill, c.energy_j.prefill), (c.cpu_ms.decode, c.energy_j.decode), (c.cpu_ms.total, c.energy_j.total)] {
        assert!((e - cpu / 1000.0 * 4.0).abs() <= 1e-12 * e.max(1.0), "{e} J vs {cpu} ms");
    }
    // A host with no clocks measures nothing and says so.
    let mut bare = load_host(&path, 1 << 20);
    bare.generate_begin(&req, 0.0).unwrap();
    while !bare.prefill_chunk().unwrap().done {}
    let c = bare.generate_end(1.0).unwrap().compute;
    assert_eq!((c.cpu_clock, c.cpu_ms.total, c.energy_j.total), ("none", 0.0, 0.0));
}

fn tiny_file(arch: &str, ty: GgmlType) -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.metadata("general.architecture", Value::String(arch.into()));
    let n = 256u64;
    let bytes = ty.bytes_for(n).unwrap() as usize;
    w.tensor("token_embd.weight", &[n, 1], ty, vec![0u8; bytes]);
    w.to_bytes().unwrap()
}

#[test]
fn unsupported_models_and_budgets_are_refused_at_the_header() {
    // Unknown architecture: refused when the header completes, before any tensor allocation.
    let f = tiny_file("mamba", GgmlType::F32);
    let mut h = Host::new();
    h.load_begin(f.len() as u64, None);
    let e = h.load_push(&f).unwrap_err();
    assert_eq!(e.code, "UNSUPPORTED_MODEL");

    // A tensor type without kernels.
    let f = tiny_file("llama", GgmlType::IQ2_XXS);
    h.load_begin(f.len() as u64, None);
    let e = h.load_push(&f).unwrap_err();
    assert_eq!(e.code, "UNSUPPORTED_TENSOR_TYPE");

    // Over the budget.
    let f = tiny_file("llama", GgmlType::F32);
    h.load_begin(f.len() as u64, Some(16));
    let e = h.load_push(&f).unwrap_err();
    assert_eq!(e.code, "OVER_MEMORY_BUDGET");
}

#[test]
fn stop_hold_holds_back_possible_stop_prefixes() {
    let mut s = StopHold::new(vec!["END".into()]);
    assert!(!s.push("abc E"));
    assert_eq!(s.ready(false), "abc ");
    assert!(!s.push("N"));
    assert_eq!(s.ready(false), "");
    assert!(!s.push("x"));
    assert_eq!(s.ready(false), "ENx");
    assert!(s.push(" yEND zz"));
    assert_eq!(s.ready(true), " y");
    assert_eq!(s.text, "abc ENx y");
    // Multi-byte characters: never split.
    let mut s = StopHold::new(vec!["é!".into()]);
    assert!(!s.push("café"));
    assert_eq!(s.ready(false), "caf");
    assert!(s.push("!"));
    assert_eq!(s.ready(true), "");
    assert_eq!(s.text, "caf");
}
