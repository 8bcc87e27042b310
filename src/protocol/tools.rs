//! The rules of OpenAI's tool parameters: `tools`, `tool_choice`, `parallel_tool_calls`, and
//! the tool parts of messages (`tool_calls` on assistant messages, `tool_call_id` on tool
//! messages). Errors name the parameter at fault with a code of their own:
//! `invalid_tools`, `invalid_tool_choice`, `unknown_tool` (a `tool_choice` naming a function
//! not in `tools`), `invalid_tool_calls`, `unmatched_tool_message` (a tool message that answers
//! no earlier call).

use serde_json::{Map, Value};

use super::error::ProtocolError;
use crate::tokenizer::ChatMessage;
use crate::tools::{Function, ToolCall, ToolChoice, Tools};

/// Most functions in `tools` (OpenAI's limit).
pub const MAX_TOOLS: usize = 128;

fn get<'a>(o: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    o.get(name).filter(|v| !v.is_null())
}

fn unknown_keys(o: &Map<String, Value>, allowed: &[&str], at: &str) -> Result<(), ProtocolError> {
    match o.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(ProtocolError::new("unknown_parameter", format!("{at}.{k}"), format!("unknown parameter {at}.{k}"))),
        None => Ok(()),
    }
}

/// OpenAI's rule for a function name: 1 to 64 of a-z, A-Z, 0-9, _ and -.
pub fn valid_name(n: &str) -> bool {
    !n.is_empty() && n.len() <= 64 && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn function(v: &Value, i: usize) -> Result<Function, ProtocolError> {
    let at = format!("tools[{i}]");
    let bad = |param: String, m: String| ProtocolError::new("invalid_tools", param, m);
    let t = v.as_object().ok_or_else(|| bad(at.clone(), format!("{at} must be an object {{type: 'function', function: {{name, description, parameters}}}}")))?;
    unknown_keys(t, &["type", "function"], &at)?;
    if t.get("type").and_then(Value::as_str) != Some("function") {
        return Err(bad(format!("{at}.type"), format!("{at}.type must be 'function'")));
    }
    let f = get(t, "function").and_then(Value::as_object).ok_or_else(|| bad(format!("{at}.function"), format!("{at}.function must be an object {{name, description, parameters}}")))?;
    let at = format!("{at}.function");
    unknown_keys(f, &["name", "description", "parameters", "strict"], &at)?;
    let name = f.get("name").and_then(Value::as_str).filter(|n| valid_name(n));
    let name = name.ok_or_else(|| bad(format!("{at}.name"), format!("{at}.name must be 1 to 64 of a-z, A-Z, 0-9, _ and -")))?;
    let description = match get(f, "description") {
        None => None,
        Some(Value::String(d)) => Some(d.clone()),
        Some(_) => return Err(bad(format!("{at}.description"), format!("{at}.description must be a string"))),
    };
    if get(f, "strict").is_some_and(|s| !s.is_boolean()) {
        return Err(bad(format!("{at}.strict"), format!("{at}.strict must be a boolean")));
    }
    // The arguments are an object (OpenAI's rule): no schema is no arguments, `{}`; a schema
    // without a type is one of an object. The schema itself is compiled by the engine
    // (`tools::constraint`), which refuses one it cannot use.
    let parameters = match get(f, "parameters") {
        None => serde_json::json!({"type": "object", "properties": {}, "additionalProperties": false}),
        Some(Value::Object(p)) => {
            let mut p = p.clone();
            match p.get("type") {
                None => {
                    p.insert("type".into(), "object".into());
                }
                Some(Value::String(s)) if s == "object" => {}
                Some(other) => return Err(bad(format!("{at}.parameters"), format!("{at}.parameters must be the schema of an object (type: 'object'), got type {other}"))),
            }
            Value::Object(p)
        }
        Some(v) => return Err(bad(format!("{at}.parameters"), format!("{at}.parameters must be a JSON Schema object, got {v}"))),
    };
    Ok(Function { name: name.to_string(), description, parameters })
}

/// `tools`, `tool_choice` and `parallel_tool_calls` → the request's [`Tools`] (`None` without
/// `tools`).
pub fn tools(o: &Map<String, Value>) -> Result<Option<Tools>, ProtocolError> {
    let Some(v) = get(o, "tools") else {
        for k in ["tool_choice", "parallel_tool_calls"] {
            if get(o, k).is_some() {
                let code = if k == "tool_choice" { "invalid_tool_choice" } else { "invalid_value" };
                return Err(ProtocolError::new(code, k, format!("{k} is only allowed when tools are given")));
            }
        }
        return Ok(None);
    };
    let list = v.as_array().ok_or_else(|| ProtocolError::new("invalid_tools", "tools", format!("tools must be an array of functions, got {v}")))?;
    if list.is_empty() || list.len() > MAX_TOOLS {
        return Err(ProtocolError::new("invalid_tools", "tools", format!("tools must hold 1 to {MAX_TOOLS} functions, got {}", list.len())));
    }
    let mut functions: Vec<Function> = Vec::with_capacity(list.len());
    for (i, t) in list.iter().enumerate() {
        let f = function(t, i)?;
        if functions.iter().any(|g| g.name == f.name) {
            return Err(ProtocolError::new("invalid_tools", format!("tools[{i}].function.name"), format!("tools: two functions are named {:?}", f.name)));
        }
        functions.push(f);
    }
    let choice = match get(o, "tool_choice") {
        None => ToolChoice::Auto,
        Some(Value::String(s)) => match s.as_str() {
            "none" => ToolChoice::None,
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            _ => return Err(ProtocolError::new("invalid_tool_choice", "tool_choice", format!("tool_choice must be 'none', 'auto', 'required' or {{type: 'function', function: {{name}}}}, got {s:?}"))),
        },
        Some(Value::Object(c)) => {
            unknown_keys(c, &["type", "function"], "tool_choice")?;
            let name = (c.get("type").and_then(Value::as_str) == Some("function"))
                .then(|| c.get("function").and_then(Value::as_object))
                .flatten()
                .and_then(|f| {
                    unknown_keys(f, &["name"], "tool_choice.function").ok()?;
                    f.get("name").and_then(Value::as_str)
                });
            let name = name.ok_or_else(|| ProtocolError::new("invalid_tool_choice", "tool_choice", "tool_choice must be {type: 'function', function: {name}}"))?;
            if !functions.iter().any(|f| f.name == name) {
                return Err(ProtocolError::new("unknown_tool", "tool_choice.function.name", format!("tool_choice names {name:?}, which is not one of the tools")));
            }
            ToolChoice::Function(name.to_string())
        }
        Some(v) => return Err(ProtocolError::new("invalid_tool_choice", "tool_choice", format!("tool_choice must be a string or an object, got {v}"))),
    };
    // Absent: one call per answer. OpenAI's default allows several; small models given the
    // choice keep adding calls until max_tokens, so several are only what the request asks for.
    let parallel = match get(o, "parallel_tool_calls") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => return Err(ProtocolError::invalid("parallel_tool_calls", format!("parallel_tool_calls must be a boolean, got {v}"))),
    };
    Ok(Some(Tools { functions, choice, parallel }))
}

