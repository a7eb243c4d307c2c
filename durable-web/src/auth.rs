//! Who may use the dashboard, and which forms it accepts.
//!
//! * **The access token** (optional): a request carries it as
//!   `Authorization: Bearer <token>`, or as the `chronopool_token` cookie,
//!   which `/?token=<token>` sets (`HttpOnly`, `SameSite=Strict`) for a
//!   browser. Compared in constant time.
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
    let presented = bearer.or_else(|| request.cookie(COOKIE));
    presented.is_some_and(|p| same(p, token))
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
    fn tokens_compare_whole() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "ab"));
        assert!(!same("", "a"));
    }
}
