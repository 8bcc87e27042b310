//! Tool calls (OpenAI's `tools` / `tool_choice`): what a checked request carries ([`Tools`]),
//! how the conversation is shown to the model ([`render`]), how a call is produced by
//! constrained decoding ([`constraint`]) and how the generated text becomes OpenAI's
//! `tool_calls` ([`output`]).
//!
//! **The call format.** The model writes each call as
//! `<tool_call>\n{"name": "NAME", "arguments": {...}}\n</tool_call>` (the Hermes format, which
//! Qwen 2/2.5/3 and Hermes models are trained on; further calls follow after a `\n`). One format
//! for every model means one grammar, one parser and one rendering of past calls, so the
//! conversation the KV cache holds is exactly what the model wrote (the next turn reuses it).
//!
//! **`auto` (call or text).** A text answer and a call are told apart by the start of the
//! output ([`classify`]): output that begins with [`TRIGGER`] is a call and is constrained to the
//! call grammar from its first byte; any other output is text and is not constrained at all.
//! While the output is still a prefix of the trigger the mask allows exactly the tokens that
//! either keep a valid call going or leave the trigger (see `constraint.rs`), so every output is
//! either valid calls or plain text — never a broken call — and the decision costs nothing once
//! made (a text answer is sampled exactly as without tools after its first token).

pub mod constraint;
pub mod output;
pub mod render;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What starts every call in the model's output.
pub const TRIGGER: &str = "<tool_call>";
/// What ends one.
pub const CLOSE: &str = "</tool_call>";

/// One function the model may call (`tools[i].function`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Function {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A JSON Schema of the arguments object (absent in the request: no arguments, `{}`).
    pub parameters: Value,
}

/// `tool_choice`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// Never call: the model answers in text (the functions are not shown to it).
    None,
    /// The model decides: text, or calls.
    Auto,
    /// One or more calls, of any of the functions.
    Required,
    /// One call of this function.
    Function(String),
}

/// The tool part of a checked request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tools {
    pub functions: Vec<Function>,
    pub choice: ToolChoice,
    /// `parallel_tool_calls: true`: more than one call in one answer (absent or false: one).
    pub parallel: bool,
}

impl Tools {
    /// The functions a call may name under the choice (none for `none`).
    pub fn callable(&self) -> Vec<&Function> {
        match &self.choice {
            ToolChoice::None => Vec::new(),
            ToolChoice::Function(n) => self.functions.iter().filter(|f| &f.name == n).collect(),
            ToolChoice::Auto | ToolChoice::Required => self.functions.iter().collect(),
        }
    }

    /// Whether the output must be calls from its first token.
    pub fn forced(&self) -> bool {
        matches!(self.choice, ToolChoice::Required | ToolChoice::Function(_))
    }

    /// Whether more than one call may come (never for a named function).
    pub fn many(&self) -> bool {
        self.parallel && !matches!(self.choice, ToolChoice::Function(_))
    }
}

/// A call in OpenAI's shape (`message.tool_calls[i]`; also what assistant messages of the
/// history carry).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub function: FunctionCall,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    /// The arguments as JSON text (OpenAI sends a string).
    pub arguments: String,
}

impl ToolCall {
    pub fn new(id: String, name: String, arguments: String) -> ToolCall {
        ToolCall { id, kind: "function".into(), function: FunctionCall { name, arguments } }
    }
}

/// One streamed piece of a call (`delta.tool_calls[i]`): the first of a call has `id`, `type`
/// and `function.name` (and empty `arguments`); the next ones only `arguments` fragments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallDelta {
    pub index: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub function: FunctionDelta,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionDelta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    pub arguments: String,
}

/// What the output is, from its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Still a prefix of [`TRIGGER`]: could become either.
    Undecided,
    /// Calls (it starts with the trigger).
    Calls,
    /// A text answer.
    Text,
}

/// The one rule that tells a call from text (the constraint and the parser both use it).
pub fn classify(output: &[u8]) -> Shape {
    let t = TRIGGER.as_bytes();
    if output.starts_with(t) {
        Shape::Calls
    } else if t.starts_with(output) {
        Shape::Undecided
    } else {
        Shape::Text
    }
}

/// The base of a generation's call ids: from the prompt's tokens and the seed, so ids are
/// deterministic and differ between the turns of a conversation (its prompt grows).
pub fn call_id_base(prompt: &[u32], seed: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &t in prompt {
        h = (h ^ t as u64).wrapping_mul(0x0100_0000_01b3);
    }
    h ^ seed.rotate_left(17)
}

/// The id of the `index`-th call of a generation (`call_` + 24 hex digits).
pub fn call_id(base: u64, index: usize) -> String {
    let mix = crate::sampling::mix64;
    let a = mix(base ^ (index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let b = mix(a ^ 0x5851_f42d_4c95_7f2d);
    format!("call_{a:016x}{:08x}", b as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_by_the_trigger() {
        assert_eq!(classify(b""), Shape::Undecided);
        assert_eq!(classify(b"<tool"), Shape::Undecided);
        assert_eq!(classify(b"<tool_call>\n{"), Shape::Calls);
        assert_eq!(classify(b"<b>"), Shape::Text);
        assert_eq!(classify(b"Hello"), Shape::Text);
    }

    #[test]
    fn call_ids_differ_by_index_prompt_and_seed() {
        let id = |p: &[u32], seed, i| call_id(call_id_base(p, seed), i);
        let a = id(&[1, 2, 3], 7, 0);
        assert_eq!(a, id(&[1, 2, 3], 7, 0));
        assert!(a.starts_with("call_") && a.len() == 5 + 24);
        assert_ne!(a, id(&[1, 2, 3], 7, 1));
        assert_ne!(a, id(&[1, 2, 3, 4], 7, 0));
        assert_ne!(a, id(&[1, 2, 3], 8, 0));
    }
}
