//! The cost of structured output on Gemma 3 270M (262 144-token vocabulary), natively:
//! building the vocabulary for llguidance (once per model), compiling a typical JSON schema
//! (per request), and decode tok/s constrained vs unconstrained, side by side; for tool calls,
//! compiling the call grammar of two functions and one step of `auto`'s undecided mask (the
//! whole vocabulary checked against the `<tool_call>` trigger).
//!
//! `cargo run --release --example structured_bench [-- MODEL.gguf]` (default: models/gemma-3-270m-q4_k_m.gguf)

use std::time::Instant;

use edgellm::host::{GenerateRequest, Host};
use edgellm::protocol::{parse_request, Kind, RequestLimits};
use edgellm::generate::TokenFilter;
use edgellm::structured::{OutputFormat, Vocabulary};
use edgellm::tools::constraint::ToolConstraint;
use serde_json::json;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn decode_rate(h: &mut Host, req: &GenerateRequest) -> (f64, usize) {
    h.reset_session();
    h.generate_begin(req, 0.0).unwrap();
    while !h.prefill_chunk().unwrap().done {}
    while h.decode_step().unwrap().finish_reason.is_none() {}
    let r = h.generate_end(0.0).unwrap();
    (r.decode_tokens_per_s, r.completion_tokens)
}

fn main() {
    let path = std::env::args().nth(1).unwrap_or_else(|| "models/gemma-3-270m-q4_k_m.gguf".into());
    let bytes = std::fs::read(&path).expect("read the model");
    let mut h = Host::with_clock(|| {
        static T0: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        T0.get_or_init(Instant::now).elapsed().as_secs_f64() * 1e3
    });
    h.load_begin(bytes.len() as u64, None);
    h.load_push(&bytes).unwrap();
    h.load_finish().unwrap();
    let tok = &h.loaded().unwrap().tokenizer;
    println!("vocabulary: {} tokens", tok.vocab_size());

    let t = Instant::now();
    let vocab = Vocabulary::new(tok).unwrap();
    println!("vocabulary for llguidance (once per model): {:.0} ms", t.elapsed().as_secs_f64() * 1e3);

    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 40},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "email": {"type": "string", "pattern": "^[a-z0-9.]+@[a-z0-9]+\\.[a-z]{2,4}$"},
            "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
            "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"}}, "required": ["city"]},
            "role": {"enum": ["admin", "user", "guest"]}
        },
        "required": ["name", "age", "email", "role"],
        "additionalProperties": false
    });
    let format = OutputFormat::JsonSchema { schema: schema.clone() };
    let compile: Vec<f64> = (0..21)
        .map(|_| {
            let t = Instant::now();
            let c = vocab.constraint(&format).unwrap();
            drop(c);
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    println!("schema compile (6 properties, pattern, enum, nested object): median {:.2} ms of 21", median(compile));

    // Tool calls: the grammar of two functions (a %json each), and auto's undecided mask step.
    let fns = json!([
        {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 20}, "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"], "additionalProperties": false}}},
        {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "maximum": 50}}, "required": ["query"]}}}
    ]);
    let tools = parse_request(Kind::Chat, &json!({"messages": [{"role": "user", "content": "x"}], "tools": fns}), RequestLimits::default()).unwrap().gen.tools.unwrap();
    let compile: Vec<f64> = (0..21)
        .map(|_| {
            let t = Instant::now();
            drop(ToolConstraint::new(&vocab, &tools).unwrap());
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    println!("tool-call grammar compile (2 functions): median {:.2} ms of 21", median(compile));
    let mut c = ToolConstraint::new(&vocab, &tools).unwrap().unwrap();
    let mut logits = vec![0f32; tok.vocab_size()];
    let mask: Vec<f64> = (0..21)
        .map(|_| {
            let t = Instant::now();
            c.filter(&mut logits).unwrap();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    println!("auto's undecided mask (first tokens only): median {:.2} ms of 21", median(mask));

    // Decode rates, alternating, the same prompt and token budget; the constrained request's
    // schema keeps it generating (an array of at least 40 strings) so both decode 64 tokens.
    let body = |rf: Option<serde_json::Value>| {
        let mut b = json!({"messages": [{"role": "user", "content": "List many fruits."}], "max_tokens": 64, "temperature": 0});
        if let Some(rf) = rf {
            b["response_format"] = rf;
        }
        parse_request(Kind::Chat, &b, RequestLimits::default()).unwrap().gen
    };
    let free = GenerateRequest { ..body(None) };
    let long = json!({"type": "array", "items": {"type": "string", "maxLength": 12}, "minItems": 40});
    let constrained = body(Some(json!({"type": "json_schema", "json_schema": {"name": "fruits", "schema": long}})));
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let (r, n) = decode_rate(&mut h, &free);
        a.push(r);
        let (rc, nc) = decode_rate(&mut h, &constrained);
        b.push(rc);
        println!("  unconstrained {r:.1} tok/s ({n} tokens), constrained {rc:.1} tok/s ({nc} tokens)");
    }
    let (ma, mb) = (median(a), median(b));
    println!("decode: unconstrained {ma:.1} tok/s, constrained {mb:.1} tok/s: {:.0}% (median of 5, alternating)", 100.0 * mb / ma);
}
