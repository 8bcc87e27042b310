//! Templates that grow or nest values one instruction at a time, and what each must end in
//! (`""`: it renders). Each asked for terabytes or nested 100,000 levels before
//! `template_program` charged operators, captures and built values; run natively on a 1 MiB
//! thread (`chat_template`'s tests) and in wasm (`cargo test --target wasm32-unknown-unknown
//! --lib`), where a stack overflow or a failed allocation is a trap.

use super::{ChatMessage, ChatTemplate};

pub const CASES: &[(&str, &str)] = &[
    // Recursion and control flow: minijinja's own limits, on the wasm stack too.
    ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "CHAT_TEMPLATE_ERROR"),
    ("{% macro f(s) %}{{ f(s ~ s) }}{% endmacro %}{{ f('x') }}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{% for x in [1] recursive %}{{ loop([x]) }}{% endfor %}", "CHAT_TEMPLATE_ERROR"),
    ("{% macro f() %}{{ caller() }}{% endmacro %}{% call f() %}{{ f() }}{% endcall %}", "CHAT_TEMPLATE_ERROR"),
    ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{% include 'chat' %}", "CHAT_TEMPLATE_ERROR"),
    ("{% extends 'chat' %}", "CHAT_TEMPLATE_ERROR"),
    // Constants minijinja would fold while compiling.
    ("{{ 'x' * 100000000 }}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{{ ('x' * 100000000) ~ ('x' * 100000000) ~ ('x' * 100000000) ~ ('x' * 100000000) }}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{{ messages ~ ('x' * (10000 * 10000)) }}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{{ 'x' * 1000000 }}{{ 'x' * 1000000 }}{{ 'x' * 1000000 }}{{ 'x' * 1000000 }}{{ 'x' * 1000000 }}{{ 'x' * 1000000 }}{{ 'x' * 1000000 }}{{ 'x' * 1000000 }}{{ 'x' * 1000000 }}{{ 'x' * 1000000 }}{{ 'x' * 1000000 }}{{ 'x' * 1000000 }}{{ 'x' * 1000000 }}{{ 'x' * 1000000 }}{{ 'x' * 1000000 }}{{ 'x' * 1000000 }}{{ 'x' * 1000000 }}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{{ [1] * 100000000 ~ '' }}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{{ 'ab' * 1000 ~ 'c' }}", ""),
    ("{{ range(100000) | list | tojson | length }}", ""),
    ("{% for i in range(20) %}{{ range(100000) | list | tojson }}{% endfor %}", "CHAT_TEMPLATE_OUTPUT_TOO_LARGE"),
    ("{% for i in range(100000) %}{{ messages }}{% endfor %}", "CHAT_TEMPLATE_OUTPUT_TOO_LARGE"),
    // Filters and methods whose integer or format-string arguments size what they build.
    ("{{ 'a\nb\nc' | indent(10000000000) }}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{{ 'a\nb\nc' | indent(width=10000000000) }}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{{ [1, 2] | batch(1000000000000) | list }}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{{ [1, 2] | slice(1000000000000) | list }}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{{ '%1000000000d' | format(1) }}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{{ '{:>1000000000}'.format(1) }}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{% set big = '<' * 1000000 %}{% for i in range(20) %}{% set x = big | e %}{% endfor %}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{{ 'aaa'.count('') }}{{ messages[0].content.count('') }}{% for m in messages %}{{ m.content.count('') }}{% endfor %}", ""),
    ("{{ 'a\nb' | indent(2) }}|{{ [1, 2, 3] | batch(2) | list | length }}|{{ '%05d' | format(42) }}|{{ '{:>4}'.format(7) }}|{{ '<' | e }}", ""),
    ("{% macro m() %}x{% endmacro %}{% set ns = namespace(f=none, i=0, r=none) %}{% for x in [1, 2] %}{% set ns.i = loop.index %}{% set ns.f = m %}{% set ns.r = range(3) %}{% endfor %}{{ ns.f() }}{{ ns.i }}{{ ns.r | sum }}", ""),
    ("{{ 1700000000 | string }}|{{ 1700000000 | tojson }}|{{ '%d' | format(1700000000) }}|{{ messages | selectattr('role', 'equalto', 1700000000) | list | length }}|{{ [1700000000, 1] | sum }}", ""),
    // Values grown or nested one instruction at a time.
    ("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s | length }}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{% set ns = namespace(s='xy') %}{% for i in range(64) %}{% set ns.s = ns.s * 2 %}{% endfor %}{{ ns.s | length }}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{% set ns = namespace(s='xy') %}{% for i in range(64) %}{% set ns.s = 2 * ns.s %}{% endfor %}{{ ns.s | length }}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{% set ns = namespace(s=[1]) %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}{{ ns.l | length }}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set c %}{{ ns.s }}{{ ns.s }}{% endset %}{% set ns.s = c %}{% endfor %}", "CHAT_TEMPLATE_OUTPUT_TOO_LARGE"),
    ("{% macro d(s) %}{{ s }}{{ s }}{% endmacro %}{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = d(ns.s) %}{% endfor %}", "CHAT_TEMPLATE_OUTPUT_TOO_LARGE"),
    ("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s %}{% filter upper %}{{ ns.s }}{{ ns.s }}{% endfilter %}{% endset %}{% endfor %}", "CHAT_TEMPLATE_OUTPUT_TOO_LARGE"),
    ("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = [ns.s, ns.s] | join %}{% endfor %}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}", "CHAT_TEMPLATE_ERROR"),
    ("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = (ns.x, 1) %}{% endfor %}", "CHAT_TEMPLATE_ERROR"),
    ("{% set ns = namespace(x={}) %}{% for i in range(100000) %}{% set ns.x = {'a': ns.x} %}{% endfor %}", "CHAT_TEMPLATE_ERROR"),
    ("{% set ns = namespace(x=none) %}{% for i in range(100000) %}{% set ns.x = namespace(y=ns.x) %}{% endfor %}", "CHAT_TEMPLATE_ERROR"),
    ("{% set ns = namespace(x=none) %}{% for i in range(100000) %}{% set ns.x = dict(y=ns.x) %}{% endfor %}", "CHAT_TEMPLATE_ERROR"),
    ("{% set ns = namespace(h=none) %}{% for i in range(100000) %}{% set n = namespace() %}{% set n.next = ns.h %}{% set ns.h = n %}{% endfor %}", "CHAT_TEMPLATE_ERROR"),
    ("{% set ns = namespace(x=[1]) %}{% for i in range(100000) %}{% set ns.x = ns.x | batch(1) | list %}{% endfor %}", "CHAT_TEMPLATE_ERROR"),
    ("{% set ns = namespace(x=[1]) %}{% for i in range(100000) %}{% set ns.x = {'k': ns.x} | items %}{% endfor %}", "CHAT_TEMPLATE_ERROR"),
    ("{% set ns = namespace(x=[1]) %}{% for i in range(100000) %}{% set ns.x = ns.x | zip(ns.x) %}{% endfor %}", "CHAT_TEMPLATE_TOO_COSTLY"),
    ("{% set ns = namespace(x=[1, 2]) %}{% for i in range(100000) %}{% set ns.x = ns.x[:] %}{% endfor %}{{ ns.x | join }}", ""),
    ("{% set ns = namespace(x=[1, 2]) %}{% for i in range(100000) %}{% set ns.x = ns.x[::-1] %}{% endfor %}{{ ns.x | join }}", ""),
    ("{% set ns = namespace(x=[1, 2]) %}{% for i in range(100000) %}{% set ns.x = ns.x | list %}{% endfor %}{{ ns.x | join }}", ""),
    ("{% set ns = namespace(x=[1, 2]) %}{% for i in range(100000) %}{% set ns.x = ns.x | reverse %}{% endfor %}{{ ns.x | join }}", ""),
    ("{% set ns = namespace(x=[1, 2]) %}{% for i in range(100000) %}{% set ns.x = ns.x * 1 %}{% endfor %}{{ ns.x | join }}", ""),
    ("{% set ns = namespace(x=[1, 2]) %}{% for i in range(100000) %}{% set ns.x = ns.x + [] %}{% endfor %}{{ ns.x | length }}", ""),
    ("{% set ns = namespace(x=[1, 2]) %}{% for i in range(100000) %}{% set ns.x = ns.x | select | list %}{% endfor %}{{ ns.x | join }}", ""),
    ("{% set ns = namespace(x=[1, 2]) %}{% for i in range(100000) %}{% set ns.x = ns.x | map('abs') %}{% endfor %}{{ ns.x | join }}", ""),
    ("{% set ns = namespace(l=none) %}{% for i in range(100000) %}{% for x in [ns.l] %}{% set ns.l = loop %}{% endfor %}{% endfor %}", "CHAT_TEMPLATE_ERROR"),
    ("{% set ns = namespace(l=none) %}{% for i in range(100000) %}{% for x in dict(a=ns.l).values() %}{% set ns.l = [1, loop] %}{% endfor %}{% endfor %}", "CHAT_TEMPLATE_ERROR"),
];

