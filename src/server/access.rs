//! Who may call: the `Host` the request was sent to, the browser origin it comes from, the
//! optional bearer token, and CORS for the configured browser origins.
//!
//! `/health` and CORS preflights (`OPTIONS`) need no token; every `/v1/*` route does when the
//! server was given one. CORS headers are added only for an `Origin` in the configured list
//! (or any origin when the list holds `*`); other origins get no CORS headers, so a browser
//! refuses to hand them the response.
//!
//! Without a token a page on any site could still *send* a request (a "simple" `text/plain`
//! POST needs no preflight) or reach the server through DNS rebinding (a hostile name that
//! resolves to 127.0.0.1). So, on every route: the `Host` header must be an IP address,
//! `localhost`, or a name given with `--allowed-host` (`host_not_allowed`, 403), and a request
//! that carries an `Origin` outside the CORS list is refused before its body is read
//! (`origin_not_allowed`, 403) — browsers always send `Origin` on cross-origin POSTs, other
//! clients (curl, SDKs) send none.

use hyper::header::{HeaderMap, HeaderValue, AUTHORIZATION, HOST, ORIGIN};
use hyper::Method;

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
        // The scheme is case-insensitive (RFC 9110 §11.1).
        .and_then(|v| v.split_once(' ').filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer")))
        .map(|(_, token)| token.trim());
    match given {
        Some(g) if same(g.as_bytes(), key.as_bytes()) => Ok(()),
        _ => Err(ApiError::unauthorized()),
    }
}

/// The host part of a `Host` header value (`name`, `1.2.3.4`, `[::1]`; port dropped).
fn host_name(v: &str) -> &str {
    if let Some(rest) = v.strip_prefix('[') {
        // An IPv6 literal: "[::1]" or "[::1]:80"; without its "]" it is no host.
        return match rest.split_once(']') {
            Some((h, port)) if port.is_empty() || port.strip_prefix(':').is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit())) => h,
            _ => "",
        };
    }
    v.rsplit_once(':').map_or(v, |(h, port)| if port.bytes().all(|b| b.is_ascii_digit()) { h } else { v })
}

/// The `Host` header names this server: an IP address (a name cannot rebind to it), `localhost`,
/// or one of `allowed` (`*`: any).
pub fn check_host(headers: &HeaderMap, allowed: &[String]) -> Result<(), ApiError> {
    // Exactly one Host field (RFC 9112 §3.2: a request without one, or with several, is a 400).
    let mut fields = headers.get_all(HOST).iter();
    let (Some(field), None) = (fields.next(), fields.next()) else {
        return Err(ApiError::invalid("invalid_host", "a request carries exactly one Host header"));
    };
    host_allowed(field.to_str().ok().map(host_name).unwrap_or(""), allowed)
}

/// A request target in absolute form (`POST http://name/v1/... HTTP/1.1`) names the host the
/// request is for, which then takes precedence over the `Host` header (RFC 9112 §3.2.2): it
/// must pass the same rule. `target_host`: the target's host, if it has one.
pub fn check_target_host(target_host: Option<&str>, allowed: &[String]) -> Result<(), ApiError> {
    target_host.map_or(Ok(()), |h| host_allowed(host_name(h), allowed))
}

/// `host` (no port) is this server's: an IP address, `localhost`, or one of `allowed`.
fn host_allowed(host: &str, allowed: &[String]) -> Result<(), ApiError> {
    let ok = !host.is_empty()
        && (host.parse::<std::net::IpAddr>().is_ok()
            || host.eq_ignore_ascii_case("localhost")
            || allowed.iter().any(|a| a == "*" || host_name(a).eq_ignore_ascii_case(host)));
    if ok {
        Ok(())
    } else {
        Err(ApiError::new(
            403,
            "invalid_request_error",
            "host_not_allowed",
            format!("Host {host:?} is not this server's address; allow a name with --allowed-host"),
        ))
    }
}

/// A request (other than a preflight) from a browser origin outside the CORS list is refused:
/// the browser would hide the answer from that page anyway, and the model must not run for it.
pub fn check_origin(headers: &HeaderMap, method: &Method, allowed: &[String]) -> Result<(), ApiError> {
    if method == Method::OPTIONS || method == Method::GET || headers.get(ORIGIN).is_none() || allowed_origin(headers, allowed).is_some() {
        return Ok(());
    }
    let origin = headers.get(ORIGIN).and_then(|v| v.to_str().ok()).unwrap_or("?");
    Err(ApiError::new(
        403,
        "invalid_request_error",
        "origin_not_allowed",
        format!("requests from the browser origin {origin:?} are not allowed; allow it with --cors-origin"),
    ))
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
        // The scheme in any case (RFC 9110 §11.1), the token exactly.
        for ok in ["bearer k2", "BEARER k2", "BeArEr  k2"] {
            h.insert(AUTHORIZATION, HeaderValue::from_static(ok));
            assert!(check_bearer(&h, Some("k2")).is_ok(), "{ok}");
        }
        for bad in ["Bearer K2", "Basic k2", "Bearerk2", "k2"] {
            h.insert(AUTHORIZATION, HeaderValue::from_static(bad));
            assert!(check_bearer(&h, Some("k2")).is_err(), "{bad}");
        }
    }

    #[test]
    fn hosts() {
        let with = |v: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(HOST, HeaderValue::from_static(v));
            h
        };
        for ok in ["127.0.0.1:8080", "localhost:1", "LOCALHOST", "[::1]:80", "10.0.0.7", "192.168.1.2:9"] {
            assert!(check_host(&with(ok), &[]).is_ok(), "{ok}");
        }
        for bad in ["evil.test", "evil.test:8080", "localhost.evil.test", "127.0.0.1.nip.io:80", "[::1", "[::1]x", "[::1]:8x"] {
            assert_eq!(check_host(&with(bad), &[]).unwrap_err().code, "host_not_allowed", "{bad}");
        }
        // No Host, or two (even a good one first): 400 (RFC 9112 §3.2).
        assert_eq!(check_host(&HeaderMap::new(), &[]).unwrap_err().status, 400);
        let mut two = with("127.0.0.1:8080");
        two.append(HOST, HeaderValue::from_static("evil.test"));
        assert_eq!((check_host(&two, &[]).unwrap_err().status, check_host(&two, &[]).unwrap_err().code.as_str()), (400, "invalid_host"));
        assert!(check_host(&with("llm.lan:8080"), &["llm.lan".into()]).is_ok());
        assert!(check_host(&with("anything"), &["*".into()]).is_ok());
        // An absolute-form target's host, by the same rule.
        assert!(check_target_host(None, &[]).is_ok());
        for ok in ["127.0.0.1", "localhost", "[::1]"] {
            assert!(check_target_host(Some(ok), &[]).is_ok(), "{ok}");
        }
        assert_eq!(check_target_host(Some("evil.test"), &[]).unwrap_err().code, "host_not_allowed");
        assert!(check_target_host(Some("llm.lan"), &["llm.lan".into()]).is_ok());
    }

    #[test]
    fn foreign_origins_cannot_post() {
        let mut h = HeaderMap::new();
        assert!(check_origin(&h, &Method::POST, &[]).is_ok(), "no Origin: not a browser");
        h.insert(ORIGIN, HeaderValue::from_static("http://evil.test"));
        assert_eq!(check_origin(&h, &Method::POST, &[]).unwrap_err().code, "origin_not_allowed");
        assert!(check_origin(&h, &Method::POST, &["http://evil.test".into()]).is_ok());
        assert!(check_origin(&h, &Method::OPTIONS, &[]).is_ok());
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
