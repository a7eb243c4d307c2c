//! A real PostgreSQL server for the tests (and for `benches/durable`,
//! which includes this file): `initdb` and `pg_ctl` on a
//! temporary directory, listening on 127.0.0.1 on a free port, stopped when
//! dropped. The server's programs come from the distribution's `postgresql`
//! package (`PATH`, then `/usr/lib/postgresql/*/bin`), which `.ci/run`
//! installs when missing. The tests' server ([`PgServer::start`]) runs with
//! `fsync=off` (the tests do not survive a crash of the machine, only of
//! the server, whose commits are in the kernel's cache once acknowledged:
//! `synchronous_commit` stays on); the benchmark's
//! ([`PgServer::start_durable`]) with the server's durable defaults.
//! PostgreSQL refuses to run as root: as root, the programs run as the
//! `postgres` user the package creates (`runuser`).
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// A running server; stopped (fast, `immediate`) when dropped.
pub struct PgServer {
    bin: PathBuf,
    data: PathBuf,
    as_postgres: bool,
    port: u16,
    /// The `-o` options of `pg_ctl start`.
    options: String,
    _dir: tempfile::TempDir,
}

/// The tests' settings: no fsync (see the module doc).
pub const TEST_SETTINGS: &str = "-c fsync=off -c full_page_writes=off";

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
    /// A server for the tests: [`TEST_SETTINGS`].
    pub fn start() -> PgServer {
        PgServer::start_with(TEST_SETTINGS)
    }

    /// A server with PostgreSQL's durable defaults (`fsync`,
    /// `full_page_writes` and `synchronous_commit` on), for benchmarks.
    pub fn start_durable() -> PgServer {
        PgServer::start_with("")
    }

    /// A server with `settings` (`-c name=value ...`) beyond the defaults.
    pub fn start_with(settings: &str) -> PgServer {
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
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 {settings}",
            dir.path().display()
        );
        let server = PgServer {
            bin,
            data,
            as_postgres,
            port,
            options,
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
        server.start_again();
        server
    }

    /// Starts the server (again, after [`stop`](Self::stop)).
    pub fn start_again(&self) {
        let log = self.data.parent().unwrap().join("server.log");
        self.run(
            "pg_ctl",
            &[
                "-D",
                self.data.to_str().unwrap(),
                "-o",
                &self.options,
                "-l",
                log.to_str().unwrap(),
                "-w",
                "start",
            ],
        );
    }

    /// Stops the server (`immediate`: as if it crashed); its clients'
    /// connections break and new ones are refused until
    /// [`start_again`](Self::start_again).
    pub fn stop(&self) {
        let data = self.data.to_str().unwrap();
        self.run("pg_ctl", &["-D", data, "-m", "immediate", "-w", "stop"]);
    }

    /// One server for every test of this test binary (each makes its own
    /// database: [`fresh_database`](Self::fresh_database)). A static is
    /// never dropped, so a watchdog process stops the server and removes
    /// its directory once this process has exited, however it ended.
    pub fn shared() -> &'static PgServer {
        static SERVER: OnceLock<PgServer> = OnceLock::new();
        SERVER.get_or_init(|| {
            let server = PgServer::start();
            server.watch(std::process::id());
            server
        })
    }

    /// Stops the server and removes its directory once process `pid` is
    /// gone.
    fn watch(&self, pid: u32) {
        let pg_ctl = self.bin.join("pg_ctl");
        let stop = format!(
            "{}{} -D {} -m immediate -w stop",
            if self.as_postgres {
                "runuser -u postgres -- "
            } else {
                ""
            },
            pg_ctl.display(),
            self.data.display()
        );
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 0.5; done; {stop}; rm -rf {}",
            self.data.parent().unwrap().display()
        );
        // Never waited for: it must outlive this process.
        #[allow(clippy::zombie_processes)]
        Command::new("setsid")
            .args(["sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("the server's watchdog");
    }

    /// A new, empty database with a name of its own; its connection string.
    pub fn fresh_database(&self) -> String {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        self.database(&format!("test_{}_{n}", std::process::id()))
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
        self.stop();
        self.start_again();
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
