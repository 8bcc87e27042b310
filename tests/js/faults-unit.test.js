// The worker's test-fault plan (pkg/src/test-faults.js): what it accepts, when it fires, and
// that it fires once.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { FaultPlan, stallThread } from '../../pkg/src/test-faults.js';

test('a fault fires at the after-th point of its kind, once, and not at other points', () => {
  const plan = new FaultPlan();
  assert.equal(plan.due('decode'), null, 'unarmed');
  assert.deepEqual(plan.arm({ at: 'decode', after: 3, fault: 'panic' }), { at: 'decode', after: 3, fault: 'panic', ms: 0 });
  assert.equal(plan.due('prefill'), null);
  assert.equal(plan.due('load'), null);
  assert.equal(plan.due('decode'), null);
  assert.equal(plan.due('decode'), null);
  assert.deepEqual(plan.due('decode'), { at: 'decode', after: 3, fault: 'panic', ms: 0 });
  assert.equal(plan.due('decode'), null, 'disarmed after firing');
  // Re-arming restarts the count.
  plan.arm({ at: 'load', fault: 'stall', ms: 5 });
  assert.deepEqual(plan.due('load'), { at: 'load', after: 1, fault: 'stall', ms: 5 });
  // A pool worker's trap (threaded build; the worker refuses it on one thread, threads.test.js).
  plan.arm({ at: 'decode', fault: 'pool-panic' });
  assert.deepEqual(plan.due('decode'), { at: 'decode', after: 1, fault: 'pool-panic', ms: 0 });
});

test('bad specs are INVALID_REQUEST and leave the plan unarmed', () => {
  const plan = new FaultPlan();
  for (const spec of [null, 'panic', { at: 'sample', fault: 'panic' }, { at: 'decode', fault: 'oom' }, { at: 'decode', fault: 'panic', after: 0 }, { at: 'decode', fault: 'panic', after: 1.5 }, { at: 'decode', fault: 'stall', ms: -1 }, { at: 'decode', fault: 'stall', ms: 1e9 }]) {
    assert.throws(() => plan.arm(spec), (e) => e.code === 'INVALID_REQUEST', JSON.stringify(spec));
  }
  assert.equal(plan.due('decode'), null);
});

test('a stall blocks the thread for about its duration', () => {
  const t0 = Date.now();
  stallThread(30);
  assert.ok(Date.now() - t0 >= 30);
});
