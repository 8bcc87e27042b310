//! The work a chat template's filters and string methods may do in one rendering.
//!
//! Fuel counts template instructions, but one instruction can walk a whole sequence or string
//! natively: `([0] * 4000000000) | sum` is a few instructions and minutes of work, and
//! `('x' * 100000000) | replace('x', 'xxxxxxxxxx')` one instruction and a gigabyte. So every
//! builtin filter that walks or builds data, and every Python-style string method, is called
//! through a wrapper that first charges what it will walk or build (the lengths of its
//! arguments, and for `replace` the longest result it can give) against a budget per rendering,
//! then charges its result; past the budget the rendering stops with a typed error before the
//! work is done. The originals are registered under names a template cannot write (`:` is not
//! part of an identifier), so a template cannot call around the wrappers.
//!
//! Operators (`~`, `+`, `*`), written bytes and the values a template keeps in a namespace are
//! charged by `template_program`, which rewrites the compiled template to call the same budget.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use minijinja::value::{Rest, Value, ValueKind};
use minijinja::filters as builtin;
use minijinja::{Environment, Error, ErrorKind, State};

use super::template_filters as ours;

/// Units (elements or bytes walked or built) one rendering may spend in filters and methods:
/// a base far above a real template's few passes over its conversation, plus a multiple of the
/// input's bytes, plus an allowance per message (a template that filters the whole conversation
/// once per message walks n² items). ~50 ns a unit in minijinja's `sum`: the base is under a
/// second of work.
pub const TEMPLATE_WORK_BASE: u64 = 16 << 20;
pub const TEMPLATE_WORK_PER_INPUT_BYTE: u64 = 16;
pub const TEMPLATE_WORK_PER_MESSAGE: u64 = 20_000;

/// The message a rendering stops with when its budget is spent (the caller maps it to
/// `ChatTemplateTooCostly`).
pub const OUT_OF_WORK: &str = "chat template: its filters, methods and operators walked or built more data than the budget allows";

/// The message a rendering stops with when it has written more bytes than its output limit
/// (counted wherever they go: the prompt, or a `{% set %}` / `{% filter %}` block's capture).
pub const OUT_OF_OUTPUT: &str = "chat template: it wrote more bytes than the output limit allows";

/// One rendering's budget of units (work, or written bytes), shared by the wrappers.
#[derive(Clone)]
pub struct WorkBudget {
    left: Arc<AtomicU64>,
    message: &'static str,
}

impl WorkBudget {
    /// A budget of work units (filters, methods, operators, values built).
    pub fn new(units: u64) -> WorkBudget {
        WorkBudget::with_message(units, OUT_OF_WORK)
    }

    /// A budget that fails with `message` once spent.
    pub fn with_message(units: u64, message: &'static str) -> WorkBudget {
        WorkBudget { left: Arc::new(AtomicU64::new(units)), message }
    }

    /// Takes `units`, or fails once the budget cannot cover them (the budget is then spent).
    pub fn charge(&self, units: u64) -> Result<(), Error> {
        let left = self.left.load(Ordering::Relaxed);
        if units > left {
            self.left.store(0, Ordering::Relaxed);
            return Err(Error::new(ErrorKind::InvalidOperation, self.message));
        }
        self.left.store(left - units, Ordering::Relaxed);
        Ok(())
    }

    /// The units left.
    pub fn left(&self) -> u64 {
        self.left.load(Ordering::Relaxed)
    }

    pub fn spent(&self) -> bool {
        self.left() == 0
    }
}

/// What walking `v` costs: a string's bytes, a container's items (at least 1).
fn size(v: &Value) -> u64 {
    match v.kind() {
        ValueKind::String | ValueKind::Bytes => v.as_str().map_or(1, |s| s.len() as u64).max(1),
        ValueKind::Seq | ValueKind::Map | ValueKind::Iterable => v.len().map_or(1, |n| n as u64).max(1),
        _ => 1,
    }
}

/// What a sizing argument can make a filter build: for an integer its value (`indent(width)`
/// repeats `width` spaces per line, `batch(n)` and `slice(n)` reserve `n` items up front: one
/// large integer asked for terabytes before any result existed), else its size.
fn arg_size(v: &Value) -> u64 {
    match v.kind() {
        ValueKind::Number => v.as_i64().map_or(1, |n| n.unsigned_abs()).max(1),
        // Keyword arguments (`indent(width=...)`): each one as an argument.
        ValueKind::Map if v.is_kwargs() => v.try_iter().map_or(1, |keys| keys.map(|k| v.get_item(&k).map_or(1, |x| arg_size(&x))).fold(1u64, u64::saturating_add)),
        _ => size(v),
    }
}

