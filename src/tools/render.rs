//! How a conversation with tools reaches the model: through the model's own chat template when
//! it renders tools (its Jinja source uses a `tools` variable: it then gets OpenAI's `tools` list
//! and the messages' `tool_calls` / `tool_call_id` as they are), otherwise through the one
//! fallback here, for templates that know nothing of tools (Gemma 3's, SmolLM2's, the built-in
//! formats):
//!
//! - the functions are listed in a section appended to the system message (one is added when
//!   the conversation has none): each function's `{"name", "description", "parameters"}` as
//!   JSON, then the call format (see `tools/mod.rs`);
//! - an assistant message's `tool_calls` become its content, each call written exactly as the
//!   model writes one (`<tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>`), so the
//!   prompt of the next turn starts with the tokens the KV cache already holds;
//! - `role: 'tool'` messages become a user turn of `<tool_response>\n...\n</tool_response>`
//!   blocks (consecutive results in one turn: templates that require alternating roles accept it).
//!
//! The functions are shown under every `tool_choice`, `'none'` included (as OpenAI does; the
//! prompt then starts the same way whatever the choice of each turn, and the KV cache is reused).

use serde_json::{json, Value};

use super::{Tools, CLOSE, TRIGGER};
use crate::tokenizer::{ChatMessage, ChatTemplate};

/// The messages to render and the `tools` value to give the template (when it renders tools).
pub fn conversation(template: &ChatTemplate, messages: &[ChatMessage], tools: Option<&Tools>) -> (Vec<ChatMessage>, Option<Value>) {
    // Shown under every choice, 'none' included (as OpenAI does): the prompt's start stays the
    // same from turn to turn whatever the choice, so the KV cache is reused.
    let shown = tools;
    if template.renders_tools() {
        return (messages.to_vec(), shown.map(openai_tools));
    }
    let out = fallback(messages, shown);
    // A section in a system message the conversation did not have: a template that refuses a
    // system role (Gemma 2's raises "System role not supported") gets it at the start of the
    // first user message instead, as such templates fold a system prompt themselves.
    let added = shown.is_some() && !messages.first().is_some_and(|m| m.role == "system" || m.role == "developer");
    if added && refuses_system(template) {
        if let Some(folded) = fold_system(&out) {
            return (folded, None);
        }
    }
    (out, None)
}

/// Whether `template` raises on a system message but takes the same text in a user turn: told
/// by two one-turn renders (not the whole conversation again).
fn refuses_system(template: &ChatTemplate) -> bool {
    let turn = |role: &str| [ChatMessage::new(role, "s"), ChatMessage::new("user", "u")];
    matches!(template.apply(&turn("system"), true), Err(crate::tokenizer::TokenizerError::ChatTemplate { .. }))
        && template.apply(&turn("user")[1..], true).is_ok()
}

/// `out` without its first (system) message, whose text starts the first user message.
fn fold_system(out: &[ChatMessage]) -> Option<Vec<ChatMessage>> {
    let (system, rest) = out.split_first()?;
    let mut folded = rest.to_vec();
    let first_user = folded.iter_mut().find(|m| m.role == "user")?;
    first_user.content = format!("{}\n\n{}", system.content, first_user.content);
    Some(folded)
}

/// OpenAI's `tools` list (what a template that renders tools expects), each function's keys in
/// OpenAI's order (`name`, `description`, `parameters`): templates write it with `tojson`, which
/// keeps the order.
pub fn openai_tools(t: &Tools) -> Value {
    Value::Array(
        t.functions
            .iter()
            .map(|f| {
                let mut func = json!({ "name": f.name });
                if let Some(d) = &f.description {
                    func["description"] = d.clone().into();
                }
                func["parameters"] = f.parameters.clone();
                json!({ "type": "function", "function": func })
            })
            .collect(),
    )
}

/// The system-prompt section that lists the functions and the call format.
pub fn section(t: &Tools) -> String {
    let mut s = String::from("# Tools\n\nYou may call functions to help with the user's request. The functions, each with the JSON Schema of its arguments:\n");
    for f in &t.functions {
        let mut v = json!({ "name": f.name });
        if let Some(d) = &f.description {
            v["description"] = d.clone().into();
        }
        v["parameters"] = f.parameters.clone();
        s.push_str(&compact(&v));
        s.push('\n');
    }
    s.push_str(&format!(
        "\nTo call a function, reply with only this{}:\n{TRIGGER}\n{{\"name\": \"<function name>\", \"arguments\": <the arguments as a JSON object>}}\n{CLOSE}\nThe results come back in <tool_response> blocks. Otherwise, answer normally.",
        if t.many() { " (one block per call)" } else { "" }
    ));
    s
}

