//! The threaded wasm build's executor: web workers that share this module's memory, each
//! parked in [`worker_loop`] (called from JS once per worker, it never returns), and the
//! engine's own worker as the caller that runs part 0.
//!
//! One job at a time, handed over by an epoch counter: the caller stores the job and bumps the
//! epoch; worker `w` runs part `w + 1` if there is one, and every worker acknowledges every
//! epoch (so none can lag into the next job). Waiting spins a while (the matmuls of a decode
//! step come back to back) and then sleeps with `memory.atomic.wait32`.
//!
//! A worker that traps (a panic in its part) never acknowledges, and the caller would wait for
//! ever. So JS catches the trap in the pool worker and calls [`worker_failed`], which marks the
//! pool failed and acknowledges for it; the caller then panics too (its output is incomplete),
//! which the host reports as `ENGINE_CRASHED` and the client answers with a restart.

use std::arch::wasm32::{memory_atomic_notify, memory_atomic_wait32};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering::*};
use std::sync::Mutex;

use super::{ExecError, Executor};

/// Spins before a wait: about 0.1 ms, longer than the gap between two matmuls of a step.
const SPINS: u32 = 1 << 15;

static EPOCH: AtomicU32 = AtomicU32::new(0);
/// Workers that have not yet acknowledged the current epoch.
static PENDING: AtomicU32 = AtomicU32::new(0);
static PARTS: AtomicUsize = AtomicUsize::new(0);
/// Workers parked in `worker_loop`.
static WORKERS: AtomicU32 = AtomicU32::new(0);
/// The current job, lifetime erased: the caller keeps it alive until every worker acknowledged.
static JOB: Mutex<Option<JobRef>> = Mutex::new(None);
/// One caller at a time (the engine is single-threaded; this keeps the protocol sound anyway).
static RUNNING: Mutex<()> = Mutex::new(());
/// Set once a pool worker trapped: no job can complete any more.
static FAILED: AtomicBool = AtomicBool::new(false);
/// Test hook: the next part a pool worker runs panics (`debug_pool_panic`).
static PANIC_NEXT_PART: AtomicBool = AtomicBool::new(false);

#[derive(Clone, Copy)]
struct JobRef(&'static (dyn Fn(usize) + Sync));

/// Waits while `a == v`: spins, then sleeps until notified.
fn wait_while(a: &AtomicU32, v: u32) {
    for _ in 0..SPINS {
        if a.load(Acquire) != v {
            return;
        }
        std::hint::spin_loop();
    }
    while a.load(Acquire) == v {
        // Safety: `a` is a live, aligned i32 in the shared memory.
        unsafe { memory_atomic_wait32(a.as_ptr() as *mut i32, v as i32, -1) };
    }
}

fn notify(a: &AtomicU32) {
    // Safety: as in `wait_while`.
    unsafe { memory_atomic_notify(a.as_ptr() as *mut i32, u32::MAX) };
}

/// Worker `index` (0-based) of the pool: registers, then runs its part of every job. Never
/// returns.
pub fn worker_loop(index: usize) -> ! {
    // Registered between jobs, so the epoch seen and the count a job waits for agree.
    let mut seen = {
        let _between = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        WORKERS.fetch_add(1, AcqRel);
        EPOCH.load(Acquire)
    };
    loop {
        wait_while(&EPOCH, seen);
        seen = EPOCH.load(Acquire);
        if index + 1 < PARTS.load(Acquire) {
            let job = JOB.lock().unwrap_or_else(|e| e.into_inner()).expect("a job is set with its epoch");
            if PANIC_NEXT_PART.swap(false, AcqRel) {
                panic!("debug_pool_panic: deliberate panic in pool worker {index}");
            }
            (job.0)(index + 1);
        }
        if PENDING.fetch_sub(1, AcqRel) == 1 {
            notify(&PENDING);
        }
    }
}

/// Called by JS in a pool worker whose `worker_loop` trapped: it will never acknowledge again,
/// so it acknowledges the job it died in and marks the pool failed for the caller.
pub fn worker_failed() {
    FAILED.store(true, Release);
    if PENDING.load(Acquire) > 0 && PENDING.fetch_sub(1, AcqRel) == 1 {
        notify(&PENDING);
    }
}

/// Test hook: makes the next part a pool worker runs panic (the fault matrix's `pool-panic`).
pub fn panic_next_part() {
    PANIC_NEXT_PART.store(true, Release);
}

/// Workers parked now.
pub fn workers() -> usize {
    WORKERS.load(Acquire) as usize
}

pub struct ThreadPool {
    threads: usize,
}

impl ThreadPool {
    /// Needs `threads - 1` workers already parked in [`worker_loop`] (JS starts them).
    pub fn new(threads: usize) -> Result<ThreadPool, ExecError> {
        if workers() + 1 < threads {
            return Err(ExecError::Spawn(format!("{threads} threads asked for, {} workers started", workers())));
        }
        Ok(ThreadPool { threads })
    }
}

impl Executor for ThreadPool {
    fn threads(&self) -> usize {
        self.threads
    }

    fn run(&self, parts: usize, f: &(dyn Fn(usize) + Sync)) {
        let _one = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
        fail_if_broken();
        let parts = parts.min(self.threads);
        // Safety: `f` outlives this call, and the job is taken down only after every worker
        // acknowledged this epoch, so no worker holds it past the borrow.
        let job: &'static (dyn Fn(usize) + Sync) = unsafe { std::mem::transmute(f) };
        *JOB.lock().unwrap_or_else(|e| e.into_inner()) = Some(JobRef(job));
        PARTS.store(parts, Release);
        PENDING.store(WORKERS.load(Acquire), Release);
        EPOCH.fetch_add(1, AcqRel);
        notify(&EPOCH);
        f(0);
        loop {
            let left = PENDING.load(Acquire);
            if left == 0 {
                break;
            }
            wait_while(&PENDING, left);
        }
        *JOB.lock().unwrap_or_else(|e| e.into_inner()) = None;
        fail_if_broken();
    }
}

/// A job a worker died in is incomplete, and a dead worker never acknowledges again: the engine
/// cannot go on (a trap, reported as `ENGINE_CRASHED`; the client restarts the worker).
fn fail_if_broken() {
    if FAILED.load(Acquire) {
        panic!("a pool worker trapped: the threaded engine cannot finish this job");
    }
}
