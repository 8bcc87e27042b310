// Formatting shared by the page and its test (tests/js/demo.test.js imports this file, so what
// the test expects on screen is computed by the same code). No DOM here.

const num = (v) => typeof v === 'number' && Number.isFinite(v);

export const DASH = '–';

/** Time to first token and other whole-millisecond durations. */
export const fmtMs = (v) => (num(v) ? `${v.toFixed(0)} ms` : DASH);
/** Time per output token (one decimal). */
export const fmtTpot = (v) => (num(v) ? `${v.toFixed(1)} ms` : DASH);
/** Throughput. */
export const fmtRate = (v) => (num(v) ? `${v.toFixed(1)} tok/s` : DASH);
export const fmtInt = (v) => (num(v) ? String(Math.round(v)) : DASH);

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
