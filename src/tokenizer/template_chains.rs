//! How long a chain one Jinja tag builds, bounded before minijinja parses the template.
//!
//! minijinja limits nesting (parentheses, blocks: 150 levels) but not flat chains: `1 + 1 + …`,
//! `----1`, `x|upper|upper…`, `not not …` and `x.a.a…` each become one AST node per operator,
//! nested, and the parser, compiler and evaluator recurse through them. A chat template with a
//! 40 KB chain overflowed the native server's inference thread (the process aborted on the first
//! chat request) and 15,000 operators overflowed the wasm engine's stack. Real chat templates
//! use a few dozen operators in their longest tag; this refuses a tag with more than
//! [`MAX_TAG_OPERATORS`] (wasm rendered 5,000 of each kind above without trouble).

use super::error::TokenizerError;

/// The most operators (anything that can nest an expression: arithmetic and comparison
/// operators, `~`, `|`, `.`, `[`, `(`, `not`, `and`, `or`, `if`, `else`, `is`, `in`) one tag may
/// hold.
pub const MAX_TAG_OPERATORS: usize = 1000;

/// `Err` (`CHAT_TEMPLATE_ERROR`) when one `{{ … }}` or `{% … %}` tag of `source` holds more than
/// [`MAX_TAG_OPERATORS`] operators outside its string literals.
pub fn check(source: &str) -> Result<(), TokenizerError> {
    let b = source.as_bytes();
    let mut i = 0;
    while i + 1 < b.len() {
        if b[i] != b'{' {
            i += 1;
            continue;
        }
        let close: &[u8] = match b[i + 1] {
            b'{' => b"}}",
            b'%' => b"%}",
            b'#' => {
                // A comment: skipped whole.
                i = find(b, i + 2, b"#}").map_or(b.len(), |e| e + 2);
                continue;
            }
            _ => {
                i += 1;
                continue;
            }
        };
        let (end, ops) = tag_operators(b, i + 2, close);
        if ops > MAX_TAG_OPERATORS {
            let line = 1 + b[..i].iter().filter(|&&c| c == b'\n').count();
            return Err(TokenizerError::ChatTemplate {
                message: format!("a tag on line {line} chains more than {MAX_TAG_OPERATORS} operators (minijinja would recurse once per operator)"),
            });
        }
        i = end;
    }
    Ok(())
}

fn find(b: &[u8], from: usize, pat: &[u8]) -> Option<usize> {
    b.get(from..)?.windows(pat.len()).position(|w| w == pat).map(|p| from + p)
}

/// Operators in the tag whose body starts at `i`, and where the tag ends (after `close`, or the
/// end of the source).
fn tag_operators(b: &[u8], mut i: usize, close: &[u8]) -> (usize, usize) {
    let mut ops = 0;
    while i < b.len() {
        if b[i..].starts_with(close) {
            return (i + close.len(), ops);
        }
        match b[i] {
            q @ (b'"' | b'\'') => {
                // A string literal, to its unescaped closing quote.
                i += 1;
                while i < b.len() && b[i] != q {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'+' | b'-' | b'*' | b'/' | b'%' | b'~' | b'|' | b'.' | b'[' | b'(' | b'<' | b'>' | b'=' | b'!' => {
                ops += 1;
                i += 1;
            }
            c if c.is_ascii_alphabetic() || c == b'_' => {
                let s = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                if matches!(&b[s..i], b"not" | b"and" | b"or" | b"if" | b"else" | b"is" | b"in") {
                    ops += 1;
                }
            }
            _ => i += 1,
        }
    }
    (b.len(), ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_templates_pass() {
        let chatml = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
        check(chatml).unwrap();
        // Operators inside strings and comments do not count.
        check(&format!("{{{{ '{}' }}}}{{# {} #}}", "+".repeat(5000), "-".repeat(5000))).unwrap();
    }

    #[test]
    fn long_chains_are_refused() {
        for chain in ["{{ 1" .to_string() + &" + 1".repeat(1500) + " }}", format!("{{{{ {}1 }}}}", "-".repeat(1500)),
            format!("{{{{ 'a'{} }}}}", "|upper".repeat(1500)), format!("{{% set x = {}true %}}", "not ".repeat(1500)), format!("{{{{ x{} }}}}", ".a".repeat(1500))]
        {
            let e = check(&chain).unwrap_err();
            assert!(matches!(e, TokenizerError::ChatTemplate { .. }), "{e}");
        }
        // The same operators spread over many tags are fine.
        check(&"{{ 1 + 1 }}".repeat(2000)).unwrap();
        // An unclosed tag is counted to the end (minijinja reports the syntax error).
        assert!(check(&format!("{{{{ 1{}", " + 1".repeat(1500))).is_err());
    }
}
