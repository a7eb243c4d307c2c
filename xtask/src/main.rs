//! The repository's own commands (the `xtask` convention: `cargo xtask`,
//! an alias in `.cargo/config.toml`, runs this crate).
//!
//! `cargo xtask test [ARGS]` is the README's test command: it makes sure
//! what the tests need is installed, then runs every test of the
//! workspace (`cargo test --workspace ARGS`). A fresh machine has only the
//! Rust toolchain; the durable crate's tests start a PostgreSQL server of
//! their own, so they need its programs (`initdb`, `pg_ctl`), and the
//! dashboard's browser test drives a headless Chromium. When either is
//! missing it installs the distribution's package (`postgresql`,
//! `chromium`) if it may (as root, or with `sudo` that asks no password, on
//! a system with `apt-get`), and otherwise says in one line what to run.
//! `.ci/run` calls the same command.

use std::path::Path;
use std::process::{Command, ExitCode, Stdio};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("test") => test(&args[1..]),
        _ => {
            eprintln!("usage: cargo xtask test [cargo test arguments]");
            ExitCode::from(2)
        }
    }
}

/// Sets up what the tests need, then runs them all.
fn test(args: &[String]) -> ExitCode {
    for needed in [POSTGRES, CHROMIUM] {
        if let Err(what_to_run) = install_if_missing(&needed) {
            eprintln!("{what_to_run}");
            return ExitCode::FAILURE;
        }
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["test", "--workspace"])
        .args(args)
        .status();
    match status {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("cargo test could not be started: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Something the tests need from the distribution.
struct Needed {
    /// What it is, for people.
    what: &'static str,
    /// Its Debian package.
    package: &'static str,
    /// Who needs it.
    by: &'static str,
    /// True if it is installed.
    present: fn() -> bool,
}

/// PostgreSQL's server programs, where the durable crate's tests look for
/// them (`durable/tests/common/mod.rs`).
const POSTGRES: Needed = Needed {
    what: "PostgreSQL's server programs (initdb, pg_ctl)",
    package: "postgresql",
    by: "the durable crate's tests",
    present: has_postgres_programs,
};

/// Chromium, where the dashboard's browser test looks for it
/// (`durable-web/tests/browser.rs`).
const CHROMIUM: Needed = Needed {
    what: "Chromium",
    package: "chromium",
    by: "the dashboard's browser test",
    present: has_chromium,
};

/// Installs `needed` when it is missing and that is allowed; `Err` is the
/// line telling the user what to run.
fn install_if_missing(needed: &Needed) -> Result<(), String> {
    if (needed.present)() {
        return Ok(());
    }
    let how = format!(
        "{} need {}: install your distribution's `{}` package (Debian, Ubuntu: \
         `sudo apt-get install {}`), then run `cargo xtask test` again",
        needed.by, needed.what, needed.package, needed.package
    );
    if !on_path("apt-get") {
        return Err(how);
    }
    let as_root = if is_root() {
        Vec::new()
    } else if on_path("sudo") && succeeds(Command::new("sudo").args(["-n", "true"])) {
        vec!["sudo", "-n"]
    } else {
        return Err(how);
    };
    eprintln!(
        "xtask: installing {} (apt-get install {})",
        needed.what, needed.package
    );
    let apt = |args: &[&str]| {
        let mut command = Command::new(as_root.first().copied().unwrap_or("apt-get"));
        if !as_root.is_empty() {
            command.args(&as_root[1..]).arg("apt-get");
        }
        command
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(args)
            .stdout(Stdio::null());
        succeeds(&mut command)
    };
    if !(apt(&["update", "-qq"]) && apt(&["install", "-y", "-qq", needed.package])) {
        return Err(format!(
            "apt-get could not install {}; {how}",
            needed.package
        ));
    }
    if (needed.present)() {
        Ok(())
    } else {
        Err(format!(
            "{} was installed, but is not where the tests look; {how}",
            needed.package
        ))
    }
}

fn has_chromium() -> bool {
    std::env::var_os("CHROME").is_some()
        || [
            "chromium",
            "chromium-browser",
            "google-chrome",
            "google-chrome-stable",
        ]
        .iter()
        .any(|name| on_path(name))
}

fn has_postgres_programs() -> bool {
    if on_path("pg_ctl") && on_path("initdb") {
        return true;
    }
    let Ok(versions) = std::fs::read_dir("/usr/lib/postgresql") else {
        return false;
    };
    versions.flatten().any(|version| {
        let bin = version.path().join("bin");
        bin.join("pg_ctl").exists() && bin.join("initdb").exists()
    })
}

/// True if `program` is a file in one of `PATH`'s directories.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|dir| Path::new(&dir).join(program).is_file())
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

fn succeeds(command: &mut Command) -> bool {
    command.status().is_ok_and(|status| status.success())
}
