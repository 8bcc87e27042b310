//! Percent-decoding of URI parts (RFC 3986): a JSON Schema `$ref` fragment, a path segment of
//! the server's routes. Invalid escapes are kept as they are; the bytes are read as UTF-8
//! (lossily).

pub fn decode(s: &str) -> String {
    if !s.contains('%') {
        return s.to_string();
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    #[test]
    fn decodes_escapes_and_keeps_the_rest() {
        assert_eq!(super::decode("a%2Fb%20c"), "a/b c");
        assert_eq!(super::decode("100%"), "100%");
        assert_eq!(super::decode("%zz%4"), "%zz%4");
        assert_eq!(super::decode("%C3%A9"), "é");
    }
}
