// A request that runs on this device: checked by the core, the model reloaded if the worker
// crashed since, then generated in the worker. Non-streamed, it resolves with the core's OpenAI
// response; streamed, it resolves once the worker accepted the request (tokenized the prompt),
// like an HTTP response whose headers arrived, and the chunks follow on the stream. The one part
// of `usage` only the main thread knows, the compute pressure seen meanwhile
// (device-signals.js), is added here.

import { Req, Ev } from '../protocol.js';
import { abortedError } from '../errors.js';
import { requestSignal } from '../strict.js';
import { CompletionStream } from './stream.js';
import { nextId, notStarted } from './worker-link.js';

function randomId(prefix) {
  const bytes = new Uint8Array(12);
  globalThis.crypto.getRandomValues(bytes);
  return prefix + Array.from(bytes, (b) => b.toString(36).padStart(2, '0')).join('').slice(0, 24);
}

/** The compute pressure seen during a local request, into the core's usage. */
function withPressure(usage, pressure) {
  if (usage && usage.compute) usage.compute.pressure = pressure ?? { state: 'unknown', last: 'unknown' };
  return usage;
}

/**
 * @param {{link: import('./worker-link.js').WorkerLink, check: Function, ensureModel: (signal?: AbortSignal) => Promise<void>,
 *          modelName: () => string|null, sustained: object, device: object,
 *          onSustained: (sustained: object) => void, onLong: (sustained: object) => void}} local
 */
export async function createLocal(local, kind, params, options = {}) {
  // The call order (engine.js #enter), taken now: a load() or unload() called after this
  // create() reaches the worker after its generation.
  const turn = local.enter();
  // A request rejected by a stuck-abort restart before the engine saw it (another request's
  // abort) runs again on the new worker, once: it reloads the model like any request after a crash.
  try {
    return await createOnce(local, kind, params, options, await turn);
  } catch (e) {
    if (!notStarted.has(e)) throw e;
    return createOnce(local, kind, params, options, () => {});
  } finally {
    (await turn)();
  }
}

/** `release`: lets the calls made after this one go on, once the generation is posted. */
async function createOnce(local, kind, params, options, release) {
  const { request, stream: streamed, include_usage: includeUsage } = await local.check(kind, params);
  const signal = requestSignal(params, options);
  if (signal && signal.aborted) throw abortedError('generation');
  // The reload after a crash is the request's work: the caller's abort stops it too.
  await local.ensureModel(signal);
  if (signal && signal.aborted) throw abortedError('generation');

  // The response's envelope; the objects themselves are built by the core in the worker
  // (src/protocol/response.rs, as edgellm serve builds them).
  const envelope = {
    kind,
    id: randomId(kind === 'chat' ? 'chatcmpl-' : 'cmpl-'),
    created: Math.floor(Date.now() / 1000),
    model: local.modelName() || 'edgellm',
    prompt_chars: kind === 'completion' ? [...(request.prompt || '')].length : 0,
  };
  const msg = { type: Req.GENERATE, request, sustained: local.sustained, openai: { envelope, stream: streamed, include_usage: includeUsage } };
  // The compute pressure seen while this request runs (the worst state), for usage.compute.
  const seen = local.device.pressure.track();
  const finish = (r) => {
    const pressure = seen.end();
    if (r.sustained && r.sustained.long) local.onLong(r.sustained);
    return pressure;
  };
  const onSustained = (ev) => {
    if (ev.type === Ev.SUSTAINED) local.onSustained(ev.sustained);
  };
  const link = local.link;

  if (!streamed) {
    let r;
    try {
      const answer = link.request(msg, onSustained, signal);
      release();
      r = await answer;
    } catch (e) {
      seen.end();
      throw e;
    }
    const response = r.openai.response;
    withPressure(response.usage, finish(r));
    return response;
  }

  await link.start();
  const worker = link.worker;
  let opId = null;
  const stream = new CompletionStream(() => {
    if (opId !== null) link.abortOp(opId, abortedError('generation'));
  }, signal);
  return new Promise((resolve, reject) => {
    let started = false;
    const onEvent = (ev) => {
      if (ev.type === Ev.STARTED) {
        started = true;
        resolve(stream);
      } else if (ev.type === Ev.TOKEN) {
        for (const c of ev.chunks || []) stream._push(c);
      } else onSustained(ev);
    };
    opId = nextId();
    const p = link.send(worker, msg, onEvent, 0, signal, opId);
    release();
    p.then(
      (r) => {
        // With include_usage, one more chunk with choices: [] and usage (as OpenAI).
        const pressure = finish(r);
        for (const c of r.openai.chunks) {
          if (c.usage) withPressure(c.usage, pressure);
          stream._push(c);
        }
        stream._end();
      },
      (e) => {
        seen.end();
        stream._end(e);
        if (!started) reject(e);
      },
    );
  });
}
