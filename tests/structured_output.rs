//! Structured output (`response_format`, `edgellm::structured`) on the real model through the
//! host driver: greedy and sampled runs under a JSON schema always parse and validate, a JSON
//! object is an object, the streamed text equals the result, and a bad schema is a typed error.

mod common;

use edgellm::host::{GenerateRequest, Host};
use edgellm::protocol::{parse_request, Kind, RequestLimits};
use serde_json::{json, Value};

fn host() -> Option<Host> {
    Some(common::load_host(&common::real_model()?))
}

/// The request an OpenAI body becomes (the protocol's rules applied).
fn request(body: Value) -> GenerateRequest {
    parse_request(Kind::Chat, &body, RequestLimits::default()).unwrap().gen
}

fn run(h: &mut Host, req: &GenerateRequest) -> (String, String, String) {
    h.generate_begin(req, 0.0).unwrap();
    while !h.prefill_chunk().unwrap().done {}
    let mut streamed = String::new();
    for _ in 0..1000 {
        let ev = h.decode_step().unwrap();
        streamed.push_str(&ev.text);
        if ev.finish_reason.is_some() {
            break;
        }
    }
    let r = h.generate_end(1.0).unwrap();
    (r.text, r.finish_reason.to_string(), streamed)
}

#[test]
fn json_schema_and_json_object_outputs_always_parse_and_validate() {
    let Some(mut h) = host() else { return };
    let schema = json!({
        "type": "object",
        "properties": {
            "color": {"type": "string", "enum": ["red", "green", "blue"]},
            "count": {"type": "integer", "minimum": 1, "maximum": 9},
            "note": {"type": "string", "maxLength": 12}
        },
        "required": ["color", "count", "note"],
        "additionalProperties": false
    });
    let rf = json!({"type": "json_schema", "json_schema": {"name": "pick", "schema": schema, "strict": true}});
    let valid = |text: &str| {
        let v: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text:?}"));
        let o = v.as_object().unwrap();
        assert_eq!(o.len(), 3, "{text}");
        assert!(["red", "green", "blue"].contains(&o["color"].as_str().unwrap()), "{text}");
        assert!((1..=9).contains(&o["count"].as_i64().unwrap()), "{text}");
        assert!(o["note"].as_str().unwrap().chars().count() <= 12, "{text}");
    };
    for (temperature, seed) in [(0.0, 1), (1.0, 1), (1.0, 2), (1.5, 3)] {
        let req = request(json!({
            "messages": [{"role": "user", "content": "Pick a color and a count."}],
            "max_tokens": 60, "temperature": temperature, "seed": seed, "response_format": rf
        }));
        let (text, finish, streamed) = run(&mut h, &req);
        assert_eq!(finish, "stop", "the grammar ends the output: {text:?}");
        assert_eq!(streamed, text);
        valid(&text);
    }
    // Any JSON object: unbounded, so the model may still be inside it at max_tokens; what it
    // wrote is the start of an object, and parses whenever the grammar ended it.
    let req = request(json!({
        "messages": [{"role": "user", "content": "Give a tiny JSON object."}],
        "max_tokens": 24, "temperature": 0, "response_format": {"type": "json_object"}
    }));
    let (text, finish, _) = run(&mut h, &req);
    assert!(text.starts_with('{'), "{text:?}");
    if finish == "stop" {
        assert!(serde_json::from_str::<Value>(&text).unwrap().is_object(), "{text}");
    }
    // Extension: a Lark grammar; the text is one of its sentences.
    let req = request(json!({
        "messages": [{"role": "user", "content": "Is the sky blue?"}],
        "max_tokens": 8, "temperature": 1.0, "seed": 5,
        "response_format": {"type": "grammar", "grammar": "start: answer \".\"\nanswer: \"yes\" | \"no\" | \"maybe\""}
    }));
    let (text, finish, _) = run(&mut h, &req);
    assert!(["yes.", "no.", "maybe."].contains(&text.as_str()) && finish == "stop", "{text:?} {finish}");
    // A schema llguidance cannot compile: INVALID_REQUEST before any model call; the host works on.
    let bad = request(json!({
        "messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "bad", "schema": {"type": "nonsense"}}}
    }));
    let e = h.generate_begin(&bad, 0.0).unwrap_err();
    assert_eq!(e.code, "INVALID_REQUEST");
    assert!(e.message.contains("response_format"), "{}", e.message);
    let (text, _, _) = run(&mut h, &request(json!({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "temperature": 0})));
    assert!(!text.is_empty());
}

/// The tiny model's vocabulary as llguidance sees it.
fn tiny_vocabulary() -> edgellm::structured::Vocabulary {
    let bytes = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/tiny_llama.gguf")).unwrap();
    let store = edgellm::gguf::load_bytes(&bytes).unwrap();
    let tok = edgellm::tokenizer::Tokenizer::from_gguf(&store.header).unwrap();
    edgellm::structured::Vocabulary::new(&tok).unwrap()
}

