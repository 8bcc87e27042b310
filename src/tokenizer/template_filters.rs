//! The chat-template filters and string methods whose output goes into the prompt, written as
//! llama.cpp's Jinja engine gives them (the reference for the prompt's tokens), where
//! minijinja's builtins differ:
//!
//! - `tojson`: keys in their order (a tool's parameters as the caller wrote them, not sorted),
//!   `", "` and `": "` between items (Python's `json.dumps`, which is what the templates were
//!   written against), non-ASCII and `<>&'` written as they are. minijinja writes compact,
//!   HTML-escaped JSON.
//! - `trim`, `.strip()`, `.lstrip()`, `.rstrip()` without characters: C `isspace` only (space,
//!   `\t`, `\n`, `\v`, `\f`, `\r`); minijinja also trims Unicode spaces (a message starting with
//!   a no-break space lost it).
//! - printing a float, and the `string` filter on one: Python's `repr` (`1e-07`, not `0.0000001`).
//! - the `iterable` test: false for undefined and none.
//!
//! Map order itself comes from minijinja's `preserve_order` feature (`Cargo.toml`).

use std::fmt::Write as _;
use minijinja::value::{Kwargs, Value, ValueKind};
use minijinja::{Error, ErrorKind, State};

/// The characters llama.cpp's `trim` removes (C `isspace`).
pub fn is_c_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r')
}

/// `s` without leading and trailing C `isspace` characters.
pub fn c_trim(s: &str) -> &str {
    s.trim_matches(is_c_space)
}

/// `trim(chars=None)`, on any value as Python's Jinja takes it (`str(value).strip()`): an
/// undefined value is `""` (a tool parameter without a description), none `"None"`, booleans
/// `"True"`/`"False"`.
pub fn trim(value: &Value, chars: Option<&str>) -> String {
    let text = match value.kind() {
        ValueKind::Undefined => String::new(),
        ValueKind::None => "None".to_string(),
        ValueKind::Bool => if value.is_true() { "True" } else { "False" }.to_string(),
        _ => value.as_str().map_or_else(|| value.to_string(), str::to_string),
    };
    match chars {
        Some(chars) => text.trim_matches(|c| chars.contains(c)).to_string(),
        None => c_trim(&text).to_string(),
    }
}

/// Deepest nesting a value may have where it is printed, written with `tojson` (both walk it
/// recursively, as dropping it does) or kept in a namespace (`template_program`): a loop of
/// `{% set ns.x = [ns.x] %}` nests one level per iteration, and 100,000 levels overflowed a
/// 32 MiB stack in `tojson` (an abort, not an error).
pub const MAX_VALUE_DEPTH: usize = 256;

/// Most nodes walked by [`check_depth`] (more could not be printed within the output limit).
const MAX_VALUE_NODES: usize = 1 << 20;

/// Walks `value`'s sequences and maps (namespaces; lazy sequences too when `lazy`) without
/// recursion, refusing it past [`MAX_VALUE_DEPTH`] levels: `container` sees each of them, `item`
/// is called once per item walked. An object that does not list what it holds (a macro) is a
/// leaf. The one walk behind [`check_depth`] and the namespace stores' check
/// (`template_program`).
pub fn walk_nested(value: &Value, lazy: bool, mut container: impl FnMut(&Value) -> Result<(), Error>, mut item: impl FnMut() -> Result<(), Error>) -> Result<(), Error> {
    let is_container = |x: &Value| matches!(x.kind(), ValueKind::Seq | ValueKind::Map) || (lazy && x.kind() == ValueKind::Iterable);
    if !is_container(value) {
        return Ok(());
    }
    let mut stack = vec![(value.clone(), 1usize)];
    while let Some((x, depth)) = stack.pop() {
        if depth > MAX_VALUE_DEPTH {
            return Err(Error::new(ErrorKind::InvalidOperation, format!("chat template: a value nested deeper than {MAX_VALUE_DEPTH} levels")));
        }
        container(&x)?;
        let is_map = x.kind() == ValueKind::Map;
        let Ok(items) = x.try_iter() else { continue };
        for it in items {
            item()?;
            let child = if is_map { x.get_item(&it).unwrap_or_default() } else { it };
            if is_container(&child) {
                stack.push((child, depth + 1));
            }
        }
    }
    Ok(())
}

