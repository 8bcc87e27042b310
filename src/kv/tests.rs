use super::*;
use crate::ops::rope::RopeMode;

const HD: usize = 32; // head dim
const NKV: usize = 2; // kv heads
const KW: usize = HD * NKV;

fn layout() -> KvLayout {
    let mut scaled = Rope::new(RopeMode::Normal, HD, 10000.0);
    scaled.freq_scale = 0.5;
    KvLayout {
        shape: KvShape { k_width: KW, v_width: KW, windows: vec![None, Some(5), None] },
        head_dim_k: HD,
        ropes: vec![Rope::new(RopeMode::Neox, HD, 1e6), Rope::new(RopeMode::Neox, HD, 10000.0), scaled],
    }
}

/// Deterministic pseudo-random row for (what, layer, absolute position).
fn row(what: u32, layer: usize, abs: usize) -> Vec<f32> {
    let mut s = (what * 7919 + layer as u32 * 104729 + abs as u32 * 15485863) ^ 0x9e37_79b9;
    (0..KW)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn rotated(rope: &Rope, x: &[f32], pos: usize) -> Vec<f32> {
    let mut cs = vec![0.0; rope.n_rot];
    rope.angles(pos, &mut cs);
    let mut y = x.to_vec();
    rope.apply(&mut y, HD, &cs);
    y
}

/// Absolute position of view entry `j` of layer `il` (during a batch).
fn abs_of(c: &KvCache, il: usize, j: usize) -> usize {
    let v = c.view(il);
    if j < v.sinks {
        j
    } else if j < v.q0 {
        v.first + (j - v.sinks)
    } else {
        c.n_past + (j - v.q0)
    }
}

/// Feeds `total` positions in batches of varying size and checks, during every batch, that
/// every layer's view is consistent: entry `j` holds the key of its token rotated at `j + s0`
/// (the same offset the batch's queries get), values unchanged. Returns the largest error.
fn run(cfg: &KvConfig, total: usize) -> (KvCache, f32) {
    let lay = layout();
    let mut c = KvCache::new(lay.clone(), cfg).unwrap();
    let mut worst = 0.0f32;
    let mut fed = 0;
    let mut step = 0;
    while fed < total {
        let n = [1, 3, 1, 5, 2, 1, 1, 4][step % 8].min(total - fed).min(c.max_batch());
        step += 1;
        c.begin(n).unwrap();
        let p0 = c.rope_pos0();
        for il in 0..lay.n_layer() {
            let rope = &lay.ropes[il];
            let mut k = Vec::new();
            let mut v = Vec::new();
            for i in 0..n {
                k.extend(rotated(rope, &row(1, il, fed + i), p0 + i));
                v.extend(row(2, il, fed + i));
            }
            c.stage(il, &k, &v);
            let q0 = c.query_pos0(il);
            let view = c.view(il);
            let len = view.len();
            assert_eq!(len, q0 + n);
            let mut kk = vec![0.0; len * KW];
            let mut vv = vec![0.0; len * KW];
            view.read_k(0, len, &mut kk);
            view.read_v(0, len, &mut vv);
            let s0 = p0 as isize - q0 as isize;
            for j in 0..len {
                let a = abs_of(&c, il, j);
                let want_k = rotated(rope, &row(1, il, a), (j as isize + s0) as usize);
                let want_v = row(2, il, a);
                for x in 0..KW {
                    worst = worst.max((kk[j * KW + x] - want_k[x]).abs());
                    worst = worst.max((vv[j * KW + x] - want_v[x]).abs());
                }
            }
            // Global layers see the budget at most; window layers their window + the batch.
            match lay.shape.windows[il] {
                None => assert!(len <= c.max_tokens(), "global view {len} > budget"),
                Some(w) => assert!(q0 <= w),
            }
            c.store(il);
        }
        c.commit();
        fed += n;
    }
    (c, worst)
}

#[test]
fn views_are_rope_consistent_through_eviction_f16_and_q8() {
    for dtype in [KvDtype::F16, KvDtype::Q8] {
        for (sinks, rebase_after) in [(3, None), (0, None), (3, Some(20)), (1, Some(14))] {
            let cfg = KvConfig { dtype, n_sink: sinks, rebase_after, ..KvConfig::window(12) };
            let (c, worst) = run(&cfg, 90);
            // f16: half an ulp at |x| ≤ ~1.4; q8: half a step (amax/254). A re-base rounds once
            // more; here (a re-base every few tokens, far more often than the default of every
            // ≥ 8192 positions) a key lives through several.
            let tol = match (dtype, rebase_after) {
                (KvDtype::F16, _) => 2.5e-3,
                (KvDtype::Q8, None) => 6e-3,
                (KvDtype::Q8, Some(_)) => 2.5e-2,
            };
            assert!(worst < tol, "{dtype:?} sinks {sinks} rebase {rebase_after:?}: worst {worst}");
            assert_eq!(c.len(), 12);
            assert_eq!(c.evicted(), 90 - 12);
            assert_eq!(c.n_past(), 90);
            if let Some(at) = rebase_after {
                assert!(c.stats().rebases >= 3, "{:?}", c.stats());
                // Positions stay bounded: at most a batch past the re-base threshold.
                assert!(c.rope_pos0() <= at + 5, "{}", c.rope_pos0());
            } else {
                assert_eq!(c.stats().rebases, 0);
            }
        }
    }
}

#[test]
fn storage_is_allocated_once_and_bytes_follow_the_formula() {
    for dtype in [KvDtype::F16, KvDtype::Q8] {
        let lay = layout();
        let rb = dtype.row_bytes(KW) * 2;
        // 2 global layers at 12 tokens + 1 window layer capped at 5.
        let budget_bytes = (2 * 12 + 5) * rb;
        let cfg = KvConfig { dtype, ..KvConfig::window(12) };
        let mut c = KvCache::new(lay.clone(), &cfg).unwrap();
        assert_eq!(c.budget_bytes(), budget_bytes);
        assert_eq!(c.bytes_allocated(), 0);
        let mut allocated = Vec::new();
        for t in 0..40 {
            c.begin(1).unwrap();
            for il in 0..3 {
                c.stage(il, &row(1, il, t), &row(2, il, t));
                c.store(il);
            }
            c.commit();
            let held = t + 1;
            assert_eq!(c.bytes_used(), (2 * held.min(12) + held.min(5)) * rb, "t {t}");
            allocated.push(c.bytes_allocated());
        }
        assert!(allocated[11..].iter().all(|&b| b == budget_bytes));
        let s = c.stats();
        assert_eq!((s.tokens_held, s.evicted, s.bytes, s.budget_bytes), (12, 28, budget_bytes, budget_bytes));
        assert_eq!(s.by_kind[0].bytes_per_token, 2 * rb);
        assert_eq!(s.by_kind[1].kind, "local");
        assert_eq!(s.by_kind[1].tokens_held, 5);
        // A byte budget picks the largest token count that fits.
        let cfg = KvConfig { budget: KvBudget::Bytes(budget_bytes + rb), dtype, ..KvConfig::window(0) };
        assert_eq!(KvCache::new(lay.clone(), &cfg).unwrap().max_tokens(), 12);
        let cfg = KvConfig { budget: KvBudget::Bytes(10), dtype, ..KvConfig::window(0) };
        assert_eq!(KvCache::new(lay, &cfg).unwrap_err().code(), "KV_BUDGET_TOO_SMALL");
    }
}

#[test]
fn policy_error_and_context_limit_refuse_with_their_codes() {
    let cfg = KvConfig { policy: KvPolicy::Error, ..KvConfig::window(6) };
    let mut c = KvCache::new(layout(), &cfg).unwrap();
    assert_eq!(c.n_sink(), 0);
    assert_eq!(c.check_prompt(7).unwrap_err().code(), "PROMPT_OVER_KV_BUDGET");
    c.begin(6).unwrap();
    for il in 0..3 {
        c.stage(il, &[0.5; 6 * KW], &[0.5; 6 * KW]);
        c.store(il);
    }
    c.commit();
    assert_eq!(c.begin(1).unwrap_err().code(), "KV_FULL");
    assert_eq!(c.check_room(1).unwrap_err().code(), "KV_FULL");
    let mut ctx = KvCache::context(layout(), 2);
    assert_eq!(ctx.check_prompt(3).unwrap_err().code(), "CONTEXT_FULL");
    assert_eq!(ctx.begin(3).unwrap_err().code(), "CONTEXT_FULL");
    // Window-sinks takes any amount, in batches of at most budget − sinks.
    let c = KvCache::new(layout(), &KvConfig::window(6)).unwrap();
    assert!(c.check_prompt(1000).is_ok());
    assert_eq!(c.max_batch(), 2);
    let mut c = c;
    // (The first 4 tokens go to the sink slots, the next ones to a ring of 2.)
    assert_eq!(c.begin(7).unwrap_err().code(), "KV_BATCH_TOO_LARGE");
    c.begin(6).unwrap();
    // Settings that cannot work.
    for bad in [KvConfig::window(4), KvConfig::window(0), KvConfig { n_sink: 9, ..KvConfig::window(9) }] {
        assert_eq!(KvCache::new(layout(), &bad).unwrap_err().code(), "BAD_KV_CONFIG", "{bad:?}");
    }
}

#[test]
fn mark_restore_and_abort() {
    let mut c = KvCache::new(layout(), &KvConfig::window(8)).unwrap();
    let feed = |c: &mut KvCache, n: usize| {
        c.begin(n).unwrap();
        for il in 0..3 {
            c.stage(il, &vec![0.25; n * KW], &vec![0.25; n * KW]);
            c.store(il);
        }
        c.commit();
    };
    feed(&mut c, 3);
    let m = c.mark();
    feed(&mut c, 1);
    assert!(c.restore(m));
    assert_eq!(c.n_past(), 3);
    // An aborted batch that overwrote nothing leaves the cache as it was.
    c.begin(1).unwrap();
    assert!(c.abort());
    assert_eq!(c.n_past(), 3);
    // Once the window layer's ring (5) has dropped a position, going back is impossible.
    let m = c.mark();
    feed(&mut c, 3);
    assert!(!c.restore(m));
    assert!(c.is_empty());
}
