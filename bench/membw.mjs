// The memory-bandwidth probe of the benchmark: how fast one wasm thread streams memory in this
// browser, measured in the same run as the engines (issue 24's yardstick: decode traffic against
// the probe's four-stream GB/s). The module is assembled here, byte by byte, so the bench needs
// no wasm toolchain:
//
//   sum1(p, n)  one stream over [p, p+n), 64 bytes per iteration into four v128 accumulators;
//   sum4(p, n)  four streams at once, the four quarters of [p, p+n), 32 bytes each per iteration
//               (how a four-row decode kernel walks its rows).
//
// Both return the i64 sum of the bytes read as 64-bit lanes, so nothing can be optimized away.
// `n` is a multiple of 128. GB/s = 1e9 bytes per second.

const leb = (v) => {
  // Signed LEB128 (i32.const) for small values, unsigned for the rest: every value here is
  // non-negative and below 2^31.
  const out = [];
  for (;;) {
    const b = v & 0x7f;
    v >>>= 7;
    if (v === 0 && !(b & 0x40)) return [...out, b];
    out.push(b | 0x80);
  }
};
const uleb = (v) => {
  const out = [];
  do {
    let b = v & 0x7f;
    v >>>= 7;
    if (v) b |= 0x80;
    out.push(b);
  } while (v);
  return out;
};
const vec = (items) => [...uleb(items.length), ...items.flat()];
const section = (id, body) => [id, ...uleb(body.length), ...body];
const str = (s) => vec([...Buffer.from(s, 'utf8')].map((b) => [b]));

const I32 = 0x7f;
const I64 = 0x7e;
const V128 = 0x7b;
const get = (i) => [0x20, i];
const set = (i) => [0x21, i];
const i32c = (v) => [0x41, ...leb(v)];
const ADD = 0x6a;
const SHR_U = 0x76;
const GE_U = 0x4f;
const load = (offset) => [0xfd, 0x00, 4, ...uleb(offset)];
const X2ADD = [0xfd, 0xce, 0x01];
const lane = (k) => [0xfd, 0x1d, k];
const I64ADD = 0x7c;

// acc(a..d) -> the i64 sum of their lanes.
const reduce = (a, b, c, d) => [...get(a), ...get(b), ...X2ADD, ...get(c), ...get(d), ...X2ADD, ...X2ADD, ...set(a), ...get(a), ...lane(0), ...get(a), ...lane(1), I64ADD];

// Parameters: p = 0, n = 1.
function sum1() {
  const [i, a, b, c, d] = [2, 3, 4, 5, 6];
  const step = (acc, off) => [...get(acc), ...get(0), ...get(i), ADD, ...load(off), ...X2ADD, ...set(acc)];
  return [
    ...i32c(0), ...set(i),
    0x02, 0x40, 0x03, 0x40,
    ...get(i), ...get(1), GE_U, 0x0d, 1,
    ...step(a, 0), ...step(b, 16), ...step(c, 32), ...step(d, 48),
    ...get(i), ...i32c(64), ADD, ...set(i),
    0x0c, 0,
    0x0b, 0x0b,
    ...reduce(a, b, c, d),
    0x0b,
  ];
}

function sum4() {
  const [q, p1, p2, p3, end, a, b, c, d] = [2, 3, 4, 5, 6, 7, 8, 9, 10];
  const ptrs = [0, p1, p2, p3];
  // Stream k from ptrs[k], 32 bytes an iteration (two loads summed into its accumulator).
  const step = (acc, k) => [...get(acc), ...get(ptrs[k]), ...load(0), ...get(ptrs[k]), ...load(16), ...X2ADD, ...X2ADD, ...set(acc)];
  const bump = (k) => [...get(ptrs[k]), ...i32c(32), ADD, ...set(ptrs[k])];
  return [
    ...get(1), ...i32c(2), SHR_U, ...set(q),
    ...get(0), ...get(q), ADD, ...set(p1),
    ...get(p1), ...get(q), ADD, ...set(p2),
    ...get(p2), ...get(q), ADD, ...set(p3),
    ...get(p1), ...set(end),
    0x02, 0x40, 0x03, 0x40,
    ...get(0), ...get(end), GE_U, 0x0d, 1,
    ...step(a, 0), ...step(b, 1), ...step(c, 2), ...step(d, 3),
    ...bump(0), ...bump(1), ...bump(2), ...bump(3),
    0x0c, 0,
    0x0b, 0x0b,
    ...reduce(a, b, c, d),
    0x0b,
  ];
}

const func = (locals, body) => {
  const code = [...vec(locals.map(([n, t]) => [...uleb(n), t])), ...body];
  return [...uleb(code.length), ...code];
};

/** The probe module's bytes. */
export function membwModule() {
  const bytes = [
    0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
    ...section(1, vec([[0x60, ...vec([[I32], [I32]]), ...vec([[I64]])]])),
    ...section(3, vec([[0], [0]])),
    // One memory, 1 page to start, grown by the caller (at most 1 GiB).
    ...section(5, vec([[0x01, ...uleb(1), ...uleb(16384)]])),
    ...section(7, vec([[...str('memory'), 0x02, 0], [...str('sum1'), 0x00, 0], [...str('sum4'), 0x00, 1]])),
    ...section(10, vec([func([[1, I32], [4, V128]], sum1()), func([[5, I32], [4, V128]], sum4())])),
  ];
  return new Uint8Array(bytes);
}

/**
 * The probe as the source of a classic Worker: on a message {bytes, mb, passes} it streams an
 * `mb`-MB region (filled first, so every page is real memory) `passes` times with each loop in
 * turn and posts {sum1, sum4} (median GB/s of the passes) or {error}.
 */
export const MEMBW_WORKER = `
onmessage = async (e) => {
  try {
    const { bytes, mb, passes } = e.data;
    const { instance } = await WebAssembly.instantiate(bytes, {});
    const x = instance.exports;
    const n = Math.floor((mb * 1e6) / 128) * 128;
    x.memory.grow(Math.ceil((n + 65536) / 65536));
    const p = 65536;
    new Uint32Array(x.memory.buffer, p, n / 4).fill(0x01020304);
    // V8 runs a call in the tier it started in, and each timed call is one long loop: call both
    // loops on a small region first, until they are optimized, or the first passes measure
    // baseline code.
    for (let i = 0; i < 400; i++) for (const k of ['sum1', 'sum4']) x[k](p, 1 << 16);
    await new Promise((r) => setTimeout(r, 200));
    const t = { sum1: [], sum4: [] };
    for (let i = 0; i < passes; i++) {
      for (const k of ['sum1', 'sum4']) {
        const t0 = performance.now();
        x[k](p, n);
        t[k].push(n / ((performance.now() - t0) * 1e6));
      }
    }
    const med = (v) => v.sort((a, b) => a - b)[(v.length - 1) >> 1];
    postMessage({ sum1: med(t.sum1), sum4: med(t.sum4) });
  } catch (err) {
    postMessage({ error: String(err) });
  }
};`;