/// Refuses a value nested deeper than [`MAX_VALUE_DEPTH`] or holding more than
/// [`MAX_VALUE_NODES`] items (where it is printed or written with `tojson`).
pub fn check_depth(value: &Value) -> Result<(), Error> {
    let mut nodes = 0usize;
    // Lazy sequences are printed item by item, under the output limit.
    walk_nested(value, false, |_| Ok(()), || {
        nodes += 1;
        if nodes > MAX_VALUE_NODES {
            return Err(Error::new(ErrorKind::InvalidOperation, format!("chat template: a value with more than {MAX_VALUE_NODES} items")));
        }
        Ok(())
    })
}

/// A float as Python's `str`/`repr` writes it (`nan`, `inf` for the non-finite ones).
fn float_text(x: f64) -> String {
    match x {
        x if x.is_nan() => "nan".to_string(),
        x if x.is_infinite() => if x > 0.0 { "inf" } else { "-inf" }.to_string(),
        x => python_float(x),
    }
}

/// A non-integer number as an f64.
fn as_float(value: &Value) -> Option<f64> {
    (value.kind() == ValueKind::Number && !value.is_integer()).then(|| f64::try_from(value.clone()).ok()).flatten()
}

/// Longest text `string` makes of a list or dict: the items of a list can all be one long
/// string (`[s] * 1000`), so its text can be far larger than the work its items were charged.
const MAX_STRING_REPR_BYTES: usize = 16 << 20;

/// `string`: floats as Python's `str` (`1e-07`; Qwen3-Coder's template writes a schema's
/// `multipleOf` through it), lists and dicts as Python's (`[1, 'a', None]`, [`python_repr`]),
/// anything else as minijinja's.
pub fn string(state: &State, value: &Value) -> Result<Value, Error> {
    if is_container(value) {
        check_depth(value)?;
        let text = python_repr(value, MAX_STRING_REPR_BYTES);
        if text.len() > MAX_STRING_REPR_BYTES {
            return Err(Error::new(ErrorKind::InvalidOperation, format!("string: a value printed in more than {MAX_STRING_REPR_BYTES} bytes")));
        }
        return Ok(Value::from(text));
    }
    match as_float(value) {
        Some(x) => Ok(Value::from(float_text(x))),
        None => minijinja::filters::string(state, value),
    }
}

/// Bytes [`print`] writes for `value`, counted up to just past `cap` without writing them.
pub fn printed_len(value: &Value, cap: u64) -> u64 {
    if is_container(value) {
        return python_repr(value, usize::try_from(cap).unwrap_or(usize::MAX)).len() as u64;
    }
    match as_float(value) {
        Some(x) => float_text(x).len() as u64,
        None => super::template_program::shown_len(value, cap),
    }
}

/// The output formatter's writing, once [`check_depth`] passed (the chat template's formatter
/// charges [`printed_len`] in between): a float as Python's `repr` (`{{ 1e-07 }}` is `1e-07`,
/// as llama.cpp and Python print it; minijinja writes `0.0000001`), a list or dict as Python's
/// (what Hugging Face's renderer prints, [`python_repr`]), anything else as minijinja prints it.
pub fn print(out: &mut minijinja::Output<'_>, state: &State, value: &Value) -> Result<(), Error> {
    if is_container(value) {
        return out.write_str(&python_repr(value, usize::MAX)).map_err(Error::from);
    }
    if let Some(x) = as_float(value) {
        return out.write_str(&float_text(x)).map_err(Error::from);
    }
    minijinja::escape_formatter(out, state, value)
}

