//! Who may call: the optional bearer token, and CORS for the configured browser origins.
//!
//! `/health` and CORS preflights (`OPTIONS`) need no token; every `/v1/*` route does when the
//! server was given one. CORS headers are added only for an `Origin` in the configured list
//! (or any origin when the list holds `*`); other origins get no CORS headers, so a browser
//! refuses to hand them the response.

use hyper::header::{HeaderMap, HeaderValue, AUTHORIZATION, ORIGIN};

use super::errors::ApiError;

/// Compares in time independent of where the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `Authorization: Bearer <key>` must match `key` (when one is configured).
pub fn check_bearer(headers: &HeaderMap, key: Option<&str>) -> Result<(), ApiError> {
    let Some(key) = key else { return Ok(()) };
    let given = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
        .map(str::trim);
    match given {
        Some(g) if same(g.as_bytes(), key.as_bytes()) => Ok(()),
        _ => Err(ApiError::unauthorized()),
    }
}

/// The `Access-Control-Allow-Origin` value for this request, if its origin is allowed.
pub fn allowed_origin(headers: &HeaderMap, allowed: &[String]) -> Option<HeaderValue> {
    if allowed.is_empty() {
        return None;
    }
    let origin = headers.get(ORIGIN)?;
    if allowed.iter().any(|a| a == "*") {
        return Some(HeaderValue::from_static("*"));
    }
    let o = origin.to_str().ok()?;
    allowed.iter().any(|a| a.trim_end_matches('/') == o).then(|| origin.clone())
}

/// Headers of every CORS response (the origin was allowed).
pub fn cors_headers(h: &mut HeaderMap, origin: HeaderValue) {
    h.insert("access-control-allow-origin", origin);
    h.append("vary", HeaderValue::from_static("Origin"));
    h.insert("access-control-expose-headers", HeaderValue::from_static("Retry-After"));
}

/// Extra headers of a preflight answer.
pub fn preflight_headers(h: &mut HeaderMap, request_headers: Option<&HeaderValue>) {
    h.insert("access-control-allow-methods", HeaderValue::from_static("GET, POST, OPTIONS"));
    h.insert(
        "access-control-allow-headers",
        request_headers.cloned().unwrap_or_else(|| HeaderValue::from_static("authorization, content-type")),
    );
    h.insert("access-control-max-age", HeaderValue::from_static("600"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer() {
        let mut h = HeaderMap::new();
        assert!(check_bearer(&h, None).is_ok());
        assert_eq!(check_bearer(&h, Some("k")).unwrap_err().status, 401);
        h.insert(AUTHORIZATION, HeaderValue::from_static("Bearer k2"));
        assert!(check_bearer(&h, Some("k")).is_err());
        assert!(check_bearer(&h, Some("k2")).is_ok());
    }

    #[test]
    fn origins() {
        let mut h = HeaderMap::new();
        let allowed = vec!["http://a.test".to_string()];
        assert!(allowed_origin(&h, &allowed).is_none());
        h.insert(ORIGIN, HeaderValue::from_static("http://b.test"));
        assert!(allowed_origin(&h, &allowed).is_none());
        h.insert(ORIGIN, HeaderValue::from_static("http://a.test"));
        assert_eq!(allowed_origin(&h, &allowed).unwrap(), "http://a.test");
        assert_eq!(allowed_origin(&h, &["*".to_string()]).unwrap(), "*");
    }
}
