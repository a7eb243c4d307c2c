//! [`Dashboard`]: the routes, each a read of the store or one of the
//! library's verbs (nothing here writes to the store itself).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chronopool_durable::{DurableError, DurableScheduler, JobQuery, JobState};

use crate::auth;
use crate::http::{Request, Response};
use crate::pages::{self, Ctx, Filters, Overview};

/// How many jobs a page of the list shows.
const PAGE: usize = 50;

/// The dashboard of one store, seen through a [`DurableScheduler`] on it
/// (one that is started runs jobs too; one that is not only reads and
/// changes the store). Mount it in an application's HTTP stack by handing
/// it requests ([`handle`](Dashboard::handle)), or serve it alone
/// ([`serve`](Dashboard::serve)).
///
/// ```no_run
/// use chronopool::ScheduledExecutor;
/// use chronopool_durable::{Config, DurableScheduler};
/// use chronopool_durable_web::Dashboard;
/// use std::sync::Arc;
///
/// let pool = ScheduledExecutor::builder().worker_threads(2).build()?;
/// let jobs = Arc::new(DurableScheduler::sqlite(&pool, "jobs.db", Config::default())?);
/// let server = Dashboard::new(Arc::clone(&jobs))
///     .token("a long random secret")
///     .serve("127.0.0.1:8080")?;
/// println!("the dashboard: http://{}/?token=…", server.addr());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct Dashboard {
    jobs: Arc<DurableScheduler>,
    token: Option<String>,
    csrf: String,
    base: String,
    /// Host names answered without a token, beside this machine's.
    hosts: Vec<String>,
}

impl Dashboard {
    /// The dashboard of `jobs`'s store, mounted at `/`, with no access
    /// token: it answers only requests addressed to this machine by name
    /// (`localhost`, `127.0.0.1`, `[::1]`: see [`allow_host`](Self::allow_host)),
    /// but any local user may use it. Give it a [`token`](Self::token)
    /// beyond a single-user machine.
    pub fn new(jobs: Arc<DurableScheduler>) -> Dashboard {
        Dashboard {
            jobs,
            token: None,
            csrf: auth::random_token(),
            base: String::new(),
            hosts: Vec::new(),
        }
    }

    /// The dashboard, answering requests addressed to `host` (a name
    /// this machine is reached by) without a token too. Without a token,
    /// only `localhost`, `127.0.0.1` and `[::1]` are answered otherwise, so
    /// that another site's page cannot reach it through DNS rebinding.
    #[must_use]
    pub fn allow_host(mut self, host: impl Into<String>) -> Dashboard {
        self.hosts.push(host.into());
        self
    }

    /// The dashboard, asking every request for `token` (see the module
    /// `auth`: a bearer header, or a cookie that `/?token=…` sets).
    #[must_use]
    pub fn token(mut self, token: impl Into<String>) -> Dashboard {
        self.token = Some(token.into());
        self
    }

    /// The dashboard, mounted at `prefix` (`/ops/jobs`, say) in the
    /// application's paths: its links start with it. The application
    /// strips it from the [`Request::path`] it hands in.
    #[must_use]
    pub fn mounted_at(mut self, prefix: &str) -> Dashboard {
        self.base = prefix.trim_end_matches('/').to_owned();
        self
    }