/// A list or a dict (a namespace too; a lazy sequence or a macro prints as minijinja's).
fn is_container(value: &Value) -> bool {
    matches!(value.kind(), ValueKind::Seq | ValueKind::Map)
}

/// `value` as Python's `repr` writes it, for a list or dict as Hugging Face's renderer prints
/// one (`{{ [1, 'a', None, True, 2.0] }}`, `{'k': [1]}`), building no more than just past
/// `cap` bytes. (minijinja writes strings inside them with JSON's double quotes.) Items nest at
/// most [`MAX_VALUE_DEPTH`] deep: every caller ran [`check_depth`].
pub fn python_repr(value: &Value, cap: usize) -> String {
    let mut out = String::new();
    repr_into(value, &mut out, cap);
    out
}

fn repr_into(v: &Value, out: &mut String, cap: usize) {
    if out.len() > cap {
        return;
    }
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if v.is_true() { "True" } else { "False" }),
        ValueKind::String => repr_str(v.as_str().unwrap_or_default(), out),
        ValueKind::Number => match as_float(v) {
            Some(x) => out.push_str(&float_text(x)),
            None => out.push_str(&v.to_string()),
        },
        ValueKind::Seq | ValueKind::Map => {
            let is_map = v.kind() == ValueKind::Map;
            out.push(if is_map { '{' } else { '[' });
            for (i, it) in v.try_iter().into_iter().flatten().enumerate() {
                if out.len() > cap {
                    return;
                }
                if i > 0 {
                    out.push_str(", ");
                }
                repr_into(&it, out, cap);
                if is_map {
                    out.push_str(": ");
                    repr_into(&v.get_item(&it).unwrap_or_default(), out, cap);
                }
            }
            out.push(if is_map { '}' } else { ']' });
        }
        _ => out.push_str(&v.to_string()),
    }
}

/// A string as Python's `repr`: single quotes unless it holds one and no double quote;
/// backslash, the quote, `\n \r \t` escaped, other characters Python does not print as they
/// are (controls, non-ASCII spaces and format characters, private use) as `\xNN`, `\uNNNN` or
/// `\UNNNNNNNN`.
fn repr_str(s: &str, out: &mut String) {
    let q = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    out.push(q);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == q => {
                out.push('\\');
                out.push(c);
            }
            c if !python_printable(c) => {
                let n = c as u32;
                let _ = match n {
                    0..=0xff => write!(out, "\\x{n:02x}"),
                    0x100..=0xffff => write!(out, "\\u{n:04x}"),
                    _ => write!(out, "\\U{n:08x}"),
                };
            }
            c => out.push(c),
        }
    }
    out.push(q);
}

/// Python's `str.isprintable` for the characters it differs on in practice: controls (Cc),
/// spaces other than ' ' (Zs, Zl, Zp), format characters (Cf) and private use (Co). Unassigned
/// code points (Cn), which Python escapes too, print as they are here (no table of them).
fn python_printable(c: char) -> bool {
    !matches!(c as u32,
        0..=0x1f | 0x7f..=0xa0 | 0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x890..=0x891 | 0x8e2 | 0x1680 | 0x180e
        | 0x2000..=0x200f | 0x2028..=0x202f | 0x205f..=0x2064 | 0x2066..=0x206f | 0x3000 | 0xd800..=0xf8ff | 0xfeff
        | 0xfff9..=0xfffb | 0x110bd | 0x110cd | 0x13430..=0x1343f | 0x1bca0..=0x1bca3 | 0x1d173..=0x1d17a
        | 0xe0001 | 0xe0020..=0xe007f | 0xf0000..=0x10ffff)
}

/// The `iterable` test: undefined and none are not (in minijinja they are, and a template's
/// `tools is iterable and tools | length > 0` then fails without tools, as llama.cpp's does not).
pub fn is_iterable(value: &Value) -> bool {
    !value.is_undefined() && !value.is_none() && value.try_iter().is_ok()
}

