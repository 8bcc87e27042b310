//! The OpenAI request rules, once: every parameter the engine knows, for which endpoint, its
//! range and its error ([`PARAMETERS`]), and [`parse_request`], which checks a request body
//! against them and turns it into the engine's [`GenerateRequest`].
//!
//! `edgellm serve` (src/server/openai.rs) and the JS engine (through the wasm export
//! `parse_openai_request`, called by the worker) both call it, so the same body gets the same
//! answer everywhere. A parameter OpenAI defines that the engine does not implement is refused
//! with `unsupported_parameter` naming it, and one nobody defines with `unknown_parameter`
//! (OpenAI refuses unrecognized arguments too): nothing is silently dropped.

use serde_json::{Map, Value};

use super::error::ProtocolError;
use crate::generate::MAX_TOP_LOGPROBS;
use crate::host::GenerateRequest;
use crate::structured::OutputFormat;
use crate::limits::MAX_NEW_TOKENS;
use crate::tokenizer::ChatMessage;

/// The endpoint a request was made to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `/v1/chat/completions`: `messages`, rendered by the model's chat template.
    Chat,
    /// `/v1/completions`: a raw `prompt`.
    Completion,
}

impl Kind {
    pub fn from_name(name: &str) -> Option<Kind> {
        match name {
            "chat" => Some(Kind::Chat),
            "completion" => Some(Kind::Completion),
            _ => None,
        }
    }
}

/// Which endpoints a parameter belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum On {
    Both,
    Chat,
    Completion,
}

/// A parameter's rule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rule {
    /// A finite number in `[lo, hi]`.
    Number(f64, f64),
    /// A finite number in `(0, hi]` (a divisor).
    Positive(f64),
    /// An integer in `[lo, hi]`.
    Integer(i128, i128),
    Bool,
    /// Any string (informational: `model`, `user`).
    Text,
    /// Checked by its own code in [`parse_request`] (its shape is more than a range).
    Shaped,
    /// Defined by OpenAI, not implemented here: refused with this reason.
    Unsupported(&'static str),
}

/// One request parameter.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    pub name: &'static str,
    pub on: On,
    pub rule: Rule,
    /// What it does here (extensions beyond OpenAI say so).
    pub doc: &'static str,
}

const fn p(name: &'static str, on: On, rule: Rule, doc: &'static str) -> Param {
    Param { name, on, rule, doc }
}

const NEW_TOKENS: Rule = Rule::Integer(1, MAX_NEW_TOKENS as i128);
const PENALTY: Rule = Rule::Number(-2.0, 2.0);
// It divides logits: 0 would make them infinite.
const REPEAT: Rule = Rule::Positive(10.0);
const OLD_FUNCTIONS: &str = "the deprecated functions API is not supported: use tools and tool_choice";

/// The message roles a chat request may carry (OpenAI's, but the deprecated `function`).
pub const ROLES: &[&str] = &["system", "developer", "user", "assistant", "tool"];

/// Most choices (`n`) per request (OpenAI's limit).
pub const MAX_CHOICES: usize = 128;

/// Most `stop` sequences (OpenAI's limit).
pub const MAX_STOP: usize = 4;

