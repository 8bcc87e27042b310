//! The streaming loader: any chunking gives the same tensors, nothing is allocated for tensors
//! before the header is accepted, and short or long streams fail with typed errors.

mod common;
mod gguf_common;

use std::time::Instant;

use edgellm::gguf::{
    load_bytes, load_file, parse_file, GgufError, LoadProgress, StreamLoader, TensorStore,
};
use gguf_common::{synthetic_model, synthetic_tensors, Rng};

/// Pushes `file` in chunks of the given sizes (cycled), checking the progress protocol.
fn stream(file: &[u8], expected: Option<u64>, sizes: &mut dyn FnMut() -> usize) -> TensorStore {
    let mut l = StreamLoader::new(expected);
    let mut at = 0;
    let mut header_ready = 0;
    let mut last_needed = 0;
    while at < file.len() {
        let n = sizes().clamp(1, file.len() - at);
        let progress = l.push(&file[at..at + n]).unwrap();
        at += n;
        assert_eq!(l.bytes_received(), at as u64);
        match progress {
            LoadProgress::Header { bytes_received, total_bytes_needed } => {
                assert_eq!(header_ready, 0);
                assert!(total_bytes_needed > bytes_received && total_bytes_needed >= last_needed);
                last_needed = total_bytes_needed;
                assert!(l.header().is_none());
            }
            LoadProgress::HeaderReady => {
                header_ready += 1;
                assert!(l.header().is_some());
                assert_eq!(l.bytes_allocated(), 0, "tensor memory before the header was accepted");
            }
            LoadProgress::Data { bytes_received, data_end } => {
                assert!(header_ready == 1 && bytes_received < data_end);
            }
            LoadProgress::Complete { bytes_received } => {
                assert!(header_ready == 1);
                assert!(bytes_received >= l.header().unwrap().data_end());
            }
        }
    }
    assert_eq!(header_ready, 1, "HeaderReady exactly once");
    l.finish().unwrap()
}

fn check_store(store: &TensorStore, file: &[u8]) {
    let h = parse_file(file).unwrap();
    assert_eq!(store.header, h);
    assert_eq!(store.len(), h.tensors.len());
    for (i, t) in h.tensors.iter().enumerate() {
        let start = (h.data_offset + t.offset) as usize;
        let (info, bytes) = store.tensor(&t.name).unwrap();
        assert_eq!(info, t);
        assert!(bytes == &file[start..start + t.n_bytes() as usize], "{} differs", t.name);
        assert_eq!(store.get(i).unwrap().1.as_ptr(), bytes.as_ptr());
    }
    assert_eq!(store.bytes_total(), h.tensor_data_bytes());
    assert!(store.tensor("no.such.tensor").is_none());
}

#[test]
fn every_chunk_size_gives_the_same_tensors() {
    for alignment in [None, Some(1), Some(128)] {
        let (file, datas) = synthetic_model(3, alignment);
        for size in (1..=80).chain([97, 1000, 4096, file.len()]) {
            for expected in [None, Some(file.len() as u64)] {
                let store = stream(&file, expected, &mut || size);
                check_store(&store, &file);
                for ((name, _, _), data) in synthetic_tensors().iter().zip(&datas) {
                    assert_eq!(store.tensor(name).unwrap().1, &data[..]);
                }
            }
        }
    }
}

#[test]
fn random_chunks_and_trailing_bytes() {
    let (mut file, _) = synthetic_model(2, Some(64));
    let mut rng = Rng::new(9);
    for _ in 0..200 {
        let store = stream(&file, None, &mut || 1 + rng.below(300) as usize);
        check_store(&store, &file);
    }
    // Bytes after the last tensor are skipped.
    file.extend_from_slice(&[0xEE; 100]);
    let store = stream(&file, Some(file.len() as u64), &mut || 37);
    check_store(&store, &file);
}

#[test]
fn the_header_can_be_refused_before_any_tensor_allocation() {
    let (file, _) = synthetic_model(3, None);
    let mut l = StreamLoader::new(Some(file.len() as u64));
    // The whole file in one chunk: the header is ready, the data waits in the chunk buffer.
    assert_eq!(l.push(&file).unwrap(), LoadProgress::HeaderReady);
    let h = l.header().unwrap();
    assert_eq!(h.tensors.len(), synthetic_tensors().len());
    assert_eq!(l.bytes_allocated(), 0);
    // A caller over budget just drops the loader here. Accepting allocates every tensor.
    l.accept_header().unwrap();
    let total = parse_file(&file).unwrap().tensor_data_bytes();
    assert_eq!(l.bytes_allocated(), total);
    l.accept_header().unwrap(); // a second call changes nothing
    check_store(&l.finish().unwrap(), &file);

    // `finish` right after HeaderReady accepts implicitly.
    let mut l = StreamLoader::new(None);
    l.push(&file).unwrap();
    check_store(&l.finish().unwrap(), &file);
    check_store(&load_bytes(&file).unwrap(), &file);
}

