//! The memory ledger (`edgellm::memory`): the header skimmer reads what the full parser reads
//! (in a few KB), the estimate of each term matches what a session really allocates on tiny
//! synthetic models and the real one, and admission refuses before any tensor is allocated.

mod common;

use std::sync::Arc;

use edgellm::engine::{Session, SessionOptions};
use edgellm::gguf::{parse_file, parse_header, HeaderStatus, Value};
use edgellm::host::{EstimateRequest, Host};
use edgellm::kv::{KvOptions, KvPolicy};
use edgellm::memory::{
    CountingAlloc, Estimate, EstimateOptions, HeaderSkimmer, HeaderStats, KvElem, Level, MemoryOptions,
    ModelGeometry, SkimStatus,
};
use edgellm::model::Model;
use edgellm::sampling::SamplerConfig;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

const TINY: [&str; 4] = ["tiny_gemma3.gguf", "tiny_llama.gguf", "tiny_qwen2.gguf", "tiny_qwen3.gguf"];

fn skim(bytes: &[u8], chunk: usize) -> (edgellm::memory::HeaderSummary, usize) {
    skim_file(bytes, chunk, bytes.len() as u64)
}

fn skim_file(bytes: &[u8], chunk: usize, file_len: u64) -> (edgellm::memory::HeaderSummary, usize) {
    let mut s = HeaderSkimmer::new();
    let mut held = 0;
    for c in bytes.chunks(chunk) {
        let st = s.push(c).unwrap();
        held = held.max(s.bytes_held());
        if let SkimStatus::Complete { .. } = st {
            break;
        }
    }
    (s.finish(Some(file_len)).unwrap(), held)
}

fn header_len(bytes: &[u8]) -> u64 {
    // The parser's NeedMore for a prefix one byte short of the header says where it ends.
    let h = parse_file(bytes).unwrap();
    let mut lo = 0u64;
    let mut hi = h.data_offset;
    while lo + 1 < hi {
        let mid = (lo + hi) / 2;
        match parse_header(&bytes[..mid as usize]).unwrap() {
            HeaderStatus::Complete(_) => hi = mid,
            HeaderStatus::NeedMore { .. } => lo = mid,
        }
    }
    hi
}

#[test]
fn skimmer_reads_what_the_parser_reads_at_any_chunk_size() {
    for name in TINY {
        let bytes = std::fs::read(common::data(name)).unwrap();
        let full = parse_file(&bytes).unwrap();
        let len = header_len(&bytes);
        let want = HeaderStats::of(&full, len);
        for chunk in [1, 7, 64, 4096, bytes.len()] {
            let (s, _) = skim(&bytes, chunk);
            assert_eq!(s.stats, want, "{name} chunk {chunk}");
            assert_eq!(s.header.tensors, full.tensors, "{name}");
            assert_eq!((s.header.alignment, s.header.data_offset, s.header.version), (full.alignment, full.data_offset, full.version));
            // Small values are kept as parsed; big arrays are present, empty.
            for ((k1, v1), (k2, v2)) in s.header.metadata.iter().zip(&full.metadata) {
                assert_eq!(k1, k2);
                match (v1, v2) {
                    (Value::Array(a), Value::Array(b)) if b.len() as u64 > edgellm::memory::KEEP_ARRAY => {
                        assert_eq!(a.len(), 0);
                        assert_eq!(a.value_type(), b.value_type());
                    }
                    _ => assert_eq!(v1, v2, "{name} {k1}"),
                }
            }
            assert_eq!(want.n_tokens, 384);
        }
    }
}

#[test]
fn skimmer_holds_little_on_the_real_model() {
    let Some(path) = common::real_model() else { return };
    let (full, file_len) = edgellm::gguf::read_header_file(&path).unwrap();
    let mut prefix = vec![0u8; 8 << 20];
    use std::io::Read;
    std::fs::File::open(&path).unwrap().read_exact(&mut prefix).unwrap();
    let (s, held) = skim_file(&prefix, 64 << 10, file_len);
    assert_eq!(s.header.tensors, full.tensors);
    let want = HeaderStats::of(&full, s.stats.header_len);
    assert_eq!(s.stats, want);
    assert_eq!((want.n_tokens, want.token_bytes), (262_144, 2_315_366));
    assert_eq!(want.n_special_tokens, 6414);
    assert!(want.header_len <= full.data_offset && want.header_len + full.alignment > full.data_offset);
    // The header is 6.5 MB; the skimmer holds the tensor index and small values only.
    assert!(held < 256 << 10, "skimmer held {held} bytes");
    eprintln!("real model: header {} bytes, parsed header ~{} bytes in wasm32, skimmer held {held} bytes", want.header_len, want.parsed_heap_bytes);
}

