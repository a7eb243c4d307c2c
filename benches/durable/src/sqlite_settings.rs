//! Each SQLite system's settings as it really sets them, not as a note
//! says: every SQLite connection in this process (rusqlite's and both
//! sqlx's link the one bundled SQLite, `libsqlite3-sys`) is opened through
//! an auto-extension that, while [`trace`] runs, counts it and installs a
//! statement trace that keeps the setting PRAGMAs it runs. The harness runs
//! each SQLite system once on a trial store inside [`trace`] and prints what
//! was seen, beside the settings this SQLite has when none is set
//! ([`defaults`]).

use std::collections::BTreeSet;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, Once};

use rusqlite::ffi;

static TRACING: AtomicBool = AtomicBool::new(false);
static OPENED: AtomicUsize = AtomicUsize::new(0);
static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
static INSTALL: Once = Once::new();

/// The PRAGMAs that set how a connection stores, syncs and waits (reads of
/// other PRAGMAs, such as a migration's `user_version`, are left out).
const SETTINGS: [&str; 14] = [
    "journal_mode",
    "synchronous",
    "busy_timeout",
    "cache_size",
    "temp_store",
    "locking_mode",
    "mmap_size",
    "wal_autocheckpoint",
    "journal_size_limit",
    "page_size",
    "auto_vacuum",
    "foreign_keys",
    "secure_delete",
    "cache_spill",
];

/// The auto-extension: runs in every `sqlite3_open*` of the process.
unsafe extern "C" fn on_open(
    db: *mut ffi::sqlite3,
    _error: *mut *mut c_char,
    _api: *const ffi::sqlite3_api_routines,
) -> c_int {
    if TRACING.load(Ordering::SeqCst) {
        OPENED.fetch_add(1, Ordering::SeqCst);
        // SAFETY: `db` is the connection being opened, on its own thread.
        unsafe {
            ffi::sqlite3_trace_v2(
                db,
                ffi::SQLITE_TRACE_STMT as c_uint,
                Some(on_statement),
                std::ptr::null_mut(),
            );
        }
    }
    ffi::SQLITE_OK
}

/// The statement trace: for `SQLITE_TRACE_STMT`, `x` is the statement's
/// text (nul-terminated). Must not unwind.
unsafe extern "C" fn on_statement(
    kind: c_uint,
    _context: *mut c_void,
    _statement: *mut c_void,
    x: *mut c_void,
) -> c_int {
    if kind != ffi::SQLITE_TRACE_STMT as c_uint || x.is_null() || !TRACING.load(Ordering::SeqCst) {
        return 0;
    }
    // SAFETY: SQLite passes the statement's text, nul-terminated.
    let sql = unsafe { CStr::from_ptr(x as *const c_char) }.to_string_lossy();
    for statement in sql.split(';') {
        if let Some(setting) = setting(statement) {
            SEEN.lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .push(setting);
        }
    }
    0
}

/// `PRAGMA name = value` (or `PRAGMA name(value)`) of a setting, as
/// `name=value`; `None` for anything else.
fn setting(statement: &str) -> Option<String> {
    let s = statement.trim();
    let rest = s
        .get(..6)?
        .eq_ignore_ascii_case("pragma")
        .then(|| &s[6..])?;
    let (name, value) = rest
        .split_once('=')
        .or_else(|| rest.split_once('('))
        .map(|(n, v)| (n.trim(), v.trim().trim_end_matches(')').trim()))?;
    let name = name.rsplit('.').next()?.trim().to_ascii_lowercase();
    SETTINGS
        .contains(&name.as_str())
        .then(|| format!("{name}={}", value.trim_matches(|c| c == '\'' || c == '"')))
}

/// Runs `f`, seeing the SQLite connections it opens: their number and the
/// distinct setting PRAGMAs they ran, in the order first run.
pub fn trace<R>(f: impl FnOnce() -> R) -> (R, usize, Vec<String>) {
    INSTALL.call_once(|| {
        // SAFETY: registers a function with the signature SQLite calls.
        let rc = unsafe { ffi::sqlite3_auto_extension(Some(on_open)) };
        assert_eq!(rc, ffi::SQLITE_OK, "sqlite3_auto_extension");
    });
    SEEN.lock().unwrap_or_else(|p| p.into_inner()).clear();
    OPENED.store(0, Ordering::SeqCst);
    TRACING.store(true, Ordering::SeqCst);
    let result = f();
    TRACING.store(false, Ordering::SeqCst);
    let seen = std::mem::take(&mut *SEEN.lock().unwrap_or_else(|p| p.into_inner()));
    let mut first = BTreeSet::new();
    let distinct = seen
        .into_iter()
        .filter(|s| first.insert(s.clone()))
        .collect();
    (result, OPENED.load(Ordering::SeqCst), distinct)
}

/// This SQLite's version and the settings of a connection that sets
/// nothing, on a new WAL file in `dir` (`synchronous` in WAL mode has its
/// own compiled default).
pub fn defaults(dir: &std::path::Path) -> String {
    let path = dir.join("sqlite-defaults.db");
    let c = rusqlite::Connection::open(&path).expect("a SQLite file");
    let get = |sql: &str| -> String {
        c.query_row(sql, [], |r| r.get::<_, rusqlite::types::Value>(0))
            .map(|v| match v {
                rusqlite::types::Value::Integer(i) => i.to_string(),
                rusqlite::types::Value::Text(t) => t,
                other => format!("{other:?}"),
            })
            .unwrap_or_else(|e| format!("? ({e})"))
    };
    let journal = get("PRAGMA journal_mode");
    let sync = get("PRAGMA synchronous");
    let wal = get("PRAGMA journal_mode = WAL");
    let wal_sync = get("PRAGMA synchronous");
    let text = format!(
        "SQLite {} (bundled); unset, its defaults: journal_mode={journal} \
         (synchronous={}), in {wal} mode synchronous={}; cache_size={}",
        rusqlite::version(),
        synchronous_name(&sync),
        synchronous_name(&wal_sync),
        get("PRAGMA cache_size"),
    );
    drop(c);
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
    }
    text
}

fn synchronous_name(level: &str) -> String {
    match level {
        "0" => "OFF".into(),
        "1" => "NORMAL".into(),
        "2" => "FULL".into(),
        "3" => "EXTRA".into(),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::setting;

    #[test]
    fn settings_are_read_from_pragmas() {
        assert_eq!(
            setting(" PRAGMA synchronous = NORMAL").as_deref(),
            Some("synchronous=NORMAL")
        );
        assert_eq!(
            setting("pragma main.journal_mode='wal'").as_deref(),
            Some("journal_mode=wal")
        );
        assert_eq!(
            setting("PRAGMA busy_timeout(5000)").as_deref(),
            Some("busy_timeout=5000")
        );
        assert_eq!(setting("PRAGMA user_version = 3"), None);
        assert_eq!(setting("PRAGMA journal_mode"), None);
        assert_eq!(setting("SELECT 1"), None);
    }
}
