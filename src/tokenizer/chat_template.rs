//! Chat templates: the GGUF's own `tokenizer.chat_template` (Jinja, rendered with minijinja
//! under llama.cpp's settings), or a built-in format when the file carries none.
//!
//! **BOS rule.** The text returned never starts with BOS text when the vocabulary adds BOS
//! itself: a Jinja template's leading `{{ bos_token }}` is stripped (as llama.cpp's chat code
//! does), and built-in formats never write it. Tokenize the result with
//! `encode(text, add_special = true, parse_special = true)` — or call
//! [`Tokenizer::encode_chat`] — to get exactly one BOS. Likewise a trailing EOS text is
//! stripped when the vocabulary appends EOS.

use serde::{Deserialize, Serialize};

use super::error::TokenizerError;
use super::literal::Literals;
use super::template_chains;
use super::template_filters::{self, c_trim};
use super::template_consts;
use super::template_program;
use super::template_work::{self, WorkBudget, TEMPLATE_WORK_BASE, TEMPLATE_WORK_PER_INPUT_BYTE, TEMPLATE_WORK_PER_MESSAGE};
use super::{DecodeOptions, Tokenizer};

/// Fuel (template instructions) one rendering may burn: a base far above what real templates
/// need for a short chat (hundreds), plus an allowance per message, so that a long
/// conversation renders and a template looping 10^10 times stops within a fraction of a second.
pub const TEMPLATE_FUEL_BASE: u64 = 2_000_000;
pub const TEMPLATE_FUEL_PER_MESSAGE: u64 = 20_000;
/// Largest template source rendered: real chat templates are a few KB (the longest seen, with
/// tool instructions, ~40 KB); parsing and compiling are not metered by fuel, and a header can
/// carry a template of hundreds of megabytes.
pub const TEMPLATE_SOURCE_MAX_BYTES: usize = 1 << 20;
/// Most bytes a rendering may write: 1 MiB plus 4 × the messages' bytes (a template repeats a
/// content a few times at most; one that writes gigabytes is stopped here).
pub const TEMPLATE_OUTPUT_BASE: usize = 1 << 20;
/// Bytes a rendering may write anywhere, as a multiple of its output limit: what `{% set %}` and
/// `{% filter %}` blocks and macro calls capture counts too (a macro's result is written
/// once into its capture and again where it is printed, once per level of macros).
pub const TEMPLATE_WRITTEN_PER_OUTPUT_BYTE: u64 = 4;

/// How special-token text inside message contents is tokenized by [`Tokenizer::encode_chat_with`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ContentSpecials {
    /// The default: the contents of user, tool and any other role but `system`, `developer`
    /// and `assistant` are literal text (`<start_of_turn>` typed by a user is text, not a
    /// turn); the instructions, the model's own turns and the template's markup are parsed.
    #[default]
    Literal,
    /// Every content is parsed for special tokens (the explicit opt-in `raw_special_tokens`):
    /// for callers that build turns themselves and trust every message.
    Parse,
}

impl ContentSpecials {
    /// From a request's `raw_special_tokens` opt-in (absent or false: literal).
    pub fn from_opt_in(raw_special_tokens: Option<bool>) -> ContentSpecials {
        if raw_special_tokens == Some(true) {
            ContentSpecials::Parse
        } else {
            ContentSpecials::Literal
        }
    }
}

/// Whether a role's content is someone else's text, kept literal by default.
fn literal_role(role: &str) -> bool {
    !matches!(role, "system" | "developer" | "assistant")
}

/// One chat turn. `role` is usually "system", "user", "assistant" or "tool".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
    /// An assistant turn's calls (OpenAI's shape; see `crate::tools`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<crate::tools::ToolCall>,
    /// A tool turn: the call it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// OpenAI's optional participant name (`[A-Za-z0-9_-]{1,64}`, checked by the protocol, so
    /// it cannot carry special-token text); templates may write it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl ChatMessage {
    pub fn new(role: &str, content: &str) -> ChatMessage {
        ChatMessage {
            role: role.to_string(),
            content: content.to_string(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            name: None,
        }
    }
}

/// Formats built in for files without a template, written as llama.cpp's
/// `llama_chat_apply_template` writes them (contents trimmed where llama.cpp trims them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BuiltinTemplate {
    /// `<start_of_turn>user\n...<end_of_turn>\n`, "assistant" renamed "model", system text
    /// folded into the first user turn followed by a blank line.
    Gemma,
    /// `<|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>`.
    Llama3,
    /// `<|im_start|>role\n...<|im_end|>\n` (llama.cpp's default when nothing else fits).
    ChatMl,
}

