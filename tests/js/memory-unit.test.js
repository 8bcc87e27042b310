// The memory ledger's JS helpers: the default budget formula and the `memory` option.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { defaultMemoryBudget, memoryOptions, slices, DEFAULT_THRESHOLDS } from '../../pkg/src/memory.js';
import { EdgeLLMError, errorFromPayload } from '../../pkg/src/errors.js';

const GiB = 1024 ** 3;

test('default budget: a quarter of the device memory, under 90 % of the 4 GiB wasm32 ceiling', () => {
  assert.equal(defaultMemoryBudget({ deviceMemory: 2 }), 0.5 * GiB);
  assert.equal(defaultMemoryBudget({ deviceMemory: 4 }), 1 * GiB);
  assert.equal(defaultMemoryBudget({ deviceMemory: 8 }), 2 * GiB);
  assert.equal(defaultMemoryBudget({ deviceMemory: 64 }), Math.floor(4 * GiB * 0.9));
  // Not exposed (Firefox, Safari, Node): a 4 GB device is assumed.
  assert.equal(defaultMemoryBudget({ deviceMemory: null }), 1 * GiB);
});

test('memory option: budget (or the older memoryBudget), thresholds, validation', () => {
  assert.deepEqual(memoryOptions({ budget_bytes: 123.9 }), { budget_bytes: 123, ...DEFAULT_THRESHOLDS });
  assert.equal(memoryOptions(undefined, 5000).budget_bytes, 5000);
  assert.equal(memoryOptions({ budget_bytes: 7 }, 5000).budget_bytes, 7);
  assert.deepEqual(memoryOptions({ budget_bytes: 10, elevated: 0.5, critical: 0.6 }), { budget_bytes: 10, elevated: 0.5, critical: 0.6 });
  for (const bad of [{ budget_bytes: 0 }, { budget_bytes: -1 }, { budget_bytes: 'x' }, { elevated: 0.9, critical: 0.8 }, { elevated: 0 }, { budgetBytes: 1 }]) {
    assert.throws(() => memoryOptions(bad), (e) => e instanceof EdgeLLMError && e.code === 'INVALID_REQUEST', JSON.stringify(bad));
  }
});

test('header pieces for the skimmer are at most 64 KiB', () => {
  const parts = [...slices(new Uint8Array(150_000))].map((p) => p.byteLength);
  assert.deepEqual(parts, [65536, 65536, 18928]);
});

test('OVER_MEMORY_BUDGET errors carry the figures across the worker boundary', () => {
  const terms = { weights: 1, kv: 2, activations: 3, runtime: 4 };
  const e = new EdgeLLMError('OVER_MEMORY_BUDGET', 'too big', { detail: 'OVER_MEMORY_BUDGET', terms, budget_bytes: 5, estimate: { peak: 10 } });
  const back = errorFromPayload(JSON.parse(JSON.stringify(e.toJSON())));
  assert.deepEqual([back.code, back.terms, back.budget_bytes, back.estimate], ['OVER_MEMORY_BUDGET', terms, 5, { peak: 10 }]);
});