/// How long one case may take (they stop within milliseconds; the limit is for slow machines).
const MAX_SECONDS: f64 = 5.0;

#[cfg(not(target_arch = "wasm32"))]
fn seconds() -> f64 {
    use std::sync::OnceLock;
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed().as_secs_f64()
}

#[cfg(target_arch = "wasm32")]
fn seconds() -> f64 {
    js_sys::Date::now() / 1000.0
}

/// The cases that did not end as they must, or took too long, described.
pub fn wrong_outcomes() -> Vec<String> {
    let m = vec![ChatMessage::new("user", "hi")];
    let mut wrong = Vec::new();
    for (src, want) in CASES {
        let t = ChatTemplate::Jinja { source: (*src).into(), bos_token: String::new(), eos_token: String::new(), strip_bos: false, strip_eos: false };
        let t0 = seconds();
        let code = t.apply(&m, true).err().map(|e| e.code().to_string()).unwrap_or_default();
        let took = seconds() - t0;
        if code != *want || took > MAX_SECONDS {
            wrong.push(format!("{src}: {code:?} in {took:.3} s, want {want:?}"));
        }
    }
    wrong
}

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen_test::wasm_bindgen_test]
fn hostile_templates_end_in_typed_errors_in_wasm() {
    let wrong = wrong_outcomes();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