/// Every parameter a request may carry. `null` counts as absent for all but the required ones.
pub const PARAMETERS: &[Param] = &[
    p("messages", On::Chat, Rule::Shaped, "required: [{role, content}], content a string or text parts"),
    p("prompt", On::Completion, Rule::Shaped, "required: a string (or an array of one string)"),
    p("model", On::Both, Rule::Text, "informational: the engine serves the model it has loaded"),
    p("max_tokens", On::Both, NEW_TOKENS, "most tokens to generate (default: until the context is full, or the server's cap)"),
    p("max_completion_tokens", On::Both, NEW_TOKENS, "the same as max_tokens (it wins when both are given: OpenAI deprecates max_tokens for it)"),
    p("temperature", On::Both, Rule::Number(0.0, 100.0), "0 = greedy; above OpenAI's 2 is an extension"),
    p("top_p", On::Both, Rule::Number(0.0, 1.0), "nucleus sampling"),
    p("top_k", On::Both, Rule::Integer(0, 1 << 20), "extension: keep the k most likely tokens (0 = off)"),
    p("min_p", On::Both, Rule::Number(0.0, 1.0), "extension: drop tokens below min_p × the top probability"),
    p("repetition_penalty", On::Both, REPEAT, "extension (llama.cpp's repeat_penalty): 1 = off"),
    p("repeat_penalty", On::Both, REPEAT, "extension: another name of repetition_penalty"),
    p("presence_penalty", On::Both, PENALTY, "OpenAI's presence penalty"),
    p("frequency_penalty", On::Both, PENALTY, "OpenAI's frequency penalty"),
    p("seed", On::Both, Rule::Integer(i64::MIN as i128, u64::MAX as i128), "an integer; a negative seed is its 64-bit two's complement"),
    p("stop", On::Both, Rule::Shaped, "a string or up to 4 non-empty strings; the text ends before the first match"),
    p("n", On::Both, Rule::Integer(1, MAX_CHOICES as i128), "choices per request, generated one after the other over the prompt's one prefill (each its own seed)"),
    p("stream", On::Both, Rule::Bool, "server-sent chunks"),
    p("stream_options", On::Both, Rule::Shaped, "{include_usage}: one last chunk with choices: [] and usage (only with stream: true)"),
    p("user", On::Both, Rule::Text, "informational: an end-user id; it changes nothing here"),
    p("metadata", On::Both, Rule::Shaped, "informational: up to 16 string tags (the router's capability rule reads them)"),
    p("safety_identifier", On::Chat, Rule::Text, "informational: an end-user id (OpenAI's successor of user); it changes nothing here"),
    p("prompt_cache_key", On::Chat, Rule::Text, "informational: the engine reuses a conversation's cached prefix by itself; it changes nothing here"),
    p("raw_special_tokens", On::Both, Rule::Bool, "extension: parse special-token text inside user and tool contents"),
    p("logit_bias", On::Both, Rule::Shaped, "{token id: bias in [-100, 100]} added to those logits before sampling (ids past the vocabulary: INVALID_REQUEST)"),
    p("logprobs", On::Both, Rule::Shaped, "chat: a boolean; completions: an integer in [0, 5], the alternatives per token"),
    p("top_logprobs", On::Chat, Rule::Integer(0, MAX_TOP_LOGPROBS as i128), "alternatives per token, in [0, 20] (needs logprobs: true)"),
    p("response_format", On::Both, Rule::Shaped, "{type: 'text' | 'json_object' | 'json_schema' | 'grammar' (extension: Lark)}: constrained decoding"),
    p("tools", On::Chat, Rule::Shaped, "1 to 128 {type: 'function', function: {name, description, parameters, strict}}: functions the model may call (parameters: the JSON Schema of an arguments object)"),
    p("tool_choice", On::Chat, Rule::Shaped, "'none' | 'auto' (default) | 'required' | {type: 'function', function: {name}}; with required or a name the call is produced by constrained decoding (only with tools)"),
    p("parallel_tool_calls", On::Chat, Rule::Shaped, "true: more than one call in one answer (default: one; only with tools)"),
    p("functions", On::Chat, Rule::Unsupported(OLD_FUNCTIONS), ""),
    p("function_call", On::Chat, Rule::Unsupported(OLD_FUNCTIONS), ""),
    p("echo", On::Completion, Rule::Unsupported("echoing the prompt is not supported"), ""),
    p("best_of", On::Completion, Rule::Unsupported("only one candidate is generated per request"), ""),
    p("suffix", On::Completion, Rule::Unsupported("insertion (suffix) is not supported"), ""),
    p("modalities", On::Chat, Rule::Unsupported("only text output is supported"), ""),
    p("audio", On::Chat, Rule::Unsupported("only text output is supported"), ""),
    p("prediction", On::Chat, Rule::Unsupported("predicted outputs are not supported"), ""),
    p("reasoning_effort", On::Chat, Rule::Unsupported("reasoning effort is not supported"), ""),
    p("web_search_options", On::Chat, Rule::Unsupported("web search is not supported"), ""),
    p("store", On::Chat, Rule::Unsupported("nothing is stored by this engine"), ""),
    p("service_tier", On::Both, Rule::Unsupported("there are no service tiers"), ""),
    p("verbosity", On::Chat, Rule::Unsupported("answer verbosity is not adjustable"), ""),
];