#[test]
fn skimmer_errors_are_typed() {
    let mut s = HeaderSkimmer::new();
    assert_eq!(s.push(b"GGUX\x03\0\0\0aaaaaaaaaaaaaaaa").unwrap_err().code(), "GGUF_BAD_MAGIC");
    let bytes = std::fs::read(common::data("tiny_llama.gguf")).unwrap();
    let mut s = HeaderSkimmer::new();
    s.push(&bytes[..1000]).unwrap();
    assert_eq!(s.finish(None).unwrap_err().code(), "GGUF_TRUNCATED");
    // A file shorter than its tensors say.
    let mut s = HeaderSkimmer::new();
    s.push(&bytes).unwrap();
    assert_eq!(s.finish(Some(bytes.len() as u64 - 1)).unwrap_err().code(), "GGUF_TENSOR_OUT_OF_BOUNDS");
}

/// Runs a prompt that fills the KV budget, in the host's prefill chunks, then decodes until
/// the cache is full; returns (weights, kv, activations) as the session reports them.
fn run_full(path: &std::path::Path, tokens: usize, dtype: &str) -> (u64, u64, u64) {
    let model = Arc::new(Model::load_file(path).unwrap());
    let mut opts = SessionOptions::for_model(&model);
    opts.sampler = SamplerConfig { seed: 7, ..SamplerConfig::default() };
    let kv = KvOptions { tokens: Some(tokens), dtype: Some(serde_json::from_str(&format!("\"{dtype}\"")).unwrap()), policy: Some(KvPolicy::Error), ..Default::default() };
    let mut s = Session::with_kv(model.clone(), opts, &kv.to_config(tokens).unwrap()).unwrap();
    let n_vocab = model.n_vocab() as u32;
    let prompt: Vec<u32> = (0..tokens as u32 - 8).map(|i| 1 + (i * 7919) % (n_vocab - 1)).collect();
    for c in prompt.chunks(edgellm::host::PREFILL_CHUNK) {
        s.prefill(c).unwrap();
    }
    while s.can_step() {
        if s.step().is_err() {
            break;
        }
    }
    let kvb = s.kv().bytes_allocated() as u64;
    (model.weight_bytes() as u64, kvb, s.bytes() as u64 - kvb + s.sampler().bytes() as u64)
}

fn estimate_of(bytes: &[u8], tokens: usize, dtype: KvElem) -> Estimate {
    let (sum, _) = skim(bytes, 4096);
    let g = ModelGeometry::from_header(&sum.header).unwrap();
    Estimate::new(&g, &sum.stats, &EstimateOptions { kv_tokens: tokens, kv_dtype: dtype, ..EstimateOptions::default() })
}

fn within(what: &str, est: u64, got: u64, tol: f64) {
    let err = (est as f64 - got as f64).abs() / got.max(1) as f64;
    eprintln!("  {what:<12} estimated {est:>12} measured {got:>12} ({:+.1} %)", 100.0 * (est as f64 / got.max(1) as f64 - 1.0));
    assert!(err <= tol, "{what}: estimated {est}, measured {got}");
}

#[test]
fn estimate_matches_what_sessions_allocate_on_tiny_models() {
    for name in TINY {
        let path = common::data(name);
        let bytes = std::fs::read(&path).unwrap();
        for (dtype, elem) in [("f16", KvElem::F16), ("q8", KvElem::Q8)] {
            let tokens = 200;
            let e = estimate_of(&bytes, tokens, elem);
            eprintln!("{name} kv {dtype} {tokens} tokens:");
            let (w, kv, act) = run_full(&path, tokens, dtype);
            // Weights: the model counts what it holds as weights; llama's RoPE frequency factors
            // (128 bytes in tiny_llama) live in its RoPE tables instead.
            within("weights", e.weights, w, 0.001);
            within("kv", e.kv, kv, 0.0);
            within("activations", e.activations, act, 0.10);
        }
    }
}