/// The Python string and list methods: `strip`/`lstrip`/`rstrip` without arguments and a
/// string's `count` here, everything else by `minijinja_contrib::pycompat`.
pub fn methods(state: &State, value: &Value, method: &str, args: &[Value]) -> Result<Value, Error> {
    if let (Some(s), true) = (value.as_str(), args.is_empty() || args.iter().all(Value::is_none)) {
        match method {
            "strip" => return Ok(Value::from(c_trim(s))),
            "lstrip" => return Ok(Value::from(s.trim_start_matches(is_c_space))),
            "rstrip" => return Ok(Value::from(s.trim_end_matches(is_c_space))),
            _ => {}
        }
    }
    if let (Some(s), "count", [what]) = (value.as_str(), method, args) {
        if let Some(what) = what.as_str() {
            return Ok(Value::from(count_str(s, what)));
        }
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}

/// Python's `str.count(sub)`: non-overlapping occurrences, and for an empty `sub` one more than
/// the characters (every position between them). pycompat's own loop never advances past an
/// empty match: a template calling `.count('')` would hang its render, which no work budget
/// can stop from outside the call.
fn count_str(s: &str, what: &str) -> usize {
    if what.is_empty() {
        s.chars().count() + 1
    } else {
        s.matches(what).count()
    }
}

/// `tojson(indent=None, ensure_ascii=False, sort_keys=False, separators=None)`, as Python's
/// `json.dumps` with those arguments (the defaults of the Hugging Face and llama.cpp
/// renderers).
pub fn tojson(value: &Value, indent: Option<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let indent = match indent {
        Some(v) => Some(v),
        None => kwargs.get::<Option<Value>>("indent")?,
    };
    let indent = match indent {
        None => None,
        Some(v) if v.is_none() => None,
        Some(v) if v.kind() == ValueKind::String => Some(v.as_str().unwrap_or_default().to_string()),
        Some(v) => Some(" ".repeat(usize::try_from(v)?.min(MAX_SEPARATOR_BYTES))),
    };
    let ensure_ascii = kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(false);
    let sort_keys = kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false);
    let separators = kwargs.get::<Option<Vec<String>>>("separators")?;
    kwargs.assert_all_used()?;
    let (item, key) = match separators.as_deref() {
        Some([item, key]) => (item.clone(), key.clone()),
        Some(_) => return Err(Error::new(ErrorKind::InvalidOperation, "tojson: separators must be (item, key)")),
        // Python: "," at line ends when indenting.
        None if indent.is_some() => (",".to_string(), ": ".to_string()),
        None => (", ".to_string(), ": ".to_string()),
    };
    // Written once per item and level: a long one would multiply the output before the work
    // budget sees it.
    if [indent.as_deref().unwrap_or_default(), &item, &key].iter().any(|s| s.len() > MAX_SEPARATOR_BYTES) {
        return Err(Error::new(ErrorKind::InvalidOperation, format!("tojson: indent and separators are at most {MAX_SEPARATOR_BYTES} bytes")));
    }
    check_depth(value)?;
    let json = serde_json::to_value(value).map_err(|e| Error::new(ErrorKind::InvalidOperation, "cannot serialize to JSON").with_source(e))?;
    let style = Style { indent, item, key, sort_keys, ensure_ascii };
    let mut out = String::new();
    write_value(&mut out, &json, &style, 0);
    Ok(Value::from_safe_string(out))
}

/// Longest `indent` string or separator `tojson` takes.
const MAX_SEPARATOR_BYTES: usize = 64;

struct Style {
    indent: Option<String>,
    item: String,
    key: String,
    sort_keys: bool,
    ensure_ascii: bool,
}

impl Style {
    /// Before an item at `depth` (after the first: the item separator).
    fn item(&self, out: &mut String, first: bool, depth: usize) {
        if !first {
            out.push_str(&self.item);
        }
        self.newline(out, depth);
    }

    fn newline(&self, out: &mut String, depth: usize) {
        if let Some(unit) = &self.indent {
            out.push('\n');
            for _ in 0..depth {
                out.push_str(unit);
            }
        }
    }
}