/// The fields a chat message may have.
const MESSAGE_FIELDS: &[&str] = &["role", "content", "tool_calls", "tool_call_id", "name"];

/// Limits a host adds to the rules (the server's `--max-tokens`).
#[derive(Clone, Copy, Debug, Default)]
pub struct RequestLimits {
    /// Most `max_tokens` a request may ask for (`max_tokens_exceeded` above it).
    pub max_tokens: Option<usize>,
}

/// A request that passed every rule.
#[derive(Clone, Debug)]
pub struct OpenAiRequest {
    pub kind: Kind,
    /// What the engine runs (`max_tokens` only when the request gave it; `seed` likewise).
    pub gen: GenerateRequest,
    pub stream: bool,
    /// `stream_options.include_usage`.
    pub include_usage: bool,
}

fn param_for(name: &str) -> Option<&'static Param> {
    PARAMETERS.iter().find(|p| p.name == name)
}

fn applies(on: On, kind: Kind) -> bool {
    matches!((on, kind), (On::Both, _) | (On::Chat, Kind::Chat) | (On::Completion, Kind::Completion))
}

fn endpoint(kind: Kind) -> &'static str {
    match kind {
        Kind::Chat => "/v1/chat/completions",
        Kind::Completion => "/v1/completions",
    }
}

/// `o[name]`, with `null` as absent.
fn get<'a>(o: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    o.get(name).filter(|v| !v.is_null())
}

fn number(o: &Map<String, Value>, name: &str) -> Result<Option<f64>, ProtocolError> {
    let Some(v) = get(o, name) else { return Ok(None) };
    match v.as_f64() {
        Some(x) => check_number(name, x).map(Some),
        None => Err(ProtocolError::invalid(name, format!("{name} must be a number, got {v}"))),
    }
}

/// `x` under number parameter `name`'s rule (the server's and the CLI's one check). The engine
/// uses the value as an f32, so that is what is checked: 1e-40 passes `> 0` as an f64 but is 0
/// as an f32 (a divisor of 0).
pub fn check_number(name: &str, x: f64) -> Result<f64, ProtocolError> {
    let used = x as f32 as f64;
    let (ok, range) = match param_for(name).map(|p| p.rule) {
        Some(Rule::Number(lo, hi)) => (used >= lo && used <= hi, format!("[{lo}, {hi}]")),
        Some(Rule::Positive(hi)) => (used > 0.0 && used <= hi, format!("(0, {hi}]")),
        _ => unreachable!("{name} is not a number parameter"),
    };
    if ok && used.is_finite() {
        Ok(x)
    } else {
        Err(ProtocolError::invalid(name, format!("{name} must be in {range}, got {x}")))
    }
}

fn integer(o: &Map<String, Value>, name: &str) -> Result<Option<i128>, ProtocolError> {
    let Some(v) = get(o, name) else { return Ok(None) };
    let Rule::Integer(lo, hi) = param_for(name).expect("a listed parameter").rule else { unreachable!("{name} is not an integer") };
    let n = match v {
        Value::Number(n) => n.as_i64().map(i128::from).or_else(|| n.as_u64().map(i128::from)).or_else(|| n.as_f64().and_then(big_integer)),
        _ => None,
    };
    match n {
        Some(x) if x >= lo && x <= hi => Ok(Some(x)),
        _ => Err(ProtocolError::invalid(name, format!("{name} must be an integer in [{lo}, {hi}], got {v}"))),
    }
}

