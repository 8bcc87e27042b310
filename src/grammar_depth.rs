//! How deep a JSON Schema or a Lark grammar nests, bounded before llguidance compiles it.
//!
//! llguidance's compiler recurses once per level of nesting (schemas through `$ref`, grammar
//! rules through the rules they name), with no limit of its own: a flat, small request — 300
//! `$defs` each an array of the next, or 1,000 Lark rules each naming the next — overflowed the
//! native server's inference thread (the whole process aborts) and the wasm engine's stack
//! (`memory access out of bounds`, the worker lost). The request body's JSON is itself at most
//! 128 levels deep (serde_json's limit), but `$ref`s and rule names chain without nesting. So the
//! depth is measured here first, the way a compiler would walk it (each `$ref` and each rule
//! name followed, a cycle cut where it closes), and a request past [`MAX_DEPTH`] is refused
//! with a clear error instead. Real schemas and grammars are far shallower (OpenAI's structured
//! outputs allow 10 levels of object nesting).

use std::collections::HashMap;

use serde_json::Value;

/// The deepest schema or grammar accepted: JSON containers plus `$ref` hops for a schema, rule
/// names plus parentheses for a grammar. Well under what overflowed (about 600 for a schema's
/// chain of `$ref`s and 1,200 for rules in wasm; fewer on a 2 MiB native thread), well over real
/// use.
pub const MAX_DEPTH: usize = 128;

/// `Err` (the message for the client) when `schema` nests deeper than [`MAX_DEPTH`].
pub fn check_schema(schema: &Value) -> Result<(), String> {
    let mut w = SchemaWalk { root: schema, on_path: Vec::new(), memo: HashMap::new() };
    let d = w.depth(schema, 0)?;
    if d > MAX_DEPTH {
        return Err(too_deep("schema", d));
    }
    Ok(())
}

fn too_deep(what: &str, d: usize) -> String {
    let shown = if d > MAX_DEPTH { format!("more than {MAX_DEPTH}") } else { d.to_string() };
    format!("the {what} nests {shown} levels deep (nested values, $ref and rule references counted; at most {MAX_DEPTH})")
}

struct SchemaWalk<'a> {
    root: &'a Value,
    /// The `$ref` targets being walked (a cycle closes at one of them: not followed again).
    on_path: Vec<&'a str>,
    /// Depth below each `$ref` target already walked (a shared definition is walked once).
    memo: HashMap<&'a str, usize>,
}

impl<'a> SchemaWalk<'a> {
    /// Levels below and including `v`; stops descending past [`MAX_DEPTH`] (`at`: the levels
    /// above), so this recursion is bounded too.
    fn depth(&mut self, v: &'a Value, at: usize) -> Result<usize, String> {
        if at > MAX_DEPTH {
            return Ok(1);
        }
        let mut below = 0;
        match v {
            Value::Object(o) => {
                if let Some(Value::String(r)) = o.get("$ref") {
                    below = below.max(self.follow(r, at + 1)?);
                }
                for x in o.values() {
                    if x.is_object() || x.is_array() {
                        below = below.max(self.depth(x, at + 1)?);
                    }
                }
            }
            Value::Array(a) => {
                for x in a {
                    if x.is_object() || x.is_array() {
                        below = below.max(self.depth(x, at + 1)?);
                    }
                }
            }
            _ => return Ok(0),
        }
        Ok(1 + below)
    }

    /// Levels through the `$ref` `r` (one for the hop); 0 for a reference this walk cannot
    /// resolve (llguidance reports those itself) or one that closes a cycle.
    fn follow(&mut self, r: &'a str, at: usize) -> Result<usize, String> {
        if let Some(&d) = self.memo.get(r) {
            return Ok(1 + d);
        }
        if self.on_path.contains(&r) {
            return Ok(0);
        }
        let Some(target) = r.strip_prefix('#').and_then(|p| self.root.pointer(&crate::percent::decode(p))) else { return Ok(0) };
        self.on_path.push(r);
        let d = self.depth(target, at);
        self.on_path.pop();
        let d = d?;
        self.memo.insert(r, d);
        Ok(1 + d)
    }
}