fn write_value(out: &mut String, v: &serde_json::Value, st: &Style, depth: usize) {
    use serde_json::Value as J;
    match v {
        J::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                st.item(out, i == 0, depth + 1);
                write_value(out, x, st, depth + 1);
            }
            st.newline(out, depth);
            out.push(']');
        }
        J::Object(map) if !map.is_empty() => {
            let mut entries: Vec<(&String, &serde_json::Value)> = map.iter().collect();
            if st.sort_keys {
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            out.push('{');
            for (i, (k, x)) in entries.into_iter().enumerate() {
                st.item(out, i == 0, depth + 1);
                write_string(out, k, st.ensure_ascii);
                out.push_str(&st.key);
                write_value(out, x, st, depth + 1);
            }
            st.newline(out, depth);
            out.push('}');
        }
        J::Array(_) => out.push_str("[]"),
        J::Object(_) => out.push_str("{}"),
        J::String(s) => write_string(out, s, st.ensure_ascii),
        J::Number(n) => match n.as_f64().filter(|_| n.is_f64()) {
            Some(x) => out.push_str(&python_float(x)),
            None => out.push_str(&n.to_string()),
        },
        // null and booleans as JSON writes them.
        other => out.push_str(&other.to_string()),
    }
}

/// A float as Python's `repr` (and so `json.dumps`) writes it: the shortest digits that read
/// back to it, in positional notation with at least one decimal for exponents -4..16
/// (`0.0001`, `2.0`, `1e+16` past), else `d.ddde±XX` with at least two exponent digits
/// (`1e-07`, `1.5e-05`).
fn python_float(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    // Rust's `{:e}` gives the shortest round-trip digits: `-1.5e-5`, `1e16`, `0e0`.
    let sci = format!("{x:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..16).contains(&exp) {
        let fixed = format!("{x}");
        if fixed.contains('.') { fixed } else { format!("{fixed}.0") }
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    }
}

