// Formatting shared by the page and its test (tests/js/demo.test.js imports this file, so what
// the test expects on screen is computed by the same code). No DOM here.

const num = (v) => typeof v === 'number' && Number.isFinite(v);

export const DASH = '–';

/** Time to first token and other whole-millisecond durations. */
export const fmtMs = (v) => (num(v) ? `${v.toFixed(0)} ms` : DASH);
/** Time per output token (one decimal). Usage reports 0 where it could not be measured (an
 * answer of one token; a server that did not give it), never a real figure: shown as unknown. */
export const fmtTpot = (v) => (num(v) && v > 0 ? `${v.toFixed(1)} ms` : DASH);
/** Throughput; 0 is unknown as for `fmtTpot` (e.g. a prompt whose size a server did not say). */
export const fmtRate = (v) => (num(v) && v > 0 ? `${v.toFixed(1)} tok/s` : DASH);
export const fmtInt = (v) => (num(v) ? String(Math.round(v)) : DASH);

/** Energy: millijoules below 1 J. */
export const fmtJoules = (j) => (num(j) ? (j < 1 ? `${(j * 1000).toFixed(j < 0.01 ? 1 : 0)} mJ` : `${j.toFixed(2)} J`) : DASH);

/** The answer's energy badge: the estimate and the CPU time it is derived from (usage.compute). */
export function energyText(c) {
  if (!c || !c.energy_j || !c.cpu_ms) return '';
  return `≈ ${fmtJoules(c.energy_j.total)} · CPU ${fmtMs(c.cpu_ms.total)}`;
}

/** How energyText was derived, for the badge's title. */
export function energyTitle(c) {
  if (!c || !c.energy_j || !c.cpu_ms) return '';
  const clock = c.cpu_clock === 'wasm-busy-wall' ? 'busy time inside the engine calls on this device' : c.cpu_clock === 'process-cpu' ? "the server's process CPU time" : c.cpu_clock;
  return `Estimate: CPU time × ${c.watts_per_busy_core} W per busy core (${clock}). Prefill ${fmtMs(c.cpu_ms.prefill)} = ${fmtJoules(c.energy_j.prefill)}, decode ${fmtMs(c.cpu_ms.decode)} = ${fmtJoules(c.energy_j.decode)}.`;
}

/** Sustained / peak of a long answer (usage.compute.sustained): latest window ÷ first. */
export function sustainedText(s) {
  if (!s || !s.long || !num(s.ratio)) return DASH;
  return `${s.ratio.toFixed(2)} (${s.first_tps.toFixed(1)} → ${s.latest_tps.toFixed(1)} tok/s${s.throttled ? ', throttled' : ''})`;
}

/** Bytes in decimal units (what a download dialog or a task manager shows). */
export function fmtBytes(n) {
  if (!num(n)) return DASH;
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)} GB`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} MB`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} kB`;
  return `${n} B`;
}

export function fmtSpeed(bytesPerS) {
  return num(bytesPerS) && bytesPerS > 0 ? `${fmtBytes(bytesPerS)}/s` : DASH;
}

export function fmtDuration(s) {
  if (!num(s) || s < 0) return DASH;
  if (s < 1) return '<1 s';
  if (s < 60) return `${Math.round(s)} s`;
  const m = Math.floor(s / 60);
  return `${m} min ${Math.round(s - m * 60)} s`;
}

/** What each `route.reason` means, in words. */
export const REASONS = {
  'prefer-local': 'preferred: this device',
  'prefer-remote': 'preferred: the server',
  'local-only': 'local only',
  'remote-only': 'server only',
  private: 'private: stays on this device',
  prompt_over_kv_budget: 'prompt over the KV budget',
  over_memory_budget: 'model over the memory budget',
  no_local_model: 'no model loaded here',
  remote_unavailable: 'server unavailable',
  remote_unauthorized: 'server refused the key',
  remote_not_configured: 'no server configured',
  capability: 'capability rule',
  latency: 'faster by estimate',
  version_pinned: 'conversation pinned (model versions differ)',
  engine_crashed: 'the local engine crashed',
  lower_cost: 'lower cost',
  cost_battery_low: 'battery low',
  cost_compute_pressure: 'device under pressure',
  cost_throttled: 'device throttled',
  cost_save_data: 'data saver on',
  cost_slow_network: 'slow network',
  no_route: 'no route',
  mode_local_only: 'local only',
  mode_remote_only: 'server only',
  offline: 'offline',
};

export function reasonText(reason) {
  if (!reason) return '';
  if (REASONS[reason]) return REASONS[reason];
  const m = /^remote_error_(\d+)$/.exec(reason);
  if (m) return `server error ${m[1]}`;
  return String(reason).replace(/_/g, ' ');
}

export const targetText = (t) => (t === 'local' ? 'this device' : t === 'remote' ? 'server' : '?');

/** The route badge's text: where it ran and why (and what failed first, after a failover). */
export function routeText(route) {
  if (!route) return '';
  if (!route.target) {
    // Nothing ran: say why each route was ruled out.
    const r = route.ruled_out || {};
    const why = ['local', 'remote'].filter((t) => r[t]).map((t) => `${targetText(t)}: ${r[t] === 'private' ? 'private' : reasonText(r[t])}`);
    return `not sent${why.length ? ` · ${why.join(' · ')}` : ''}`;
  }
  let s = `${targetText(route.target)} · ${reasonText(route.reason)}`;
  if (route.fallback_from) s += ` (fell back from ${targetText(route.fallback_from)})`;
  return s;
}
