// The router's cost terms (the `route.cost` options object): signals from the device that make
// one route cheaper than the other, beside the mode's own preference.
//
//   prefer the server (a term against local):
//     battery_low       on battery (not charging) with level below `battery.below` (default 0.2)
//     compute_pressure  Compute Pressure 'cpu' state in `pressure` (default serious, critical)
//     throttled         the last long local request slowed down (usage.compute.sustained.throttled),
//                       within the last THROTTLE_MEMORY_MS (5 min, sustained.js)
//   prefer local (a term against the server):
//     save_data         navigator.connection.saveData (the user asked to save data)
//     slow_network      navigator.connection.effectiveType in `slowConnection` (default slow-2g, 2g)
//
// A term only weighs when its signal is known; 'unknown' signals weigh nothing. Terms never
// open a route that a constraint closed (privacy, a local-only engine or request, feasibility,
// latency): decision.js applies them only between two open routes. Each term counts
// TERM_WEIGHT, more than the mode's preference (1), so one term flips a tie-free choice, and
// terms on both sides cancel out.

import { EdgeLLMError, ErrorCode } from '../errors.js';
import { PRESSURE_STATES } from '../device-signals.js';

export const TERM_WEIGHT = 2;
export const LOCAL_TERMS = ['battery_low', 'compute_pressure', 'throttled'];
export const REMOTE_TERMS = ['save_data', 'slow_network'];
const EFFECTIVE_TYPES = ['slow-2g', '2g', '3g', '4g'];

const invalid = (m) => new EdgeLLMError(ErrorCode.INVALID_REQUEST, m);

function list(v, name, allowed) {
  if (v === false) return [];
  if (!Array.isArray(v) || v.some((x) => !allowed.includes(x))) throw invalid(`route.cost.${name} must be false or an array of ${allowed.map((a) => `'${a}'`).join(', ')}`);
  return [...v];
}

function flag(v, name) {
  if (typeof v !== 'boolean') throw invalid(`route.cost.${name} must be true or false`);
  return v;
}

/** The `route.cost` object → normalized options (defaults filled in, validated). */
export function costOptions(o) {
  if (!o || typeof o !== 'object' || Array.isArray(o)) throw invalid('route.cost must be a function or an options object');
  const known = ['battery', 'pressure', 'throttled', 'saveData', 'slowConnection', 'signals'];
  const unknown = Object.keys(o).filter((k) => !known.includes(k));
  if (unknown.length) throw invalid(`route.cost: unknown option ${unknown.join(', ')}`);
  let battery = o.battery ?? { below: 0.2 };
  if (battery !== false) {
    const below = battery && typeof battery === 'object' ? battery.below ?? 0.2 : NaN;
    if (typeof below !== 'number' || !(below >= 0 && below <= 1)) throw invalid('route.cost.battery must be false or {below: a level in [0, 1]}');
    battery = { below };
  }
  if (o.signals !== undefined && typeof o.signals !== 'function') throw invalid('route.cost.signals must be a function returning {battery, pressure, connection, throttled}');
  return {
    battery,
    pressure: list(o.pressure ?? ['serious', 'critical'], 'pressure', PRESSURE_STATES),
    throttled: flag(o.throttled ?? true, 'throttled'),
    saveData: flag(o.saveData ?? true, 'saveData'),
    slowConnection: list(o.slowConnection ?? ['slow-2g', '2g'], 'slowConnection', EFFECTIVE_TYPES),
    signals: o.signals,
  };
}

/** The signals with every missing or malformed one as 'unknown' (throttled: null). */
export function normalizeSignals(s = {}) {
  const b = s.battery;
  const c = s.connection;
  return {
    battery: b && typeof b === 'object' && typeof b.level === 'number' ? { level: b.level, charging: !!b.charging } : 'unknown',
    pressure: PRESSURE_STATES.includes(s.pressure) ? s.pressure : 'unknown',
    connection: c && typeof c === 'object' ? { save_data: c.save_data === true, effective_type: EFFECTIVE_TYPES.includes(c.effective_type) ? c.effective_type : 'unknown' } : 'unknown',
    throttled: typeof s.throttled === 'boolean' ? s.throttled : null,
  };
}

/**
 * The terms that fire: `{local: [...], remote: [...]}`, each a list of term names that make
 * that route costlier, in the order of LOCAL_TERMS / REMOTE_TERMS.
 */
export function costTerms(signals, opts) {
  const s = normalizeSignals(signals);
  const local = [];
  const remote = [];
  if (opts.battery && s.battery !== 'unknown' && !s.battery.charging && s.battery.level < opts.battery.below) local.push('battery_low');
  if (s.pressure !== 'unknown' && opts.pressure.includes(s.pressure)) local.push('compute_pressure');
  if (opts.throttled && s.throttled === true) local.push('throttled');
  if (opts.saveData && s.connection !== 'unknown' && s.connection.save_data) remote.push('save_data');
  if (s.connection !== 'unknown' && opts.slowConnection.includes(s.connection.effective_type)) remote.push('slow_network');
  return { local, remote };
}
