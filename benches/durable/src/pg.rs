//! The PostgreSQL server every PostgreSQL system is measured on: `initdb`
//! and `pg_ctl` on a temporary directory, listening on 127.0.0.1 on a free
//! port, stopped when dropped. The same approach as chronopool-durable's
//! tests (`durable/tests/common/mod.rs`): `fsync=off` and
//! `full_page_writes=off` (commits reach the kernel's cache, not the disk;
//! `synchronous_commit` stays on, so a commit still waits for its WAL
//! write), and, as root, the programs run as the `postgres` user
//! (`runuser`), since PostgreSQL refuses to run as root.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;

/// The server's settings beyond the defaults, as passed to `pg_ctl -o`
/// (printed with each run's settings).
pub const SETTINGS: &str = "fsync=off full_page_writes=off (synchronous_commit=on, the default)";

/// A running server; stopped (`immediate`) when dropped.
pub struct PgServer {
    bin: PathBuf,
    data: PathBuf,
    as_postgres: bool,
    port: u16,
    _dir: tempfile::TempDir,
}

/// The directory of `pg_ctl`: on `PATH`, else the newest
/// `/usr/lib/postgresql/*/bin`.
fn find_bin() -> PathBuf {
    let on_path = Command::new("sh")
        .args(["-c", "command -v pg_ctl"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    if let Some(pg_ctl) = on_path {
        let real = std::fs::canonicalize(&pg_ctl).unwrap_or(pg_ctl);
        return real.parent().expect("pg_ctl's directory").to_path_buf();
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|bin| bin.join("pg_ctl").exists())
        .collect();
    versions.sort();
    versions
        .pop()
        .expect("the PostgreSQL systems need initdb and pg_ctl (the `postgresql` package)")
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

impl PgServer {
    /// Creates a cluster and starts it.
    pub fn start() -> PgServer {
        let bin = find_bin();
        let dir = tempfile::tempdir().expect("a temporary directory");
        let as_postgres = is_root();
        if as_postgres {
            let status = Command::new("chown")
                .args(["-R", "postgres"])
                .arg(dir.path())
                .status()
                .expect("chown");
            assert!(status.success(), "chown of the server's directory");
        }
        let data = dir.path().join("data");
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let server = PgServer {
            bin,
            data,
            as_postgres,
            port,
            _dir: dir,
        };
        let data = server.data.to_str().expect("a UTF-8 path").to_owned();
        server.run(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        let parent = server.data.parent().expect("the data's parent");
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off",
            parent.display()
        );
        let log = parent.join("server.log");
        server.run(
            "pg_ctl",
            &[
                "-D",
                &data,
                "-o",
                &options,
                "-l",
                log.to_str().expect("a UTF-8 path"),
                "-w",
                "start",
            ],
        );
        server
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    fn run(&self, program: &str, args: &[&str]) {
        let output = self
            .command(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
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

    /// The libpq connection string of the database `dbname`.
    pub fn params(&self, dbname: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user=postgres dbname={dbname}",
            self.port
        )
    }

    /// The URL of the database `dbname` (for sqlx).
    pub fn url(&self, dbname: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{dbname}", self.port)
    }

    /// Creates the empty database `dbname`, and returns its connection
    /// string.
    pub fn create_database(&self, dbname: &str) -> String {
        let mut client = postgres::Client::connect(&self.params("postgres"), postgres::NoTls)
            .expect("a connection to the harness's server");
        client
            .batch_execute(&format!("CREATE DATABASE {dbname}"))
            .expect("CREATE DATABASE");
        self.params(dbname)
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let data = self.data.to_str().unwrap_or_default().to_owned();
        let _ = self
            .command("pg_ctl")
            .args(["-D", &data, "-m", "immediate", "-w", "stop"])
            .output();
    }
}

impl PgServer {
    /// Drops the database `dbname`, closing its connections.
    pub fn drop_database(&self, dbname: &str) {
        if let Ok(mut client) = postgres::Client::connect(&self.params("postgres"), postgres::NoTls)
        {
            let _ = client.batch_execute(&format!("DROP DATABASE IF EXISTS {dbname} WITH (FORCE)"));
        }
    }
}
