// Compiled (not run) by types.test.js with `tsc --strict`: the hand-written index.d.ts must
// accept the documented usage and reject misuse (each @ts-expect-error must be an error).
import {
  createEngine,
  defaultMemoryBudget,
  EdgeLLMError,
  ErrorCode,
  type ComputeUsage,
  type PressureEvent,
  type ChatCompletion,
  type ChatCompletionChunk,
  type Completion,
  type CompletionChunk,
  type CompletionStream,
  type Engine,
  type ErrorCodeName,
  type LoadProgress,
  type MemoryEstimate,
  type MemorySnapshot,
  type ModelInfo,
  type RouteInfo,
  type RouteOptions,
  type SimdTier,
  type ChatCompletionTool,
  type ChatCompletionMessageToolCall,
  type ChatCompletionToolCallDelta,
  type FinishReason,
  createOpenAIFetch,
} from 'edgellm';

export async function usage(file: File): Promise<string> {
  const engine: Engine = await createEngine({ cache: true, onLog: (level, msg) => console.log(level, msg) });
  const ac = new AbortController();
  const info: ModelInfo = await engine.load('https://example.org/m.gguf', {
    signal: ac.signal,
    onProgress: (p: LoadProgress) => console.log(p.phase, p.loaded, p.total, p.fraction),
  });
  await engine.load(file);
  await engine.load(new URL('https://example.org/m.gguf'), { sha256: info.sha256, cache: false });

  const r: ChatCompletion = await engine.chat.completions.create({
    messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: [{ type: 'text', text: 'Hi' }] }],
    max_tokens: 16,
    temperature: 0,
    top_p: 0.9,
    top_k: 40,
    min_p: 0.05,
    repetition_penalty: 1.1,
    presence_penalty: 0,
    frequency_penalty: 0,
    seed: 1,
    stop: ['\n\n'],
    signal: ac.signal,
  });
  let text: string = r.choices[0].message.content ?? '';
  const ttft: number = r.usage.ttft_ms + r.usage.tpot_ms + r.usage.prefill_tokens_per_s + r.usage.decode_tokens_per_s;
  const reused: number = r.usage.prompt_tokens_details?.cached_tokens ?? 0;
  console.log(reused);
  // A bounded KV cache (engine-wide or per load), and its figures in ModelInfo and usage.
  const bounded: Engine = await createEngine({ kv: { tokens: 1024, dtype: 'q8', policy: 'window-sinks', sinks: 4 } });
  const kvInfo: ModelInfo = await bounded.load(file, { kv: { bytes: 8 << 20, policy: 'error' } });
  const perToken: number[] = (kvInfo.kv?.by_kind ?? []).map((k) => k.bytes_per_token);
  const kvUsed: number = (r.usage.kv?.bytes ?? 0) / (r.usage.kv?.budget_bytes ?? 1) + (r.usage.kv?.evicted ?? 0) + perToken.length;

  const stream: CompletionStream<ChatCompletionChunk> = await engine.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], stream: true });
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta.content ?? '';
    if (chunk.usage) console.log(chunk.usage.decode_tokens_per_s);
  }
  stream.abort();

  const c: Completion = await engine.completions.create({ prompt: 'The capital of France is', max_tokens: 4 });
  const cs: CompletionStream<CompletionChunk> = await engine.completions.create({ prompt: 'x', stream: true }, { signal: ac.signal });
  for await (const chunk of cs) text += chunk.choices[0]?.text ?? '';
  text += c.choices[0].text;

  try {
    await engine.unload();
  } catch (e) {
    if (e instanceof EdgeLLMError) {
      const code: ErrorCodeName = e.code;
      if (code === ErrorCode.ABORTED || e.code === 'NETWORK') console.log(e.status, e.detail);
    }
  }
  const st = await engine.status();
  console.log(st.busy, st.model?.name, engine.model?.quantization, engine.info?.simd, ttft);
  const tier: SimdTier | null | undefined = engine.info?.simd_tier;
  const fallback = await createEngine({ simd: 'simd128' });
  // @ts-expect-error: simd is 'auto' | 'relaxed' | 'simd128'
  await createEngine({ simd: 'relaxed-simd' });
  console.log(tier, fallback.info?.simd_tier === 'simd128');
  const entries = await engine.cache.list();
  console.log(entries[0]?.sha256);
  // Saved conversations.
  const saved: { key: string; tokens: number; bytes: number } = await engine.session.save('chat-1');
  const restored = await engine.session.restore(saved.key);
  const sessions = await engine.session.list();
  const gone: boolean = (await engine.session.delete('chat-1')).deleted;
  console.log(restored.tokens, sessions[0]?.model_sha256, sessions[0]?.saved_at, gone);
  engine.terminate();

  // Routing between this engine and an OpenAI-compatible server.
  const route: RouteOptions = {
    mode: 'prefer-local',
    remote: { baseURL: 'http://127.0.0.1:8080/v1', apiKey: 'k', timeoutMs: 10_000 },
    local: { maxContextTokens: 2048 },
    isSensitive: (input) => JSON.stringify(input).includes('password'),
    capability: ({ target, params }) => params.quality !== 'high' || target === 'remote',
    pinOnVersionMismatch: true,
  };
  const routed = await createEngine({ route });
  const rr = await routed.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], private: true, route: { mode: 'local-only' } });
  const ri: RouteInfo | undefined = rr.route;
  console.log(ri?.target, ri?.reason, ri?.estimates.t_local_ms, ri?.fallback_from, ri?.version.match, rr.error?.code);
  if (rr.choices[0].finish_reason === 'error') console.log('broken after the first token');
  routed.setRoute({ ...route, mode: 'prefer-remote' });
  console.log(routed.router?.lastRoute?.ruled_out.remote, (await routed.countTokens({ prompt: 'x' })).prompt_tokens);
  // @ts-expect-error: not a mode
  routed.setRoute({ mode: 'sometimes' });

  // @ts-expect-error: messages are required for chat
  await engine.chat.completions.create({ prompt: 'x' });
  // @ts-expect-error: a streamed request does not return a ChatCompletion
  const wrong: ChatCompletion = await engine.chat.completions.create({ messages: [], stream: true });
  // @ts-expect-error: not an error code
  const bad: ErrorCodeName = 'NOPE';
  // @ts-expect-error: load needs a source
  await engine.load();
  console.log(wrong, bad);
  // The memory ledger: budget, estimate before load, snapshots and pressure events.
  const lean: Engine = await createEngine({ memory: { budget_bytes: defaultMemoryBudget({ deviceMemory: 4 }), elevated: 0.8, critical: 0.95 } });
  const est: MemoryEstimate = await lean.estimate('https://example.org/m.gguf', { kv: { tokens: 4096, dtype: 'q8' }, batch: 64 });
  const need: number = est.terms.weights + est.terms.kv + est.terms.activations + est.terms.runtime + est.load_peak + (est.fits ? 0 : 1);
  const off = lean.on('memory', (m: MemorySnapshot) => console.log(m.level, m.wasm_memory_bytes, m.terms.kv.measured ?? 0, m.total.estimated));
  off();
  const snap: MemorySnapshot | null = lean.memory();
  await lean.setMemoryOptions({ budget_bytes: need });
  try {
    await lean.load(file);
  } catch (e) {
    if (e instanceof EdgeLLMError && e.code === ErrorCode.OVER_MEMORY_BUDGET) console.log(e.terms?.weights, e.budget_bytes, snap?.level);
  }
  // @ts-expect-error: only 'memory' and 'pressure' events exist
  lean.on('tokens', () => {});
  // Energy, heat and cost: the power model, usage.compute, the 'pressure' event, cost terms.
  const frugal: Engine = await createEngine({ energy: { watts_per_busy_core: 2.5 }, sustained: { window_ms: 5000, throttle_fraction: 0.7 }, route: { mode: 'prefer-local', remote: { baseURL: 'http://127.0.0.1:8080/v1' }, cost: { battery: { below: 0.3 }, pressure: ['critical'], slowConnection: false, signals: () => ({ pressure: 'fair' }) } } });
  const done = await frugal.chat.completions.create({ messages: [{ role: 'user', content: 'hi' }] });
  const work: ComputeUsage | undefined = done.usage.compute;
  const joules: number = (work?.energy_j.prefill ?? 0) + (work?.energy_j.decode ?? 0) + (work?.cpu_ms.total ?? 0);
  const hot: boolean | null = work?.sustained?.throttled ?? null;
  const unsub = frugal.on('pressure', (ev: PressureEvent) => console.log(ev.reason, ev.state, ev.sustained?.ratio));
  unsub();
  const now: string = frugal.pressure().state;
  const why: string | undefined = done.route?.cost?.terms.local[0];
  console.log(joules, hot, now, why);
  // @ts-expect-error: watts must be a number
  await createEngine({ energy: { watts_per_busy_core: 'lots' } });
  // Tool calls: tools, tool_choice, the calls in the history and their results.
  const tools: ChatCompletionTool[] = [{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  const called = await engine.chat.completions.create({ messages: [{ role: 'user', content: 'Weather?' }], tools, tool_choice: 'required' });
  const calls: ChatCompletionMessageToolCall[] = called.choices[0].message.tool_calls ?? [];
  const args: string = calls[0].function.arguments;
  const reason: FinishReason = called.choices[0].finish_reason;
  await engine.chat.completions.create({
    messages: [{ role: 'user', content: 'Weather?' }, { role: 'assistant', content: null, tool_calls: calls }, { role: 'tool', tool_call_id: calls[0].id, content: '21 C' }],
    tools,
    tool_choice: { type: 'function', function: { name: 'get_weather' } },
    parallel_tool_calls: false,
  });
  const piece: ChatCompletionToolCallDelta | undefined = (await stream[Symbol.asyncIterator]().next()).value?.choices[0]?.delta.tool_calls?.[0];
  const localFetch: typeof fetch = createOpenAIFetch(engine);
  console.log(args, reason, piece?.function.arguments, localFetch);

  return text;
}
