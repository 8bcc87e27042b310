//! Schema `pattern`s made safe for llguidance's JSON-string quoting.
//!
//! llguidance (through derivre 0.3.13) turns a pattern over a string's *value* into one over
//! its JSON text. A character class holding every control character (or every one but `\n`)
//! takes a short path that allows every one-letter escape after `\` — `\"` and `\\` included —
//! even when the class excludes `"` or `\`. So under `"pattern": "^[^\"]*$"` the model could
//! write `\"` (a quote) and the output broke the schema while finishing with "stop".
//!
//! Each class (in practice a negated one: `[^"]`, `\P{P}`) that holds U+001F and lacks
//! `"` or `\` loses U+001F: `[[^"]--[\x1f]]`. Without every control character the class takes
//! llguidance's exact path, which allows `\"` and `\\` only when the class holds `"` and `\`.
//! (Adding U+001F back as an alternative does not work: derivre merges the alternatives into one
//! set again.) So such a string can no longer hold U+001F, a control character no text needs;
//! every output still matches the schema, which is the promise of constrained decoding.

use regex_syntax::ast::{self, Ast};
use regex_syntax::hir::{Class, HirKind};
use serde_json::Value;

/// Rewrites every `pattern` (and every `patternProperties` key) in `schema` as described above.
/// Values that are not schemas (`const`, `enum`, `default`, `examples`, …) are left alone.
pub fn make_quote_safe(schema: &mut Value) {
    let Some(o) = schema.as_object_mut() else { return };
    for (k, v) in o.iter_mut() {
        match k.as_str() {
            "pattern" => {
                if let Some(fixed) = v.as_str().and_then(rewrite) {
                    *v = Value::String(fixed);
                }
            }
            "patternProperties" => {
                if let Some(map) = v.as_object_mut() {
                    let entries: Vec<(String, Value)> = std::mem::take(map).into_iter().collect();
                    for (key, mut sub) in entries {
                        make_quote_safe(&mut sub);
                        map.insert(rewrite(&key).unwrap_or(key), sub);
                    }
                }
            }
            "properties" | "$defs" | "definitions" | "dependentSchemas" => {
                if let Some(map) = v.as_object_mut() {
                    map.values_mut().for_each(make_quote_safe);
                }
            }
            "items" | "prefixItems" | "allOf" | "anyOf" | "oneOf" => match v {
                Value::Array(list) => list.iter_mut().for_each(make_quote_safe),
                other => make_quote_safe(other),
            },
            "additionalProperties" | "additionalItems" | "unevaluatedProperties" | "unevaluatedItems" | "contains" | "not" | "if" | "then"
            | "else" | "propertyNames" => make_quote_safe(v),
            _ => {}
        }
    }
}

/// `pattern` with its affected classes rewritten, or `None` when none is (or it does not
/// parse: llguidance then reports its own error).
fn rewrite(pattern: &str) -> Option<String> {
    let parsed = ast::parse::Parser::new().parse(pattern).ok()?;
    let mut spans = Vec::new();
    affected_classes(&parsed, pattern, &mut spans);
    if spans.is_empty() {
        return None;
    }
    spans.sort_unstable();
    let mut out = String::with_capacity(pattern.len() + 12 * spans.len());
    let mut at = 0;
    for (start, end) in spans {
        out.push_str(&pattern[at..start]);
        out.push_str(&format!("[{}--[\\x1f]]", &pattern[start..end]));
        at = end;
    }
    out.push_str(&pattern[at..]);
    Some(out)
}

/// The byte spans of the outermost classes that need the rewrite: bracketed (`[^"]`), Unicode
/// (`\P{P}`: not punctuation, so no `"` or `\`) and Perl (`\W`, `\S`).
fn affected_classes(node: &Ast, src: &str, out: &mut Vec<(usize, usize)>) {
    let span = match node {
        Ast::ClassBracketed(c) => Some(&c.span),
        Ast::ClassUnicode(c) => Some(&c.span),
        Ast::ClassPerl(c) => Some(&c.span),
        _ => None,
    };
    if let Some(span) = span {
        let (start, end) = (span.start.offset, span.end.offset);
        if needs_rewrite(&src[start..end]) {
            out.push((start, end));
        }
        return;
    }
    match node {
        Ast::Repetition(r) => affected_classes(&r.ast, src, out),
        Ast::Group(g) => affected_classes(&g.ast, src, out),
        Ast::Alternation(a) => a.asts.iter().for_each(|x| affected_classes(x, src, out)),
        Ast::Concat(c) => c.asts.iter().for_each(|x| affected_classes(x, src, out)),
        _ => {}
    }
}

