//! Structured output by constrained decoding (OpenAI's `response_format`): each step, the tokens
//! that cannot continue a valid output are masked out of the logits before sampling, so the
//! text always parses (and validates against the schema). The grammar engine is the `llguidance`
//! crate (MIT; what llama.cpp, vLLM and SGLang use): its `TokEnv` is built once per model from
//! the tokenizer's vocabulary ([`Vocabulary`]), a `Matcher` per request ([`Constraint`]).

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, TokEnv, TokRxInfo, TokTrie};
use llguidance::{Matcher, ParserFactory};
use serde_json::Value;

use crate::generate::TokenFilter;
use crate::grammar_depth;
use crate::tokenizer::{TokenAttr, Tokenizer};

/// What the output must be (a checked `response_format`; the worker's JSON:
/// `{"type": "json_object"}` or `{"type": "json_schema", "schema": {...}}`).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutputFormat {
    /// Any JSON object (`{type: 'json_object'}`).
    JsonObject,
    /// A JSON value valid against this JSON Schema (`{type: 'json_schema', json_schema: {schema}}`).
    JsonSchema { schema: Value },
    /// Extension: text in the language of this grammar, in llguidance's Lark syntax
    /// (`{type: 'grammar', grammar: 'start: "yes" | "no"'}`).
    Grammar { grammar: String },
}

impl OutputFormat {
    fn grammar(&self) -> TopLevelGrammar {
        let mut schema = match self {
            OutputFormat::JsonObject => serde_json::json!({ "type": "object" }),
            OutputFormat::JsonSchema { schema } => schema.clone(),
            OutputFormat::Grammar { grammar } => return TopLevelGrammar::from_lark(grammar.clone()),
        };
        compact_schema(&mut schema);
        TopLevelGrammar::from_json_schema(schema)
    }
}

/// A schema as llguidance gets it: compact JSON output (no free whitespace between tokens — a
/// small model would otherwise fill the output with it — and `, ` / `: ` as separators,
/// llguidance's `x-guidance`), and its patterns made safe for llguidance's string quoting
/// ([`crate::schema_patterns`]).
pub(crate) fn compact_schema(schema: &mut Value) {
    crate::schema_patterns::make_quote_safe(schema);
    if let Some(o) = schema.as_object_mut() {
        o.entry("x-guidance").or_insert(serde_json::json!({ "whitespace_flexible": false, "item_separator": ", ", "key_separator": ": " }));
    }
}

/// The largest integer every f64 holds exactly, with all below it.
const EXACT_F64_INT: u64 = 1 << 53;

/// The keywords whose numbers llguidance compares or writes as 64-bit floats.
const NUMBER_KEYWORDS: [&str; 7] = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "const", "enum"];

/// What llguidance would compile but not enforce, refused so that output never breaks the
/// schema (walked without recursion; the depth check comes after):
/// - bounds or values that are integers past 2^53: llguidance reads them as f64, which rounds
///   them (a `minimum` of 2^53 + 1 let 2^53 through);
/// - `minProperties` / `maxProperties` on an object open to keys beyond its `properties`: the
///   grammar does not keep such a key from repeating, and `{"a": 1, "a": 2, "a": 3}` met a
///   `minProperties` of 3 (any JSON parser reads one key).
pub(crate) fn check_enforceable(schema: &Value) -> Result<(), String> {
    let inexact = |v: &Value| v.as_u64().map_or_else(|| v.as_i64().is_some_and(|i| i.unsigned_abs() > EXACT_F64_INT), |u| u > EXACT_F64_INT);
    let mut stack = vec![schema];
    while let Some(v) = stack.pop() {
        match v {
            Value::Object(o) => {
                // Numbers only: a `properties` map may name a property "minProperties".
                let counted = ["minProperties", "maxProperties"].iter().any(|k| o.get(*k).is_some_and(Value::is_number));
                let open = o.get("additionalProperties").is_none_or(|a| a != &Value::Bool(false)) || o.contains_key("patternProperties");
                if counted && open && o.get("type").is_none_or(|t| t == "object" || t.as_array().is_some_and(|a| a.iter().any(|t| t == "object"))) {
                    return Err("minProperties/maxProperties need additionalProperties: false and no patternProperties here: the grammar cannot keep an undeclared key from repeating, and repeats would count".into());
                }
                for (k, x) in o {
                    if NUMBER_KEYWORDS.contains(&k.as_str()) {
                        let values: Vec<&Value> = match x {
                            Value::Array(a) if k == "enum" => a.iter().collect(),
                            _ => vec![x],
                        };
                        if let Some(n) = values.into_iter().find(|n| inexact(n)) {
                            return Err(format!("{k}: {n} is past 2^53, where 64-bit floats (as the grammar compares numbers) cannot hold every integer exactly"));
                        }
                    }
                    stack.push(x);
                }
            }
            Value::Array(a) => stack.extend(a.iter()),
            _ => {}
        }
    }
    Ok(())
}

