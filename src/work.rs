//! The work one generation cost the machine that ran it: CPU time per phase (prefill, decode)
//! and an energy *estimate* in joules from a device power model.
//!
//! This is the one place the energy formula lives; the browser worker (through `host` and
//! `src/wasm`) and `edgellm serve` both report what this module computes.
//!
//! **The formula.** Every busy core draws `watts_per_busy_core` while it works and nothing
//! otherwise, so E = ∫P(t)dt becomes a sum over the cores of their busy time:
//! `energy_j = cpu_ms / 1000 × watts_per_busy_core`, where `cpu_ms` is *core*-milliseconds
//! (one thread busy for 1 s = 1000; two threads busy for 1 s = 2000). A multi-threaded engine
//! therefore needs no other formula: its CPU clock counts every busy core. Natively the process
//! clock does so already; with a busy-wall clock the host multiplies each call's wall time by
//! its thread count (the threaded wasm build's pool workers compute or spin for the whole call),
//! since [`WorkMeter::add`] takes core-ms, not wall time.
//!
//! **The CPU clock** ([`CpuClock`]) is the host's:
//! * natively (`edgellm serve`): the process's CPU time (`clock_gettime(CLOCK_PROCESS_CPUTIME_ID)`),
//!   which sums every thread of the process — the inference thread, any compute threads, and
//!   the (small) share of the HTTP thread that runs meanwhile;
//! * in the browser worker there is no per-thread CPU clock, so it is the *busy wall time
//!   inside the wasm calls* (`performance.now()` at entry and exit of each prefill chunk and
//!   decode step). For the single-threaded compute worker this is its CPU time, except when the
//!   OS takes the core away mid-call (then it over-counts) — an estimate, labelled
//!   `cpu_clock: "wasm-busy-wall"`.
//!
//! **The default power model**: [`DEFAULT_WATTS_PER_BUSY_CORE`] = 1.33 W, a phone's big core at
//! full clock: AnandTech's measurement of the HiSilicon Kirin 960 ("Kirin 960 performance and
//! power", 2017), 4 × Cortex-A73 at 2.36 GHz under a power virus = 5.31 W of system active
//! power (device power minus idle), i.e. 1.33 W per busy core. The first busy core measured
//! 1.81 W (interconnect and DRAM ramp up with it), so a single-threaded run on such a phone is
//! underestimated by up to ~25 %; a laptop or desktop core draws several times more. Apps (the
//! JS `energy.watts_per_busy_core` option) and servers (`--watts-per-busy-core`) set their own.

use serde::{Deserialize, Serialize};

use crate::host::HostError;
use crate::metrics::Clock;

/// Watts one fully busy core draws (see the module doc for the source).
pub const DEFAULT_WATTS_PER_BUSY_CORE: f64 = 1.33;
/// Above this a figure is a unit mistake (kW), not a core.
pub const MAX_WATTS_PER_BUSY_CORE: f64 = 1000.0;

/// The two phases of a generation whose work is counted apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Tokenizing the request, prefix reuse and the prompt's forward passes (until the first
    /// token can be sampled).
    Prefill,
    /// Each decode step: one forward pass and one sampling.
    Decode,
}

/// The device power model (the JS `energy` option, `edgellm serve --watts-per-busy-core`).
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PowerModel {
    #[serde(default = "default_watts")]
    pub watts_per_busy_core: f64,
}

fn default_watts() -> f64 {
    DEFAULT_WATTS_PER_BUSY_CORE
}

impl Default for PowerModel {
    fn default() -> Self {
        PowerModel { watts_per_busy_core: DEFAULT_WATTS_PER_BUSY_CORE }
    }
}

impl PowerModel {
    /// A checked model: `watts_per_busy_core` finite, > 0 and at most [`MAX_WATTS_PER_BUSY_CORE`].
    pub fn new(watts_per_busy_core: f64) -> Result<PowerModel, HostError> {
        let m = PowerModel { watts_per_busy_core };
        m.check()?;
        Ok(m)
    }

    pub fn check(&self) -> Result<(), HostError> {
        let w = self.watts_per_busy_core;
        if !w.is_finite() || w <= 0.0 || w > MAX_WATTS_PER_BUSY_CORE {
            return Err(HostError::new(
                "INVALID_REQUEST",
                format!("energy.watts_per_busy_core must be a number in (0, {MAX_WATTS_PER_BUSY_CORE}], got {w}"),
            ));
        }
        Ok(())
    }

    /// The energy formula: joules for `cpu_ms` core-milliseconds of busy CPU.
    pub fn joules(&self, cpu_ms: f64) -> f64 {
        cpu_ms / 1000.0 * self.watts_per_busy_core
    }
}

/// Where CPU time comes from, and its name in the report.
#[derive(Clone, Copy, Debug)]
pub struct CpuClock {
    /// Core-milliseconds since an arbitrary origin.
    pub read: Clock,
    /// `"process-cpu"`, `"wasm-busy-wall"` or `"busy-wall"` (a wall clock read around each call).
    pub kind: &'static str,
    /// `read` is the host's wall clock itself: one reading serves both (so a single-threaded
    /// worker's `busy_cores` is exactly 1).
    pub is_wall: bool,
}

