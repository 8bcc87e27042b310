// The routing decision, a pure function of what the router gathered:
//
//   route(x) = argmin_r C_r(x)  subject to  privacy, feasibility, Q_r(x) >= Q_min, T_r(x) <= T_max
//
// Every constraint that fails rules a route out, with a reason code:
//
//   mode_local_only / mode_remote_only   the mode forbids it
//   private                              the request is private (or the app's isSensitive said so)
//   no_local_model                       nothing loaded locally (and nothing to reload)
//   over_memory_budget                   the local model does not fit the memory budget
//   prompt_over_kv_budget                the prompt does not fit the local KV/context budget
//   remote_not_configured                no route.remote.baseURL
//   remote_unavailable                   health check failed / timed out, or a recent request failed
//   remote_unauthorized                  the server refused the API key
//   capability                           the app's capability rule (quality) refused this route
//   latency                              estimated time over max_latency_ms
//   version_pinned                       the conversation ran on the other route and the model
//                                        versions differ (route.pinOnVersionMismatch)
//
// Cost: by default the mode's preference (prefer-local: local 0, remote 1; prefer-remote: the
// reverse); an app `cost(target, ctx)` function replaces it. Ties go to the lower latency.
// With the `route.cost` options object, the device's cost terms (cost.js: battery, compute
// pressure, throttling, saveData, a slow network) add TERM_WEIGHT each to the route they make
// costlier; when they change the choice, the reason is `cost_<term>` (e.g. cost_battery_low).

import { EdgeLLMError, ErrorCode } from '../errors.js';
import { TERM_WEIGHT } from './cost.js';

export const MODES = ['local-only', 'prefer-local', 'prefer-remote', 'remote-only'];
export const TARGETS = ['local', 'remote'];

export const other = (t) => (t === 'local' ? 'remote' : 'local');

/**
 * @param {{
 *   mode: string, private: boolean, maxLatencyMs?: number|null,
 *   local: {reason: string|null}, remote: {reason: string|null},
 *   estimates: {t_local_ms: number|null, t_remote_ms: number|null},
 *   pinned?: 'local'|'remote'|null,
 *   cost?: (target: string) => number,
 *   costTerms?: {local: string[], remote: string[]} | null,
 * }} x
 * @returns {{target: string|null, reason: string, ruled_out: Record<string,string>}}
 */
export function decide(x) {
  const ruled = {};
  const rule = (t, why) => {
    if (!ruled[t]) ruled[t] = why;
  };
  if (x.mode === 'local-only') rule('remote', 'mode_local_only');
  if (x.mode === 'remote-only') rule('local', 'mode_remote_only');
  if (x.private) rule('remote', 'private');
  for (const t of TARGETS) if (x[t].reason) rule(t, x[t].reason);
  if (x.maxLatencyMs !== undefined && x.maxLatencyMs !== null) {
    for (const t of TARGETS) {
      const est = x.estimates[`t_${t}_ms`];
      if (est !== null && est !== undefined && est > x.maxLatencyMs) rule(t, 'latency');
    }
  }
  if (x.pinned) rule(other(x.pinned), 'version_pinned');

  const open = TARGETS.filter((t) => !ruled[t]);
  if (open.length === 0) return { target: null, reason: 'no_route', ruled_out: ruled };
  if (open.length === 1) {
    const t = open[0];
    const o = other(t);
    // Why this one: the mode, privacy, or why the other was ruled out.
    const reason = ruled[o] === 'mode_local_only' ? 'local-only' : ruled[o] === 'mode_remote_only' ? 'remote-only' : ruled[o];
    return { target: t, reason, ruled_out: ruled };
  }
  const preferRemote = x.mode === 'prefer-remote';
  const cost = x.cost || ((t) => (t === 'remote' ? (preferRemote ? 0 : 1) : preferRemote ? 1 : 0));
  const base = { local: Number(cost('local')), remote: Number(cost('remote')) };
  const pick = (c) => {
    if (c.local !== c.remote) return c.local < c.remote ? 'local' : 'remote';
    const tl = x.estimates.t_local_ms ?? Infinity;
    const tr = x.estimates.t_remote_ms ?? Infinity;
    return tr < tl ? 'remote' : 'local';
  };
  const terms = x.costTerms || { local: [], remote: [] };
  const c = { local: base.local + TERM_WEIGHT * terms.local.length, remote: base.remote + TERM_WEIGHT * terms.remote.length };
  const without = pick(base);
  const target = pick(c);
  // The cost term that tipped it: the first one against the route the mode alone would take.
  const reason = target !== without ? `cost_${terms[without][0]}` : x.cost ? 'lower_cost' : preferRemote ? 'prefer-remote' : 'prefer-local';
  return { target, reason, ruled_out: ruled, ...(x.costTerms ? { costs: c } : {}) };
}

const LOCAL_CODE = {
  prompt_over_kv_budget: ErrorCode.PROMPT_OVER_KV_BUDGET,
  over_memory_budget: ErrorCode.OVER_MEMORY_BUDGET,
  no_local_model: ErrorCode.MODEL_NOT_LOADED,
};
const REMOTE_CODE = {
  remote_unavailable: ErrorCode.REMOTE_UNAVAILABLE,
  remote_unauthorized: ErrorCode.REMOTE_UNAUTHORIZED,
  remote_not_configured: ErrorCode.REMOTE_UNAVAILABLE,
};
const POLICY = new Set(['mode_local_only', 'mode_remote_only', 'private']);

/** The typed error when no route is left (nothing has been sent anywhere). */
export function noRouteError(decision, route) {
  const r = decision.ruled_out;
  const why = Object.entries(r)
    .map(([t, w]) => `${t}: ${w}`)
    .join(', ');
  let err;
  const localCode = LOCAL_CODE[r.local];
  if (r.remote === 'private') {
    // Private, and the local route cannot take it: refuse, sending nothing.
    err = new EdgeLLMError(ErrorCode.PRIVATE_REMOTE_FORBIDDEN, `the request is private, so it may not be sent to the server, and it cannot run locally (${r.local})`, {
      detail: localCode || String(r.local || '').toUpperCase(),
    });
  } else if (POLICY.has(r.remote) && localCode) {
    err = new EdgeLLMError(localCode, `cannot run locally: ${r.local} (${why})`, { detail: String(r.local).toUpperCase() });
  } else if (POLICY.has(r.local) && REMOTE_CODE[r.remote]) {
    err = new EdgeLLMError(REMOTE_CODE[r.remote], `cannot use the server: ${r.remote} (${why})`, { detail: String(r.remote).toUpperCase() });
  } else if (r.remote === 'remote_not_configured' && localCode) {
    // No server at all: the local route's own refusal is the answer (what an engine without a
    // router gives), now that the local fit is known before the request runs (count_tokens).
    err = new EdgeLLMError(localCode, `cannot run locally: ${r.local} (no server configured)`, { detail: String(r.local).toUpperCase() });
  } else if (REMOTE_CODE[r.remote] && !POLICY.has(r.local)) {
    // Both allowed: the local route did not fit and the server, the way out, is not there.
    err = new EdgeLLMError(REMOTE_CODE[r.remote], `no route: ${why}`, { detail: String(r.remote).toUpperCase() });
  } else {
    err = new EdgeLLMError(ErrorCode.NO_ROUTE, `no route satisfies the constraints (${why})`, { detail: 'NO_ROUTE' });
  }
  err.route = route;
  return err;
}