/// Whether a class (its source text) holds U+001F and lacks `"` or `\`: the sets that take
/// llguidance's short path and gain an escape they exclude.
fn needs_rewrite(class: &str) -> bool {
    let Ok(hir) = regex_syntax::ParserBuilder::new().utf8(false).build().parse(class) else { return false };
    let holds = |c: char| match hir.kind() {
        HirKind::Class(Class::Unicode(u)) => u.ranges().iter().any(|r| r.start() <= c && c <= r.end()),
        HirKind::Class(Class::Bytes(b)) => b.ranges().iter().any(|r| r.start() as u32 <= c as u32 && c as u32 <= r.end() as u32),
        _ => false,
    };
    holds('\u{1f}') && (!holds('"') || !holds('\\'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classes_that_exclude_a_quote_or_backslash_are_rewritten() {
        assert_eq!(rewrite(r#"^"[^"]*"$"#).as_deref(), Some(r#"^"[[^"]--[\x1f]]*"$"#));
        assert_eq!(rewrite(r"^[^\\]+$").as_deref(), Some(r"^[[^\\]--[\x1f]]+$"));
        assert_eq!(rewrite(r#"([^"\n]{2}|x)"#).as_deref(), Some(r#"([[^"\n]--[\x1f]]{2}|x)"#));
        assert_eq!(rewrite(r"[\x00-!]").as_deref(), Some(r"[[\x00-!]--[\x1f]]"));
        assert_eq!(rewrite(r"^\P{P}+$").as_deref(), Some(r"^[\P{P}--[\x1f]]+$"));
        // Classes that keep both characters, or lack a control character, are quoted right.
        for same in [r"^[^a-z]+$", r"^[^x]{1,6}$", r#"^[^"\x00-\x1f]*$"#, r"^\S+$", r"^.*$", "^[a-z\"]+$", "(", r"\d{3}"] {
            assert_eq!(rewrite(same), None, "{same}");
        }
    }

    /// llguidance itself, over a byte-level vocabulary: how much of `text` a string schema with
    /// `pattern` accepts, and whether the whole is complete.
    fn llguidance_accepts(pattern: &str, text: &str) -> bool {
        use llguidance::api::TopLevelGrammar;
        use llguidance::toktrie::ApproximateTokEnv;
        use llguidance::{Matcher, ParserFactory};
        let mut schema = json!({"type": "string", "pattern": pattern});
        crate::structured::compact_schema(&mut schema);
        let env = ApproximateTokEnv::single_byte_env();
        let mut f = ParserFactory::new_simple(&env).unwrap();
        f.quiet();
        let mut m = Matcher::new(f.create_parser(TopLevelGrammar::from_json_schema(schema)));
        let toks: Vec<u32> = text.bytes().map(u32::from).collect();
        m.validate_tokens(&toks).unwrap() == toks.len() && m.consume_tokens(&toks).is_ok() && m.is_accepting().unwrap()
    }

    #[test]
    fn llguidance_keeps_to_the_class_after_the_rewrite() {
        // Before: `\"` (a quote) passed `[^"]`, and `\\` (a backslash) passed `[^\\]`.
        assert!(!llguidance_accepts(r#"^[^"]*$"#, r#""ab\"c""#));
        assert!(!llguidance_accepts(r"^[^\\]*$", r#""a\\b""#));
        assert!(!llguidance_accepts(r#"^[^"\n]*$"#, r#""a\"b""#));
        assert!(!llguidance_accepts(r"^\P{P}*$", r#""a\"b""#));
        // What the classes hold is still allowed, escapes included, but for U+001F.
        assert!(llguidance_accepts(r#"^[^"]*$"#, r#""a\\b\nc\u001e""#));
        assert!(llguidance_accepts(r"^[^\\]*$", r#""a\"b\u001E""#));
        assert!(!llguidance_accepts(r#"^[^"]*$"#, r#""a\u001f""#));
        assert!(llguidance_accepts(r#"^[^"\n]*$"#, r#""a\tb""#));
        assert!(!llguidance_accepts(r#"^[^"\n]*$"#, r#""a\nb""#));
    }

    #[test]
    fn only_schema_positions_are_walked() {
        let mut s = json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "pattern": "^[^\"]+$"},
                "q": {"const": {"pattern": "[^\"]"}},
                "list": {"type": "array", "items": {"type": "string", "pattern": "[^\\\\]"}}
            },
            "patternProperties": {"^[^\"]+$": {"type": "string"}},
            "$defs": {"d": {"anyOf": [{"type": "string", "pattern": "[^\"]"}]}}
        });
        make_quote_safe(&mut s);
        let fixed = |p: &str| rewrite(p).unwrap();
        assert_eq!(s["properties"]["pattern"]["pattern"], fixed("^[^\"]+$"));
        assert_eq!(s["properties"]["q"]["const"]["pattern"], "[^\"]", "a const value is data, not a schema");
        assert_eq!(s["properties"]["list"]["items"]["pattern"], fixed("[^\\\\]"));
        assert!(s["patternProperties"].get(fixed("^[^\"]+$")).is_some());
        assert_eq!(s["$defs"]["d"]["anyOf"][0]["pattern"], fixed("[^\"]"));
    }
}
