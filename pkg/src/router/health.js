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

  /**
   * `this[key]` while it is fresh (younger than `ttlOf(it)`), else the one request in flight that
   * refreshes it (`fetch` resolves with the new entry, `at` stamped).
   */
  #cached(key, ttlOf, fetch) {
    const entry = this[key];
    if (entry && performance.now() - entry.at < ttlOf(entry)) return entry;
    if (!this.#inflight[key]) {
      this.#inflight[key] = fetch()
        .then((r) => (this[key] = r))
        .finally(() => (this.#inflight[key] = null));
    }
    return this.#inflight[key];
  }

  /** Cached health; checks the server when the cache is stale. */
  async checkHealth() {
    return this.#cached(
      'health',
      (h) => (h.ok ? this.ttlMs : this.downTtlMs),
      () => this.client.health(this.timeoutMs).then((r) => ({ ...r, at: performance.now() })),
    );
  }

  /** Cached model card; null-safe: failures are cached briefly and reported, not thrown. */
  async modelInfo() {
    return this.#cached(
      'model',
      (m) => (m.error ? this.downTtlMs : this.modelTtlMs),
      () =>
        this.client.modelInfo(this.timeoutMs).then(
          (r) => ({ ...r, at: performance.now() }),
          (e) => ({ error: { code: e.code, message: e.message, status: e.status }, at: performance.now() }),
        ),
    );
  }

  /** A request found the server unreachable: treat it as down until the next check is due. */
  markDown(reason = 'remote_unavailable') {
    this.health = { ok: false, status: null, rtt_ms: null, reason, at: performance.now() };
  }
}
