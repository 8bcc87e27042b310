//! Calls by constrained decoding: the call grammar ([`call_grammar`]: the call format of
//! `tools/mod.rs` with each function's `arguments` held to its JSON Schema by llguidance's
//! `%json`), and [`ToolConstraint`], the `generate::TokenFilter` that applies it — from the first
//! token for `required` / a named function, and for `auto` only once the output is a call (see
//! the rule in `tools/mod.rs`).

use llguidance::toktrie::TokTrie;
use serde_json::Value;

use super::{classify, Shape, Tools, CLOSE, TRIGGER};
use crate::generate::TokenFilter;
use crate::structured::{compact_schema, Constraint, Vocabulary};

/// The Lark grammar of the calls a request allows (`None` for `tool_choice: 'none'`). Each
/// function is its own alternative, its name a literal and its arguments a `%json` of its own
/// schema (so `$ref`s inside a schema resolve against that schema).
pub fn call_grammar(tools: &Tools) -> Option<String> {
    let functions = tools.callable();
    if functions.is_empty() {
        return None;
    }
    let lit = |s: &str| Value::from(s).to_string();
    let mut g = String::from(if tools.many() { "start: call (\"\\n\" call)*\n" } else { "start: call\n" });
    for (i, f) in functions.iter().enumerate() {
        let mut schema = f.parameters.clone();
        compact_schema(&mut schema);
        let head = format!("{TRIGGER}\n{{\"name\": {}, \"arguments\": ", lit(&f.name));
        g.push_str(if i == 0 { "call: " } else { "    | " });
        g.push_str(&format!("{} %json {} {}\n", lit(&head), schema, lit(&format!("}}\n{CLOSE}"))));
    }
    Some(g)
}

/// The tools' token filter for one request.
pub struct ToolConstraint {
    vocab: Vocabulary,
    calls: Constraint,
    shape: Shape,
    /// The output's bytes while undecided.
    start: Vec<u8>,
}

impl ToolConstraint {
    /// `Ok(None)` when the request allows no call; `Err` when a schema cannot be compiled.
    pub fn new(vocab: &Vocabulary, tools: &Tools) -> Result<Option<ToolConstraint>, String> {
        for f in tools.callable() {
            crate::structured::check_enforceable(&f.parameters).map_err(|e| format!("function {}: {e}", f.name))?;
        }
        let Some(g) = call_grammar(tools) else { return Ok(None) };
        let calls = vocab.lark(&g)?;
        let shape = if tools.forced() { Shape::Calls } else { Shape::Undecided };
        Ok(Some(ToolConstraint { vocab: vocab.clone(), calls, shape, start: Vec::new() }))
    }
}

impl TokenFilter for ToolConstraint {
    fn filter(&mut self, logits: &mut [f32]) -> Result<(), String> {
        match self.shape {
            Shape::Text => Ok(()),
            Shape::Calls => self.calls.filter(logits),
            Shape::Undecided => {
                // Allowed: what keeps a call valid, and any text token that leaves the trigger
                // (the answer is then text). Not allowed: a token that stays on the trigger, or
                // passes it, without being a valid call; a special token the grammar refuses.
                let mask = self.calls.mask()?;
                let rest = &TRIGGER.as_bytes()[self.start.len()..];
                let n = self.vocab.size();
                for (i, l) in logits.iter_mut().enumerate() {
                    if i >= n {
                        *l = f32::NEG_INFINITY;
                        continue;
                    }
                    if mask.is_allowed(i as u32) {
                        continue;
                    }
                    let b = self.vocab.token_bytes(i as u32);
                    let leaves = !b.is_empty() && b[0] != TokTrie::SPECIAL_TOKEN_MARKER && !rest.starts_with(b) && !b.starts_with(rest);
                    if !leaves {
                        *l = f32::NEG_INFINITY;
                    }
                }
                Ok(())
            }
        }
    }

    fn accept(&mut self, id: u32) -> Result<(), String> {
        match self.shape {
            Shape::Text => Ok(()),
            Shape::Calls => self.calls.accept(id),
            Shape::Undecided => {
                let b = self.vocab.token_bytes(id);
                let mut next = self.start.clone();
                next.extend_from_slice(b);
                let special = b.first() == Some(&TokTrie::SPECIAL_TOKEN_MARKER);
                match classify(&next) {
                    Shape::Text if !special => {
                        self.shape = Shape::Text;
                        Ok(())
                    }
                    shape => {
                        self.start = next;
                        self.shape = if special { Shape::Calls } else { shape };
                        self.calls.accept(id)
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{Function, ToolChoice};
    use serde_json::json;

    #[test]
    fn the_grammar_has_one_alternative_per_callable_function() {
        let f = |n: &str| Function { name: n.into(), description: None, parameters: json!({"type": "object"}) };
        let mut t = Tools { functions: vec![f("a"), f("b")], choice: ToolChoice::Auto, parallel: true };
        let g = call_grammar(&t).unwrap();
        assert!(g.starts_with("start: call (\"\\n\" call)*\ncall: \"<tool_call>\\n{\\\"name\\\": \\\"a\\\", \\\"arguments\\\": \" %json {"), "{g}");
        assert_eq!(g.matches("%json").count(), 2);
        t.choice = ToolChoice::Function("b".into());
        let g = call_grammar(&t).unwrap();
        assert!(g.starts_with("start: call\n") && g.contains("\\\"b\\\"") && !g.contains("\\\"a\\\""), "{g}");
        t.choice = ToolChoice::None;
        assert!(call_grammar(&t).is_none());
    }
}