/// The conversation for a template without tools.
fn fallback(messages: &[ChatMessage], tools: Option<&Tools>) -> Vec<ChatMessage> {
    let mut out: Vec<ChatMessage> = Vec::with_capacity(messages.len() + 1);
    if let Some(t) = tools {
        let sec = section(t);
        match messages.first() {
            Some(m) if m.role == "system" || m.role == "developer" => {
                let content = if m.content.trim().is_empty() { sec } else { format!("{}\n\n{sec}", m.content) };
                out.push(ChatMessage::new(&m.role, &content));
            }
            _ => out.push(ChatMessage::new("system", &sec)),
        }
    }
    let skip = usize::from(tools.is_some() && out.len() == 1 && messages.first().is_some_and(|m| m.role == "system" || m.role == "developer"));
    let mut in_results = false;
    for m in &messages[skip..] {
        if m.role == "tool" {
            let block = format!("<tool_response>\n{}\n</tool_response>", m.content);
            match out.last_mut() {
                Some(last) if in_results => {
                    last.content.push('\n');
                    last.content.push_str(&block);
                }
                _ => out.push(ChatMessage::new("user", &block)),
            }
            in_results = true;
            continue;
        }
        in_results = false;
        if m.tool_calls.is_empty() {
            out.push(ChatMessage::new(&m.role, &m.content));
            continue;
        }
        let mut content = m.content.clone();
        for c in &m.tool_calls {
            if !content.is_empty() {
                content.push('\n');
            }
            content.push_str(&call_text(&c.function.name, &c.function.arguments));
        }
        out.push(ChatMessage::new(&m.role, &content));
    }
    out
}

/// One call as the model writes it (the arguments compact, as the grammar writes them).
pub fn call_text(name: &str, arguments: &str) -> String {
    let args = serde_json::from_str::<Value>(arguments).map(|v| compact(&v)).unwrap_or_else(|_| arguments.to_string());
    format!("{TRIGGER}\n{{\"name\": {}, \"arguments\": {args}}}\n{CLOSE}", Value::from(name))
}

/// JSON with `, ` and `: ` separators and no other whitespace (the constrained output's form).
pub fn compact(v: &Value) -> String {
    let mut s = String::new();
    write_compact(v, &mut s);
    s
}