/// An integer JSON reads as a float because its decimal text is past i64 / u64: what JS prints
/// for -2^63 ("-9223372036854776000"). Only past 2^53, where every f64 is an integer and no
/// one writes a fraction: `5.0` stays refused.
fn big_integer(x: f64) -> Option<i128> {
    (x.abs() > 9_007_199_254_740_992.0 && x.abs() < 1e39).then_some(x as i128)
}

fn boolean(o: &Map<String, Value>, name: &str) -> Result<Option<bool>, ProtocolError> {
    match get(o, name) {
        None => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(v) => Err(ProtocolError::invalid(name, format!("{name} must be a boolean, got {v}"))),
    }
}

/// An unsupported parameter given the value that asks for what the engine does anyway
/// (clients send these explicitly: `store: false`, `modalities: ["text"]`): accepted.
fn asks_for_what_runs(name: &str, v: &Value) -> bool {
    match name {
        "store" | "echo" => v == &Value::Bool(false),
        "best_of" => v.as_u64() == Some(1),
        "modalities" => v.as_array().is_some_and(|m| m.iter().all(|x| x == "text")),
        "service_tier" => matches!(v.as_str(), Some("auto" | "default")),
        "verbosity" => v.as_str() == Some("medium"),
        "suffix" => v.as_str() == Some(""),
        _ => false,
    }
}

/// Every key is a known parameter of this endpoint, with a value of its rule's type.
fn check_keys(kind: Kind, o: &Map<String, Value>) -> Result<(), ProtocolError> {
    for (name, v) in o {
        let Some(p) = param_for(name) else {
            return Err(ProtocolError::new("unknown_parameter", name.as_str(), format!("unknown parameter {name:?}")));
        };
        if !applies(p.on, kind) {
            return Err(ProtocolError::new("unknown_parameter", name.as_str(), format!("{name} is not a parameter of {}", endpoint(kind))));
        }
        if v.is_null() {
            continue;
        }
        match p.rule {
            Rule::Unsupported(_) if asks_for_what_runs(name, v) => {}
            Rule::Unsupported(why) => return Err(ProtocolError::unsupported(name.as_str(), format!("{name} is not supported: {why}"))),
            Rule::Text if !v.is_string() => return Err(ProtocolError::invalid(name.as_str(), format!("{name} must be a string, got {v}"))),
            _ => {}
        }
    }
    Ok(())
}

/// A message's `content`: a string, an array of `{type: "text", text}` parts, or null.
fn content_text(v: Option<&Value>, i: usize) -> Result<String, ProtocolError> {
    let param = format!("messages[{i}].content");
    match v {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(parts)) => {
            let mut out = String::new();
            for (j, p) in parts.iter().enumerate() {
                match (p.get("type").and_then(Value::as_str), p.get("text").and_then(Value::as_str)) {
                    (Some("text"), Some(t)) => out.push_str(t),
                    _ => return Err(ProtocolError::new("unsupported_content", format!("{param}[{j}]"), format!("{param}[{j}]: only text parts are supported"))),
                }
            }
            Ok(out)
        }
        Some(_) => Err(ProtocolError::new("invalid_messages", param.clone(), format!("{param} must be a string or an array of text parts"))),
    }
}