/// A JSON string as serde_json writes it (`"` and `\` escaped, `\b \f \n \r \t` short,
/// other controls `\u00XX`, the rest as it is, as Python's `json.dumps` does), with
/// `ensure_ascii` every non-ASCII character as `\uXXXX` (UTF-16 units).
fn write_string(out: &mut String, s: &str, ensure_ascii: bool) {
    let quoted = serde_json::Value::from(s).to_string();
    if !ensure_ascii {
        out.push_str(&quoted);
        return;
    }
    for c in quoted.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{:04x}", u));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The formatter without the output budget: the depth check, then [`print`].
    fn formatter(out: &mut minijinja::Output<'_>, state: &State, value: &Value) -> Result<(), Error> {
        check_depth(value)?;
        print(out, state, value)
    }

    fn render(src: &str, ctx: Value) -> String {
        let mut env = minijinja::Environment::new();
        env.add_filter("tojson", tojson);
        env.add_filter("trim", trim);
        env.set_unknown_method_callback(methods);
        env.render_str(src, ctx).unwrap()
    }

    fn ctx(json: &str) -> Value {
        Value::from_serialize(serde_json::from_str::<serde_json::Value>(json).unwrap())
    }

    // Expected strings: llama.cpp's renderer (node-llama-cpp 3.21.1, AddonJinjaRenderer) on the
    // same templates and values.
    #[test]
    fn tojson_keeps_key_order_with_python_separators() {
        let c = ctx(r#"{"x": {"b": 1, "a": [1, 2.5, true, null, "s\"\\/<>&'é\u0001\t\n\b\f"], "c": {}, "d": []}}"#);
        assert_eq!(render("{{ x|tojson }}", c), r#"{"b": 1, "a": [1, 2.5, true, null, "s\"\\/<>&'é\u0001\t\n\b\f"], "c": {}, "d": []}"#);
        let c = ctx(r#"{"x": {"b": 1, "a": [1, {"z": []}], "c": {}}}"#);
        assert_eq!(render("{{ x|tojson(indent=2) }}", c), "{\n  \"b\": 1,\n  \"a\": [\n    1,\n    {\n      \"z\": []\n    }\n  ],\n  \"c\": {}\n}");
        assert_eq!(render("{{ x|tojson(indent=4) }}", ctx(r#"{"x": [1, [2, 3]]}"#)), "[\n    1,\n    [\n        2,\n        3\n    ]\n]");
    }

    #[test]
    fn tojson_python_arguments() {
        let c = ctx(r#"{"x": {"b": "é😀", "a": 1}}"#);
        assert_eq!(render("{{ x|tojson(ensure_ascii=true, sort_keys=true) }}", c.clone()), r#"{"a": 1, "b": "\u00e9\ud83d\ude00"}"#);
        assert_eq!(render("{{ x|tojson(separators=[',', ':']) }}", c.clone()), r#"{"b":"é😀","a":1}"#);
        // An indent or separator long enough to multiply the output is refused.
        let mut env = minijinja::Environment::new();
        env.add_filter("tojson", tojson);
        for src in ["{{ x|tojson(indent='a' * 1000) }}", "{{ x|tojson(separators=['a' * 1000, ':']) }}"] {
            assert!(env.render_str(src, c.clone()).is_err(), "{src}");
        }
    }

    #[test]
    fn floats_as_python_writes_them() {
        let cases = [
            (1e-7, "1e-07"),
            (1.5e-5, "1.5e-05"),
            (0.0001, "0.0001"),
            (2.0, "2.0"),
            (-0.0, "-0.0"),
            (0.1, "0.1"),
            (123456.789, "123456.789"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.2345e20, "1.2345e+20"),
            (-2.5e-300, "-2.5e-300"),
            (f64::MAX, "1.7976931348623157e+308"),
        ];
        for (x, want) in cases {
            assert_eq!(python_float(x), want, "{x}");
        }
        assert_eq!(render("{{ x|tojson }}", ctx(r#"{"x": {"a": 1e-07, "b": 1.5e-05, "c": 3, "d": 2.0}}"#)), r#"{"a": 1e-07, "b": 1.5e-05, "c": 3, "d": 2.0}"#);
        // Printed: Python's repr too (the formatter).
        let mut env = minijinja::Environment::new();
        env.set_formatter(formatter);
        let c = ctx(r#"{"x": {"a": 1e-07, "b": 1.5e-05, "c": 3, "d": 2.0, "e": 1e16}}"#);
        env.add_filter("string", string);
        assert_eq!(env.render_str("{{ x.a }} {{ x.b }} {{ x.c }} {{ x.d }} {{ x.e }} {{ 0.5 }} {{ 'a' }} {{ x.a|string ~ '|' ~ x.c|string ~ '|' ~ [1]|string }}", c).unwrap(), "1e-07 1.5e-05 3 2.0 1e+16 0.5 a 1e-07|3|[1]");
    }

    // Expected strings: Python's `repr` (jinja2 3.1, as Hugging Face renders), checked there.
    #[test]
    fn lists_and_dicts_print_as_python_does() {
        let mut env = minijinja::Environment::new();
        env.set_formatter(formatter);
        env.add_filter("string", string);
        let c = ctx(r#"{"x": [1, "a", null, true, 2.0, {"k": "it's", "q": "say \"hi\" it's"}], "t": [{"type": "function", "function": {"name": "f", "parameters": {}}}]}"#);
        assert_eq!(env.render_str("{{ x }}", c.clone()).unwrap(), r#"[1, 'a', None, True, 2.0, {'k': "it's", 'q': 'say "hi" it\'s'}]"#);
        assert_eq!(env.render_str("{{ t }}|{{ t|string }}", c.clone()).unwrap(), "[{'type': 'function', 'function': {'name': 'f', 'parameters': {}}}]|[{'type': 'function', 'function': {'name': 'f', 'parameters': {}}}]");
        assert_eq!(env.render_str("{{ [] }} {{ {} }} {{ [[1], ['b']] }}", c).unwrap(), "[] {} [[1], ['b']]");
        let esc = ctx(r#"{"x": ["a\\b\n\t\u0001\u00a0é\u200b😀"]}"#);
        assert_eq!(env.render_str("{{ x }}", esc).unwrap(), r"['a\\b\n\t\x01\xa0é\u200b😀']");
        // A list whose text is far larger than its items: refused by `string`, not built.
        let big = ctx(&format!(r#"{{"x": [{}]}}"#, vec![format!("\"{}\"", "y".repeat(1 << 20)); 20].join(",")));
        assert_eq!(env.render_str("{{ x|length }}", big.clone()).unwrap(), "20");
        let e = env.render_str("{{ x|string|length }}", big).unwrap_err();
        assert!(e.to_string().contains("more than 16777216 bytes"), "{e}");
    }

    #[test]
    #[cfg(not(target_arch = "wasm32"))]
    fn deep_values_are_refused_where_printed_or_written() {
        use crate::tokenizer::{ChatMessage, ChatTemplate};
        // On a thread with the server's inference stack: dropping the 100,000-level value at the
        // end of the rendering recurses too (minijinja's values), which a test thread's 2 MiB
        // does not hold.
        let deep = "{% set ns = namespace(x=1) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}";
        for tail in ["{{ ns.x|tojson|length }}", "{{ ns.x }}", "{{ {'a': ns.x}|tojson }}"] {
            let t = ChatTemplate::Jinja { source: format!("{deep}{tail}"), bos_token: String::new(), eos_token: String::new(), strip_bos: false, strip_eos: false };
            let run = move || t.apply(&[ChatMessage::new("user", "hi")], false).map_err(|e| e.code());
            let got = std::thread::Builder::new().stack_size(crate::limits::INFERENCE_STACK_BYTES).spawn(run).unwrap().join().unwrap();
            assert_eq!(got, Err("CHAT_TEMPLATE_ERROR"), "{tail}");
        }
        // 256 levels still print.
        let ok = "{% set ns = namespace(x=1) %}{% for i in range(255) %}{% set ns.x = [ns.x] %}{% endfor %}{{ ns.x|tojson|length }}";
        let t = ChatTemplate::Jinja { source: ok.into(), bos_token: String::new(), eos_token: String::new(), strip_bos: false, strip_eos: false };
        assert_eq!(t.apply(&[ChatMessage::new("user", "hi")], false).unwrap(), (255 * 2 + 1).to_string());
    }

    #[test]
    fn trim_takes_any_value() {
        let c = ctx(r#"{"p": {"type": "string"}, "n": null, "b": true, "i": 5}"#);
        assert_eq!(render("[{{ p.description|trim }}][{{ n|trim }}][{{ b|trim }}][{{ i|trim }}]", c), "[][None][True][5]");
    }

    #[test]
    fn trim_and_strip_remove_c_spaces_only() {
        let c = ctx(r#"{"x": "\u000b\u00a0 a \t\r\n\u00a0\f", "y": "\u001ca\u001c"}"#);
        assert_eq!(render("[{{ x|trim }}]", c.clone()), "[\u{a0} a \t\r\n\u{a0}]");
        assert_eq!(render("[{{ x.strip() }}|{{ x.lstrip() }}|{{ x.rstrip() }}]", c.clone()), "[\u{a0} a \t\r\n\u{a0}|\u{a0} a \t\r\n\u{a0}\u{0c}|\u{0b}\u{a0} a \t\r\n\u{a0}]");
        assert_eq!(render("[{{ y|trim }}|{{ y.strip() }}]", c.clone()), "[\u{1c}a\u{1c}|\u{1c}a\u{1c}]");
        assert_eq!(render("[{{ 'abxba'.strip('ab') }}|{{ 'abxba'|trim('ab') }}]", c), "[x|x]");
    }
}
