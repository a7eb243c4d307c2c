//! The dashboard's own request and response: what any HTTP stack can hand
//! it and take back, so that an application mounts it in its own router
//! (and `server.rs` serves it alone).

use std::collections::HashMap;

/// An HTTP request, as the dashboard needs it.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// `GET`, `POST`, …
    pub method: String,
    /// The path, below the dashboard's prefix (`/`, `/jobs`, …), without
    /// the query.
    pub path: String,
    /// The query string, without the `?`.
    pub query: String,
    /// The headers, names in any case.
    pub headers: Vec<(String, String)>,
    /// The body (a form, for `POST`).
    pub body: Vec<u8>,
}

impl Request {
    /// A `GET` of `target` (a path and its query), with no headers.
    ///
    /// ```
    /// let request = chronopool_durable_web::Request::get("/jobs?state=dead");
    /// assert_eq!((request.path.as_str(), request.query.as_str()), ("/jobs", "state=dead"));
    /// ```
    pub fn get(target: &str) -> Request {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        Request {
            method: "GET".into(),
            path: path.into(),
            query: query.into(),
            ..Request::default()
        }
    }

    /// The first header `name` (in any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The query's parameters (the last of each name).
    pub(crate) fn params(&self) -> HashMap<String, String> {
        parse(self.query.as_bytes())
    }

    /// The form's fields (the last of each name).
    pub(crate) fn form(&self) -> HashMap<String, String> {
        parse(&self.body)
    }

    /// The cookie `name`.
    pub(crate) fn cookie(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("cookie"))
            .flat_map(|(_, v)| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
    }
}

fn parse(bytes: &[u8]) -> HashMap<String, String> {
    form_urlencoded::parse(bytes).into_owned().collect()
}

/// `pairs` as a query string (each name and value encoded).
pub(crate) fn query<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}

/// An HTTP response.
#[derive(Clone, Debug)]
pub struct Response {
    /// Its status code.
    pub status: u16,
    /// Its headers.
    pub headers: Vec<(String, String)>,
    /// Its body.
    pub body: Vec<u8>,
}

impl Response {
    /// An HTML page, with the headers every page carries: no script may
    /// run (there is none), no other site may frame it or post to it.
    pub(crate) fn html(status: u16, page: maud::Markup) -> Response {
        Response {
            status,
            headers: vec![
                ("Content-Type".into(), "text/html; charset=utf-8".into()),
                (
                    "Content-Security-Policy".into(),
                    "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; \
                     form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
                        .into(),
                ),
                ("X-Content-Type-Options".into(), "nosniff".into()),
                // Not `no-referrer`: under it a browser posts forms with
                // `Origin: null`, and the origin check (auth.rs) refuses.
                ("Referrer-Policy".into(), "same-origin".into()),
                ("Cache-Control".into(), "no-store".into()),
            ],
            body: page.into_string().into_bytes(),
        }
    }

    /// A redirect (after a POST: `303 See Other`) to `location`.
    pub(crate) fn see_other(location: String) -> Response {
        Response {
            status: 303,
            headers: vec![
                ("Location".into(), location),
                ("Cache-Control".into(), "no-store".into()),
            ],
            body: Vec::new(),
        }
    }

    /// The header `name`, if it is set.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}
