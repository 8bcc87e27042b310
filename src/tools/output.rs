//! The generated text → OpenAI's `content` and `tool_calls`, as it streams: [`CallStream`]
//! takes the text of each decode step and returns the content it releases and the
//! `delta.tool_calls` pieces it completes (the first piece of a call carries its id, type and
//! name; then `arguments` fragments as they are generated). The non-streamed response is the
//! same pieces, gathered ([`CallStream::calls`], [`CallStream::content`]).
//!
//! Under the call grammar the text is always of the format of `tools/mod.rs`, so this reads it
//! with a small state machine; anything else (text a stop string cut into) goes to `content`,
//! never lost.

use super::{classify, call_id, Shape, ToolCall, ToolCallDelta, FunctionDelta, CLOSE, TRIGGER};

/// What one piece of text released.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Released {
    pub content: String,
    pub tool_calls: Vec<ToolCallDelta>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Before a call's `<tool_call>\n{"name": "`.
    Open,
    /// In the name.
    Name,
    /// In the arguments value: nesting depth, inside a string, after a backslash.
    Args { depth: usize, in_str: bool, esc: bool },
    /// Before `}\n</tool_call>`.
    Close,
    /// After a call: the end, or `\n` and the next call.
    After,
    /// Text that does not follow the format: the rest is content.
    Broken,
}

/// One generation's output, read as it comes.
#[derive(Clone, Debug)]
pub struct CallStream {
    shape: Shape,
    /// Text not yet read (the undecided start, or a call's incomplete piece).
    buf: String,
    state: State,
    calls: Vec<ToolCall>,
    content: String,
    ids: u64,
}

fn open() -> String {
    format!("{TRIGGER}\n{{\"name\": \"")
}
const MID: &str = "\", \"arguments\": ";
fn close() -> String {
    format!("}}\n{CLOSE}")
}

/// Whether `buf` starts with `lit`: `Some(true)` yes, `Some(false)` not yet known (a prefix),
/// `None` no.
fn expect(buf: &str, lit: &str) -> Option<bool> {
    if buf.starts_with(lit) {
        Some(true)
    } else if lit.starts_with(buf) {
        Some(false)
    } else {
        None
    }
}

impl CallStream {
    /// `forced`: the output is calls from the start (`required`, a named function); else it is
    /// told from its first bytes. `ids`: the base of the calls' ids (`tools::call_id`).
    pub fn new(forced: bool, ids: u64) -> CallStream {
        CallStream { shape: if forced { Shape::Calls } else { Shape::Undecided }, buf: String::new(), state: State::Open, calls: Vec::new(), content: String::new(), ids }
    }

    /// The calls so far (the last one's arguments may be incomplete until the end).
    pub fn calls(&self) -> &[ToolCall] {
        &self.calls
    }

    /// Whether every call so far is closed (none is cut in its name or arguments).
    pub fn calls_complete(&self) -> bool {
        !self.calls.is_empty() && self.state == State::After
    }

    /// The content so far (a text answer, or what did not follow the call format).
    pub fn content(&self) -> &str {
        &self.content
    }

    /// Reads the next text of the output.
    pub fn push(&mut self, text: &str) -> Released {
        let mut out = Released::default();
        match self.shape {
            Shape::Text => self.emit_content(text, &mut out),
            Shape::Undecided => {
                self.buf.push_str(text);
                self.shape = classify(self.buf.as_bytes());
                match self.shape {
                    Shape::Text => {
                        let held = std::mem::take(&mut self.buf);
                        self.emit_content(&held, &mut out);
                    }
                    Shape::Calls => self.parse(&mut out),
                    Shape::Undecided => {}
                }
            }
            Shape::Calls => {
                self.buf.push_str(text);
                self.parse(&mut out);
            }
        }
        out
    }

    /// The end of the output: a start that never became a call is content. Once the output is
    /// calls, a piece of the call format cut short (the opening, or a name not yet closed, by
    /// `max_tokens`) is dropped: it is neither the model's text nor a call with a name. A call
    /// cut after its name's closing quote is a call with that name and no arguments yet, as one
    /// cut inside its arguments keeps what it has.
    pub fn finish(&mut self) -> Released {
        let mut out = Released::default();
        if self.shape == Shape::Undecided {
            let held = std::mem::take(&mut self.buf);
            self.emit_content(&held, &mut out);
        }
        if self.state == State::Name {
            if let Some(q) = self.buf.find('"').filter(|&q| expect(&self.buf[q..], MID).is_some()) {
                let name = self.buf[..q].to_string();
                self.start_call(name, &mut out);
            }
        }
        self.buf.clear();
        out
    }

