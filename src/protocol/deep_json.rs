//! JSON text to values for the request parsers, nested as deep as a request may need.
//!
//! A schema or grammar's nesting is limited by the grammar check (`grammar_depth::MAX_DEPTH`
//! levels of nested values, with a message naming the limit). serde_json's own limit, 128
//! levels of arrays and objects for the whole body, hit first: with the request's levels
//! around a schema (`response_format.json_schema.schema`, `tools[i].function.parameters`), a
//! schema the check accepts was refused as "not valid JSON: recursion limit exceeded". Here the
//! nesting is counted first by a scan without recursion, and a body past [`MAX_JSON_DEPTH`] is
//! refused as such; serde_json then parses without its own limit, and its recursion never goes
//! deeper than the brackets counted.

use serde::de::DeserializeOwned;

/// Levels of arrays and objects a request body may nest: the grammar check's limit and room
/// for the request's own levels around a schema (so that a schema past that limit gets the
/// check's message).
pub const MAX_JSON_DEPTH: usize = crate::grammar_depth::MAX_DEPTH + 32;

/// Why JSON text was not read.
#[derive(Debug)]
pub enum DeepJsonError {
    /// Arrays and objects nested past [`MAX_JSON_DEPTH`].
    TooDeep,
    /// Not JSON, or not the shape asked for.
    Json(serde_json::Error),
}

impl std::fmt::Display for DeepJsonError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeepJsonError::TooDeep => write!(f, "arrays and objects nest more than {MAX_JSON_DEPTH} levels deep"),
            DeepJsonError::Json(e) => write!(f, "{e}"),
        }
    }
}

/// Whether the `[`/`{` nesting outside strings in `text` goes past `limit`. It counts what a
/// parser reading `text` from the start would recurse into: for text that is not JSON the
/// parser stops at the first fault, before any bracket the count saw after it.
fn nests_past(text: &[u8], limit: usize) -> bool {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    for &b in text {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// `T` from JSON text nesting at most [`MAX_JSON_DEPTH`] levels (the whole text, as
/// `serde_json::from_slice`).
pub fn from_slice<T: DeserializeOwned>(text: &[u8]) -> Result<T, DeepJsonError> {
    if nests_past(text, MAX_JSON_DEPTH) {
        return Err(DeepJsonError::TooDeep);
    }
    let mut de = serde_json::Deserializer::from_slice(text);
    // Bounded by the scan above.
    de.disable_recursion_limit();
    let v = T::deserialize(&mut de).map_err(DeepJsonError::Json)?;
    de.end().map_err(DeepJsonError::Json)?;
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn nested(levels: usize) -> String {
        format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
    }

    #[test]
    fn reads_what_serde_json_reads_up_to_the_limit() {
        for text in [r#"{"a": [1, {"b": "x[{\"]"}], "c": null}"#, "[]", "3", r#""[[[[""#] {
            assert_eq!(from_slice::<Value>(text.as_bytes()).unwrap(), serde_json::from_str::<Value>(text).unwrap());
        }
        // Past serde_json's own 128 levels, up to ours; then refused as too deep, not as bad JSON.
        assert!(serde_json::from_str::<Value>(&nested(MAX_JSON_DEPTH)).is_err());
        assert!(from_slice::<Value>(nested(MAX_JSON_DEPTH).as_bytes()).is_ok());
        assert!(matches!(from_slice::<Value>(nested(MAX_JSON_DEPTH + 1).as_bytes()), Err(DeepJsonError::TooDeep)));
        assert!(matches!(from_slice::<Value>("[".repeat(1 << 20).as_bytes()), Err(DeepJsonError::TooDeep)));
        // Brackets inside strings (escaped quotes too) do not count.
        let in_strings = format!(r#"["{}\"{}"]"#, "[".repeat(1000), "{".repeat(1000));
        assert!(from_slice::<Value>(in_strings.as_bytes()).is_ok());
        // Not JSON: serde_json's error; trailing text too.
        assert!(matches!(from_slice::<Value>(b"[1,]"), Err(DeepJsonError::Json(_))));
        assert!(matches!(from_slice::<Value>(b"[1] x"), Err(DeepJsonError::Json(_))));
    }
}