fn messages(o: &Map<String, Value>) -> Result<Vec<ChatMessage>, ProtocolError> {
    let bad = |param: String, m: String| ProtocolError::new("invalid_messages", param, m);
    let msgs = get(o, "messages")
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty())
        .ok_or_else(|| bad("messages".into(), "messages must be a non-empty array".into()))?;
    let mut out = Vec::with_capacity(msgs.len());
    for (i, m) in msgs.iter().enumerate() {
        let m = m.as_object().ok_or_else(|| bad(format!("messages[{i}]"), format!("messages[{i}] must be an object")))?;
        if let Some(k) = m.keys().find(|k| !MESSAGE_FIELDS.contains(&k.as_str()) && !m[k.as_str()].is_null()) {
            let why = if k == "function_call" { OLD_FUNCTIONS } else { "messages have only role, content, name, tool_calls and tool_call_id here" };
            return Err(ProtocolError::unsupported(format!("messages[{i}].{k}"), format!("messages[{i}].{k} is not supported: {why}")));
        }
        let role = m.get("role").and_then(Value::as_str).ok_or_else(|| bad(format!("messages[{i}].role"), format!("messages[{i}].role must be a string")))?;
        if role == "function" {
            return Err(ProtocolError::unsupported(format!("messages[{i}].role"), format!("messages[{i}].role \"function\" is not supported: {OLD_FUNCTIONS}")));
        }
        // A template writes the role as it is, where special-token text is parsed: only the
        // roles OpenAI defines (anything else could forge a turn).
        if !ROLES.contains(&role) {
            return Err(bad(format!("messages[{i}].role"), format!("messages[{i}].role must be one of {}, got {role:?}", ROLES.join(", "))));
        }
        let mut msg = ChatMessage::new(role, &content_text(m.get("content"), i)?);
        if let Some(c) = get(m, "tool_calls") {
            msg.tool_calls = super::tools::message_calls(c, i)?;
        }
        // OpenAI requires content but of an assistant message that carries tool_calls (then it
        // may be null or absent); llama.cpp's server refuses a message with neither as well.
        if get(m, "content").is_none() && !(role == "assistant" && get(m, "tool_calls").is_some()) {
            let param = format!("messages[{i}].content");
            return Err(bad(param.clone(), format!("{param} is required (a string or an array of text parts; null only beside an assistant's tool_calls)")));
        }
        match get(m, "name") {
            None => {}
            Some(Value::String(n)) if super::tools::valid_name(n) => msg.name = Some(n.clone()),
            Some(v) => return Err(bad(format!("messages[{i}].name"), format!("messages[{i}].name must be 1 to 64 letters, digits, '_' or '-', got {v}"))),
        }
        match get(m, "tool_call_id") {
            None => {}
            Some(Value::String(id)) => msg.tool_call_id = Some(id.clone()),
            Some(v) => return Err(bad(format!("messages[{i}].tool_call_id"), format!("messages[{i}].tool_call_id must be a string, got {v}"))),
        }
        out.push(msg);
    }
    Ok(out)
}

fn prompt(o: &Map<String, Value>) -> Result<String, ProtocolError> {
    match get(o, "prompt") {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Array(a)) if a.len() == 1 && a[0].is_string() => Ok(a[0].as_str().unwrap_or_default().to_string()),
        Some(Value::Array(_)) => Err(ProtocolError::unsupported("prompt", "prompt: only a string (or an array of one string) is supported")),
        _ => Err(ProtocolError::new("invalid_prompt", "prompt", "prompt must be a string")),
    }
}

fn stop(o: &Map<String, Value>) -> Result<Option<Vec<String>>, ProtocolError> {
    let list: Vec<&Value> = match get(o, "stop") {
        None => return Ok(None),
        Some(Value::Array(a)) => a.iter().collect(),
        Some(v) => vec![v],
    };
    let rule = || format!("stop must be a non-empty string or an array of at most {MAX_STOP} non-empty strings");
    if list.len() > MAX_STOP {
        return Err(ProtocolError::invalid("stop", format!("{}; got {}", rule(), list.len())));
    }
    list.iter()
        .map(|s| s.as_str().filter(|s| !s.is_empty()).map(str::to_string).ok_or_else(|| ProtocolError::invalid("stop", format!("{}; got {s}", rule()))))
        .collect::<Result<Vec<_>, _>>()
        .map(|v| if v.is_empty() { None } else { Some(v) })
}