    fn ctx(&self) -> Ctx<'_> {
        Ctx {
            base: &self.base,
            csrf: &self.csrf,
        }
    }

    /// Answers `request` (its path below the mount point). A `HEAD` is
    /// answered as its `GET` (the HTTP stack leaves the body out).
    pub fn handle(&self, request: &Request) -> Response {
        let ctx = self.ctx();
        let params = request.params();
        let method = match request.method.as_str() {
            "HEAD" => "GET",
            other => other,
        };
        if let Some(token) = &self.token {
            // The login: `/?token=…` (a link to hand out), or the login
            // page's form, which posts it (out of the address bar, the
            // history and the logs of proxies).
            let given = match (method, request.path.as_str()) {
                ("GET", "/") => params.get("token").cloned(),
                ("POST", "/login") => request.form().remove("token"),
                _ => None,
            };
            if let Some(given) = given {
                if !auth::same(&given, token) {
                    return unauthorized(ctx);
                }
                let mut r = Response::see_other(ctx.link("/", []));
                r.headers.push((
                    "Set-Cookie".into(),
                    format!(
                        "{}={}; HttpOnly; SameSite=Strict; Path={}",
                        auth::COOKIE,
                        auth::cookie_value(token),
                        if self.base.is_empty() {
                            "/"
                        } else {
                            &self.base
                        }
                    ),
                ));
                return r;
            }
        }
        if self.token.is_none() && !auth::host_allowed(request, &self.hosts) {
            return Response::html(
                421,
                pages::message(
                    ctx,
                    "Not this host",
                    "This dashboard answers requests for localhost only (or the hosts it \
                     allows), unless it has an access token.",
                ),
            );
        }
        if !auth::allowed(request, self.token.as_deref()) {
            return unauthorized(ctx);
        }
        let result = match (method, request.path.as_str()) {
            ("GET", "/") => self.overview(params.get("done").map(String::as_str)),
            ("GET", "/jobs") => self.list(&params),
            ("GET", "/job") => match params.get("key") {
                Some(key) => self.job(key, params.get("done").map(String::as_str)),
                None => Ok(not_found(ctx)),
            },
            ("GET", "/confirm") => Ok(self.confirm(&params)),
            ("POST", "/action") => self.action(request),
            ("GET" | "POST", _) => Ok(not_found(ctx)),
            _ => {
                let mut r = Response::html(
                    405,
                    pages::message(ctx, "Not allowed", "Only GET, HEAD and POST."),
                );
                r.headers.push(("Allow".into(), "GET, HEAD, POST".into()));
                Ok(r)
            }
        };
        result.unwrap_or_else(|e| {
            Response::html(503, pages::message(ctx, "The store failed", &e.to_string()))
        })
    }

    fn overview(&self, flash: Option<&str>) -> Result<Response, DurableError> {
        let counts = self.jobs.counts()?;
        let recent = self.jobs.recent_runs(Duration::from_secs(3600))?;
        let late = self.jobs.late_jobs(10)?;
        let paused_handlers = self.jobs.paused_handlers()?;
        let limits = self.jobs.limits()?;
        let o = Overview {
            counts,
            recent: &recent,
            late: &late,
            paused_handlers: &paused_handlers,
            limits: &limits,
            now: SystemTime::now(),
        };
        Ok(Response::html(
            200,
            pages::overview(self.ctx(), &o, flash.and_then(flash_text)),
        ))
    }

    fn list(
        &self,
        params: &std::collections::HashMap<String, String>,
    ) -> Result<Response, DurableError> {
        let get = |name: &str| params.get(name).cloned().unwrap_or_default();
        let filters = Filters {
            state: get("state"),
            handler: get("handler"),
            prefix: get("prefix"),
            paused: get("paused"),
        };
        let mut q = JobQuery::new().limit(PAGE + 1);
        q = match filters.state.as_str() {
            "scheduled" => q.state(JobState::Scheduled),
            "running" => q.state(JobState::Running),
            "dead" => q.state(JobState::Dead),
            "done" => q.state(JobState::Done),
            "" => q,
            _ => return Ok(bad_request(self.ctx(), "No such state.")),
        };
        if !filters.handler.is_empty() {
            q = q.handler(filters.handler.clone());
        }
        if !filters.prefix.is_empty() {
            q = q.key_prefix(filters.prefix.clone());
        }
        q = match filters.paused.as_str() {
            "true" => q.paused(true),
            "false" => q.paused(false),
            "" => q,
            _ => return Ok(bad_request(self.ctx(), "Paused is true, false or empty.")),
        };
        match (params.get("after_time"), params.get("after_key")) {
            (Some(t), Some(key)) => match t.parse::<i64>().ok().and_then(time_of_micros) {
                Some(t) => q = q.after(t, key.clone()),
                None => return Ok(bad_request(self.ctx(), "No such page.")),
            },
            (None, None) => {}
            _ => return Ok(bad_request(self.ctx(), "No such page.")),
        }
        let mut jobs = self.jobs.jobs(&q)?;
        let next = if jobs.len() > PAGE {
            jobs.truncate(PAGE);
            jobs.last()
                .map(|last| (micros_of(last.next_fire).to_string(), last.key.clone()))
        } else {
            None
        };
        Ok(Response::html(
            200,
            pages::jobs(self.ctx(), &filters, &jobs, next, SystemTime::now()),
        ))
    }

    fn job(&self, key: &str, flash: Option<&str>) -> Result<Response, DurableError> {
        let Some(job) = self.jobs.job(key)? else {
            return Ok(Response::html(
                404,
                pages::message(
                    self.ctx(),
                    "No such job",
                    "It is not in the store (done, cancelled, or never scheduled).",
                ),
            ));
        };
        let history = self.jobs.history(Some(key), 20)?;
        Ok(Response::html(
            200,
            pages::job(
                self.ctx(),
                &job,
                &history,
                flash.and_then(flash_text),
                SystemTime::now(),
            ),
        ))
    }

    fn confirm(&self, params: &std::collections::HashMap<String, String>) -> Response {
        let ctx = self.ctx();
        let action = params.get("action").map(String::as_str).unwrap_or("");
        if pages::verb_text(action).is_none() {
            return not_found(ctx);
        }
        let (target, is_handler) = match (params.get("key"), params.get("handler")) {
            (Some(key), _) if !action.ends_with("-handler") => (key, false),
            (_, Some(name)) if action.ends_with("-handler") => (name, true),
            _ => return not_found(ctx),
        };
        Response::html(200, pages::confirm(ctx, action, target, is_handler))
    }

    /// A verb, from its confirmation's form; then back to the job (or the
    /// overview), saying what was done.
    fn action(&self, request: &Request) -> Result<Response, DurableError> {
        let ctx = self.ctx();
        let form = request.form();
        if !auth::form_allowed(request, &self.csrf, form.get("csrf").map(String::as_str)) {
            return Ok(Response::html(
                403,
                pages::message(
                    ctx,
                    "Refused",
                    "This form did not come from this dashboard.",
                ),
            ));
        }
        let action = form.get("action").map(String::as_str).unwrap_or("");
        if let Some(name) = form.get("handler") {
            match action {
                "pause-handler" => self.jobs.pause_handler(name)?,
                "resume-handler" => self.jobs.resume_handler(name)?,
                _ => return Ok(not_found(ctx)),
            }
            return Ok(Response::see_other(ctx.link("/", [("done", action)])));
        }
        let Some(key) = form.get("key") else {
            return Ok(not_found(ctx));
        };
        let changed = match action {
            "pause" => self.jobs.pause(key)?,
            "resume" => self.jobs.resume(key)?,
            "run-now" => self.jobs.run_now(key)?,
            "retry" => self.jobs.retry(key)?,
            "cancel" => self.jobs.cancel(key)?,
            _ => return Ok(not_found(ctx)),
        };
        let done = if changed { action } else { "unchanged" };
        if action == "cancel" && changed {
            return Ok(Response::see_other(ctx.link("/", [("done", "cancel")])));
        }
        Ok(Response::see_other(
            ctx.link("/job", [("key", key.as_str()), ("done", done)]),
        ))
    }
}

