//! The header skimmer (the estimate's streaming reader) fed in chunks of sizes drawn from the
//! input's length (so a seed file stays a valid GGUF), then finished with or without the length.
#![no_main]

use edgellm::memory::HeaderSkimmer;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|file: &[u8]| {
    let mut s = HeaderSkimmer::new();
    let mut rng = file.len() as u64 | 1;
    let mut at = 0;
    while at < file.len() {
        rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let step = 1 + (rng >> 33) as usize % 9000;
        let end = (at + step).min(file.len());
        if s.push(&file[at..end]).is_err() {
            return;
        }
        at = end;
    }
    let len = if rng & 1 == 1 { Some(file.len() as u64) } else { None };
    if let Ok(summary) = s.finish(len) {
        if let Ok(g) = edgellm::memory::ModelGeometry::from_header(&summary.header) {
            let _ = edgellm::memory::Estimate::new(&g, &summary.stats, &edgellm::memory::EstimateOptions::default());
        }
    }
});
