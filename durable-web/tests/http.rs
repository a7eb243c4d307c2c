//! The dashboard at the HTTP level, through `Dashboard::handle` and through
//! its own server: pages, filters, pages of the list, the verbs behind
//! their confirmations, the access token, the CSRF token, and stored
//! strings that try to become markup. On SQLite and on PostgreSQL (the
//! durable crate's test server).

#[path = "../../durable/tests/common/mod.rs"]
mod common;

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use chronopool::ScheduledExecutor;
use chronopool_durable::{Config, DurableScheduler, JobError, JobState, Schedule};
use chronopool_durable_web::{Dashboard, Request, Response};

const HOSTILE: &str = "<script>alert(1)</script>\"'&";

/// A store with jobs: three reports, two mails (one paused), and a dead
/// job whose key and error are markup.
fn store(postgres: bool) -> (tempfile::TempDir, ScheduledExecutor, Arc<DurableScheduler>) {
    let dir = tempfile::tempdir().unwrap();
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .build()
        .unwrap();
    let jobs = if postgres {
        let params = common::PgServer::shared().fresh_database();
        DurableScheduler::postgres(&pool, &params, Config::default())
    } else {
        DurableScheduler::sqlite(&pool, dir.path().join("jobs.db"), Config::default())
    }
    .unwrap();
    let hour = Duration::from_secs(3600);
    for n in 0..3 {
        jobs.schedule(&format!("report-{n}"), "report", b"", Schedule::After(hour))
            .unwrap();
    }
    jobs.schedule("mail-0", "mail", b"to: ada", Schedule::After(hour))
        .unwrap();
    jobs.schedule("mail-1", "mail", b"", Schedule::After(hour))
        .unwrap();
    jobs.pause("mail-1").unwrap();
    jobs.register("evil", |_| Err(JobError::permanent(HOSTILE)));
    jobs.start().unwrap();
    jobs.schedule(
        HOSTILE,
        "evil",
        HOSTILE.as_bytes(),
        Schedule::After(Duration::ZERO),
    )
    .unwrap();
    let waited = std::time::Instant::now();
    while jobs.job(HOSTILE).unwrap().map(|j| j.state) != Some(JobState::Dead) {
        assert!(waited.elapsed() < Duration::from_secs(30), "never dead");
        std::thread::sleep(Duration::from_millis(20));
    }
    (dir, pool, Arc::new(jobs))
}

fn get(d: &Dashboard, target: &str) -> Response {
    d.handle(&Request::get(target))
}

/// The CSRF token the confirmation page's form carries.
fn csrf_of(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").expect("a csrf field") + 19;
    page[at..at + 32].to_owned()
}

fn post(d: &Dashboard, fields: &[(&str, &str)]) -> Response {
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish();
    d.handle(&Request {
        method: "POST".into(),
        path: "/action".into(),
        headers: vec![(
            "Content-Type".into(),
            "application/x-www-form-urlencoded".into(),
        )],
        body: body.into_bytes(),
        ..Request::default()
    })
}

/// The confirmation of `action` on `key`, then its form posted.
fn confirm_and_post(d: &Dashboard, action: &str, key: &str) -> Response {
    let q = form_urlencoded::Serializer::new(String::new())
        .extend_pairs([("action", action), ("key", key)])
        .finish();
    let page = get(d, &format!("/confirm?{q}"));
    assert_eq!(page.status, 200);
    let csrf = csrf_of(&page.text());
    post(d, &[("action", action), ("key", key), ("csrf", &csrf)])
}