/// A model's vocabulary as llguidance sees it, built once per model (a few hundred ms for
/// 262 144 tokens) and shared by its requests.
#[derive(Clone)]
pub struct Vocabulary {
    factory: Arc<ParserFactory>,
}

impl Vocabulary {
    pub fn new(tok: &Tokenizer) -> Result<Vocabulary, String> {
        let n = tok.vocab_size();
        let eos = tok.eog_ids().first().copied().or(tok.eos_id()).unwrap_or(0);
        let mut words = Vec::with_capacity(n);
        for id in 0..n as u32 {
            let control = tok.token_attr(id).is_some_and(TokenAttr::needs_special_parsing);
            words.push(if control {
                // llguidance's marker for a special token: never part of the constrained text.
                let mut w = vec![TokTrie::SPECIAL_TOKEN_MARKER];
                w.extend_from_slice(tok.token_text(id).unwrap_or("").as_bytes());
                w
            } else {
                tok.token_to_piece(id, false).unwrap_or_default()
            });
        }
        let trie = TokTrie::from(&TokRxInfo::new(n as u32, eos), &words);
        let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie));
        let mut factory = ParserFactory::new_simple(&env).map_err(|e| e.to_string())?;
        factory.quiet();
        Ok(Vocabulary { factory: Arc::new(factory) })
    }

    /// A constraint for one request: the grammar compiled (`Err`: the schema is not usable).
    pub fn constraint(&self, format: &OutputFormat) -> Result<Constraint, String> {
        match format {
            OutputFormat::JsonObject => {}
            OutputFormat::JsonSchema { schema } => {
                check_enforceable(schema)?;
                grammar_depth::check_schema(schema)?
            }
            OutputFormat::Grammar { grammar } => grammar_depth::check_lark(grammar)?,
        }
        self.compile(format.grammar())
    }

    /// A constraint to a grammar in llguidance's Lark syntax (the tool calls' grammar).
    pub(crate) fn lark(&self, grammar: &str) -> Result<Constraint, String> {
        grammar_depth::check_lark(grammar)?;
        self.compile(TopLevelGrammar::from_lark(grammar.to_string()))
    }

    /// A token's bytes as llguidance sees them (a special token's start with
    /// `TokTrie::SPECIAL_TOKEN_MARKER`).
    pub(crate) fn token_bytes(&self, id: u32) -> &[u8] {
        self.factory.tok_env().tok_trie().token(id)
    }

    /// Tokens in the vocabulary.
    pub(crate) fn size(&self) -> usize {
        self.factory.tok_env().tok_trie().vocab_size()
    }

    fn compile(&self, grammar: TopLevelGrammar) -> Result<Constraint, String> {
        // A schema llguidance cannot compile is an error here (not a panic: it reports them).
        let parser = self.factory.create_parser(grammar).map_err(|e| e.to_string())?;
        let mut m = Matcher::new(Ok(parser));
        if let Some(e) = m.get_error() {
            return Err(e);
        }
        // Some grammars only fail at their first mask (a `$ref` cycle that never reaches a
        // value): found here, they are the request's error, not the generation's. Its message
        // is followed by the parser's state dump: the first line is the reason. The mask is
        // kept for the first step, which would compute the same one.
        let first = m.compute_mask_or_eos().map_err(|e| e.to_string().lines().next().unwrap_or_default().to_string())?;
        Ok(Constraint { m, first: Some(first) })
    }
}

/// One request's grammar state.
pub struct Constraint {
    m: Matcher,
    /// The mask before any token, computed by `compile` (taken by the first `mask`).
    first: Option<llguidance::toktrie::SimpleVob>,
}

impl Constraint {
    /// The tokens the grammar allows next (only the end token once it is complete).
    pub(crate) fn mask(&mut self) -> Result<llguidance::toktrie::SimpleVob, String> {
        if let Some(first) = self.first.take() {
            return Ok(first);
        }
        self.m.compute_mask_or_eos().map_err(|e| e.to_string())
    }
}

impl TokenFilter for Constraint {
    fn filter(&mut self, logits: &mut [f32]) -> Result<(), String> {
        let mask = self.mask()?;
        for (i, l) in logits.iter_mut().enumerate() {
            if !mask.is_allowed(i as u32) {
                *l = f32::NEG_INFINITY;
            }
        }
        Ok(())
    }

    fn accept(&mut self, id: u32) -> Result<(), String> {
        // The kept first mask is the start's only.
        self.first = None;
        // Once the grammar is complete only the end token was allowed: it ends the generation,
        // and the stopped matcher has nothing more to follow.
        if self.m.is_stopped() {
            return Ok(());
        }
        self.m.consume_token(id).map_err(|e| e.to_string())
    }
}