/// Schemas and grammars llguidance would recurse through without end, or that fail at their
/// first mask, are the request's errors (they aborted the server or trapped wasm, or came as
/// 500 mid-generation).
#[test]
fn deep_or_cyclic_schemas_are_request_errors() {
    use edgellm::structured::OutputFormat;
    let v = tiny_vocabulary();
    let mut defs = serde_json::Map::new();
    for i in 0..300 {
        defs.insert(format!("d{i}"), serde_json::json!({"type": "array", "items": {"$ref": format!("#/$defs/d{}", i + 1)}}));
    }
    defs.insert("d300".into(), serde_json::json!({"type": "string"}));
    let deep = OutputFormat::JsonSchema { schema: serde_json::json!({"$ref": "#/$defs/d0", "$defs": defs}) };
    assert!(v.constraint(&deep).err().unwrap().contains("at most 128"));
    let chain: String = (0..1000).map(|i| format!("x{i}: \"a\" x{} | \"b\"\n", i + 1)).collect();
    let lark = OutputFormat::Grammar { grammar: format!("start: x0\n{chain}x1000: \"c\"\n") };
    assert!(v.constraint(&lark).is_err());
    let cycle = OutputFormat::JsonSchema { schema: serde_json::json!({"$ref": "#/$defs/a", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}}) };
    let e = v.constraint(&cycle).err().expect("a cycle that never reaches a value is refused");
    assert!(!e.contains('\n'), "one line, not the parser's state: {e}");
}

/// A schema as deep as the grammar check allows (128 levels of nested values: 63 nested
/// objects, each a schema and its `properties`) arrives as JSON and compiles; one object more
/// gets the check's message. serde_json's own 128-level limit for the whole body refused both
/// as "not valid JSON" (from 62 nested objects on). On a 1 MiB stack, the wasm engine's.
#[test]
fn schemas_as_deep_as_the_check_allows_arrive_as_json() {
    use edgellm::protocol::{deep_json::MAX_JSON_DEPTH, parse_request_json, Kind, RequestLimits};
    let run = || {
        let nested = |k: usize| {
            let mut s = serde_json::json!({"type": "integer"});
            for _ in 0..k {
                s = serde_json::json!({"type": "object", "properties": {"a": s}, "required": ["a"]});
            }
            s
        };
        let v = tiny_vocabulary();
        for (k, fits) in [(63, true), (64, false)] {
            let body = serde_json::json!({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_schema", "json_schema": {"name": "deep", "schema": nested(k)}}}).to_string();
            let req = parse_request_json(Kind::Chat, body.as_bytes(), RequestLimits::default()).unwrap_or_else(|e| panic!("{k} objects: {e}"));
            let c = v.constraint(req.gen.response_format.as_ref().unwrap());
            if fits {
                c.unwrap_or_else(|e| panic!("{k} objects: {e}"));
            } else {
                assert!(c.err().unwrap().contains("at most 128"), "{k} objects");
            }
        }
        // Past the body's own limit: refused as too deep, not as bad JSON.
        let deep = format!(r#"{{"messages": [{{"role": "user", "content": "hi"}}], "x": {}1{}}}"#, "[".repeat(MAX_JSON_DEPTH), "]".repeat(MAX_JSON_DEPTH));
        let e = parse_request_json(Kind::Chat, deep.as_bytes(), RequestLimits::default()).unwrap_err();
        assert_eq!(e.code, "too_deep", "{e}");
    };
    std::thread::Builder::new().stack_size(1 << 20).spawn(run).unwrap().join().unwrap();
}

/// Integer bounds and values past 2^53 are refused: llguidance compares numbers as f64, which
/// rounded `minimum: 2^53 + 1` to 2^53 and let 2^53 through (found by a schema probe). At 2^53
/// and below they compile; past it elsewhere (a description's example) they do not matter.
#[test]
fn integer_bounds_past_two_to_the_53_are_request_errors() {
    use edgellm::structured::OutputFormat;
    let v = tiny_vocabulary();
    let schema = |s: Value| OutputFormat::JsonSchema { schema: json!({"type": "object", "properties": {"id": s}, "required": ["id"]}) };
    for bad in [
        json!({"type": "integer", "minimum": 9007199254740993u64}),
        json!({"type": "integer", "maximum": -9007199254740993i64}),
        json!({"type": "integer", "exclusiveMaximum": 18446744073709551615u64}),
        json!({"const": 9007199254740993u64}),
        json!({"enum": [1, 9007199254740995u64]}),
    ] {
        let e = v.constraint(&schema(bad.clone())).err().unwrap_or_else(|| panic!("{bad} compiled"));
        assert!(e.contains("2^53"), "{e}");
    }
    for ok in [json!({"type": "integer", "minimum": 9007199254740992u64, "maximum": 9007199254740992u64}), json!({"type": "integer", "examples": [9007199254740993u64]})] {
        assert!(v.constraint(&schema(ok.clone())).is_ok(), "{ok}");
    }
}

/// Property counts on an object open to undeclared keys are refused: the grammar cannot keep
/// such a key from repeating, and `{"a": 1, "a": 2, "a": 3}` met `minProperties: 3` (found by a
/// schema probe). Over declared properties only, they compile.
#[test]
fn property_counts_over_keys_that_could_repeat_are_request_errors() {
    use edgellm::structured::OutputFormat;
    let v = tiny_vocabulary();
    let format = |s: Value| OutputFormat::JsonSchema { schema: s };
    for bad in [
        json!({"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 3, "maxProperties": 3}),
        json!({"type": "object", "patternProperties": {"^x_": {"type": "integer"}}, "additionalProperties": false, "minProperties": 1}),
        json!({"type": "object", "properties": {"inner": {"type": "object", "maxProperties": 2}}}),
    ] {
        let e = v.constraint(&format(bad.clone())).err().unwrap_or_else(|| panic!("{bad} compiled"));
        assert!(e.contains("minProperties/maxProperties"), "{e}");
    }
    for ok in [
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "additionalProperties": false, "minProperties": 1}),
        json!({"type": "object", "properties": {"minProperties": {"type": "integer"}}, "required": ["minProperties"]}),
    ] {
        assert!(v.constraint(&format(ok.clone())).is_ok(), "{ok}");
    }
}