fn include_usage(o: &Map<String, Value>, stream: bool) -> Result<bool, ProtocolError> {
    let Some(v) = get(o, "stream_options") else { return Ok(false) };
    let so = v.as_object().ok_or_else(|| ProtocolError::invalid("stream_options", "stream_options must be an object"))?;
    if !stream {
        return Err(ProtocolError::invalid("stream_options", "stream_options is only allowed with stream: true"));
    }
    if let Some(k) = so.keys().find(|k| k.as_str() != "include_usage") {
        return Err(ProtocolError::new("unknown_parameter", format!("stream_options.{k}"), format!("unknown parameter stream_options.{k}")));
    }
    match so.get("include_usage") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(v) => Err(ProtocolError::invalid("stream_options.include_usage", format!("stream_options.include_usage must be a boolean, got {v}"))),
    }
}

/// Most alternatives per token on `/v1/completions` (OpenAI's legacy limit).
const MAX_COMPLETION_LOGPROBS: i128 = 5;

/// The alternatives per token, when log probabilities are asked for.
fn logprobs(kind: Kind, o: &Map<String, Value>) -> Result<Option<usize>, ProtocolError> {
    let top = integer(o, "top_logprobs")?;
    match (kind, get(o, "logprobs")) {
        (Kind::Chat, None | Some(Value::Bool(false))) if top.is_some() => {
            Err(ProtocolError::invalid("top_logprobs", "top_logprobs needs logprobs: true"))
        }
        (Kind::Chat, None | Some(Value::Bool(false))) => Ok(None),
        (Kind::Chat, Some(Value::Bool(true))) => Ok(Some(top.unwrap_or(0) as usize)),
        (Kind::Chat, Some(v)) => Err(ProtocolError::invalid("logprobs", format!("logprobs must be a boolean, got {v}"))),
        (Kind::Completion, None) => Ok(None),
        (Kind::Completion, Some(v)) => match v.as_u64() {
            Some(n) if n as i128 <= MAX_COMPLETION_LOGPROBS && v.is_u64() => Ok(Some(n as usize)),
            _ => Err(ProtocolError::invalid("logprobs", format!("logprobs must be an integer in [0, {MAX_COMPLETION_LOGPROBS}], got {v}"))),
        },
    }
}

fn check_metadata(o: &Map<String, Value>) -> Result<(), ProtocolError> {
    match get(o, "metadata") {
        None => Ok(()),
        Some(Value::Object(m)) if m.len() <= 16 && m.values().all(Value::is_string) => Ok(()),
        Some(v) => Err(ProtocolError::invalid("metadata", format!("metadata must be an object of at most 16 string values, got {v}"))),
    }
}

/// Largest bias magnitude `logit_bias` takes (OpenAI's range).
pub const MAX_LOGIT_BIAS: f64 = 100.0;

/// `logit_bias`: an object from token ids (decimal strings, as JSON keys are) to numbers in
/// [-100, 100]. Whether the ids exist is the loaded model's to say (`Host::generate_begin`).
fn logit_bias(o: &Map<String, Value>) -> Result<Option<std::collections::BTreeMap<u32, f32>>, ProtocolError> {
    let m = match get(o, "logit_bias") {
        None => return Ok(None),
        Some(Value::Object(m)) => m,
        Some(v) => return Err(ProtocolError::invalid("logit_bias", format!("logit_bias must be an object of token ids to biases, got {v}"))),
    };
    let mut out = std::collections::BTreeMap::new();
    for (k, v) in m {
        let id = Some(k.as_str()).filter(|k| !k.is_empty() && k.len() <= 10 && k.bytes().all(|b| b.is_ascii_digit())).and_then(|k| k.parse::<u32>().ok());
        let Some(id) = id else {
            return Err(ProtocolError::invalid("logit_bias", format!("logit_bias: {k:?} is not a token id (a non-negative integer)")));
        };
        match v.as_f64() {
            Some(b) if b.is_finite() && b.abs() <= MAX_LOGIT_BIAS => {
                out.insert(id, b as f32);
            }
            _ => return Err(ProtocolError::invalid("logit_bias", format!("logit_bias[{k}] must be a number in [-{MAX_LOGIT_BIAS}, {MAX_LOGIT_BIAS}], got {v}"))),
        }
    }
    Ok((!out.is_empty()).then_some(out))
}