    /// A call whose name is whole: its first delta (id, type, name).
    fn start_call(&mut self, name: String, out: &mut Released) {
        let index = self.calls.len();
        let id = call_id(self.ids, index);
        self.calls.push(ToolCall::new(id.clone(), name.clone(), String::new()));
        out.tool_calls.push(ToolCallDelta { index, id: Some(id), kind: Some("function".into()), function: FunctionDelta { name: Some(name), arguments: String::new() } });
    }

    fn emit_content(&mut self, text: &str, out: &mut Released) {
        self.content.push_str(text);
        out.content.push_str(text);
    }

    fn broken(&mut self, out: &mut Released) {
        self.state = State::Broken;
        let rest = std::mem::take(&mut self.buf);
        self.emit_content(&rest, out);
    }

    /// Reads `lit` at the start of the buffer and moves to `next`; false when it must wait for
    /// more text, or the text is not the format (then the rest is content).
    fn literal(&mut self, lit: &str, next: State, out: &mut Released) -> bool {
        match expect(&self.buf, lit) {
            Some(true) => {
                self.buf.drain(..lit.len());
                self.state = next;
                true
            }
            Some(false) => false,
            None => {
                self.broken(out);
                false
            }
        }
    }

    fn parse(&mut self, out: &mut Released) {
        loop {
            match self.state {
                State::Broken => {
                    let rest = std::mem::take(&mut self.buf);
                    self.emit_content(&rest, out);
                    return;
                }
                State::Open => {
                    if !self.literal(&open(), State::Name, out) {
                        return;
                    }
                }
                State::Name => {
                    let Some(q) = self.buf.find('"') else { return };
                    match expect(&self.buf[q..], MID) {
                        Some(true) => {
                            let name = self.buf[..q].to_string();
                            self.buf.drain(..q + MID.len());
                            self.start_call(name, out);
                            self.state = State::Args { depth: 0, in_str: false, esc: false };
                        }
                        Some(false) => return,
                        None => return self.broken(out),
                    }
                }
                State::Args { mut depth, mut in_str, mut esc } => {
                    let mut end = None;
                    for (i, c) in self.buf.char_indices() {
                        if in_str {
                            match (esc, c) {
                                (true, _) => esc = false,
                                (false, '\\') => esc = true,
                                (false, '"') => in_str = false,
                                _ => {}
                            }
                            continue;
                        }
                        match c {
                            '"' => in_str = true,
                            '{' | '[' => depth += 1,
                            '}' | ']' if depth > 0 => {
                                depth -= 1;
                                if depth == 0 {
                                    end = Some(i + 1);
                                    break;
                                }
                            }
                            _ if depth == 0 && !c.is_ascii_whitespace() => {
                                // Arguments are an object: anything else is not the format.
                                return self.broken(out);
                            }
                            _ => {}
                        }
                    }
                    let n = end.unwrap_or(self.buf.len());
                    let frag: String = self.buf.drain(..n).collect();
                    if !frag.is_empty() {
                        let index = self.calls.len() - 1;
                        self.calls[index].function.arguments.push_str(&frag);
                        out.tool_calls.push(ToolCallDelta { index, id: None, kind: None, function: FunctionDelta { name: None, arguments: frag } });
                    }
                    if end.is_none() {
                        self.state = State::Args { depth, in_str, esc };
                        return;
                    }
                    self.state = State::Close;
                }
                State::Close => {
                    if !self.literal(&close(), State::After, out) {
                        return;
                    }
                }
                State::After => {
                    if self.buf.is_empty() {
                        return;
                    }
                    if self.buf.starts_with('\n') {
                        self.buf.drain(..1);
                        self.state = State::Open;
                    } else {
                        return self.broken(out);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `text` in pieces of `n` bytes (on char boundaries) and gathers what comes out.
    fn run(forced: bool, text: &str, n: usize) -> (String, Vec<ToolCallDelta>, CallStream) {
        let mut s = CallStream::new(forced, 1);
        let (mut content, mut deltas) = (String::new(), Vec::new());
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(n) {
            let r = s.push(&piece.iter().collect::<String>());
            content.push_str(&r.content);
            deltas.extend(r.tool_calls);
        }
        let r = s.finish();
        content.push_str(&r.content);
        deltas.extend(r.tool_calls);
        (content, deltas, s)
    }

    const TWO: &str = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa\\\"ris}\", \"days\": [1, {\"x\": 2}]}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";

    #[test]
    fn calls_stream_as_openai_deltas_whatever_the_pieces() {
        for n in [1, 2, 3, 7, 1000] {
            let (content, deltas, s) = run(false, TWO, n);
            assert_eq!(content, "", "n={n}");
            let calls = s.calls();
            assert_eq!(calls.len(), 2);
            assert_eq!(calls[0].function.name, "get_weather");
            assert_eq!(calls[0].function.arguments, "{\"city\": \"Pa\\\"ris}\", \"days\": [1, {\"x\": 2}]}");
            assert_eq!(serde_json::from_str::<serde_json::Value>(&calls[0].function.arguments).unwrap()["city"], "Pa\"ris}");
            assert_eq!((calls[1].function.name.as_str(), calls[1].function.arguments.as_str()), ("now", "{}"));
            assert_ne!(calls[0].id, calls[1].id);
            // The first delta of each call names it; the arguments fragments add up.
            let first: Vec<&ToolCallDelta> = deltas.iter().filter(|d| d.id.is_some()).collect();
            assert_eq!(first.len(), 2);
            assert!(first.iter().all(|d| d.kind.as_deref() == Some("function") && d.function.arguments.is_empty()));
            let args0: String = deltas.iter().filter(|d| d.index == 0).map(|d| d.function.arguments.as_str()).collect();
            assert_eq!(args0, calls[0].function.arguments);
        }
    }

    #[test]
    fn text_and_almost_calls_are_content() {
        let (content, deltas, s) = run(false, "Hello <tool_call> there", 2);
        assert_eq!((content.as_str(), deltas.len(), s.calls().len()), ("Hello <tool_call> there", 0, 0));
        // A start that never became a call.
        let (content, _, s) = run(false, "<tool", 1);
        assert_eq!((content.as_str(), s.calls().len()), ("<tool", 0));
        let (content, _, _) = run(false, "<tool_x>", 3);
        assert_eq!(content, "<tool_x>");
        // Not the format after the trigger: kept as content.
        let (content, _, s) = run(false, "<tool_call>oops", 4);
        assert_eq!((content.as_str(), s.calls().len()), ("<tool_call>oops", 0));
    }

    /// A forced call cut in its opening or its name (max_tokens): no markup in the content and
    /// no call without a whole name (it leaked `<tool_call>\n{"name` as the assistant's text).
    #[test]
    fn a_call_cut_before_its_name_closes_leaves_nothing() {
        let name_end = TWO.find("\", \"arguments").unwrap();
        for cut in 1..name_end + 1 {
            for forced in [true, false] {
                let (content, deltas, s) = run(forced, &TWO[..cut], 3);
                if !forced && cut < "<tool_call>".len() {
                    // Auto, still undecided: the text may be the model's own.
                    assert_eq!(content, &TWO[..cut]);
                    continue;
                }
                assert_eq!((content.as_str(), deltas.len(), s.calls().len()), ("", 0, 0), "cut {cut} forced {forced}");
            }
        }
    }

    /// Cut anywhere from its name's closing quote to its arguments: a call with that name and
    /// no arguments yet (it was dropped, though the README promises the call once its name is
    /// whole).
    #[test]
    fn a_call_cut_after_its_name_keeps_the_name() {
        let name_end = TWO.find("\", \"arguments").unwrap();
        for cut in name_end + 1..=name_end + MID.len() {
            for forced in [true, false] {
                let (content, deltas, s) = run(forced, &TWO[..cut], 3);
                assert_eq!(content, "", "cut {cut}");
                assert_eq!(s.calls().len(), 1, "cut {cut}");
                assert_eq!((s.calls()[0].function.name.as_str(), s.calls()[0].function.arguments.as_str()), ("get_weather", ""));
                assert_eq!(deltas.len(), 1);
                assert_eq!(deltas[0].function.name.as_deref(), Some("get_weather"));
                assert!(!s.calls_complete());
            }
        }
    }

    #[test]
    fn a_call_cut_short_keeps_its_name_and_arguments_so_far() {
        let cut = &TWO[..60];
        let (content, deltas, s) = run(true, cut, 5);
        assert_eq!(content, "");
        assert_eq!(s.calls().len(), 1);
        assert!(s.calls()[0].function.arguments.starts_with("{\"city\""));
        assert!(deltas.len() >= 2);
        // Cut inside its arguments (a stop string or max_tokens): not complete, so the finish
        // reason stays "stop" / "length" (host.rs), not "tool_calls".
        assert!(!s.calls_complete());
        // Whole calls are complete; so is a cut after the first call's close.
        assert!(run(true, TWO, 5).2.calls_complete());
        let first_end = TWO.find("</tool_call>").unwrap() + "</tool_call>".len();
        assert!(run(true, &TWO[..first_end], 3).2.calls_complete());
    }
}