/// `Err` when the Lark grammar `g` nests deeper than [`MAX_DEPTH`]: the longest chain of rules
/// naming rules (a cycle cut where it closes), each rule's parentheses and brackets counted
/// too. Also checks every inline `%json` schema ([`check_schema`]).
pub fn check_lark(g: &str) -> Result<(), String> {
    let rules = lark_rules(g)?;
    let index: HashMap<&str, usize> = rules.iter().enumerate().map(|(i, r)| (r.name, i)).collect();
    let mut memo: Vec<Option<usize>> = vec![None; rules.len()];
    let mut on_path = vec![false; rules.len()];
    // An explicit stack (rule, next reference to visit, deepest below so far): the chain of
    // rules can be as long as the grammar, far past what recursion here could take.
    for start in 0..rules.len() {
        if memo[start].is_some() {
            continue;
        }
        let mut stack: Vec<(usize, usize, usize)> = vec![(start, 0, 0)];
        on_path[start] = true;
        while let Some(&mut (r, ref mut next, ref mut best)) = stack.last_mut() {
            if let Some(name) = rules[r].refs.get(*next) {
                *next += 1;
                let Some(&c) = index.get(name) else { continue };
                if let Some(d) = memo[c] {
                    *best = (*best).max(d);
                } else if !on_path[c] {
                    on_path[c] = true;
                    stack.push((c, 0, 0));
                }
                continue;
            }
            let d = rules[r].parens + 1 + *best;
            memo[r] = Some(d);
            on_path[r] = false;
            stack.pop();
            if d > MAX_DEPTH {
                return Err(too_deep("grammar", d));
            }
            if let Some((_, _, b)) = stack.last_mut() {
                *b = (*b).max(d);
            }
        }
    }
    Ok(())
}

/// One Lark rule or terminal: its name, the names its definition uses (in order), and how deep
/// its parentheses and brackets nest.
struct LarkRule<'a> {
    name: &'a str,
    refs: Vec<&'a str>,
    parens: usize,
}

