//! Each load admits its header once: the worker skims the header for the estimate before the
//! download (a refusal costs nothing), then `load_begin_admitted` takes that admission over at
//! `HeaderReady` instead of estimating the same header again; other bytes, or settings changed
//! since, are admitted afresh.

mod engine_common;

use edgellm::host::{EstimateRequest, Host};
use edgellm::kv::KvOptions;
use edgellm::memory::MemoryOptions;
use engine_common::data;

fn bytes(name: &str) -> Vec<u8> {
    std::fs::read(data(name)).unwrap()
}

/// Skims `file`'s header (as the worker does, in small pieces) and returns whether it fits.
fn estimate(h: &mut Host, file: &[u8], budget: Option<u64>) -> bool {
    h.estimate_begin();
    for piece in file.chunks(4096) {
        if h.estimate_push(piece).unwrap().complete {
            break;
        }
    }
    let req = EstimateRequest { budget_bytes: budget, ..Default::default() };
    h.estimate_finish(Some(file.len() as u64), &req).unwrap().fits
}

fn load(h: &mut Host, file: &[u8], admitted: bool, budget: Option<u64>) -> Result<(), String> {
    if admitted {
        h.load_begin_admitted(file.len() as u64, budget);
    } else {
        h.load_begin(file.len() as u64, budget);
    }
    for c in file.chunks(64 << 10) {
        h.load_push(c).map_err(|e| e.code.clone())?;
    }
    h.load_finish().map(drop).map_err(|e| e.code.clone())
}

#[test]
fn the_load_takes_the_estimates_admission_over() {
    let file = bytes("tiny_gemma3.gguf");
    let mut h = Host::new();
    assert!(estimate(&mut h, &file, None));
    let skimmed = h.last_estimate().unwrap().clone();
    // The load's own budget would refuse it: the admission made before the download decides.
    load(&mut h, &file, true, Some(1)).unwrap();
    let e = h.last_estimate().unwrap();
    assert_eq!((e.peak, e.weights, e.kv, e.activations), (skimmed.peak, skimmed.weights, skimmed.kv, skimmed.activations));
    assert_eq!(h.memory_snapshot().total.estimated, Some(skimmed.total));

    // One admission per estimate: the next load admits its header itself.
    assert_eq!(load(&mut h, &file, true, Some(1)).unwrap_err(), "OVER_MEMORY_BUDGET");
    // And a plain load_begin never takes one over.
    assert!(estimate(&mut h, &file, None));
    assert_eq!(load(&mut h, &file, false, Some(1)).unwrap_err(), "OVER_MEMORY_BUDGET");
}

#[test]
fn other_bytes_or_changed_settings_are_admitted_afresh() {
    let (gemma, llama) = (bytes("tiny_gemma3.gguf"), bytes("tiny_llama.gguf"));
    let mut h = Host::new();
    // Estimated one file, loaded another: its own admission (refused by the load's budget).
    assert!(estimate(&mut h, &gemma, None));
    assert_eq!(load(&mut h, &llama, true, Some(1)).unwrap_err(), "OVER_MEMORY_BUDGET");
    // A refused estimate admits nothing.
    assert!(!estimate(&mut h, &gemma, Some(1)));
    assert_eq!(load(&mut h, &gemma, true, Some(1)).unwrap_err(), "OVER_MEMORY_BUDGET");
    // Settings changed after the estimate (budget, KV options, threads): admitted afresh.
    assert!(estimate(&mut h, &gemma, None));
    h.set_memory_options(MemoryOptions { budget_bytes: Some(1), ..MemoryOptions::default() }).unwrap();
    assert_eq!(load(&mut h, &gemma, true, None).unwrap_err(), "OVER_MEMORY_BUDGET");
    h.set_memory_options(MemoryOptions::default()).unwrap();
    assert!(estimate(&mut h, &gemma, None));
    h.set_kv_options(Some(KvOptions { tokens: Some(16), ..Default::default() })).unwrap();
    assert_eq!(load(&mut h, &gemma, true, Some(1)).unwrap_err(), "OVER_MEMORY_BUDGET");
    // What-if estimates (other KV options) are not the load's.
    h.estimate_begin();
    h.estimate_push(&gemma).unwrap();
    let what_if = EstimateRequest { kv: Some(KvOptions { tokens: Some(8), ..Default::default() }), ..Default::default() };
    assert!(h.estimate_finish(Some(gemma.len() as u64), &what_if).unwrap().fits);
    assert_eq!(load(&mut h, &gemma, true, Some(1)).unwrap_err(), "OVER_MEMORY_BUDGET");
    // Admitted afresh, within no budget: it loads.
    load(&mut h, &gemma, true, None).unwrap();
}

/// Skims `file`'s header as a load does (`as_loaded` with the load's KV options) and returns the
/// report's KV term, or None when it does not fit.
fn estimate_as_loaded(h: &mut Host, file: &[u8], kv: Option<KvOptions>) -> Option<u64> {
    h.estimate_begin();
    h.estimate_push(file).unwrap();
    let req = EstimateRequest { kv, as_loaded: true, ..Default::default() };
    let r = h.estimate_finish(Some(file.len() as u64), &req).unwrap();
    r.fits.then_some(r.estimate.kv)
}

/// A load estimates its model while the previous one is still loaded with its own KV options
/// (so that a refusal keeps it): the estimate is for the options the load names (none: the
/// plain context), and setting exactly those afterwards keeps the admission.
#[test]
fn a_loads_estimate_is_for_its_own_kv_options() {
    let file = bytes("tiny_gemma3.gguf");
    let plain_kv = {
        let mut fresh = Host::new();
        assert!(estimate(&mut fresh, &file, None));
        fresh.last_estimate().unwrap().kv
    };
    let mut h = Host::new();
    let small = Some(KvOptions { tokens: Some(16), ..Default::default() });
    h.set_kv_options(small.clone()).unwrap();
    load(&mut h, &file, false, None).unwrap();
    let loaded_kv = h.last_estimate().unwrap().kv;
    assert!(loaded_kv < plain_kv, "{loaded_kv} {plain_kv}");

    // The next load names no KV options: estimated for the plain context, not the loaded one's.
    assert_eq!(estimate_as_loaded(&mut h, &file, None), Some(plain_kv));
    // Setting the options it was estimated for keeps its admission (the load's budget of one
    // byte would refuse it otherwise).
    h.set_kv_options(None).unwrap();
    load(&mut h, &file, true, Some(1)).unwrap();
    assert_eq!(h.last_estimate().unwrap().kv, plain_kv);

    // Estimated for some options, then others set: admitted afresh.
    assert_eq!(estimate_as_loaded(&mut h, &file, small.clone()), Some(loaded_kv));
    h.set_kv_options(Some(KvOptions { tokens: Some(32), ..Default::default() })).unwrap();
    assert_eq!(load(&mut h, &file, true, Some(1)).unwrap_err(), "OVER_MEMORY_BUDGET");
}