/// `t` as signed microseconds since the epoch (a page's cursor: jobs may
/// fire before 1970).
fn micros_of(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_micros()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_micros()).map_or(i64::MIN, |us| -us),
    }
}

/// The inverse of [`micros_of`].
fn time_of_micros(us: i64) -> Option<SystemTime> {
    let d = Duration::from_micros(us.unsigned_abs());
    if us >= 0 {
        UNIX_EPOCH.checked_add(d)
    } else {
        UNIX_EPOCH.checked_sub(d)
    }
}

/// The flash message of a redirect after a verb.
fn flash_text(done: &str) -> Option<&'static str> {
    Some(match done {
        "pause" => "Paused.",
        "resume" => "Resumed.",
        "run-now" => "Due now.",
        "retry" => "Scheduled again.",
        "cancel" => "Cancelled.",
        "pause-handler" => "The handler is paused.",
        "resume-handler" => "The handler is resumed.",
        "unchanged" => "Nothing changed: the job is not in a state this applies to.",
        _ => return None,
    })
}

/// The login page, for a request without the access token (or with a
/// wrong one).
fn unauthorized(ctx: Ctx<'_>) -> Response {
    let mut r = Response::html(401, pages::login(ctx));
    r.headers.push((
        "WWW-Authenticate".into(),
        "Bearer realm=\"chronopool-durable\"".into(),
    ));
    r
}

/// A request that asks for nothing this dashboard knows (a filter's value,
/// a page's cursor).
fn bad_request(ctx: Ctx<'_>, text: &str) -> Response {
    Response::html(400, pages::message(ctx, "Bad request", text))
}

fn not_found(ctx: Ctx<'_>) -> Response {
    Response::html(404, pages::message(ctx, "Not found", "No such page."))
}