#[test]
fn pages_filters_and_verbs_on_both_stores() {
    for postgres in [false, true] {
        let (_dir, _pool, jobs) = store(postgres);
        let d = Dashboard::new(Arc::clone(&jobs));

        let overview = get(&d, "/");
        assert_eq!(overview.status, 200);
        let text = overview.text();
        assert!(text.contains(r#"data-count="scheduled">4<"#), "{text}");
        assert!(text.contains(r#"data-count="paused">1<"#));
        assert!(text.contains(r#"data-count="dead">1<"#));
        assert!(
            text.contains(r#"data-count="died">1<"#),
            "the last hour's runs"
        );
        assert!(
            overview
                .header("content-security-policy")
                .is_some_and(|c| c.contains("default-src 'none'")),
            "no script may run"
        );

        // Filters.
        let reports = get(&d, "/jobs?handler=report").text();
        assert_eq!(reports.matches("href=\"/job?key=report-").count(), 3);
        assert!(!reports.contains("mail-0"));
        let prefixed = get(&d, "/jobs?prefix=mail-").text();
        assert!(prefixed.contains("mail-0") && prefixed.contains("mail-1"));
        let paused = get(&d, "/jobs?paused=true").text();
        assert!(paused.contains("mail-1") && !paused.contains("mail-0"));
        let dead = get(&d, "/jobs?state=dead").text();
        assert!(dead.contains("&lt;script&gt;"), "{dead}");

        // A job's page, and the verbs.
        let job = get(&d, "/job?key=mail-0").text();
        assert!(job.contains("to: ada") && job.contains("once"), "{job}");
        let r = confirm_and_post(&d, "pause", "mail-0");
        assert_eq!(r.status, 303);
        assert!(
            jobs.job("mail-0").unwrap().unwrap().paused,
            "postgres: {postgres}"
        );
        let after = get(&d, r.header("location").unwrap()).text();
        assert!(after.contains("Paused."), "{after}");
        confirm_and_post(&d, "resume", "mail-0");
        assert!(!jobs.job("mail-0").unwrap().unwrap().paused);
        confirm_and_post(&d, "run-now", "report-0");
        let moved = jobs.job("report-0").unwrap().unwrap().next_fire;
        assert!(moved <= SystemTime::now());
        confirm_and_post(&d, "retry", HOSTILE);
        // Retried, it runs again (and dies again): its second run.
        let waited = std::time::Instant::now();
        while jobs.history(Some(HOSTILE), 10).unwrap().len() < 2 {
            assert!(
                waited.elapsed() < Duration::from_secs(30),
                "never ran again"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        confirm_and_post(&d, "cancel", "report-2");
        assert!(jobs.job("report-2").unwrap().is_none());
        // A verb that does not apply changes nothing, and says so.
        let r = confirm_and_post(&d, "retry", "report-1");
        let said = get(&d, r.header("location").unwrap()).text();
        assert!(said.contains("Nothing changed"), "{said}");

        // A handler's pause, from the overview's side.
        let page = get(&d, "/confirm?action=pause-handler&handler=report");
        let csrf = csrf_of(&page.text());
        post(
            &d,
            &[
                ("action", "pause-handler"),
                ("handler", "report"),
                ("csrf", &csrf),
            ],
        );
        assert_eq!(jobs.paused_handlers().unwrap(), ["report"]);
        assert!(get(&d, "/").text().contains("report"));
        post(
            &d,
            &[
                ("action", "resume-handler"),
                ("handler", "report"),
                ("csrf", &csrf),
            ],
        );
        assert!(jobs.paused_handlers().unwrap().is_empty());

        // The history of a run shows on its job's page.
        let evil = get(&d, &format!("/job?key={}", urlencode(HOSTILE))).text();
        assert!(evil.contains("dead") && evil.contains("History"));
    }
}

fn urlencode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[test]
fn stored_strings_never_become_markup() {
    let (_dir, _pool, jobs) = store(false);
    let d = Dashboard::new(jobs);
    for target in [
        "/".to_owned(),
        "/jobs".to_owned(),
        "/jobs?state=dead".to_owned(),
        format!("/job?key={}", urlencode(HOSTILE)),
        format!("/confirm?action=retry&key={}", urlencode(HOSTILE)),
        format!("/jobs?handler={}", urlencode(HOSTILE)),
    ] {
        let page = get(&d, &target).text();
        assert!(!page.contains("<script"), "{target}: {page}");
        assert!(!page.contains("alert(1)</"), "{target}");
    }
}

#[test]
fn the_token_and_the_csrf_token_are_asked_for() {
    let (_dir, _pool, jobs) = store(false);
    let d = Dashboard::new(Arc::clone(&jobs)).token("s3cret-token");
    assert_eq!(get(&d, "/").status, 401);
    assert_eq!(get(&d, "/jobs").status, 401);
    assert_eq!(get(&d, "/?token=wrong").status, 401);
    // The token in the query sets a cookie, which then opens every page.
    let login = get(&d, "/?token=s3cret-token");
    assert_eq!(login.status, 303);
    let cookie = login.header("set-cookie").unwrap().to_owned();
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
    let with_cookie = |target: &str| {
        let mut r = Request::get(target);
        r.headers.push((
            "Cookie".into(),
            cookie.split(';').next().unwrap().to_owned(),
        ));
        d.handle(&r)
    };
    assert_eq!(with_cookie("/").status, 200);
    let mut bearer = Request::get("/jobs");
    bearer
        .headers
        .push(("Authorization".into(), "Bearer s3cret-token".into()));
    assert_eq!(d.handle(&bearer).status, 200);

    // A form without the CSRF token, or from another origin, changes nothing.
    let open = Dashboard::new(Arc::clone(&jobs));
    let forged = post(&open, &[("action", "cancel"), ("key", "report-0")]);
    assert_eq!(forged.status, 403);
    assert!(jobs.job("report-0").unwrap().is_some());
    let page = get(&open, "/confirm?action=cancel&key=report-0").text();
    let csrf = csrf_of(&page);
    let mut other_origin = Request {
        method: "POST".into(),
        path: "/action".into(),
        body: format!("action=cancel&key=report-0&csrf={csrf}").into_bytes(),
        ..Request::default()
    };
    other_origin.headers = vec![
        ("Origin".into(), "http://evil.example".into()),
        ("Host".into(), "127.0.0.1:8080".into()),
    ];
    assert_eq!(open.handle(&other_origin).status, 403);
    assert!(jobs.job("report-0").unwrap().is_some());
    // Unknown pages and methods.
    assert_eq!(get(&open, "/nothing").status, 404);
    assert_eq!(get(&open, "/job?key=nothing").status, 404);
    assert_eq!(get(&open, "/confirm?action=explode&key=x").status, 404);
    let mut delete = Request::get("/");
    delete.method = "DELETE".into();
    assert_eq!(open.handle(&delete).status, 405);
}

#[test]
fn the_list_goes_page_by_page() {
    let dir = tempfile::tempdir().unwrap();
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .build()
        .unwrap();
    let jobs =
        DurableScheduler::sqlite(&pool, dir.path().join("jobs.db"), Config::default()).unwrap();
    // In 1960: a page's cursor is a time before the epoch.
    let base = SystemTime::UNIX_EPOCH - Duration::from_secs(10 * 365 * 86_400);
    let batch = (0..120).map(|n| {
        chronopool_durable::Job::new(
            format!("k-{n:03}"),
            "work",
            "",
            Schedule::At(base + Duration::from_secs(n)),
        )
    });
    jobs.schedule_all(batch).unwrap();
    let d = Dashboard::new(Arc::new(jobs)).mounted_at("/ops/jobs/");
    let mut seen = Vec::new();
    let mut target = "/jobs".to_owned();
    loop {
        let page = get(&d, &target).text();
        for line in page.split("href=\"/ops/jobs/job?key=").skip(1) {
            seen.push(line.split('"').next().unwrap().to_owned());
        }
        let Some(at) = page.find("href=\"/ops/jobs/jobs?after_time") else {
            break;
        };
        let href = page[at + 6..]
            .split('"')
            .next()
            .unwrap()
            .replace("&amp;", "&");
        target = href.trim_start_matches("/ops/jobs").to_owned();
    }
    let expected: Vec<String> = (0..120).map(|n| format!("k-{n:03}")).collect();
    assert_eq!(seen, expected);
}

/// The standalone server answers over TCP, and stops when dropped.
#[test]
fn the_server_serves_over_tcp() {
    let (_dir, _pool, jobs) = store(false);
    let server = Dashboard::new(jobs).serve("127.0.0.1:0").unwrap();
    let addr = server.addr();
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .write_all(
            b"GET /jobs?handler=report HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
        )
        .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.contains("report-1"));
    drop(server);
    // The listener closes with its accepting thread, which the drop ends.
    let waited = std::time::Instant::now();
    while std::net::TcpStream::connect(addr).is_ok() {
        assert!(waited.elapsed() < Duration::from_secs(5), "still listening");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Without a token, a request for another host name (a page of another
/// site whose name resolves to 127.0.0.1: DNS rebinding) is refused; the
/// names the application allows, and any with a token, are answered.
#[test]
fn without_a_token_only_this_machine_s_names_are_answered() {
    let (_dir, _pool, jobs) = store(false);
    let with_host = |d: &Dashboard, host: &str| {
        let mut r = Request::get("/");
        r.headers.push(("Host".into(), host.into()));
        d.handle(&r).status
    };
    let open = Dashboard::new(Arc::clone(&jobs)).allow_host("ops.internal");
    assert_eq!(with_host(&open, "127.0.0.1:8080"), 200);
    assert_eq!(with_host(&open, "localhost:8080"), 200);
    assert_eq!(with_host(&open, "ops.internal:8080"), 200);
    assert_eq!(with_host(&open, "rebound.evil.example:8080"), 421);
    let guarded = Dashboard::new(jobs).token("t");
    let mut r = Request::get("/");
    r.headers.push(("Host".into(), "jobs.example.com".into()));
    r.headers.push(("Authorization".into(), "Bearer t".into()));
    assert_eq!(guarded.handle(&r).status, 200);
}

/// A client that announces a body and never sends it holds its own
/// request only; a body over the limit is refused unread.
#[test]
fn a_slow_client_holds_up_no_other() {
    let (_dir, _pool, jobs) = store(false);
    let server = Dashboard::new(jobs).serve("127.0.0.1:0").unwrap();
    let addr = server.addr();
    let mut slow = std::net::TcpStream::connect(addr).unwrap();
    slow.write_all(
        b"POST /action HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2000\r\n\r\npartial",
    )
    .unwrap();
    let fetch = |request: &[u8]| {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.write_all(request).unwrap();
        let mut reply = String::new();
        let _ = stream.read_to_string(&mut reply);
        reply
    };
    let reply = fetch(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    let big = fetch(
        b"POST /action HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10000000\r\nConnection: close\r\n\r\n",
    );
    assert!(big.starts_with("HTTP/1.1 413"), "{big}");
    drop(slow);
}

/// Sends `request` on a connection of its own and reads until the server
/// closes it (or 20 s pass); the whole reply.
fn exchange(addr: std::net::SocketAddr, request: &[u8]) -> String {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    stream.write_all(request).unwrap();
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    String::from_utf8_lossy(&reply).into_owned()
}

const GET_ROOT: &[u8] = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

/// A `Content-Length` beyond any memory (or `u64::MAX`) on any method is
/// refused without a byte of it read or allocated: the process lives, and
/// every request slot comes back.
#[test]
fn a_huge_content_length_is_refused_unread() {
    let (_dir, _pool, jobs) = store(false);
    let server = Dashboard::new(jobs).serve("127.0.0.1:0").unwrap();
    let addr = server.addr();
    for length in ["1000000000000000", "18446744073709551615"] {
        for method in ["GET /", "POST /action", "PUT /"] {
            for _ in 0..20 {
                let reply = exchange(
                    addr,
                    format!(
                        "{method} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {length}\r\n\r\nx"
                    )
                    .as_bytes(),
                );
                assert!(reply.starts_with("HTTP/1.1 "), "{method} {length}: {reply}");
                if method.starts_with("POST") {
                    // 413 from the dashboard's server, or 400 or 431 from
                    // hyper's parser for a length it will not frame.
                    let status = &reply[9..12];
                    assert!(
                        ["400", "413", "431"].contains(&status),
                        "{method} {length}: {reply}"
                    );
                }
            }
        }
    }
    let reply = exchange(addr, GET_ROOT);
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
}

/// Clients that send half a head, or a head and half a body, and then
/// nothing (slowloris), more of them than pages are built at once, hold
/// up no other client; each is let go after its time-out.
#[test]
fn slow_clients_hold_up_no_other() {
    let (_dir, _pool, jobs) = store(false);
    let server = Dashboard::new(jobs).serve("127.0.0.1:0").unwrap();
    let addr = server.addr();
    let open = |bytes: &[u8]| {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream.write_all(bytes).unwrap();
        stream
    };
    let mut slow = Vec::new();
    for _ in 0..40 {
        slow.push(open(
            b"POST /action HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2000\r\n\r\npart",
        ));
        slow.push(open(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "));
        slow.push(open(b""));
    }
    let asked = std::time::Instant::now();
    let reply = exchange(addr, GET_ROOT);
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(
        asked.elapsed() < Duration::from_secs(4),
        "answered after {:?}, behind the slow clients",
        asked.elapsed()
    );
    // Each slow client is let go: a body that never came is answered 408,
    // a head that never came closes the connection.
    for (n, mut stream) in slow.into_iter().enumerate() {
        stream
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        let mut reply = Vec::new();
        let read = stream.read_to_end(&mut reply);
        assert!(read.is_ok(), "client {n} still held: {read:?}");
        let reply = String::from_utf8_lossy(&reply);
        if n % 3 == 0 {
            assert!(reply.starts_with("HTTP/1.1 408"), "client {n}: {reply}");
        }
    }
}

/// A connection carries one request: what follows it, in its body or
/// after it, is never read as another (no request smuggling).
#[test]
fn a_connection_carries_one_request() {
    let (_dir, _pool, jobs) = store(false);
    let server = Dashboard::new(jobs).serve("127.0.0.1:0").unwrap();
    let addr = server.addr();
    let hidden = "GET /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    let filler = "a".repeat(70_000);
    let chunk = format!("{filler}{hidden}");
    let requests = [
        format!(
            "POST /action HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n\
             {:x}\r\n{chunk}\r\n0\r\n\r\n",
            chunk.len()
        ),
        format!(
            "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n\
             {:x}\r\n{hidden}\r\n0\r\n\r\n",
            hidden.len()
        ),
        format!("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n{hidden}"),
    ];
    for request in &requests {
        let reply = exchange(addr, request.as_bytes());
        assert_eq!(
            reply.matches("HTTP/1.1 ").count(),
            1,
            "{}",
            &reply[..reply.len().min(400)]
        );
    }
}

/// `HEAD` is answered as `GET` without the body; other methods 405 with
/// `Allow`; a request without the token 401 with `WWW-Authenticate`; a
/// filter or cursor the dashboard does not know 400.
#[test]
fn methods_and_statuses_say_what_is_allowed() {
    let (_dir, _pool, jobs) = store(false);
    let open = Dashboard::new(Arc::clone(&jobs));
    let server = open.clone().serve("127.0.0.1:0").unwrap();
    let head = exchange(
        server.addr(),
        b"HEAD /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    );
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(!head.contains("report-1"), "a HEAD with a body: {head}");
    let mut put = Request::get("/");
    put.method = "PUT".into();
    let refused = open.handle(&put);
    assert_eq!(refused.status, 405);
    assert_eq!(refused.header("Allow"), Some("GET, HEAD, POST"));
    let guarded = Dashboard::new(Arc::clone(&jobs)).token("t");
    let asked = get(&guarded, "/");
    assert_eq!(asked.status, 401);
    assert!(asked.header("WWW-Authenticate").is_some());
    for target in [
        "/jobs?state=bogus",
        "/jobs?paused=maybe",
        "/jobs?after_time=99999999999999999999&after_key=a",
        "/jobs?after_time=12",
    ] {
        assert_eq!(get(&open, target).status, 400, "{target}");
    }
    assert_eq!(get(&open, "/jobs?state=&paused=").status, 200);
}

/// Any token logs a browser in, by the link or by the login page's form
/// (a `POST`, so the token stays out of the address bar): a `;`, spaces
/// and non-ASCII characters make a valid cookie; a wrong token is refused.
#[test]
fn any_token_logs_a_browser_in() {
    let (_dir, _pool, jobs) = store(false);
    let token = "a;b c=d, é\u{1F511}";
    let d = Dashboard::new(jobs).token(token);
    let server = d.clone().serve("127.0.0.1:0").unwrap();
    let encoded = form_urlencoded::byte_serialize(token.as_bytes()).collect::<String>();
    let login_page = get(&d, "/").text();
    assert!(login_page.contains("method=\"post\""), "{login_page}");
    let logins = [
        format!("GET /?token={encoded} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
        format!(
            "POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: \
             application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\ntoken={encoded}",
            encoded.len() + 6
        ),
    ];
    for login in &logins {
        let reply = exchange(server.addr(), login.as_bytes());
        assert!(reply.starts_with("HTTP/1.1 303"), "{reply}");
        let cookie = reply
            .lines()
            .find_map(|l| l.strip_prefix("set-cookie: "))
            .unwrap_or_else(|| panic!("no cookie: {reply}"));
        let pair = cookie.split(';').next().unwrap();
        let page = exchange(
            server.addr(),
            format!("GET /jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nCookie: {pair}\r\n\r\n").as_bytes(),
        );
        assert!(page.starts_with("HTTP/1.1 200"), "{page}");
        assert!(page.contains("report-1"));
    }
    let wrong = exchange(
        server.addr(),
        b"GET /?token=a%3Bb HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    );
    assert!(wrong.starts_with("HTTP/1.1 401"), "{wrong}");
    assert!(!wrong.contains("set-cookie"), "{wrong}");
}