/// A chat template ready to render.
#[derive(Clone, Debug, PartialEq)]
pub enum ChatTemplate {
    Jinja {
        source: String,
        /// Text of BOS / EOS, given to the template as `bos_token` / `eos_token`.
        bos_token: String,
        eos_token: String,
        /// Strip a leading `bos_token` (the tokenizer adds BOS) / trailing `eos_token`.
        strip_bos: bool,
        strip_eos: bool,
    },
    Builtin(BuiltinTemplate),
}

impl BuiltinTemplate {
    /// Picks the built-in format for a vocabulary: Gemma by architecture or turn tokens,
    /// Llama 3 by its header tokens, ChatML otherwise.
    pub fn for_tokenizer(tok: &Tokenizer) -> BuiltinTemplate {
        let arch = tok.architecture().unwrap_or("");
        if arch.starts_with("gemma") || tok.token_id("<start_of_turn>").is_some() {
            BuiltinTemplate::Gemma
        } else if tok.token_id("<|start_header_id|>").is_some()
            && tok.token_id("<|eot_id|>").is_some()
        {
            BuiltinTemplate::Llama3
        } else {
            BuiltinTemplate::ChatMl
        }
    }

    pub fn render(self, messages: &[ChatMessage], add_generation_prompt: bool) -> String {
        let mut s = String::new();
        match self {
            BuiltinTemplate::Gemma => {
                let mut system = String::new();
                for m in messages {
                    if m.role == "system" {
                        system.push_str(c_trim(&m.content));
                        continue;
                    }
                    let role = if m.role == "assistant" {
                        "model"
                    } else {
                        m.role.as_str()
                    };
                    s.push_str("<start_of_turn>");
                    s.push_str(role);
                    s.push('\n');
                    if !system.is_empty() && role != "model" {
                        s.push_str(&system);
                        s.push_str("\n\n");
                        system.clear();
                    }
                    s.push_str(c_trim(&m.content));
                    s.push_str("<end_of_turn>\n");
                }
                if add_generation_prompt {
                    s.push_str("<start_of_turn>model\n");
                }
            }
            BuiltinTemplate::Llama3 => {
                for m in messages {
                    s.push_str("<|start_header_id|>");
                    s.push_str(&m.role);
                    s.push_str("<|end_header_id|>\n\n");
                    s.push_str(c_trim(&m.content));
                    s.push_str("<|eot_id|>");
                }
                if add_generation_prompt {
                    s.push_str("<|start_header_id|>assistant<|end_header_id|>\n\n");
                }
            }
            BuiltinTemplate::ChatMl => {
                for m in messages {
                    s.push_str("<|im_start|>");
                    s.push_str(&m.role);
                    s.push('\n');
                    s.push_str(&m.content);
                    s.push_str("<|im_end|>\n");
                }
                if add_generation_prompt {
                    s.push_str("<|im_start|>assistant\n");
                }
            }
        }
        s
    }
}

impl ChatTemplate {
    /// The template for a tokenizer: the file's Jinja template if it has one, else the
    /// built-in format that fits the vocabulary.
    pub fn for_tokenizer(tok: &Tokenizer) -> ChatTemplate {
        match tok.chat_template() {
            Some(src) if !src.is_empty() => ChatTemplate::jinja_for(tok, src),
            _ => ChatTemplate::Builtin(BuiltinTemplate::for_tokenizer(tok)),
        }
    }

    /// A Jinja template with this tokenizer's BOS/EOS text and BOS/EOS rules.
    pub fn jinja_for(tok: &Tokenizer, source: &str) -> ChatTemplate {
        let text = |id: Option<u32>| {
            id.and_then(|id| {
                tok.decode(
                    &[id],
                    DecodeOptions {
                        remove_special: false,
                        unparse_special: true,
                    },
                )
                .ok()
            })
            .unwrap_or_default()
        };
        ChatTemplate::Jinja {
            source: source.to_string(),
            bos_token: text(tok.bos_id()),
            eos_token: text(tok.eos_id()),
            strip_bos: tok.add_bos(),
            strip_eos: tok.add_eos(),
        }
    }