/// `response_format` → what the output must be (`None`: free text). The schema itself is
/// compiled by the engine (`crate::structured`), which refuses one it cannot use.
fn response_format(o: &Map<String, Value>) -> Result<Option<OutputFormat>, ProtocolError> {
    let Some(v) = get(o, "response_format") else { return Ok(None) };
    let bad = |m: String| ProtocolError::invalid("response_format", m);
    let obj = v.as_object().ok_or_else(|| bad(format!("response_format must be an object, got {v}")))?;
    let only = |allowed: &[&str]| match obj.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(ProtocolError::new("unknown_parameter", format!("response_format.{k}"), format!("unknown parameter response_format.{k}"))),
        None => Ok(()),
    };
    match obj.get("type").and_then(Value::as_str) {
        Some("text") => only(&["type"]).map(|_| None),
        Some("json_object") => only(&["type"]).map(|_| Some(OutputFormat::JsonObject)),
        Some("json_schema") => {
            only(&["type", "json_schema"])?;
            let js = obj.get("json_schema").and_then(Value::as_object).ok_or_else(|| bad("response_format.json_schema must be an object {name, schema, strict}".into()))?;
            if let Some(k) = js.keys().find(|k| !["name", "schema", "strict", "description"].contains(&k.as_str())) {
                return Err(ProtocolError::new("unknown_parameter", format!("response_format.json_schema.{k}"), format!("unknown parameter response_format.json_schema.{k}")));
            }
            // OpenAI's rule for the name: a-z, A-Z, 0-9, _ and -, at most 64.
            let name_ok = js.get("name").and_then(Value::as_str).is_some_and(|n| !n.is_empty() && n.len() <= 64 && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'));
            if !name_ok {
                return Err(ProtocolError::invalid("response_format.json_schema.name", "response_format.json_schema.name must be 1 to 64 of a-z, A-Z, 0-9, _ and -"));
            }
            if js.get("strict").is_some_and(|s| !s.is_boolean() && !s.is_null()) {
                return Err(ProtocolError::invalid("response_format.json_schema.strict", "response_format.json_schema.strict must be a boolean"));
            }
            // No schema: any JSON value (OpenAI's default); `strict` changes nothing here, the
            // output always follows the schema.
            let schema = match js.get("schema") {
                None | Some(Value::Null) => serde_json::json!({}),
                Some(s @ Value::Object(_)) => s.clone(),
                Some(s) => return Err(ProtocolError::invalid("response_format.json_schema.schema", format!("response_format.json_schema.schema must be an object, got {s}"))),
            };
            Ok(Some(OutputFormat::JsonSchema { schema }))
        }
        // Extension: a grammar in llguidance's Lark syntax (compiled by the engine).
        Some("grammar") => {
            only(&["type", "grammar"])?;
            match obj.get("grammar").and_then(Value::as_str) {
                Some(g) if !g.trim().is_empty() => Ok(Some(OutputFormat::Grammar { grammar: g.to_string() })),
                _ => Err(ProtocolError::invalid("response_format.grammar", "response_format.grammar must be a non-empty Lark grammar (a string)")),
            }
        }
        _ => Err(bad(format!("response_format.type must be 'text', 'json_object', 'json_schema' or 'grammar', got {v}"))),
    }
}