#[test]
fn estimate_matches_the_real_model() {
    let Some(path) = common::real_model() else { return };
    let (h, _) = edgellm::gguf::read_header_file(&path).unwrap();
    let g = ModelGeometry::from_header(&h).unwrap();
    let tokens = 160;
    let e = Estimate::new(&g, &HeaderStats::of(&h, h.data_offset), &EstimateOptions { kv_tokens: tokens, ..EstimateOptions::default() });
    // Gemma 3: 3 global layers hold every token, 15 local ones at most their 512-token window.
    let row = g.kv.row_bytes(KvElem::F16) as u64;
    assert_eq!(g.kv.bytes_at(KvElem::F16, 32768), 3 * 32768 * row + 15 * 512 * row);
    eprintln!("gemma-3-270m kv f16 {tokens} tokens:");
    let (w, kv, act) = run_full(&path, tokens, "f16");
    within("weights", e.weights, w, 0.0);
    within("kv", e.kv, kv, 0.0);
    within("activations", e.activations, act, 0.10);
}

#[test]
fn admission_refuses_from_the_header_before_any_tensor_memory() {
    let bytes = std::fs::read(common::data("tiny_llama.gguf")).unwrap();
    let mut h = Host::new();
    // The estimate, through the skimmer, as the worker asks for it.
    h.estimate_begin();
    let p = h.estimate_push(&bytes[..2000]).unwrap();
    assert!(!p.complete);
    let p = h.estimate_push(&bytes[2000..]).unwrap();
    assert!(p.complete);
    let r = h.estimate_finish(Some(bytes.len() as u64), &EstimateRequest { budget_bytes: Some(1 << 20), ..Default::default() }).unwrap();
    assert!(!r.fits, "a 1 MiB budget cannot hold the module alone");
    let e = r.estimate;
    assert_eq!(e.total, e.weights + e.kv + e.activations + e.runtime);
    // The peak keeps room for the free space the load's last chunk leaves (the step guard
    // counts every new byte as growth).
    assert_eq!(e.peak, (e.total + e.load_transient).max(e.load_peak));
    // The load itself: refused at the header, the loader allocated nothing.
    h.load_begin(bytes.len() as u64, Some(e.peak - 1));
    let err = h.load_push(&bytes).unwrap_err();
    assert_eq!(err.code, "OVER_MEMORY_BUDGET");
    assert!(err.message.contains("weights"), "{}", err.message);
    assert!(h.loaded().is_none());
    // With room, it loads, and the snapshot has every term.
    h.load_begin(bytes.len() as u64, Some(e.peak));
    h.load_push(&bytes).unwrap();
    h.load_finish().unwrap();
    let s = h.memory_snapshot();
    let (we, wm) = (s.terms.weights.estimated.unwrap(), s.terms.weights.measured.unwrap());
    assert!(we >= wm && we - wm <= 128, "weights {we} vs {wm}");
    assert_eq!(s.terms.kv.measured, Some(0));
    assert_eq!(s.phase, "ready");
}

#[test]
fn levels_follow_the_thresholds_and_changes_are_reported_once() {
    let o = MemoryOptions { budget_bytes: Some(1000), ..MemoryOptions::default() };
    assert_eq!((o.level(749), o.level(750), o.level(899), o.level(900), o.level(2000)), (Level::Ok, Level::Elevated, Level::Elevated, Level::Critical, Level::Critical));
    assert_eq!(MemoryOptions::default().level(u64::MAX), Level::Ok);
    assert!(MemoryOptions { elevated: 0.9, critical: 0.8, ..MemoryOptions::default() }.check().is_err());

    let bytes = std::fs::read(common::data("tiny_qwen2.gguf")).unwrap();
    let mut h = Host::new();
    h.load_begin(bytes.len() as u64, None);
    h.load_push(&bytes).unwrap();
    h.load_finish().unwrap();
    let live = h.memory_snapshot().total.measured.unwrap();
    // A budget the engine already fills to 95 %: one change to critical, then none.
    h.set_memory_options(MemoryOptions { budget_bytes: Some((live as f64 / 0.95) as u64), ..MemoryOptions::default() }).unwrap();
    let s = h.memory_poll().expect("the level changed");
    assert_eq!(s.level, Level::Critical);
    assert!(h.memory_poll().is_none());
    h.set_memory_options(MemoryOptions { budget_bytes: Some(live * 100), ..MemoryOptions::default() }).unwrap();
    assert_eq!(h.memory_poll().map(|s| s.level), Some(Level::Ok));
}
