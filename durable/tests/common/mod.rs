//! A real PostgreSQL server for the tests (and for `benches/durable`,
//! which includes this file): `initdb` and `pg_ctl` on a
//! temporary directory, listening on 127.0.0.1 on a free port, stopped when
//! dropped. The server's programs come from the distribution's `postgresql`
//! package (`PATH`, then `/usr/lib/postgresql/*/bin`), which `.ci/run`
//! installs when missing. `fsync=off` (the tests do not survive a crash of
//! the machine, only of the server, whose commits are in the kernel's
//! cache once acknowledged: `synchronous_commit` stays on). PostgreSQL
//! refuses to run as root: as root, the
//! programs run as the `postgres` user the package creates (`runuser`).
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A running server; stopped (fast, `immediate`) when dropped.
pub struct PgServer {
    bin: PathBuf,
    data: PathBuf,
    as_postgres: bool,
    port: u16,
    _dir: tempfile::TempDir,
}

fn find_bin() -> PathBuf {
    let on_path = Command::new("sh")
        .args(["-c", "command -v pg_ctl"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    if let Some(pg_ctl) = on_path {
        // /usr/local/bin/pg_ctl may be a link into the version's bin.
        let real = std::fs::canonicalize(&pg_ctl).unwrap_or(pg_ctl);
        return real.parent().unwrap().to_path_buf();
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|bin| bin.join("pg_ctl").exists())
        .collect();
    versions.sort();
    versions.pop().expect(
        "the PostgreSQL tests need the server's programs (initdb, pg_ctl): \
         install the distribution's `postgresql` package (.ci/run does)",
    )
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

impl PgServer {
    pub fn start() -> PgServer {
        let bin = find_bin();
        let dir = tempfile::tempdir().unwrap();
        let as_postgres = is_root();
        if as_postgres {
            let status = Command::new("chown")
                .args(["-R", "postgres"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(status.success(), "chown of the server's directory");
        }
        let data = dir.path().join("data");
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let server = PgServer {
            bin,
            data,
            as_postgres,
            port,
            _dir: dir,
        };
        server.run(
            "initdb",
            &[
                "-D",
                server.data.to_str().unwrap(),
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off \
             -c full_page_writes=off",
            server.data.parent().unwrap().display()
        );
        let log = server.data.parent().unwrap().join("server.log");
        server.run(
            "pg_ctl",
            &[
                "-D",
                server.data.to_str().unwrap(),
                "-o",
                &options,
                "-l",
                log.to_str().unwrap(),
                "-w",
                "start",
            ],
        );
        server
    }

    /// `program` of the server's, run as the `postgres` user when root.
    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&path);
            c
        } else {
            Command::new(&path)
        }
    }

    fn run(&self, program: &str, args: &[&str]) {
        let output = self.command(program).args(args).output().unwrap();
        assert!(
            output.status.success(),
            "{program} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// The server's version, as `postgres --version` prints it.
    pub fn version(&self) -> String {
        self.command("postgres")
            .arg("--version")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    }

    /// The URL of the database `name` (for clients that take URLs).
    pub fn url(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// Drops the database `name`, closing its connections.
    pub fn drop_database(&self, name: &str) {
        if let Ok(mut client) = postgres::Client::connect(&self.params(), postgres::NoTls) {
            let _ = client.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
        }
    }

    /// The connection string of its `postgres` database.
    pub fn params(&self) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname=postgres",
            self.port
        )
    }

    /// A new, empty database `name`; its connection string.
    pub fn database(&self, name: &str) -> String {
        let mut client = postgres::Client::connect(&self.params(), postgres::NoTls).unwrap();
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        format!(
            "host=127.0.0.1 port={} user=postgres dbname={name}",
            self.port
        )
    }

    /// Restarts the server (its clients' connections break).
    pub fn restart(&self) {
        // `-l` again: a server started without it writes to pg_ctl's
        // output, which `run` waits to close.
        let log = self.data.parent().unwrap().join("server.log");
        self.run(
            "pg_ctl",
            &[
                "-D",
                self.data.to_str().unwrap(),
                "-l",
                log.to_str().unwrap(),
                "-m",
                "immediate",
                "-w",
                "restart",
            ],
        );
    }

    pub fn data(&self) -> &Path {
        &self.data
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let data = self.data.to_str().unwrap().to_owned();
        let args = ["-D", data.as_str(), "-m", "immediate", "-w", "stop"];
        let _ = self.command("pg_ctl").args(args).output();
    }
}
