// Latency estimates from measured rates.
//
//   T_local  = T_load (when the model is not loaded) + n_prompt / prefill_rate + n_out × TPOT
//   T_remote = RTT + n_prompt / prefill_rate_server + n_out × TPOT_server
//
// Each rate is an exponential moving average of what finished requests reported (their
// `usage`), starting from a prior until the first measurement. Local rates are this device's;
// remote rates come from the server's usage (or, when a server does not report timings, from
// the client's own clock), RTT from health checks.

const DEFAULT_PRIORS = {
  local: { prefill_tokens_per_s: 50, tpot_ms: 100, load_ms: 5_000 },
  remote: { rtt_ms: 50, prefill_tokens_per_s: 500, tpot_ms: 25 },
};

class Ewma {
  constructor(prior, alpha = 0.3) {
    this.value = prior;
    this.n = 0;
    this.alpha = alpha;
  }

  update(v) {
    if (!Number.isFinite(v) || v <= 0) return;
    this.value = this.n === 0 ? v : this.alpha * v + (1 - this.alpha) * this.value;
    this.n++;
  }
}

export class Estimates {
  constructor(priors = {}) {
    const l = { ...DEFAULT_PRIORS.local, ...(priors.local || {}) };
    const r = { ...DEFAULT_PRIORS.remote, ...(priors.remote || {}) };
    this.local = { prefill: new Ewma(l.prefill_tokens_per_s), tpot: new Ewma(l.tpot_ms), load: new Ewma(l.load_ms) };
    this.remote = { rtt: new Ewma(r.rtt_ms), prefill: new Ewma(r.prefill_tokens_per_s), tpot: new Ewma(r.tpot_ms) };
  }

  /** After a local request: its usage (prefill_tokens_per_s, tpot_ms). */
  observeLocal(usage) {
    if (!usage) return;
    this.local.prefill.update(usage.prefill_tokens_per_s);
    this.local.tpot.update(usage.tpot_ms);
  }

  observeLoad(ms) {
    this.local.load.update(ms);
  }

  observeRtt(ms) {
    this.remote.rtt.update(ms);
  }

  /** After a remote request: the server's usage, else the client-side timings. */
  observeRemote(usage, client = {}) {
    const u = usage || {};
    const prefill = u.prefill_tokens_per_s ?? (client.prompt_tokens && client.ttft_ms ? (client.prompt_tokens * 1000) / client.ttft_ms : undefined);
    this.remote.prefill.update(prefill);
    this.remote.tpot.update(u.tpot_ms ?? client.tpot_ms);
  }

  /** @param {{promptTokens: number, maxTokens: number, loaded: boolean, loadMs?: number}} x */
  tLocal({ promptTokens, maxTokens, loaded, loadMs }) {
    const load = loaded ? 0 : (loadMs ?? this.local.load.value);
    return load + (promptTokens * 1000) / this.local.prefill.value + maxTokens * this.local.tpot.value;
  }

  /** @param {{promptTokens: number, maxTokens: number}} x */
  tRemote({ promptTokens, maxTokens }) {
    return this.remote.rtt.value + (promptTokens * 1000) / this.remote.prefill.value + maxTokens * this.remote.tpot.value;
  }

  /** The current rates (for the app to display or persist). */
  snapshot() {
    return {
      local: { prefill_tokens_per_s: this.local.prefill.value, tpot_ms: this.local.tpot.value, load_ms: this.local.load.value, samples: this.local.tpot.n },
      remote: { rtt_ms: this.remote.rtt.value, prefill_tokens_per_s: this.remote.prefill.value, tpot_ms: this.remote.tpot.value, samples: this.remote.tpot.n },
    };
  }
}