/// The widths a format string can ask for (`%1000000000d`, `{:>1000000000}`): every run of digits
/// in it, summed.
fn format_widths(spec: &Value) -> u64 {
    let mut total = 0u64;
    let mut run = 0u64;
    for c in spec.as_str().unwrap_or_default().chars().chain(std::iter::once(' ')) {
        match c.to_digit(10) {
            Some(d) => run = run.saturating_mul(10).saturating_add(d as u64),
            None => {
                total = total.saturating_add(run);
                run = 0;
            }
        }
    }
    total
}

/// What a call of filter or method `name` on `args` (the value first) may walk or build,
/// charged before it runs: the sizes of its arguments; for the filters whose integer
/// parameters size what they build, those integers' values; for `format`, the widths its
/// format string asks for.
fn cost_before(name: &str, args: &[Value]) -> u64 {
    let sizes = |a: &[Value], f: fn(&Value) -> u64| a.iter().map(f).fold(0u64, u64::saturating_add);
    match (name, args.split_first()) {
        ("replace", _) => replace_bound(args),
        ("indent" | "batch" | "slice", Some((value, params))) => size(value).saturating_add(sizes(params, arg_size)),
        ("format", Some((spec, _))) => sizes(args, size).saturating_add(format_widths(spec)),
        _ => sizes(args, size),
    }
}

/// The longest result `replace(old, new)` on `s` can give: every `old` becomes `new`.
fn replace_bound(args: &[Value]) -> u64 {
    let len = |i: usize| args.get(i).and_then(Value::as_str).map_or(0, |s| s.len() as u64);
    let (s, old, new) = (len(0), len(1), len(2));
    if new <= old {
        s
    } else {
        // At most s / old occurrences (s + 1 insertions when `old` is empty).
        let n = if old == 0 { s + 1 } else { s / old };
        s.saturating_add(n.saturating_mul(new - old))
    }
}

/// The filters that walk or build data: minijinja's builtins, and ours where the prompt must
/// be llama.cpp's (`template_filters`); the others (tests of a value, `default`, `length`,
/// `first`, number conversions) take constant time.
macro_rules! walking_filters {
    ($m:ident) => {
        $m!(
            builtin: sum, join, list, sort, reverse, unique, min, max, last, batch, slice, map, select, reject, selectattr, rejectattr, groupby, items, dictsort, pprint, replace, indent, upper, lower, title, capitalize, split, lines, format, escape, chain, zip
        );
        $m!(ours: tojson, trim, string);
    };
}

/// Wraps the walking filters of `env` and its unknown-method callback (`methods`: the Python
/// string and list methods) with `budget`.
pub fn install(env: &mut Environment<'_>, budget: &WorkBudget, methods: fn(&State, &Value, &str, &[Value]) -> Result<Value, Error>) {
    macro_rules! wrap {
        ($module:ident: $($name:ident),*) => {$(
            env.add_filter(concat!("budget:", stringify!($name)), $module::$name);
            let b = budget.clone();
            env.add_filter(stringify!($name), move |state: &State, args: Rest<Value>| -> Result<Value, Error> {
                b.charge(cost_before(stringify!($name), &args))?;
                let out = state.apply_filter(concat!("budget:", stringify!($name)), &args)?;
                b.charge(size(&out))?;
                Ok(out)
            });
        )*};
    }
    walking_filters!(wrap);
    // `e` is minijinja's alias of `escape` (which can make a string 5 times longer): the same
    // wrapped filter under its other name.
    env.add_filter("e", |state: &State, args: Rest<Value>| state.apply_filter("escape", &args));
    let b = budget.clone();
    env.set_unknown_method_callback(move |state: &State, value: &Value, method: &str, args: &[Value]| {
        let mut all = vec![value.clone()];
        all.extend_from_slice(args);
        b.charge(cost_before(method, &all))?;
        let out = methods(state, value, method, args)?;
        b.charge(size(&out))?;
        Ok(out)
    });
}