fn write_compact(v: &Value, s: &mut String) {
    match v {
        Value::Array(a) => {
            s.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                write_compact(x, s);
            }
            s.push(']');
        }
        Value::Object(o) => {
            s.push('{');
            for (i, (k, x)) in o.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                s.push_str(&Value::from(k.as_str()).to_string());
                s.push_str(": ");
                write_compact(x, s);
            }
            s.push('}');
        }
        other => s.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::{Function, ToolCall, ToolChoice};
    use crate::tokenizer::chat_template::BuiltinTemplate;

    fn tools(choice: ToolChoice) -> Tools {
        Tools {
            functions: vec![Function { name: "get_weather".into(), description: Some("Weather now".into()), parameters: json!({"type": "object", "properties": {"city": {"type": "string"}}}) }],
            choice,
            parallel: true,
        }
    }

    fn history() -> Vec<ChatMessage> {
        let mut call = ChatMessage::new("assistant", "");
        call.tool_calls = vec![ToolCall::new("call_1".into(), "get_weather".into(), "{\"city\":\"Paris\"}".into())];
        let mut result = ChatMessage::new("tool", "{\"temp\": 21}");
        result.tool_call_id = Some("call_1".into());
        vec![ChatMessage::new("user", "Weather in Paris?"), call, result]
    }

    #[test]
    fn fallback_lists_functions_and_renders_calls_and_results() {
        let t = tools(ToolChoice::Auto);
        let (m, ctx) = conversation(&ChatTemplate::Builtin(BuiltinTemplate::ChatMl), &history(), Some(&t));
        assert!(ctx.is_none());
        assert_eq!(m.len(), 4);
        assert_eq!(m[0].role, "system");
        assert!(m[0].content.contains("{\"name\": \"get_weather\", \"description\": \"Weather now\", \"parameters\": {\"type\": \"object\""), "{}", m[0].content);
        assert_eq!(m[2].content, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>");
        assert_eq!((m[3].role.as_str(), m[3].content.as_str()), ("user", "<tool_response>\n{\"temp\": 21}\n</tool_response>"));
        // An existing system message gets the section; 'none' shows no functions.
        let mut h = vec![ChatMessage::new("system", "Be brief.")];
        h.extend(history());
        let (m, _) = conversation(&ChatTemplate::Builtin(BuiltinTemplate::Gemma), &h, Some(&t));
        assert!(m[0].content.starts_with("Be brief.\n\n# Tools"));
        assert_eq!(m.len(), 4);
        let (m2, _) = conversation(&ChatTemplate::Builtin(BuiltinTemplate::Gemma), &h, Some(&tools(ToolChoice::None)));
        assert_eq!(m2, m, "'none' shows the functions too");
        let (m, _) = conversation(&ChatTemplate::Builtin(BuiltinTemplate::Gemma), &h, None);
        assert_eq!(m[0].content, "Be brief.");
        assert!(m[2].content.starts_with(TRIGGER));
    }

    #[test]
    fn consecutive_results_share_one_turn() {
        let mut h = history();
        let mut second = ChatMessage::new("tool", "ok");
        second.tool_call_id = Some("call_2".into());
        h[1].tool_calls.push(ToolCall::new("call_2".into(), "get_weather".into(), "{}".into()));
        h.push(second);
        h.push(ChatMessage::new("user", "Thanks"));
        let m = fallback(&h, None);
        assert_eq!(m.len(), 4, "{m:?}");
        assert_eq!(m[1].content.matches(TRIGGER).count(), 2);
        assert_eq!(m[1].content.split("</tool_call>\n<tool_call>").count(), 2);
        assert_eq!(m[2].content.matches("<tool_response>").count(), 2);
        assert_eq!((m[2].role.as_str(), m[3].content.as_str()), ("user", "Thanks"));
    }

    #[test]
    fn a_template_that_renders_tools_gets_them() {
        let src = "{% if tools %}TOOLS:{% for t in tools %}{{ t.function.name }};{% endfor %}\n{% endif %}{% for m in messages %}[{{ m.role }}]{{ m.content }}{% for c in m.tool_calls %}<{{ c.function.name }} {{ c.function.arguments.city }}>{% endfor %}{% if m.tool_call_id %}({{ m.tool_call_id }}){% endif %}\n{% endfor %}";
        let tpl = ChatTemplate::Jinja { source: src.into(), bos_token: String::new(), eos_token: String::new(), strip_bos: false, strip_eos: false };
        assert!(tpl.renders_tools());
        let t = tools(ToolChoice::Auto);
        let (m, ctx) = conversation(&tpl, &history(), Some(&t));
        assert_eq!(m, history());
        let text = tpl.apply_with_tools(&m, false, ctx.as_ref()).unwrap();
        // The arguments reach the template as an object (what Hugging Face templates expect).
        // (trim_blocks, as llama.cpp renders: no newline after a block tag.)
        assert_eq!(text, "TOOLS:get_weather;[user]Weather in Paris?[assistant]<get_weather Paris>[tool]{\"temp\": 21}(call_1)");
        let plain = ChatTemplate::Jinja { source: "{% for m in messages %}{{ m.content }}{% endfor %}".into(), bos_token: String::new(), eos_token: String::new(), strip_bos: false, strip_eos: false };
        assert!(!plain.renders_tools());
    }

    fn jinja(src: &str) -> ChatTemplate {
        ChatTemplate::Jinja { source: src.into(), bos_token: String::new(), eos_token: String::new(), strip_bos: false, strip_eos: false }
    }

    #[test]
    fn past_arguments_reach_a_template_in_the_form_it_renders() {
        let t = tools(ToolChoice::Auto);
        let text = |src: &str| {
            let tpl = jinja(src);
            let (m, ctx) = conversation(&tpl, &history(), Some(&t));
            tpl.apply_with_tools(&m, false, ctx.as_ref())
        };
        // Joined as text (DeepSeek R1 / V3): an object there is an error ("string + map").
        let joined = "{% if tools %}{% endif %}{% for m in messages %}{% for c in m.tool_calls %}{{ '```json\n' + c.function.arguments + '\n```' }}{% endfor %}{% endfor %}";
        assert_eq!(text(joined).unwrap(), "```json\n{\"city\":\"Paris\"}\n```", "the request's own text");
        // Printed as it is: the text, byte for byte.
        assert_eq!(text("{{ tools | length }}{% for m in messages %}{% for c in m.tool_calls %}{{ c.function.arguments }}{% endfor %}{% endfor %}").unwrap(), "1{\"city\":\"Paris\"}");
        // Written with tojson (Qwen 2.5, Llama 3.1, Hermes): the object, not a quoted string.
        let tojson = "{{ tools | length }}{% for m in messages %}{% for c in m.tool_calls %}{{ c.function.arguments | tojson }}{% endfor %}{% endfor %}";
        assert_eq!(text(tojson).unwrap(), "1{\"city\": \"Paris\"}");
        // A template that takes either (`is string`) gets the text.
        let either = "{{ tools | length }}{% for m in messages %}{% for c in m.tool_calls %}{% if c.function.arguments is string %}S{{ c.function.arguments }}{% else %}O{{ c.function.arguments | tojson }}{% endif %}{% endfor %}{% endfor %}";
        assert_eq!(text(either).unwrap(), "1S{\"city\":\"Paris\"}");
    }

    #[test]
    fn a_template_that_refuses_a_system_role_gets_the_section_in_the_first_user_turn() {
        // Gemma 2's template raises on a system message; the fallback must not add one it then refuses.
        let src = "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}<{{ m.role }}>{{ m.content }}\n{% endfor %}";
        let tpl = jinja(src);
        let t = tools(ToolChoice::Auto);
        let (m, ctx) = conversation(&tpl, &[ChatMessage::new("user", "Weather in Paris?")], Some(&t));
        assert!(ctx.is_none());
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].role, "user");
        assert!(m[0].content.starts_with("# Tools\n") && m[0].content.ends_with("\n\nWeather in Paris?"), "{}", m[0].content);
        let rendered = tpl.apply(&m, true).unwrap();
        assert!(rendered.starts_with("<user># Tools") && rendered.contains("get_weather"));
        // A system message the caller gave stays one (the template's refusal is then the caller's).
        let given = [ChatMessage::new("system", "Be brief."), ChatMessage::new("user", "Hi")];
        let (m, _) = conversation(&tpl, &given, Some(&t));
        assert_eq!(m[0].role, "system");
        assert!(tpl.apply(&m, true).is_err());
        // A template that takes a system message keeps the section there.
        let (m, _) = conversation(&jinja("{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"), &[ChatMessage::new("user", "Hi")], Some(&t));
        assert_eq!((m.len(), m[0].role.as_str()), (2, "system"));
    }

    #[test]
    fn tools_reach_a_template_in_the_callers_key_order() {
        // A schema whose properties are not in sorted order, written with `tojson` as Hugging
        // Face templates do: OpenAI's order for the function, the caller's for the schema.
        let src = "{% for t in tools %}{{ t | tojson }}{% endfor %}{% for m in messages %}{{ m.content }}{% endfor %}";
        let tpl = ChatTemplate::Jinja { source: src.into(), bos_token: String::new(), eos_token: String::new(), strip_bos: false, strip_eos: false };
        let parameters: Value = serde_json::from_str(r#"{"type": "object", "properties": {"zone": {"type": "string"}, "city": {"type": "string"}}, "required": ["zone"]}"#).unwrap();
        let t = Tools { functions: vec![Function { name: "f".into(), description: Some("d".into()), parameters }], choice: ToolChoice::Auto, parallel: true };
        let (m, ctx) = conversation(&tpl, &[ChatMessage::new("user", "hi")], Some(&t));
        let text = tpl.apply_with_tools(&m, false, ctx.as_ref()).unwrap();
        assert_eq!(
            text,
            r#"{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object", "properties": {"zone": {"type": "string"}, "city": {"type": "string"}}, "required": ["zone"]}}}hi"#
        );
    }
}
