//! Who may use the dashboard, and which forms it accepts.
//!
//! * **The access token** (optional): a request carries it as
//!   `Authorization: Bearer <token>`, or as the `chronopool_token` cookie,
//!   which `/?token=<token>` and the login page's form (`POST /login`) set
//!   (`HttpOnly`, `SameSite=Strict`) for a browser. The cookie holds the
//!   token in hex, so that any token (with `;`, spaces or non-ASCII
//!   characters) makes a valid cookie. Compared in constant time.
//! * **Without a token**, only requests addressed to this machine by name
//!   (`Host` `localhost`, `127.0.0.1`, `[::1]`, or a name the application
//!   allowed) are answered: a page of another site whose name was made to
//!   resolve to 127.0.0.1 (DNS rebinding) sends its own name.
//! * **Forms**: every change is a `POST` whose form carries the dashboard's
//!   CSRF token (128 random bits drawn when it was made; another site's
//!   page cannot read it), and whose `Origin`, if sent, is this host.

use crate::http::Request;

/// The cookie that carries the access token.
pub(crate) const COOKIE: &str = "chronopool_token";

/// True if `a` and `b` are equal, in time that depends on their lengths
/// only (a token is not guessed byte by byte from response times).
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0_u8, |diff, (x, y)| diff | (x ^ y))
            == 0
}

/// True if `request` may see the dashboard under `token`.
pub(crate) fn allowed(request: &Request, token: Option<&str>) -> bool {
    let Some(token) = token else {
        return true;
    };
    let bearer = request
        .header("authorization")
        .and_then(|h| h.strip_prefix("Bearer "));
    if bearer.is_some_and(|p| same(p, token)) {
        return true;
    }
    request
        .cookie(COOKIE)
        .is_some_and(|p| same(p, &cookie_value(token)))
}

/// What the cookie holds for `token`: its bytes in hex.
pub(crate) fn cookie_value(token: &str) -> String {
    token.bytes().map(|b| format!("{b:02x}")).collect()
}

/// True if `request`'s `Host` (its name, without the port) is this
/// machine's, or one of `allowed`; a request without `Host` (not a
/// browser's) passes.
pub(crate) fn host_allowed(request: &Request, allowed: &[String]) -> bool {
    let Some(host) = request.header("host") else {
        return true;
    };
    let name = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.rsplit_once(':').map_or(host, |(name, _)| name),
    };
    let name = name.to_ascii_lowercase();
    ["localhost", "127.0.0.1", "::1"].contains(&name.as_str())
        || allowed.iter().any(|a| a.eq_ignore_ascii_case(&name))
}

/// True if a form posted with `request` may change the store.
pub(crate) fn form_allowed(request: &Request, csrf: &str, field: Option<&str>) -> bool {
    let origin_ok = match (request.header("origin"), request.header("host")) {
        (Some(origin), Some(host)) => {
            let origin = origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"))
                .unwrap_or(origin);
            origin == host
        }
        (Some(_), None) => false,
        (None, _) => true,
    };
    origin_ok && field.is_some_and(|f| same(f, csrf))
}

/// 128 random bits, in hex.
pub(crate) fn random_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_this_machines_or_allowed() {
        let with_host = |h: &str| Request {
            headers: vec![("Host".into(), h.into())],
            ..Request::default()
        };
        let none: &[String] = &[];
        for ok in ["localhost:8080", "127.0.0.1:9", "[::1]:80", "LOCALHOST"] {
            assert!(host_allowed(&with_host(ok), none), "{ok}");
        }
        for bad in ["evil.example:8080", "127.0.0.1.evil.example", "[::2]:80"] {
            assert!(!host_allowed(&with_host(bad), none), "{bad}");
        }
        assert!(host_allowed(
            &with_host("ops.internal:8080"),
            &["ops.internal".into()]
        ));
        assert!(host_allowed(&Request::default(), none));
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "ab"));
        assert!(!same("", "a"));
    }
}