/// The rules of a Lark grammar, read just enough for [`check_lark`]: a definition starts at a
/// line's `name:` (or `name.priority:`) and runs until the next; strings, regexes and comments
/// are skipped; `%json { … }` schemas are checked where they stand.
fn lark_rules(g: &str) -> Result<Vec<LarkRule<'_>>, String> {
    let b = g.as_bytes();
    let mut rules: Vec<LarkRule<'_>> = Vec::new();
    let (mut depth, mut i, mut line_start) = (0usize, 0usize, true);
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    while i < b.len() {
        let c = b[i];
        if line_start && depth == 0 {
            // `name:` / `name.2:` / `?name:` / `!name:` at the start of a line opens a definition.
            let mut j = i;
            while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
                j += 1;
            }
            let k0 = if j < b.len() && (b[j] == b'?' || b[j] == b'!') { j + 1 } else { j };
            let mut k = k0;
            while k < b.len() && ident(b[k]) {
                k += 1;
            }
            let name_end = k;
            if k < b.len() && b[k] == b'.' {
                k += 1;
                while k < b.len() && (b[k].is_ascii_digit() || b[k] == b'-') {
                    k += 1;
                }
            }
            while k < b.len() && (b[k] == b' ' || b[k] == b'\t') {
                k += 1;
            }
            if name_end > k0 && k < b.len() && b[k] == b':' {
                rules.push(LarkRule { name: &g[k0..name_end], refs: Vec::new(), parens: 0 });
                i = k + 1;
                line_start = false;
                continue;
            }
        }
        line_start = false;
        match c {
            b'\n' => {
                line_start = true;
                i += 1;
            }
            b'"' | b'/' if !(c == b'/' && b.get(i + 1) == Some(&b'/')) => {
                // A string or a regex: to its unescaped closing quote or slash (then flags).
                i += 1;
                while i < b.len() && b[i] != c && b[i] != b'\n' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'/' => {
                // A `//` comment, to the end of the line.
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'(' | b'[' => {
                depth += 1;
                if let Some(r) = rules.last_mut() {
                    r.parens = r.parens.max(depth);
                }
                i += 1;
            }
            b')' | b']' => {
                depth = depth.saturating_sub(1);
                i += 1;
            }
            b'%' if g[i..].starts_with("%json") => {
                // `%json {schema}`: the schema is the JSON value that follows.
                let rest = g[i + 5..].trim_start();
                let at = g.len() - rest.len();
                let mut it = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
                match it.next() {
                    Some(Ok(schema)) => {
                        check_schema(&schema)?;
                        i = at + it.byte_offset();
                    }
                    _ => i += 5,
                }
            }
            _ if ident(c) => {
                let s = i;
                while i < b.len() && ident(b[i]) {
                    i += 1;
                }
                if let Some(r) = rules.last_mut() {
                    r.refs.push(&g[s..i]);
                }
            }
            _ => i += 1,
        }
        if i > b.len() {
            break;
        }
    }
    Ok(rules)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ref_chain(n: usize) -> Value {
        let mut defs = serde_json::Map::new();
        for i in 0..n {
            defs.insert(format!("d{i}"), json!({"type": "array", "items": {"$ref": format!("#/$defs/d{}", i + 1)}}));
        }
        defs.insert(format!("d{n}"), json!({"type": "string"}));
        json!({"$ref": "#/$defs/d0", "$defs": defs})
    }

    fn lark_chain(n: usize) -> String {
        let mut g = String::from("start: x0\n");
        for i in 0..n {
            g.push_str(&format!("x{i}: \"a\" x{} | \"b\"\n", i + 1));
        }
        g.push_str(&format!("x{n}: \"c\"\n"));
        g
    }

    #[test]
    fn real_schemas_pass() {
        let person = json!({"type": "object", "properties": {"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}},
            "address": {"type": "object", "properties": {"city": {"type": "string"}}}}, "required": ["name"]});
        check_schema(&person).unwrap();
        // A recursive tree: the cycle is cut, not refused.
        let tree = json!({"$defs": {"node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}, "$ref": "#/$defs/node"});
        check_schema(&tree).unwrap();
        check_schema(&ref_chain(20)).unwrap();
    }

    #[test]
    fn a_long_ref_chain_is_refused() {
        let e = check_schema(&ref_chain(300)).unwrap_err();
        assert!(e.contains("at most 128"), "{e}");
        // A chain of plain `$ref` hops, no nesting at all.
        let mut defs = serde_json::Map::new();
        for i in 0..200 {
            defs.insert(format!("d{i}"), json!({"$ref": format!("#/$defs/d{}", i + 1)}));
        }
        defs.insert("d200".into(), json!({"type": "integer"}));
        assert!(check_schema(&json!({"$ref": "#/$defs/d0", "$defs": defs})).is_err());
    }

    #[test]
    fn shared_definitions_are_walked_once() {
        // Each level names the next twice: 2^60 paths, but one walk per definition.
        let mut defs = serde_json::Map::new();
        for i in 0..60 {
            let next = format!("#/$defs/d{}", i + 1);
            defs.insert(format!("d{i}"), json!({"anyOf": [{"$ref": next}, {"$ref": next}]}));
        }
        defs.insert("d60".into(), json!({"type": "integer"}));
        let t = std::time::Instant::now();
        let r = check_schema(&json!({"$ref": "#/$defs/d0", "$defs": defs}));
        assert!(t.elapsed().as_secs() < 2);
        assert!(r.is_err(), "60 levels of anyOf + array + $ref is over 128");
    }

    #[test]
    fn lark_depth() {
        check_lark(&lark_chain(30)).unwrap();
        let e = check_lark(&lark_chain(1000)).unwrap_err();
        assert!(e.contains("grammar"), "{e}");
        // Left recursion and cycles are cut, not refused.
        check_lark("start: expr\nexpr: expr \"+\" term | term\nterm: \"(\" expr \")\" | NUMBER\nNUMBER: /[0-9]+/\n").unwrap();
        // Strings, regexes and comments do not count.
        check_lark("start: \"((((((((\" /[(]{3}x(y)/ // ((((( \n").unwrap();
        // Parentheses nest within a rule.
        let deep = format!("start: {}\"a\"{}\n", "(".repeat(200), ")".repeat(200));
        assert!(check_lark(&deep).is_err());
        // A %json schema inside is checked as a schema.
        let g = format!("start: %json {}\n", ref_chain(300));
        assert!(check_lark(&g).is_err());
        check_lark(&format!("start: %json {}\n", ref_chain(5))).unwrap();
    }
}