impl CpuClock {
    /// The busy wall time inside each call, read from `clock` (the browser worker's).
    pub fn busy_wall(clock: Clock) -> CpuClock {
        CpuClock { read: clock, kind: if cfg!(target_arch = "wasm32") { "wasm-busy-wall" } else { "busy-wall" }, is_wall: true }
    }

    /// The process's CPU time, all threads (native Unix).
    #[cfg(all(unix, not(target_arch = "wasm32")))]
    pub fn process() -> CpuClock {
        CpuClock { read: process_cpu_ms, kind: "process-cpu", is_wall: false }
    }
}

/// CPU time of the whole process (every thread), milliseconds.
#[cfg(all(unix, not(target_arch = "wasm32")))]
pub fn process_cpu_ms() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a valid pointer; the clock id is a
    // constant every Unix the crate builds for defines.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0.0;
    }
    ts.tv_sec as f64 * 1000.0 + ts.tv_nsec as f64 / 1e6
}

/// A figure per phase and their sum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct PhaseSplit {
    pub prefill: f64,
    pub decode: f64,
    pub total: f64,
}

impl PhaseSplit {
    fn of(prefill: f64, decode: f64) -> PhaseSplit {
        PhaseSplit { prefill, decode, total: prefill + decode }
    }
}

/// Accumulates one generation's CPU and wall time per phase.
#[derive(Clone, Debug, Default)]
pub struct WorkMeter {
    cpu_ms: [f64; 2],
    wall_ms: [f64; 2],
}

impl WorkMeter {
    /// Adds one call's CPU (core-ms) and wall time (ms) to `phase`. Negative deltas (a clock
    /// that went back) count as 0.
    pub fn add(&mut self, phase: Phase, cpu_ms: f64, wall_ms: f64) {
        let i = phase as usize;
        self.cpu_ms[i] += cpu_ms.max(0.0);
        self.wall_ms[i] += wall_ms.max(0.0);
    }

    /// The report under `power`, with the CPU clock's name.
    pub fn report(&self, power: &PowerModel, cpu_clock: &'static str) -> WorkReport {
        let cpu = PhaseSplit::of(self.cpu_ms[0], self.cpu_ms[1]);
        let wall = PhaseSplit::of(self.wall_ms[0], self.wall_ms[1]);
        WorkReport {
            cpu_ms: cpu,
            busy_wall_ms: wall,
            busy_cores: if wall.total > 0.0 { cpu.total / wall.total } else { 0.0 },
            energy_j: PhaseSplit::of(power.joules(cpu.prefill), power.joules(cpu.decode)),
            watts_per_busy_core: power.watts_per_busy_core,
            cpu_clock,
        }
    }
}

/// What a generation cost (`usage.compute` in the JS and HTTP APIs, with the sustained-speed
/// figures the JS side adds).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkReport {
    /// Core-milliseconds of CPU per phase ([`CpuClock`]).
    pub cpu_ms: PhaseSplit,
    /// Wall time spent inside the engine's calls per phase (waiting between calls excluded).
    pub busy_wall_ms: PhaseSplit,
    /// `cpu_ms.total / busy_wall_ms.total`: the mean number of busy cores while it worked.
    pub busy_cores: f64,
    /// The estimate: `cpu_ms / 1000 × watts_per_busy_core`, per phase.
    pub energy_j: PhaseSplit,
    pub watts_per_busy_core: f64,
    /// Which clock `cpu_ms` was read from.
    pub cpu_clock: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn energy_is_cpu_time_times_the_model_per_phase() {
        let mut m = WorkMeter::default();
        m.add(Phase::Prefill, 300.0, 150.0); // two cores busy
        m.add(Phase::Decode, 100.0, 100.0);
        m.add(Phase::Decode, -5.0, 50.0);
        let r = m.report(&PowerModel::new(2.0).unwrap(), "busy-wall");
        assert_eq!(r.cpu_ms, PhaseSplit { prefill: 300.0, decode: 100.0, total: 400.0 });
        assert_eq!(r.energy_j, PhaseSplit { prefill: 0.6, decode: 0.2, total: 0.8 });
        assert_eq!(r.busy_wall_ms.total, 300.0);
        assert!((r.busy_cores - 4.0 / 3.0).abs() < 1e-12);
        assert_eq!(WorkMeter::default().report(&PowerModel::default(), "x").busy_cores, 0.0);
    }

    #[test]
    fn bad_power_models_are_refused() {
        for w in [0.0, -1.0, f64::NAN, f64::INFINITY, 1e6] {
            assert_eq!(PowerModel::new(w).unwrap_err().code, "INVALID_REQUEST", "{w}");
        }
        assert_eq!(PowerModel::default().watts_per_busy_core, DEFAULT_WATTS_PER_BUSY_CORE);
        let m: PowerModel = serde_json::from_str("{}").unwrap();
        assert_eq!(m, PowerModel::default());
        assert!(serde_json::from_str::<PowerModel>(r#"{"watts":3}"#).is_err());
    }

    #[cfg(all(unix, not(target_arch = "wasm32")))]
    #[test]
    fn process_cpu_time_advances_with_work() {
        let a = process_cpu_ms();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(process_cpu_ms() > a);
    }
}
