// What the router knows about the server, cached so that a decision costs at most one short
// request: health (GET /health, short timeout, cached `ttlMs` when up and `downTtlMs` when down)
// and the model card (GET /v1/models: id and the GGUF's sha256, cached `modelTtlMs`).
// Concurrent callers share one request in flight. A failure seen while serving a request
// (`markDown`) counts as a failed health check.

export class RemoteState {
  /**
   * @param {import('./remote.js').RemoteClient} client
   * @param {{healthTtlMs?: number, healthDownTtlMs?: number, healthTimeoutMs?: number, modelTtlMs?: number}} [opts]
   */
  constructor(client, opts = {}) {
    this.client = client;
    this.ttlMs = opts.healthTtlMs ?? 5_000;
    this.downTtlMs = opts.healthDownTtlMs ?? 2_000;
    this.timeoutMs = opts.healthTimeoutMs ?? 1_500;
    this.modelTtlMs = opts.modelTtlMs ?? 60_000;
    this.health = null; // {ok, status, rtt_ms, reason, at}
    this.model = null; // {id, sha256, ..., at} or {error, at}
    this.#inflight = { health: null, model: null };
  }

  #inflight;

  #fresh(entry, ttl) {
    return entry && performance.now() - entry.at < ttl;
  }

  /** Cached health; checks the server when the cache is stale. */
  async checkHealth() {
    const h = this.health;
    if (h && this.#fresh(h, h.ok ? this.ttlMs : this.downTtlMs)) return h;
    if (!this.#inflight.health) {
      this.#inflight.health = this.client
        .health(this.timeoutMs)
        .then((r) => (this.health = { ...r, at: performance.now() }))
        .finally(() => (this.#inflight.health = null));
    }
    return this.#inflight.health;
  }

  /** Cached model card; null-safe: failures are cached briefly and reported, not thrown. */
  async modelInfo() {
    const m = this.model;
    if (m && this.#fresh(m, m.error ? this.downTtlMs : this.modelTtlMs)) return m;
    if (!this.#inflight.model) {
      this.#inflight.model = this.client
        .modelInfo(this.timeoutMs)
        .then(
          (r) => ({ ...r, at: performance.now() }),
          (e) => ({ error: { code: e.code, message: e.message, status: e.status }, at: performance.now() }),
        )
        .then((r) => (this.model = r))
        .finally(() => (this.#inflight.model = null));
    }
    return this.#inflight.model;
  }

  /** A request found the server unreachable: treat it as down until the next check is due. */
  markDown(reason = 'remote_unavailable') {
    this.health = { ok: false, status: null, rtt_ms: null, reason, at: performance.now() };
  }
}