/// Checks a request body (a JSON object) against every rule and builds the engine's request.
/// The first broken rule is the error.
pub fn parse_request(kind: Kind, body: &Value, limits: RequestLimits) -> Result<OpenAiRequest, ProtocolError> {
    let o = body.as_object().ok_or_else(|| ProtocolError::new("invalid_json", "", "the body must be a JSON object"))?;
    check_keys(kind, o)?;
    let mut gen = GenerateRequest::default();
    match kind {
        Kind::Chat => {
            gen.kind = Some("chat".into());
            let m = messages(o)?;
            super::tools::check_turns(&m)?;
            gen.messages = Some(m);
            gen.tools = super::tools::tools(o)?;
        }
        Kind::Completion => {
            gen.kind = Some("completion".into());
            gen.prompt = Some(prompt(o)?);
        }
    }
    gen.n = integer(o, "n")?.map(|n| n as usize);
    // Both are checked (nothing given is ignored unchecked); max_completion_tokens wins, as
    // OpenAI deprecates max_tokens for it (llama.cpp's server and vLLM read it first too).
    let max_tokens = integer(o, "max_tokens")?;
    let max_completion_tokens = integer(o, "max_completion_tokens")?;
    // The error names the parameter the value came from.
    let given = if max_completion_tokens.is_some() { "max_completion_tokens" } else { "max_tokens" };
    let max_tokens = max_completion_tokens.or(max_tokens);
    if let (Some(m), Some(cap)) = (max_tokens, limits.max_tokens) {
        if m > cap as i128 {
            return Err(ProtocolError::new("max_tokens_exceeded", given, format!("{given} is {m}; this server allows at most {cap}")));
        }
    }
    gen.max_tokens = max_tokens.map(|m| m as usize);
    gen.temperature = number(o, "temperature")?.map(|v| v as f32);
    gen.top_p = number(o, "top_p")?.map(|v| v as f32);
    gen.top_k = integer(o, "top_k")?.map(|v| v as usize);
    gen.min_p = number(o, "min_p")?.map(|v| v as f32);
    let repeat = (number(o, "repetition_penalty")?, number(o, "repeat_penalty")?);
    if let (Some(a), Some(b)) = repeat {
        if a != b {
            return Err(ProtocolError::invalid("repeat_penalty", "repetition_penalty and repeat_penalty are the same parameter; give one"));
        }
    }
    gen.repetition_penalty = repeat.0.or(repeat.1).map(|v| v as f32);
    gen.presence_penalty = number(o, "presence_penalty")?.map(|v| v as f32);
    gen.frequency_penalty = number(o, "frequency_penalty")?.map(|v| v as f32);
    // Two's complement: -1 and 2^64 - 1 are the same seed.
    gen.seed = integer(o, "seed")?.map(|v| v as u64);
    gen.stop = stop(o)?;
    gen.raw_special_tokens = boolean(o, "raw_special_tokens")?;
    gen.logit_bias = logit_bias(o)?;
    check_metadata(o)?;
    gen.logprobs = logprobs(kind, o)?;
    gen.response_format = response_format(o)?;
    if gen.response_format.is_some() && gen.tools.as_ref().is_some_and(|t| t.choice != crate::tools::ToolChoice::None) {
        return Err(ProtocolError::unsupported("response_format", "response_format together with tools is not supported (unless tool_choice is 'none')"));
    }
    let stream = boolean(o, "stream")?.unwrap_or(false);
    let include_usage = include_usage(o, stream)?;
    Ok(OpenAiRequest { kind, gen, stream, include_usage })
}

/// [`parse_request`] on JSON text (`invalid_json` when it does not parse).
pub fn parse_request_json(kind: Kind, body: &[u8], limits: RequestLimits) -> Result<OpenAiRequest, ProtocolError> {
    let v: Value = super::deep_json::from_slice(body).map_err(|e| match e {
        super::deep_json::DeepJsonError::TooDeep => ProtocolError::new("too_deep", "", format!("the body's {e}")),
        super::deep_json::DeepJsonError::Json(e) => ProtocolError::new("invalid_json", "", format!("the body is not valid JSON: {e}")),
    })?;
    parse_request(kind, &v, limits)
}