    /// Renders the conversation; with `add_generation_prompt` the text ends where the
    /// assistant's reply begins.
    pub fn apply(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, TokenizerError> {
        self.apply_with_tools(messages, add_generation_prompt, None)
    }

    /// Whether the template renders tools itself: its source reads a `tools` variable (as
    /// Hugging Face tool-calling templates do). See `crate::tools::render`.
    pub fn renders_tools(&self) -> bool {
        match self {
            ChatTemplate::Builtin(_) => false,
            ChatTemplate::Jinja { source, .. } => {
                let env = minijinja::Environment::new();
                template_chains::check(source).is_ok()
                    && env.template_from_str(source).is_ok_and(|t| t.undeclared_variables(false).contains("tools"))
            }
        }
    }

    /// [`apply`](Self::apply), with OpenAI's `tools` list given to a Jinja template as `tools`.
    pub fn apply_with_tools(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        tools: Option<&serde_json::Value>,
    ) -> Result<String, TokenizerError> {
        match self {
            ChatTemplate::Builtin(b) => Ok(b.render(messages, add_generation_prompt)),
            ChatTemplate::Jinja {
                source,
                bos_token,
                eos_token,
                strip_bos,
                strip_eos,
            } => {
                let args = match messages.iter().any(|m| !m.tool_calls.is_empty()) {
                    true => arguments_form(source, bos_token, eos_token, tools),
                    false => ArgumentsForm::Text,
                };
                let mut out = render_jinja(
                    source,
                    messages,
                    add_generation_prompt,
                    bos_token,
                    eos_token,
                    tools,
                    args,
                )?;
                if *strip_bos && !bos_token.is_empty() && out.starts_with(bos_token.as_str()) {
                    out.drain(..bos_token.len());
                }
                if *strip_eos && !eos_token.is_empty() && out.ends_with(eos_token.as_str()) {
                    out.truncate(out.len() - eos_token.len());
                }
                Ok(out)
            }
        }
    }
}

fn template_error(e: minijinja::Error) -> TokenizerError {
    let mut message = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    TokenizerError::ChatTemplate { message }
}

/// Renders with the settings llama.cpp's Jinja engine uses for chat templates (trim_blocks,
/// lstrip_blocks), Python string methods (`.strip()`, `.startswith()`, ...) and the
/// functions chat templates call (`raise_exception`, `strftime_now`).
fn render_jinja(
    source: &str,
    messages: &[ChatMessage],
    add_generation_prompt: bool,
    bos_token: &str,
    eos_token: &str,
    tools: Option<&serde_json::Value>,
    args: ArgumentsForm,
) -> Result<String, TokenizerError> {
    if source.len() > TEMPLATE_SOURCE_MAX_BYTES {
        return Err(TokenizerError::ChatTemplate { message: format!("the template is {} bytes, more than the {TEMPLATE_SOURCE_MAX_BYTES} rendered", source.len()) });
    }
    let mut env = minijinja::Environment::new();
    env.add_function(
        "raise_exception",
        |msg: String| -> Result<String, minijinja::Error> {
            Err(minijinja::Error::new(
                minijinja::ErrorKind::InvalidOperation,
                msg,
            ))
        },
    );
    env.add_test("iterable", template_filters::is_iterable);
    env.add_function("strftime_now", |fmt: String| {
        strftime(&fmt, now_unix_seconds())
    });
    let fuel = TEMPLATE_FUEL_BASE.saturating_add(TEMPLATE_FUEL_PER_MESSAGE.saturating_mul(messages.len() as u64));
    env.set_fuel(Some(fuel));
    let content: usize = messages.iter().map(|m| m.content.len() + m.role.len() + m.tool_calls.iter().map(|c| c.function.arguments.len() + c.function.name.len()).sum::<usize>()).sum::<usize>()
        + tools.map_or(0, |t| t.to_string().len());
    let work = TEMPLATE_WORK_BASE
        .saturating_add(TEMPLATE_WORK_PER_INPUT_BYTE.saturating_mul(content as u64))
        .saturating_add(TEMPLATE_WORK_PER_MESSAGE.saturating_mul(messages.len() as u64));
    let budget = WorkBudget::new(work);
    let output_limit = TEMPLATE_OUTPUT_BASE.saturating_add(content.saturating_mul(4));
    let output = WorkBudget::with_message((output_limit as u64).saturating_mul(TEMPLATE_WRITTEN_PER_OUTPUT_BYTE), template_work::OUT_OF_OUTPUT);
    template_work::install(&mut env, &budget, template_filters::methods);
    template_program::install(&mut env, &budget, &output);
    // Every printed value is charged to the output budget, wherever it is written (the prompt,
    // or a capture a template may print again).
    let printed = output.clone();
    env.set_formatter(move |out, state, value| {
        template_filters::check_depth(value)?;
        printed.charge(template_filters::printed_len(value, printed.left()))?;
        template_filters::print(out, state, value)
    });
    template_chains::check(source)?;
    let compiled = template_program::compile(source).map_err(|e| match template_consts::is_refusal(&e) {
        true => TokenizerError::ChatTemplateTooMuchWork { units: template_consts::MAX_CONSTANTS_BYTES },
        false => template_error(e),
    })?;
    let base = minijinja::context! {
        messages => minijinja::Value::from_serialize(template_messages(messages, args)),
        add_generation_prompt => add_generation_prompt,
        bos_token => bos_token,
        eos_token => eos_token,
    };
    // Without tools, `tools` is left undefined, as llama.cpp leaves it (templates test
    // `tools is defined` or `tools is iterable`, which a none value passes in minijinja).
    let ctx = match tools {
        Some(t) => minijinja::context! { tools => minijinja::Value::from_serialize(t), ..base },
        None => base,
    };
    match template_program::render(&env, &compiled, ctx) {
        Ok(text) if text.len() <= output_limit => Ok(text),
        Ok(_) => Err(TokenizerError::ChatTemplateOutputTooLarge { limit: output_limit }),
        Err(_) if output.spent() => Err(TokenizerError::ChatTemplateOutputTooLarge { limit: output_limit }),
        Err(e) if e.kind() == minijinja::ErrorKind::OutOfFuel => Err(TokenizerError::ChatTemplateTooCostly { fuel }),
        Err(_) if budget.spent() => Err(TokenizerError::ChatTemplateTooMuchWork { units: work }),
        Err(e) => Err(template_error(e)),
    }
}

/// How a template gets a past call's `arguments`: as the request's JSON text (OpenAI's shape,
/// what Hugging Face templates get from an OpenAI-style conversation), or parsed into the object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ArgumentsForm {
    Text,
    Object,
}

