// Sustained vs peak decode speed: tok/s per time window over one generation (or over a run of
// them: bench/page.html's `--sustained` loop uses this same meter), and the `throttled` rule.
//
// Windows: the first token starts window 0 and is not counted (as TPOT counts the tokens after
// the first); every later token counts in the current window; the first token at least
// `window_ms` after the window's start closes it, at rate = tokens / (its time − the start),
// and starts the next. A window still open at the end is not reported (too short to compare).
//
// throttled: with at least two windows (a "long" request), true when the latest window's rate
// is below `throttle_fraction` × the first's — the device slowed down during the request (a
// phone's thermal limit is typically reached within ~30 s). null for shorter requests.

import { EdgeLLMError, ErrorCode } from './errors.js';

export const DEFAULT_WINDOW_MS = 10_000;
export const DEFAULT_THROTTLE_FRACTION = 0.75;
/** How long a throttled request counts as the device's state (the router's `throttled` term):
 * a device that cooled down must get the next long request back. */
export const THROTTLE_MEMORY_MS = 5 * 60_000;

/** createEngine's `sustained` option → {window_ms, throttle_fraction} (validated). */
export function sustainedOptions(o) {
  if (o === undefined || o === null) return { window_ms: DEFAULT_WINDOW_MS, throttle_fraction: DEFAULT_THROTTLE_FRACTION };
  const bad = (m) => new EdgeLLMError(ErrorCode.INVALID_REQUEST, m);
  if (typeof o !== 'object') throw bad('sustained must be an object like {window_ms: 10000, throttle_fraction: 0.75}');
  const unknown = Object.keys(o).filter((k) => !['window_ms', 'throttle_fraction'].includes(k));
  if (unknown.length) throw bad(`sustained: unknown option ${unknown.join(', ')}`);
  const w = o.window_ms ?? DEFAULT_WINDOW_MS;
  const f = o.throttle_fraction ?? DEFAULT_THROTTLE_FRACTION;
  if (typeof w !== 'number' || !Number.isFinite(w) || w < 100 || w > 600_000) throw bad(`sustained.window_ms must be a number in [100, 600000], got ${JSON.stringify(w)}`);
  if (typeof f !== 'number' || !Number.isFinite(f) || f <= 0 || f > 1) throw bad(`sustained.throttle_fraction must be a number in (0, 1], got ${JSON.stringify(f)}`);
  return { window_ms: w, throttle_fraction: f };
}

export class DecodeWindows {
  #start = null; // start of the open window (ms)
  #n = 0; // tokens counted in it

  /** @param {{window_ms?: number, throttle_fraction?: number}} [o] (validated by sustainedOptions) */
  constructor(o = {}) {
    this.window_ms = o.window_ms ?? DEFAULT_WINDOW_MS;
    this.throttle_fraction = o.throttle_fraction ?? DEFAULT_THROTTLE_FRACTION;
    /** tok/s of each closed window, in order. */
    this.windows = [];
  }

  /** One decoded token at time `t` (ms); returns the rate of the window it closed, or null. */
  token(t) {
    if (this.#start === null) {
      this.#start = t;
      return null;
    }
    this.#n++;
    const dt = t - this.#start;
    if (dt < this.window_ms) return null;
    const rate = (this.#n * 1000) / dt;
    this.windows.push(rate);
    this.#start = t;
    this.#n = 0;
    return rate;
  }

  /** The figures reported in usage.compute.sustained and the 'pressure' event. */
  summary() {
    const w = this.windows;
    const first = w.length ? w[0] : null;
    const latest = w.length ? w[w.length - 1] : null;
    const long = w.length >= 2;
    return {
      window_ms: this.window_ms,
      windows: [...w],
      first_tps: first,
      latest_tps: latest,
      peak_tps: w.length ? Math.max(...w) : null,
      ratio: long && first > 0 ? latest / first : null,
      long,
      throttle_fraction: this.throttle_fraction,
      throttled: long ? latest < this.throttle_fraction * first : null,
    };
  }
}