/// An assistant message's `tool_calls`.
pub fn message_calls(v: &Value, i: usize) -> Result<Vec<ToolCall>, ProtocolError> {
    let at = format!("messages[{i}].tool_calls");
    let bad = |param: String, m: String| ProtocolError::new("invalid_tool_calls", param, m);
    let list = v.as_array().ok_or_else(|| bad(at.clone(), format!("{at} must be an array")))?;
    let mut out = Vec::with_capacity(list.len());
    for (j, c) in list.iter().enumerate() {
        let at = format!("{at}[{j}]");
        let shape = || bad(at.clone(), format!("{at} must be {{id, type: 'function', function: {{name, arguments}}}} with string id, name and arguments"));
        let c = c.as_object().ok_or_else(shape)?;
        unknown_keys(c, &["id", "type", "function"], &at)?;
        let f = c.get("function").and_then(Value::as_object).ok_or_else(shape)?;
        unknown_keys(f, &["name", "arguments"], &format!("{at}.function"))?;
        let id = c.get("id").and_then(Value::as_str).filter(|s| !s.is_empty()).ok_or_else(shape)?;
        if c.get("type").and_then(Value::as_str) != Some("function") {
            return Err(shape());
        }
        let (Some(name), Some(arguments)) = (f.get("name").and_then(Value::as_str), f.get("arguments").and_then(Value::as_str)) else { return Err(shape()) };
        out.push(ToolCall::new(id.to_string(), name.to_string(), arguments.to_string()));
    }
    Ok(out)
}

/// The tool turns of a conversation: `tool_calls` only on assistant messages, every tool
/// message answers a call of an earlier assistant message (by `tool_call_id`), once.
pub fn check_turns(messages: &[ChatMessage]) -> Result<(), ProtocolError> {
    let mut open: Vec<&str> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        if !m.tool_calls.is_empty() && m.role != "assistant" {
            return Err(ProtocolError::new("invalid_tool_calls", format!("messages[{i}].tool_calls"), format!("messages[{i}]: only assistant messages have tool_calls")));
        }
        if m.tool_call_id.is_some() && m.role != "tool" {
            return Err(ProtocolError::new("invalid_messages", format!("messages[{i}].tool_call_id"), format!("messages[{i}]: only tool messages have a tool_call_id")));
        }
        if m.role == "assistant" {
            open = m.tool_calls.iter().map(|c| c.id.as_str()).collect();
        } else if m.role == "tool" {
            let id = m.tool_call_id.as_deref().ok_or_else(|| ProtocolError::new("unmatched_tool_message", format!("messages[{i}].tool_call_id"), format!("messages[{i}]: a tool message needs the tool_call_id of the call it answers")))?;
            let Some(k) = open.iter().position(|c| *c == id) else {
                return Err(ProtocolError::new("unmatched_tool_message", format!("messages[{i}].tool_call_id"), format!("messages[{i}]: tool_call_id {id:?} answers no call of the assistant message before it")));
            };
            open.remove(k);
        } else {
            open.clear();
        }
    }
    Ok(())
}
