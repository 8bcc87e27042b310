// The native CLI's output for the greedy cross-check (JS engine vs native engine, same GGUF).
import { execFileSync } from 'node:child_process';
import { MODEL, cliPath } from './helpers.js';

export const GREEDY_PROMPT = 'The capital of France is';
export const GREEDY_TOKENS = 8;

/** Runs `edgellm generate … --temperature 0 --json`; returns its parsed JSON. */
export function nativeGenerate(prompt = GREEDY_PROMPT, maxTokens = GREEDY_TOKENS, extra = [], model = MODEL) {
  const cli = cliPath();
  if (!cli) throw new Error('native CLI not built');
  // Greedy unless `extra` sets a temperature.
  const greedy = extra.includes('--temperature') ? [] : ['--temperature', '0'];
  const out = execFileSync(cli, ['generate', '--model', model, '--prompt', prompt, '--max-tokens', String(maxTokens), ...greedy, '--json', ...extra], {
    encoding: 'utf8',
    maxBuffer: 16 << 20,
    timeout: 300_000,
  });
  return JSON.parse(out.trim().split('\n').filter(Boolean).pop());
}

let memo = null;
/** The CLI's greedy output for GREEDY_PROMPT / GREEDY_TOKENS (computed once per process). */
export function nativeGreedy() {
  if (!memo) memo = nativeGenerate();
  return memo;
}
