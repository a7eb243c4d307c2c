//! The pages, as HTML (maud escapes every value put into them): the
//! overview, the job list, a job's page, and the confirmation of a verb.
//! No script: every action is a link to its confirmation, then a form.

use std::time::SystemTime;

use chronopool_durable::{JobCounts, JobInfo, JobState, RunInfo, RunOutcome};
use maud::{html, Markup, DOCTYPE};

use crate::http::query;

/// What every page knows: where the dashboard is mounted, and the token
/// its forms carry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ctx<'a> {
    pub(crate) base: &'a str,
    pub(crate) csrf: &'a str,
}

impl Ctx<'_> {
    /// The dashboard's `path` with `pairs` as its query.
    pub(crate) fn link<'p>(
        &self,
        path: &str,
        pairs: impl IntoIterator<Item = (&'p str, &'p str)>,
    ) -> String {
        let q = query(pairs);
        if q.is_empty() {
            format!("{}{path}", self.base)
        } else {
            format!("{}{path}?{q}", self.base)
        }
    }
}

const STYLE: &str = "
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; color: #1d2329; background: #f6f7f9; }
header { background: #1d2329; color: #fff; padding: 10px 20px; display: flex; gap: 20px; align-items: center; }
header a { color: #cfe3ff; text-decoration: none; }
header strong { font-size: 16px; }
main { padding: 16px 20px; max-width: 1200px; }
h1 { font-size: 20px; margin: 8px 0 16px; }
h2 { font-size: 16px; margin: 20px 0 8px; }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid #e3e6ea; vertical-align: top; }
th { background: #eef1f4; font-weight: 600; }
td.key, td.err { word-break: break-all; }
.cards { display: flex; gap: 12px; flex-wrap: wrap; }
a.card { color: inherit; text-decoration: none; }
.card { background: #fff; border: 1px solid #e3e6ea; border-radius: 6px; padding: 10px 16px; min-width: 110px; }
.card .n { font-size: 24px; font-weight: 600; }
.state-dead, .bad { color: #b00020; }
.state-running { color: #0a6b2f; }
.paused { color: #8a5a00; font-weight: 600; }
form.filter { display: flex; gap: 8px; flex-wrap: wrap; margin-bottom: 12px; align-items: end; }
form.filter label { display: flex; flex-direction: column; font-size: 12px; }
.actions { display: flex; gap: 8px; margin: 12px 0; }
.button { display: inline-block; padding: 5px 12px; border: 1px solid #8795a1; border-radius: 4px; background: #fff; color: #1d2329; text-decoration: none; cursor: pointer; font: inherit; }
.button.danger { border-color: #b00020; color: #b00020; }
.flash { background: #e7f3ff; border: 1px solid #9cc7f5; padding: 8px 12px; margin-bottom: 12px; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; background: #fff; padding: 12px; border: 1px solid #e3e6ea; }
dt { font-weight: 600; }
dd { margin: 0; word-break: break-all; }
pre { white-space: pre-wrap; word-break: break-all; margin: 0; }
";

/// A time for people: RFC 3339, UTC.
pub(crate) fn when(t: SystemTime) -> String {
    match jiff::Timestamp::try_from(t) {
        Ok(ts) => ts.strftime("%Y-%m-%d %H:%M:%S%.3f UTC").to_string(),
        Err(_) => "(out of range)".into(),
    }
}

/// How long ago (or in how long) `t` is, roughly.
fn relative(t: SystemTime, now: SystemTime) -> String {
    let (d, ago) = match now.duration_since(t) {
        Ok(d) => (d, true),
        Err(e) => (e.duration(), false),
    };
    let secs = d.as_secs();
    let amount = match secs {
        0..=59 => format!("{secs}s"),
        60..=3599 => format!("{}m", secs / 60),
        3600..=86_399 => format!("{}h {}m", secs / 3600, secs % 3600 / 60),
        _ => format!("{}d {}h", secs / 86_400, secs % 86_400 / 3600),
    };
    if ago {
        format!("{amount} ago")
    } else {
        format!("in {amount}")
    }
}

pub(crate) fn state_name(state: JobState) -> &'static str {
    match state {
        JobState::Scheduled => "scheduled",
        JobState::Running => "running",
        JobState::Dead => "dead",
        JobState::Done => "done",
        _ => "other",
    }
}

fn layout(ctx: Ctx<'_>, title: &str, flash: Option<&str>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · chronopool-durable" }
                style { (maud::PreEscaped(STYLE)) }
            }
            body {
                header {
                    strong { "chronopool-durable" }
                    a href=(ctx.link("/", [])) { "Overview" }
                    a href=(ctx.link("/jobs", [])) { "Jobs" }
                    a href=(ctx.link("/jobs", [("state", "dead")])) { "Dead" }
                }
                main {
                    @if let Some(flash) = flash {
                        p.flash role="status" { (flash) }
                    }
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// The overview: counts, the last hour's runs, the most late jobs, paused
/// handlers and limits.
pub(crate) struct Overview<'a> {
    pub(crate) counts: JobCounts,
    pub(crate) recent: &'a [(RunOutcome, u64)],
    pub(crate) late: &'a [JobInfo],
    pub(crate) paused_handlers: &'a [String],
    pub(crate) limits: &'a [(String, u32)],
    pub(crate) now: SystemTime,
}

pub(crate) fn overview(ctx: Ctx<'_>, o: &Overview<'_>, flash: Option<&str>) -> Markup {
    let recent = |outcome| {
        o.recent
            .iter()
            .find(|(x, _)| *x == outcome)
            .map_or(0, |(_, n)| *n)
    };
    let c = o.counts;
    let body = html! {
        div.cards {
            @for (label, n, state) in [
                ("Scheduled", c.scheduled, "scheduled"),
                ("Paused", c.paused, ""),
                ("Running", c.running, "running"),
                ("Dead", c.dead, "dead"),
                ("Done", c.done, "done"),
            ] {
                a.card href=(if state.is_empty() { ctx.link("/jobs", [("paused", "true")]) } else { ctx.link("/jobs", [("state", state)]) }) {
                    div { (label) }
                    div.n data-count=(label.to_lowercase()) { (n) }
                }
            }
        }
        h2 { "The last hour" }
        div.cards {
            div.card { div { "Succeeded" } div.n data-count="succeeded" { (recent(RunOutcome::Succeeded)) } }
            div.card { div { "Failed" } div.n.bad data-count="failed" { (recent(RunOutcome::Failed)) } }
            div.card { div { "Dead" } div.n.bad data-count="died" { (recent(RunOutcome::Dead)) } }
            div.card { div { "Skipped" } div.n data-count="skipped" { (recent(RunOutcome::Skipped)) } }
        }
        h2 { "Most late" }
        @if o.late.is_empty() {
            p { "No job is late." }
        } @else {
            (job_table(ctx, o.late, o.now))
        }
        h2 { "Paused handlers" }
        @if o.paused_handlers.is_empty() {
            p { "None." }
        } @else {
            table {
                tr { th { "Handler" } th { "" } }
                @for name in o.paused_handlers {
                    tr {
                        td.key { (name) }
                        td { a.button href=(ctx.link("/confirm", [("action", "resume-handler"), ("handler", name.as_str())])) { "Resume" } }
                    }
                }
            }
        }
        h2 { "Limits of runs at once" }
        @if o.limits.is_empty() {
            p { "None." }
        } @else {
            table {
                tr { th { "Handler" } th { "At most" } }
                @for (name, n) in o.limits {
                    tr { td.key { (name) } td { (n) } }
                }
            }
        }
    };
    layout(ctx, "Overview", flash, body)
}

fn job_table(ctx: Ctx<'_>, jobs: &[JobInfo], now: SystemTime) -> Markup {
    html! {
        table {
            tr { th { "Key" } th { "Handler" } th { "State" } th { "Next fire" } th { "Attempt" } th { "Last error" } }
            @for job in jobs {
                tr {
                    td.key { a href=(ctx.link("/job", [("key", job.key.as_str())])) { (job.key) } }
                    td.key { (job.name) }
                    td class=(format!("state-{}", state_name(job.state))) {
                        (state_name(job.state))
                        @if job.paused { " " span.paused { "paused" } }
                    }
                    td title=(when(job.next_fire)) { (relative(job.next_fire, now)) }
                    td { (job.attempt) }
                    td.err { @if let Some(e) = &job.last_error { (truncate(e, 120)) } }
                }
            }
        }
    }
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        return s.to_owned();
    }
    let mut t: String = s.chars().take(n).collect();
    t.push('…');
    t
}

/// The list's filters, as the query gave them.
#[derive(Clone, Debug, Default)]
pub(crate) struct Filters {
    pub(crate) state: String,
    pub(crate) handler: String,
    pub(crate) prefix: String,
    pub(crate) paused: String,
}

impl Filters {
    /// The filters as query pairs (the empty ones left out).
    pub(crate) fn pairs(&self) -> Vec<(&str, &str)> {
        [
            ("state", self.state.as_str()),
            ("handler", self.handler.as_str()),
            ("prefix", self.prefix.as_str()),
            ("paused", self.paused.as_str()),
        ]
        .into_iter()
        .filter(|(_, v)| !v.is_empty())
        .collect()
    }
}

pub(crate) fn jobs(
    ctx: Ctx<'_>,
    filters: &Filters,
    jobs: &[JobInfo],
    next: Option<(String, String)>,
    now: SystemTime,
) -> Markup {
    let body = html! {
        form.filter method="get" action=(ctx.link("/jobs", [])) {
            label { "State"
                select name="state" {
                    option value="" { "any" }
                    @for s in ["scheduled", "running", "dead", "done"] {
                        option value=(s) selected[filters.state == s] { (s) }
                    }
                }
            }
            label { "Handler" input type="text" name="handler" value=(filters.handler); }
            label { "Key prefix" input type="text" name="prefix" value=(filters.prefix); }
            label { "Paused"
                select name="paused" {
                    option value="" { "either" }
                    option value="true" selected[filters.paused == "true"] { "paused" }
                    option value="false" selected[filters.paused == "false"] { "not paused" }
                }
            }
            button.button type="submit" id="filter" { "Filter" }
        }
        @if jobs.is_empty() {
            p { "No job matches." }
        } @else {
            (job_table(ctx, jobs, now))
        }
        @if let Some((after_time, after_key)) = &next {
            @let pairs = filters.pairs().into_iter().chain([
                ("after_time", after_time.as_str()),
                ("after_key", after_key.as_str()),
            ]);
            p { a.button href=(ctx.link("/jobs", pairs)) { "Next page" } }
        }
    };
    layout(ctx, "Jobs", None, body)
}

pub(crate) fn job(
    ctx: Ctx<'_>,
    job: &JobInfo,
    history: &[RunInfo],
    flash: Option<&str>,
    now: SystemTime,
) -> Markup {
    let key = job.key.as_str();
    let confirm = |action: &'static str| ctx.link("/confirm", [("action", action), ("key", key)]);
    let body = html! {
        dl {
            dt { "Key" } dd id="key" { (job.key) }
            dt { "Handler" } dd { (job.name) }
            dt { "State" } dd id="state" class=(format!("state-{}", state_name(job.state))) {
                (state_name(job.state))
                @if job.paused { " " span.paused id="paused" { "paused" } }
            }
            dt { "Schedule" } dd { (job.schedule) }
            dt { "Next fire" } dd { (when(job.next_fire)) " (" (relative(job.next_fire, now)) ")" }
            dt { "Attempt" } dd { (job.attempt) }
            dt { "Payload" } dd { pre { (String::from_utf8_lossy(&job.payload)) } }
            @if let Some(owner) = &job.owner_name { dt { "Run by" } dd { (owner) } }
            @if let Some(lease) = job.lease_until { dt { "Lease until" } dd { (when(lease)) } }
            dt { "Last error" } dd.bad id="last-error" { @if let Some(e) = &job.last_error { pre { (e) } } @else { "none" } }
        }
        div.actions {
            @if job.paused {
                a.button id="resume" href=(confirm("resume")) { "Resume" }
            } @else if job.state != JobState::Dead && job.state != JobState::Done {
                a.button id="pause" href=(confirm("pause")) { "Pause" }
            }
            @if job.state == JobState::Scheduled {
                a.button id="run-now" href=(confirm("run-now")) { "Run now" }
            }
            @if job.state == JobState::Dead {
                a.button id="retry" href=(confirm("retry")) { "Retry" }
            }
            a.button.danger id="cancel" href=(confirm("cancel")) { "Cancel" }
        }
        h2 { "History" }
        @if history.is_empty() {
            p { "No run recorded." }
        } @else {
            table id="history" {
                tr { th { "Ended" } th { "Outcome" } th { "Attempt" } th { "Due" } th { "Started" } th { "By" } th { "Error" } }
                @for run in history {
                    tr {
                        td { (when(run.ended_at)) }
                        td class=(if matches!(run.outcome, Some(RunOutcome::Failed | RunOutcome::Dead)) { "bad" } else { "" }) {
                            (run.outcome.map_or("?", RunOutcome::name))
                        }
                        td { (run.attempt) }
                        td { (when(run.due)) }
                        td { @if let Some(s) = run.started_at { (when(s)) } }
                        td.key { (run.owner_name.as_deref().unwrap_or(&run.owner)) }
                        td.err { @if let Some(e) = &run.error { (truncate(e, 200)) } }
                    }
                }
            }
        }
    };
    layout(ctx, "Job", flash, body)
}

/// What a verb is, for its confirmation.
pub(crate) fn verb_text(action: &str) -> Option<&'static str> {
    Some(match action {
        "pause" => "Pause the job",
        "resume" => "Resume the job",
        "run-now" => "Run the job now",
        "retry" => "Retry the dead job",
        "cancel" => "Cancel (delete) the job",
        "pause-handler" => "Pause every job of the handler",
        "resume-handler" => "Resume the handler's jobs",
        _ => return None,
    })
}

pub(crate) fn confirm(ctx: Ctx<'_>, action: &str, target: &str, is_handler: bool) -> Markup {
    let text = verb_text(action).unwrap_or("Do it");
    let back = if is_handler {
        ctx.link("/", [])
    } else {
        ctx.link("/job", [("key", target)])
    };
    let body = html! {
        p { (text) " " strong id="target" { (target) } "?" }
        form method="post" action=(ctx.link("/action", [])) {
            input type="hidden" name="action" value=(action);
            input type="hidden" name=(if is_handler { "handler" } else { "key" }) value=(target);
            input type="hidden" name="csrf" value=(ctx.csrf);
            div.actions {
                button.button.danger type="submit" id="confirm" { "Confirm" }
                a.button href=(back) { "Back" }
            }
        }
    };
    layout(ctx, "Confirm", None, body)
}

/// A page that says what went wrong.
pub(crate) fn message(ctx: Ctx<'_>, title: &str, text: &str) -> Markup {
    layout(ctx, title, None, html! { p { (text) } })
}

/// The page of a request without the access token: a field for it.
pub(crate) fn login(ctx: Ctx<'_>) -> Markup {
    let body = html! {
        p { "This dashboard needs its access token." }
        form method="post" action=(ctx.link("/login", [])) {
            input type="password" name="token" autocomplete="off";
            " "
            button.button type="submit" { "Open" }
        }
    };
    layout(ctx, "Access token", None, body)
}
