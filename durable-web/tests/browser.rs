//! The dashboard in a real browser: headless Chromium (Debian's `chromium`,
//! which `cargo xtask test` installs when it is missing), driven over the
//! DevTools protocol. It loads the overview, filters the list, opens a
//! job, pauses and resumes it, retries a dead one, and the store is
//! checked after each verb. A screenshot of each page is kept in
//! `target/dashboard-screenshots/` (a test artefact).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use chronopool::ScheduledExecutor;
use chronopool_durable::{Config, DurableScheduler, JobError, JobState, Schedule};
use chronopool_durable_web::Dashboard;
use headless_chrome::protocol::cdp::Page::CaptureScreenshotFormatOption;
use headless_chrome::{Browser, LaunchOptions, Tab};

/// Chromium's program: `$CHROME`, else the first of its usual names on the
/// `PATH`. The test fails (it is never skipped) without one.
fn chromium() -> PathBuf {
    if let Some(path) = std::env::var_os("CHROME") {
        return path.into();
    }
    let names = [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ];
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file())
        .expect(
            "the browser test needs Chromium: install your distribution's chromium \
             (Debian: apt-get install chromium; `cargo xtask test` does it), or set CHROME",
        )
}

fn screenshots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("target")
        .join("dashboard-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn shot(tab: &Tab, name: &str) {
    let png = tab
        .capture_screenshot(CaptureScreenshotFormatOption::Png, None, None, true)
        .unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG");
    std::fs::write(screenshots().join(format!("{name}.png")), png).unwrap();
}

/// The text of the element `selector`.
fn text_of(tab: &Tab, selector: &str) -> String {
    tab.wait_for_element(selector)
        .unwrap()
        .get_inner_text()
        .unwrap()
}

/// Clicks `selector` and waits for the page it leads to.
fn click(tab: &Tab, selector: &str) {
    tab.wait_for_element(selector).unwrap().click().unwrap();
    tab.wait_until_navigated().unwrap();
}

/// A job's verb through the browser: its button, its confirmation page,
/// Confirm.
fn verb(tab: &Tab, button: &str, name: &str) {
    click(tab, button);
    assert!(text_of(tab, "h1").contains("Confirm"));
    shot(tab, &format!("confirm-{name}"));
    click(tab, "#confirm");
}

#[test]
fn an_operator_pauses_resumes_and_retries_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let pool = ScheduledExecutor::builder()
        .worker_threads(1)
        .build()
        .unwrap();
    let jobs =
        DurableScheduler::sqlite(&pool, dir.path().join("jobs.db"), Config::default()).unwrap();
    let hour = Duration::from_secs(3600);
    for (key, name) in [
        ("report-eu-daily", "report"),
        ("report-us-daily", "report"),
        ("mail-welcome-7", "mail"),
    ] {
        jobs.schedule(key, name, b"{\"customer\":7}", Schedule::Every(hour))
            .unwrap();
    }
    jobs.register("charge", |_| {
        Err(JobError::permanent("card declined <b>4242</b>"))
    });
    jobs.start().unwrap();
    jobs.schedule(
        "charge-order-9",
        "charge",
        b"",
        Schedule::After(Duration::ZERO),
    )
    .unwrap();
    let waited = std::time::Instant::now();
    while jobs.job("charge-order-9").unwrap().map(|j| j.state) != Some(JobState::Dead) {
        assert!(waited.elapsed() < Duration::from_secs(30), "never dead");
        std::thread::sleep(Duration::from_millis(20));
    }
    let jobs = Arc::new(jobs);
    let server = Dashboard::new(Arc::clone(&jobs))
        .token("browser-test-token")
        .serve("127.0.0.1:0")
        .unwrap();
    let base = format!("http://{}", server.addr());

    let options = LaunchOptions::default_builder()
        .path(Some(chromium()))
        .headless(true)
        // CI runs as root, where Chromium's sandbox cannot start.
        .sandbox(false)
        .window_size(Some((1280, 900)))
        .idle_browser_timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let browser = Browser::new(options).unwrap();
    let tab = browser.new_tab().unwrap();
    tab.set_default_timeout(Duration::from_secs(20));

    // Without the token: asked for it.
    tab.navigate_to(&format!("{base}/")).unwrap();
    tab.wait_until_navigated().unwrap();
    assert!(text_of(&tab, "h1").contains("Access token"));
    // With it (the cookie keeps it): the overview.
    tab.navigate_to(&format!("{base}/?token=browser-test-token"))
        .unwrap();
    tab.wait_until_navigated().unwrap();
    assert_eq!(text_of(&tab, "h1"), "Overview");
    assert_eq!(text_of(&tab, "[data-count=scheduled]"), "3");
    assert_eq!(text_of(&tab, "[data-count=dead]"), "1");
    assert_eq!(text_of(&tab, "[data-count=died]"), "1");
    shot(&tab, "overview");

    // The list, filtered by handler in its form.
    tab.navigate_to(&format!("{base}/jobs")).unwrap();
    tab.wait_until_navigated().unwrap();
    tab.wait_for_element("input[name=handler]")
        .unwrap()
        .type_into("report")
        .unwrap();
    click(&tab, "#filter");
    let listed = text_of(&tab, "table");
    assert!(listed.contains("report-eu-daily") && listed.contains("report-us-daily"));
    assert!(!listed.contains("mail-welcome-7"), "{listed}");
    shot(&tab, "jobs");

    // A job, opened from the list, paused and resumed.
    click(&tab, "a[href*='report-eu-daily']");
    assert_eq!(text_of(&tab, "#key"), "report-eu-daily");
    assert!(text_of(&tab, "dl").contains("every 1h"));
    shot(&tab, "job");
    verb(&tab, "#pause", "pause");
    assert!(text_of(&tab, ".flash").contains("Paused"));
    assert!(
        jobs.job("report-eu-daily").unwrap().unwrap().paused,
        "the store changed"
    );
    assert_eq!(text_of(&tab, "#paused"), "paused");
    shot(&tab, "job-paused");
    verb(&tab, "#resume", "resume");
    assert!(text_of(&tab, ".flash").contains("Resumed"));
    assert!(!jobs.job("report-eu-daily").unwrap().unwrap().paused);

    // The dead job: its error shown as text, then retried.
    tab.navigate_to(&format!("{base}/jobs?state=dead")).unwrap();
    tab.wait_until_navigated().unwrap();
    click(&tab, "a[href*='charge-order-9']");
    assert_eq!(
        text_of(&tab, "#last-error"),
        "card declined <b>4242</b>",
        "markup in an error is text"
    );
    assert!(
        tab.find_elements("#last-error b").is_err(),
        "no <b> element"
    );
    assert!(text_of(&tab, "#history").contains("dead"));
    shot(&tab, "job-dead");
    verb(&tab, "#retry", "retry");
    assert!(text_of(&tab, ".flash").contains("Scheduled again"));
    // Retried, it ran again (and, its card still declined, died again):
    // the store has its second run.
    let waited = std::time::Instant::now();
    while jobs.history(Some("charge-order-9"), 10).unwrap().len() < 2 {
        assert!(
            waited.elapsed() < Duration::from_secs(30),
            "never ran again"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    drop(tab);
    drop(browser);
    drop(server);
}