#[test]
fn short_and_long_streams_fail_with_typed_errors() {
    let (file, _) = synthetic_model(3, None);
    let len = file.len() as u64;
    let data_end = parse_file(&file).unwrap().data_end();
    for cut in 0..file.len() {
        let has_all_tensors = cut as u64 >= data_end;
        // A stream that just stops: truncated, unless every tensor arrived and no length was
        // announced (the rest is padding).
        for expected in [None, Some(len)] {
            let mut l = StreamLoader::new(expected);
            for chunk in file[..cut].chunks(50) {
                l.push(chunk).unwrap();
            }
            let r = l.finish();
            if has_all_tensors && expected.is_none() {
                check_store(&r.unwrap(), &file);
                continue;
            }
            let e = r.unwrap_err();
            assert!(
                matches!(e, GgufError::Truncated { available, needed } if available == cut as u64 && needed > available),
                "cut {cut}, expected {expected:?}: {e:?}"
            );
        }
        // A stream announced at the cut length: refused as soon as the header shows that it
        // cannot hold the data.
        let mut l = StreamLoader::new(Some(cut as u64));
        let r = file[..cut].chunks(64).try_for_each(|c| l.push(c).map(|_| ()));
        let r = r.and_then(|_| l.finish());
        if has_all_tensors {
            check_store(&r.unwrap(), &file);
            continue;
        }
        let e = r.unwrap_err();
        match e.code() {
            // The header itself is cut.
            "GGUF_TRUNCATED" => {
                assert_eq!(parse_file(&file[..cut]).unwrap_err().code(), "GGUF_TRUNCATED")
            }
            // The header is whole but the data cannot fit.
            "GGUF_TENSOR_OUT_OF_BOUNDS" => {}
            _ => panic!("cut {cut}: {e:?}"),
        }
    }

    // More bytes than announced.
    let mut l = StreamLoader::new(Some(len - 1));
    let e = l.push(&file).unwrap_err();
    assert_eq!(e, GgufError::StreamTooLong { expected: len - 1, received: len });
    // A failed loader stays failed.
    assert_eq!(l.push(&[]).unwrap_err(), e);
    assert_eq!(l.finish().unwrap_err(), e);

    // A corrupt header fails the push that completes it, and later pushes repeat the error.
    let mut bad = file.clone();
    bad[4] = 9;
    let mut l = StreamLoader::new(None);
    let e = l.push(&bad[..100]).unwrap_err();
    assert_eq!(e.code(), "GGUF_UNSUPPORTED_VERSION");
    assert_eq!(l.push(&bad[100..]).unwrap_err(), e);
}

#[test]
fn real_model_streams_in_random_chunks() {
    let Some(path) = common::real_model() else { return };
    let file = std::fs::read(&path).unwrap();
    let h = parse_file(&file).unwrap();
    for seed in [1, 2] {
        let mut rng = Rng::new(seed);
        // Log-uniform sizes from 1 byte to 8 MiB: many tiny pushes through the header and
        // tensor boundaries, large ones through the bulk.
        let t = Instant::now();
        let store = stream(&file, Some(file.len() as u64), &mut || {
            1usize << rng.below(24) | rng.below(1 << 10) as usize
        });
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(store.len(), 236);
        for (t, bytes) in store.iter() {
            let start = (h.data_offset + t.offset) as usize;
            assert!(bytes == &file[start..start + t.n_bytes() as usize], "{} differs", t.name);
        }
        assert_eq!(store.bytes_total(), 246_587_904);
        eprintln!("seed {seed}: streamed {} MB in {:.0} ms", file.len() / 1_000_000, secs * 1e3);
    }
    // Cut in the data: truncated.
    let mut l = StreamLoader::new(None);
    for c in file[..200_000_000].chunks(3 << 20) {
        l.push(c).unwrap();
    }
    assert_eq!(
        l.finish().unwrap_err(),
        GgufError::Truncated { needed: file.len() as u64, available: 200_000_000 }
    );
}

#[test]
fn load_file_reads_the_real_model() {
    let Some(path) = common::real_model() else { return };
    let t = Instant::now();
    let store = load_file(&path).unwrap();
    eprintln!("load_file: {:.0} ms", t.elapsed().as_secs_f64() * 1e3);
    assert_eq!(store.len(), 236);
    assert_eq!(store.bytes_total(), 246_587_904);
    let (info, bytes) = store.tensor("blk.17.post_ffw_norm.weight").unwrap();
    assert_eq!(bytes.len() as u64, info.n_bytes());
    // Spot-check bytes against a direct read.
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(&path).unwrap();
    for name in ["token_embd.weight", "blk.0.attn_k.weight", "blk.17.post_ffw_norm.weight"] {
        let (info, bytes) = store.tensor(name).unwrap();
        let mut direct = vec![0; info.n_bytes() as usize];
        f.seek(SeekFrom::Start(store.header.data_offset + info.offset)).unwrap();
        f.read_exact(&mut direct).unwrap();
        assert!(bytes == &direct[..], "{name}");
    }
    let (header, parts) = store.into_parts();
    assert_eq!(header.tensors.len(), parts.len());
}

#[test]
fn missing_file_is_an_io_error() {
    let e = load_file("/nonexistent/model.gguf").unwrap_err();
    assert_eq!(e.code(), "GGUF_IO");
    assert_eq!(
        edgellm::gguf::read_header_file("/nonexistent/model.gguf").unwrap_err().code(),
        "GGUF_IO"
    );
}
