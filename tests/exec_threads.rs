//! Threads never change a result: the same logits, bit for bit, on 1, 2 and 3 threads — for
//! batched prefill and single-token decode, on the tiny models (every supported quant type
//! across their tensors, four architectures) and on the real Gemma model.

mod common;

use edgellm::exec::Exec;
use edgellm::gguf::GgmlType;
use edgellm::model::{ForwardScratch, LogitRows, Model};
use edgellm::ops::{matmul_on, MatmulScratch, Weight};
use edgellm::quant;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Logits of a prefill of `prompt` (every position) then `steps` greedy decode steps (the
/// last position each), all concatenated, on `threads` threads.
fn run(model: &Model, prompt: &[u32], steps: usize, threads: usize) -> (Vec<u32>, Vec<u32>) {
    let mut s = ForwardScratch::new(Exec::with_threads(threads).unwrap());
    let mut kv = model.new_kv_cache(prompt.len() + steps);
    let (mut out, mut all, mut toks) = (Vec::new(), Vec::new(), Vec::new());
    model.forward(prompt, &mut kv, &mut s, LogitRows::All, &mut out).unwrap();
    all.extend_from_slice(&out);
    let n_vocab = model.n_vocab();
    for _ in 0..steps {
        let next = edgellm::sampling::argmax(&out[out.len() - n_vocab..]);
        toks.push(next);
        model.forward(&[next], &mut kv, &mut s, LogitRows::Last, &mut out).unwrap();
        all.extend_from_slice(&out);
    }
    (bits(&all), toks)
}

#[test]
fn tiny_models_give_identical_logits_on_any_thread_count() {
    for arch in ["llama", "qwen2", "qwen3", "gemma3"] {
        let model = Model::load_file(common::data(&format!("tiny_{arch}.gguf"))).unwrap();
        // 45 prompt tokens: token tiles of 8, 4 and single tokens in the prefill kernels.
        let prompt: Vec<u32> = (0..45u32).map(|i| (i * 7 + 3) % model.n_vocab() as u32).collect();
        let one = run(&model, &prompt, 5, 1);
        for threads in [2, 3] {
            let many = run(&model, &prompt, 5, threads);
            assert!(one.0 == many.0, "{arch}: {threads} threads changed the logits");
            assert_eq!(one.1, many.1, "{arch}: {threads} threads changed the tokens");
        }
    }
}

/// `n` values in [-1, 1) that vary from element to element (any will do: the test compares
/// thread counts with each other).
fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7919 + seed * 104_729) % 2003) as f32 / 1001.5 - 1.0).collect()
}

#[test]
fn matmul_rows_split_anywhere_give_the_serial_result() {
    // Q8_0 weights with a row count that is not a multiple of four (the decode kernel's tail).
    let (n_in, n_out) = (96, 37);
    let wv = values(n_in * n_out, 1);
    let (mut data, mut row) = (Vec::new(), Vec::new());
    for r in 0..n_out {
        quant::quantize_activation(GgmlType::Q8_0, &wv[r * n_in..(r + 1) * n_in], &mut row).unwrap();
        data.extend_from_slice(&row);
    }
    let w = Weight::new(GgmlType::Q8_0, n_in, n_out, data).unwrap();
    for n_tok in [1, 2, 13, 45] {
        let x = values(n_in * n_tok, 2 + n_tok);
        let mut want = vec![0.0; n_tok * n_out];
        matmul_on(&Exec::serial(), &w, &x, &mut want, &mut MatmulScratch::default()).unwrap();
        for threads in [2, 3, 5] {
            let mut got = vec![f32::NAN; n_tok * n_out];
            let e = Exec::with_threads(threads).unwrap();
            matmul_on(&e, &w, &x, &mut got, &mut MatmulScratch::default()).unwrap();
            assert_eq!(bits(&want), bits(&got), "{n_tok} tokens on {threads} threads");
        }
    }
}

#[test]
fn gemma_gives_identical_logits_and_tokens_on_one_and_two_threads() {
    let Some(path) = common::real_model() else { return };
    let model = Model::load_file(&path).unwrap();
    let prompt: Vec<u32> = [2u32, 818, 5279, 529, 7001, 563].iter().cycle().take(21).copied().collect();
    let one = run(&model, &prompt, 4, 1);
    let two = run(&model, &prompt, 4, 2);
    assert_eq!(one.1, two.1, "tokens");
    assert!(one.0 == two.0, "2 threads changed the logits");
}

#[test]
fn the_host_takes_a_thread_count_and_refuses_bad_ones() {
    let mut h = edgellm::host::Host::new();
    assert_eq!(h.threads(), 1);
    assert_eq!(h.set_threads(2).unwrap(), 2);
    assert_eq!(h.threads(), 2);
    assert_eq!(h.set_threads(0).unwrap_err().code, "INVALID_REQUEST");
    assert_eq!(h.set_threads(edgellm::limits::MAX_THREADS + 1).unwrap_err().code, "INVALID_REQUEST");
    assert_eq!(h.threads(), 2);
}

#[test]
fn the_hosts_estimate_counts_each_extra_threads_stack() {
    let bytes = std::fs::read(common::data("tiny_llama.gguf")).unwrap();
    let estimate = |h: &mut edgellm::host::Host| {
        h.estimate_begin();
        h.estimate_push(&bytes).unwrap();
        h.estimate_finish(Some(bytes.len() as u64), &Default::default()).unwrap().estimate
    };
    let mut h = edgellm::host::Host::new();
    let one = estimate(&mut h);
    h.set_threads(3).unwrap();
    let three = estimate(&mut h);
    let stack = edgellm::limits::WORKER_STACK_BYTES as u64;
    assert_eq!(three.runtime_parts.thread_stacks, 2 * stack);
    // The rest of the difference: attention's extra parts (its heads split over the threads).
    assert!(three.activations > one.activations);
    assert_eq!(three.total - one.total, 2 * stack + (three.activations - one.activations));
    assert_eq!((three.weights, three.kv), (one.weights, one.kv));
}