/// The form a template needs, found much as llama.cpp finds it (minja's
/// `requires_object_arguments`): a probe conversation with one call is rendered with the text
/// form, which the template "renders" when `"argument_needle":` shows in the output. Then it
/// gets the text: templates that join it into the prompt (DeepSeek's
/// `'```json\n' + arguments`, an error with an object), print it, or test `is string` (the model's
/// own text, byte for byte). Otherwise the object, as Hugging Face templates expect: those that
/// write it with `tojson` (Qwen 2.5, Llama 3.1: the text would show as a quoted string) or read
/// its fields (`arguments.city`; llama.cpp gives the text there, whose fields are undefined).
fn arguments_form(source: &str, bos: &str, eos: &str, tools: Option<&serde_json::Value>) -> ArgumentsForm {
    let mut call = ChatMessage::new("assistant", "");
    call.tool_calls.push(crate::tools::ToolCall::new("call_1___".into(), "ipython".into(), r#"{"argument_needle": "print('Hello, World!')"}"#.into()));
    let probe = [ChatMessage::new("user", "Hey"), call];
    let text = render_jinja(source, &probe, false, bos, eos, tools, ArgumentsForm::Text);
    match text.is_ok_and(|out| out.contains("\"argument_needle\":")) {
        true => ArgumentsForm::Text,
        false => ArgumentsForm::Object,
    }
}

/// The messages as a template sees them: OpenAI's shape, with a call's `arguments` that are a
/// JSON object given as that object where the template needs it ([`arguments_form`]).
fn template_messages(messages: &[ChatMessage], args: ArgumentsForm) -> serde_json::Value {
    let mut v = serde_json::to_value(messages).unwrap_or_default();
    if args == ArgumentsForm::Text {
        return v;
    }
    for m in v.as_array_mut().into_iter().flatten() {
        for c in m.get_mut("tool_calls").and_then(|c| c.as_array_mut()).into_iter().flatten() {
            if let Some(f) = c.get_mut("function") {
                let parsed = f.get("arguments").and_then(|a| a.as_str()).and_then(|a| serde_json::from_str::<serde_json::Value>(a).ok()).filter(|a| a.is_object());
                if let Some(obj) = parsed {
                    f["arguments"] = obj;
                }
            }
        }
    }
    v
}

#[cfg(not(target_arch = "wasm32"))]
fn now_unix_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

#[cfg(target_arch = "wasm32")]
fn now_unix_seconds() -> i64 {
    // std's clock panics on wasm32-unknown-unknown; ask JavaScript.
    (js_sys::Date::now() / 1000.0) as i64
}

/// A small `strftime` (UTC, C locale) for the formats chat templates use: %a %A %b %B %d %e
/// %F %H %I %j %m %M %p %S %T %u %w %y %Y %z %Z %%, and glibc's `-` flag on the numeric ones
/// (`%-d`: no padding), which Python's `strftime` passes through on Linux.
fn strftime(fmt: &str, unix: i64) -> Result<String, minijinja::Error> {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];
    let days = unix.div_euclid(86_400);
    let secs = unix.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + (month <= 2) as i64;
    // 1970-01-01 was a Thursday (weekday 4, Sunday 0).
    let weekday = (days + 4).rem_euclid(7) as usize;
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    const BEFORE_MONTH: [i64; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
    let yday = BEFORE_MONTH[(month - 1) as usize] + day + (leap && month > 2) as i64;
    let (hour, minute, second) = (secs / 3600, secs / 60 % 60, secs % 60);
    let hour12 = if hour % 12 == 0 { 12 } else { hour % 12 };
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut d = chars.next();
        let unpadded = d == Some('-');
        if unpadded {
            d = chars.next();
        }
        // A number, zero-padded to `width` unless the `-` flag asks for none.
        let num = |out: &mut String, v: i64, width: usize| match unpadded {
            true => out.push_str(&v.to_string()),
            false => out.push_str(&format!("{v:0width$}")),
        };
        let month_name = MONTHS[(month - 1) as usize];
        match d {
            Some('a') if !unpadded => out.push_str(&DAYS[weekday][..3]),
            Some('A') if !unpadded => out.push_str(DAYS[weekday]),
            Some('b') if !unpadded => out.push_str(&month_name[..3]),
            Some('B') if !unpadded => out.push_str(month_name),
            Some('d') => num(&mut out, day, 2),
            Some('e') => match unpadded {
                true => num(&mut out, day, 1),
                false => out.push_str(&format!("{day:>2}")),
            },
            Some('F') if !unpadded => out.push_str(&format!("{year}-{month:02}-{day:02}")),
            Some('H') => num(&mut out, hour, 2),
            Some('I') => num(&mut out, hour12, 2),
            Some('j') => num(&mut out, yday, 3),
            Some('m') => num(&mut out, month, 2),
            Some('M') => num(&mut out, minute, 2),
            Some('p') if !unpadded => out.push_str(if hour < 12 { "AM" } else { "PM" }),
            Some('S') => num(&mut out, second, 2),
            Some('T') if !unpadded => out.push_str(&format!("{hour:02}:{minute:02}:{second:02}")),
            Some('u') => num(&mut out, if weekday == 0 { 7 } else { weekday as i64 }, 1),
            Some('w') => num(&mut out, weekday as i64, 1),
            Some('y') => num(&mut out, year.rem_euclid(100), 2),
            Some('Y') => num(&mut out, year, 1),
            Some('z') if !unpadded => out.push_str("+0000"),
            Some('Z') if !unpadded => out.push_str("UTC"),
            Some('%') if !unpadded => out.push('%'),
            other => {
                return Err(minijinja::Error::new(
                    minijinja::ErrorKind::InvalidOperation,
                    format!("strftime_now: unsupported directive %{}{}", if unpadded { "-" } else { "" }, other.map(String::from).unwrap_or_default()),
                ))
            }
        }
    }
    Ok(out)
}

impl Tokenizer {
    /// Renders `messages` with [`ChatTemplate::for_tokenizer`]. See the module docs for the
    /// BOS rule.
    pub fn apply_chat_template(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<String, TokenizerError> {
        ChatTemplate::for_tokenizer(self).apply(messages, add_generation_prompt)
    }

    /// The prompt ids for a conversation: the rendered template tokenized with BOS added per
    /// the metadata and special tokens parsed (so exactly one BOS), user and tool contents as
    /// literal text ([`ContentSpecials::Literal`]).
    pub fn encode_chat(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
    ) -> Result<Vec<u32>, TokenizerError> {
        self.encode_chat_with(messages, add_generation_prompt, ContentSpecials::Literal)
    }

    /// [`Tokenizer::encode_chat`] with the choice of how contents' special-token text is read.
    pub fn encode_chat_with(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        specials: ContentSpecials,
    ) -> Result<Vec<u32>, TokenizerError> {
        ChatTemplate::for_tokenizer(self).encode(self, messages, add_generation_prompt, specials)
    }
}

impl ChatTemplate {
    /// Renders the conversation and tokenizes it with `tok` (BOS per the metadata, special
    /// tokens of the markup parsed), contents read as `specials` says (see `literal`).
    pub fn encode(
        &self,
        tok: &Tokenizer,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        specials: ContentSpecials,
    ) -> Result<Vec<u32>, TokenizerError> {
        self.encode_with_tools(tok, messages, add_generation_prompt, specials, None)
    }

    /// [`encode`](Self::encode), with `tools` for a template that renders them.
    pub fn encode_with_tools(
        &self,
        tok: &Tokenizer,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        specials: ContentSpecials,
        tools: Option<&serde_json::Value>,
    ) -> Result<Vec<u32>, TokenizerError> {
        let mut literals = Literals::default();
        let protected;
        let messages = match specials {
            ContentSpecials::Parse => messages,
            ContentSpecials::Literal => {
                protected = messages
                    .iter()
                    .map(|m| {
                        if !literal_role(&m.role) {
                            return Ok(m.clone());
                        }
                        // A tool turn's call id is the caller's text too (templates write it).
                        let tool_call_id = m.tool_call_id.as_deref().map(|id| literals.protect(tok, id)).transpose()?;
                        Ok(ChatMessage { content: literals.protect(tok, &m.content)?, tool_call_id, ..m.clone() })
                    })
                    .collect::<Result<Vec<_>, TokenizerError>>()?;
                &protected[..]
            }
        };
        let text = self.apply_with_tools(messages, add_generation_prompt, tools)?;
        Ok(tok.encode_restoring(&text, true, true, &literals))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conv() -> Vec<ChatMessage> {
        vec![
            ChatMessage::new("system", "  Be brief. "),
            ChatMessage::new("user", "Hi\n"),
            ChatMessage::new("assistant", "Hello!"),
            ChatMessage::new("user", "Bye"),
        ]
    }

    #[test]
    fn gemma_builtin_folds_system_into_first_user_turn() {
        assert_eq!(
            BuiltinTemplate::Gemma.render(&conv(), true),
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n\
             <start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n"
        );
        assert_eq!(
            BuiltinTemplate::Gemma.render(&conv()[1..2], false),
            "<start_of_turn>user\nHi<end_of_turn>\n"
        );
    }

    #[test]
    fn llama3_and_chatml_builtins() {
        let m = &conv()[1..3];
        assert_eq!(
            BuiltinTemplate::Llama3.render(m, true),
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n\
             Hello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
        );
        assert_eq!(
            BuiltinTemplate::ChatMl.render(m, false),
            "<|im_start|>user\nHi\n<|im_end|>\n<|im_start|>assistant\nHello!<|im_end|>\n"
        );
    }

    #[test]
    fn jinja_strips_leading_bos_only_when_asked() {
        let t = |strip_bos| {
            ChatTemplate::Jinja {
            source: "{{ bos_token }}{% for m in messages %}[{{ m.role }}]{{ m.content.strip() }}\n{% endfor %}".into(),
            bos_token: "<bos>".into(),
            eos_token: "<eos>".into(),
            strip_bos,
            strip_eos: false,
        }
        };
        let m = vec![ChatMessage::new("user", " hi ")];
        assert_eq!(t(true).apply(&m, false).unwrap(), "[user]hi\n");
        assert_eq!(t(false).apply(&m, false).unwrap(), "<bos>[user]hi\n");
    }

    #[test]
    fn jinja_errors_are_typed() {
        let bad = ChatTemplate::Jinja {
            source: "{% for m in messages %}".into(),
            bos_token: String::new(),
            eos_token: String::new(),
            strip_bos: false,
            strip_eos: false,
        };
        assert_eq!(
            bad.apply(&[], false).unwrap_err().code(),
            "CHAT_TEMPLATE_ERROR"
        );
        let raising = ChatTemplate::Jinja {
            source: "{{ raise_exception('roles must alternate') }}".into(),
            bos_token: String::new(),
            eos_token: String::new(),
            strip_bos: false,
            strip_eos: false,
        };
        let e = raising.apply(&[], false).unwrap_err();
        assert!(e.to_string().contains("roles must alternate"), "{e}");
    }

    fn jinja(source: &str) -> ChatTemplate {
        ChatTemplate::Jinja { source: source.into(), bos_token: String::new(), eos_token: String::new(), strip_bos: false, strip_eos: false }
    }

    #[test]
    fn templates_see_names_and_no_tools_variable_without_tools() {
        let mut named = ChatMessage::new("user", "hi");
        named.name = Some("bob".into());
        let t = jinja("{% for m in messages %}{{ m.name or '-' }}:{{ m.content }};{% endfor %}{% if tools is defined %}T{% endif %}{% if tools is iterable %}I{% endif %}");
        assert_eq!(t.apply(&[named, ChatMessage::new("user", "yo")], false).unwrap(), "bob:hi;-:yo;");
    }

    #[test]
    fn hostile_templates_stop_with_typed_errors() {
        let m = vec![ChatMessage::new("user", "hi")];
        // Nested loops of 10^10 iterations: out of fuel, quickly.
        let e = jinja("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}").apply(&m, true).unwrap_err();
        assert_eq!(e.code(), "CHAT_TEMPLATE_TOO_COSTLY");
        // 100 KB per iteration: stopped at the output limit, not after gigabytes.
        let e = jinja("{% for i in range(100000) %}{{ 'x' * 100000 }}{% endfor %}").apply(&m, true).unwrap_err();
        assert_eq!(e.code(), "CHAT_TEMPLATE_OUTPUT_TOO_LARGE");
        // Recursion: minijinja's own depth limit, a typed error too.
        let e = jinja("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}").apply(&m, true).unwrap_err();
        assert!(e.code().starts_with("CHAT_TEMPLATE_"), "{e}");
        // One instruction, minutes of native work: a filter over four billion items.
        for src in ["{{ ([0] * 4000000000) | sum }}", "{{ ([1] * 4000000000) | join(',') }}", "{{ ([1] * 4000000000) | list | length }}"] {
            let t0 = std::time::Instant::now();
            let e = jinja(src).apply(&m, true).unwrap_err();
            assert_eq!(e.code(), "CHAT_TEMPLATE_TOO_COSTLY", "{src}: {e}");
            assert!(t0.elapsed() < std::time::Duration::from_secs(2), "{src}: {:?}", t0.elapsed());
        }
        // Many filter calls, each within the budget, add up against it.
        let e = jinja("{% for i in range(100000) %}{{ ([0] * 1000000) | sum }}{% endfor %}").apply(&m, true).unwrap_err();
        assert_eq!(e.code(), "CHAT_TEMPLATE_TOO_COSTLY");
        // A gigabyte from one replace (filter or method) is refused before it is built.
        for src in ["{{ ('x' * 100000000) | replace('x', 'xxxxxxxxxx') | length }}", "{{ ('x' * 100000000).replace('x', 'xxxxxxxxxx') | length }}"] {
            let e = jinja(src).apply(&m, true).unwrap_err();
            assert_eq!(e.code(), "CHAT_TEMPLATE_TOO_COSTLY", "{src}: {e}");
        }
        // A template source past 1 MiB is refused before it is parsed; one at the limit renders.
        let e = jinja(&"{{ messages }}".repeat(TEMPLATE_SOURCE_MAX_BYTES / 14 + 1)).apply(&m, true).unwrap_err();
        assert_eq!(e.code(), "CHAT_TEMPLATE_ERROR", "{e}");
        let at_limit = format!("{{{{ messages | length }}}}{}", "x".repeat(TEMPLATE_SOURCE_MAX_BYTES - 23));
        assert_eq!(at_limit.len(), TEMPLATE_SOURCE_MAX_BYTES);
        assert!(jinja(&at_limit).apply(&m, true).unwrap().starts_with("1x"));
        // A content passed down five levels of macros is written six times (five captures and
        // the prompt): a 1 MB conversation still renders.
        let big: Vec<ChatMessage> = (0..1000).map(|_| ChatMessage::new("user", &"w".repeat(1000))).collect();
        let nested = "{% macro a(x) %}{{ x }}{% endmacro %}{% macro b(x) %}{{ a(x) }}{% endmacro %}{% macro c(x) %}{{ b(x) }}{% endmacro %}{% macro d(x) %}{{ c(x) }}{% endmacro %}{% macro e(x) %}{{ d(x) }}{% endmacro %}{% for m in messages %}{{ e(m.content) }}{% endfor %}";
        assert_eq!(jinja(nested).apply(&big, true).unwrap().len(), 1_000_000);
        // Templates cannot call the unwrapped filters around the budget.
        assert!(jinja("{{ [1, 2] | budget:sum }}").apply(&m, true).is_err());
        // The wrapped filters and methods still do their work.
        let t = jinja("{{ [3, 1, 2] | sort | join('-') }} {{ ' a b '.strip().split(' ') | list | length }} {{ 'abc' | replace('b', 'BB') | upper }} {{ {'k': 1} | tojson }}");
        assert_eq!(t.apply(&m, false).unwrap(), "1-2-3 2 ABBC {\"k\": 1}");
        // `count` of an empty string: Python's answer (one more than the characters), at once,
        // on a 1 MB content too; pycompat's own loop never ended (a hung render).
        let t = jinja("{{ 'aaa'.count('') }} {{ 'éé'.count('') }} {{ 'aaaa'.count('aa') }} {{ 'abab'.count('ab') }} {{ ''.count('') }} {{ 'x'.count('y') }}");
        assert_eq!(t.apply(&m, false).unwrap(), "4 3 2 2 1 0");
        let t0 = std::time::Instant::now();
        let t = jinja("{% for m in messages %}{{ m.content.count('') }}{% endfor %}");
        assert_eq!(t.apply(&[ChatMessage::new("user", &"w".repeat(1_000_000))], false).unwrap(), "1000001");
        assert!(t0.elapsed() < std::time::Duration::from_secs(2), "{:?}", t0.elapsed());
        // Keyword arguments pass through the wrappers as they are (real templates use them).
        let t = jinja("{{ [{'x': 2}, {'x': 1}] | sort(attribute='x') | map(attribute='x') | join(',') }} {{ messages | selectattr('role', 'equalto', 'user') | list | length }} {{ {'b': [1]} | tojson(indent=2) }}");
        assert_eq!(t.apply(&m, false).unwrap(), "1,2 1 {\n  \"b\": [\n    1\n  ]\n}");
        // A real conversation of 1000 turns still renders, even through a template that filters
        // the whole conversation at every turn (n² items walked).
        let long: Vec<ChatMessage> = (0..1000).map(|i| ChatMessage::new(if i % 2 == 0 { "user" } else { "assistant" }, "some words here")).collect();
        let t = jinja("{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}</{{ m.role }}>{{ messages | selectattr('role', 'equalto', 'user') | list | length }}\n{% endfor %}");
        assert_eq!(t.apply(&long, true).unwrap().lines().count(), 1000);
    }

    /// The hostile battery of `template_hostile` on a 1 MiB stack (the wasm engine's; the
    /// wasm build runs it too).
    #[test]
    fn templates_cannot_grow_or_nest_values_without_bound() {
        let wrong = std::thread::Builder::new().stack_size(1 << 20).spawn(super::super::template_hostile::wrong_outcomes).unwrap().join().unwrap();
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn strftime_formats_utc_dates() {
        // 2024-07-26 13:25:09 UTC
        assert_eq!(
            strftime("%d %b %Y %H:%M:%S", 1_722_000_309).unwrap(),
            "26 Jul 2024 13:25:09"
        );
        assert_eq!(strftime("%Y-%m-%d", 0).unwrap(), "1970-01-01");
        assert_eq!(strftime("%B %y %%", 951_782_400).unwrap(), "February 00 %");
        // Weekdays, unpadded numbers, 12-hour clock, day of year (what Python's strftime on
        // Linux gives for these): 2024-07-26 was a Friday, day 208 of a leap year.
        assert_eq!(strftime("%A, %B %-d, %Y", 1_722_000_309).unwrap(), "Friday, July 26, 2024");
        assert_eq!(strftime("%a %e %-m/%-d %I:%M %p %j %u %w", 1_722_000_309).unwrap(), "Fri 26 7/26 01:25 PM 208 5 5");
        assert_eq!(strftime("%F %T %Z %z", 1_722_000_309).unwrap(), "2024-07-26 13:25:09 UTC +0000");
        assert_eq!(strftime("%a %e %-I%p %j", 0).unwrap(), "Thu  1 12AM 001");
        // 2000-03-01, after a leap day: day 61; 1999-12-31 is day 365, a Friday.
        assert_eq!(strftime("%j", 951_868_800).unwrap(), "061");
        assert_eq!(strftime("%j %A", 946_598_400).unwrap(), "365 Friday");
        assert!(strftime("%Q", 0).is_err() && strftime("%-A", 0).is_err() && strftime("%", 0).is_err());
        assert!(strftime("%Q", 0).is_err());
    }
}
