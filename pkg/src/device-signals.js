// What the device says about its own state, from the browser APIs where they exist:
//
//   compute pressure  PressureObserver 'cpu' (Compute Pressure API, Chromium): 'nominal' |
//                     'fair' | 'serious' | 'critical'
//   battery           navigator.getBattery() (Battery Status API, Chromium): {level 0..1, charging}
//   network           navigator.connection (Network Information API, Chromium):
//                     {save_data, effective_type: 'slow-2g' | '2g' | '3g' | '4g'}
//
// Each is 'unknown' where the API is absent, refused (permissions policy, insecure context) or
// has not reported yet; nothing here throws. Read by the engine (the pressure seen during a
// request, the 'pressure' event) and the router's cost terms (router/cost.js).

export const PRESSURE_STATES = ['nominal', 'fair', 'serious', 'critical'];
const rank = (s) => PRESSURE_STATES.indexOf(s);

/** The worse of two pressure states ('unknown' loses to any known state). */
export function worsePressure(a, b) {
  return rank(b) > rank(a) ? b : a;
}

/** Observes the 'cpu' pressure source once started; `state` is the latest record's. */
export class PressureWatch {
  #g;
  #started = false;
  #listeners = new Set();
  #trackers = new Set();
  #ready = null;
  #stopped = false;

  constructor(global = globalThis) {
    this.#g = global;
    /** 'nominal' | 'fair' | 'serious' | 'critical' | 'unknown' */
    this.state = 'unknown';
    /** Whether the API exists here. */
    this.supported = typeof global.PressureObserver === 'function';
  }

  /** Starts observing (idempotent); resolves when the observer is set up or known impossible. */
  start() {
    if (this.#started || this.#stopped) return this.#ready;
    this.#started = true;
    this.#ready = (async () => {
      if (!this.supported) return;
      try {
        const sources = this.#g.PressureObserver.knownSources;
        if (Array.isArray(sources) && !sources.includes('cpu')) return;
        this.observer = new this.#g.PressureObserver((records) => {
          const r = records[records.length - 1];
          if (r && PRESSURE_STATES.includes(r.state)) this.#set(r.state);
        });
        await this.observer.observe('cpu', { sampleInterval: 1000 });
        if (this.#stopped) this.stop(); // stopped while observe() was pending
      } catch {
        this.observer = null; // NotAllowedError / NotSupportedError: stays 'unknown'
      }
    })();
    return this.#ready;
  }

  #set(state) {
    if (state === this.state) return;
    this.state = state;
    for (const t of this.#trackers) t.worst = worsePressure(t.worst, state);
    for (const fn of [...this.#listeners]) {
      try {
        fn(state);
      } catch {
        /* the listener's problem */
      }
    }
  }

  onChange(fn) {
    this.#listeners.add(fn);
    return () => this.#listeners.delete(fn);
  }

  /** Follows the worst state until `end()`: `{state: worst seen, last}` for one request. */
  track() {
    this.start();
    const t = { worst: this.state };
    this.#trackers.add(t);
    return {
      end: () => {
        this.#trackers.delete(t);
        return { state: worsePressure(t.worst, this.state), last: this.state };
      },
    };
  }

  stop() {
    this.#stopped = true;
    try {
      if (this.observer) this.observer.disconnect();
    } catch {
      /* gone already */
    }
  }
}

/** {level, charging} from navigator.getBattery(), or 'unknown'. */
export async function readBattery(nav = globalThis.navigator) {
  try {
    if (!nav || typeof nav.getBattery !== 'function') return 'unknown';
    const b = await nav.getBattery();
    if (!b || typeof b.level !== 'number' || !Number.isFinite(b.level)) return 'unknown';
    return { level: b.level, charging: !!b.charging };
  } catch {
    return 'unknown';
  }
}

/** {save_data, effective_type} from navigator.connection, or 'unknown'. */
export function readConnection(nav = globalThis.navigator) {
  try {
    const c = nav && nav.connection;
    if (!c || typeof c !== 'object') return 'unknown';
    const et = typeof c.effectiveType === 'string' ? c.effectiveType : 'unknown';
    return { save_data: c.saveData === true, effective_type: et };
  } catch {
    return 'unknown';
  }
}

/** The three signals together, for the router: {battery, pressure, connection}. */
export class DeviceSignals {
  constructor(global = globalThis) {
    this.global = global;
    this.pressure = new PressureWatch(global);
  }

  async read() {
    this.pressure.start();
    const battery = await readBattery(this.global.navigator);
    return { battery, pressure: this.pressure.state, connection: readConnection(this.global.navigator) };
  }
}
