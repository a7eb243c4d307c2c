//! The source tree's layers, checked: every path to another module of the
//! crate (`crate::…`) in the library's code (test modules aside) points to
//! the same layer or a lower one.
//!
//! ```text
//!   API       lib.rs, executor.rs, builder.rs, handles, errors, metrics, …
//!   pool/     queues, workers, sleep, lifecycle, hooks
//!   timer/    the delayed work queue (queue/) and the timer thread (driver/)
//!   task/     task cells, jobs, the context a task runs in
//!   time/     the executor's clock
//!   sync/     the loom shim, the parker, the ring
//! ```
//!
//! A layer may use any layer below it; cycles stay inside a layer. So the
//! task layer knows nothing of the pool that runs its tasks (it sees it
//! through `task::TaskContext`), and the timer knows the pool only through
//! `timer::driver::Workers`.

use std::fs;
use std::path::{Path, PathBuf};

/// The layers, lowest first.
const LAYERS: [&str; 7] = ["sync", "time", "trigger", "task", "timer", "pool", "api"];

/// The layer of a top-level module of the crate.
fn layer_of(module: &str) -> &'static str {
    match module {
        "sync" => "sync",
        "time" => "time",
        "trigger" => "trigger",
        "task" => "task",
        "timer" => "timer",
        "pool" => "pool",
        _ => "api",
    }
}

fn rank(layer: &str) -> usize {
    LAYERS
        .iter()
        .position(|l| *l == layer)
        .expect("a known layer")
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

/// The library code of a file: everything before its first test module
/// (test modules come last, by the crate's convention).
fn library_code(text: &str) -> &str {
    let test_module = ["\n#[cfg(test)]", "\n#[cfg(all(test", "\n#[cfg(any(test"]
        .iter()
        .filter_map(|marker| text.find(marker))
        .min();
    &text[..test_module.unwrap_or(text.len())]
}

/// The top-level modules a piece of code names as `crate::<module>`.
fn crate_paths(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in code.lines() {
        let line = line.trim_start();
        if line.starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            let after = &rest[at + "crate::".len()..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                found.push(name);
            }
            rest = after;
        }
    }
    found
}

#[test]
fn every_import_points_to_the_same_layer_or_a_lower_one() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    assert!(files.len() > 20, "found the sources");
    let mut wrong = Vec::new();
    for file in &files {
        let relative = file.strip_prefix(&src).expect("under src/");
        let top = relative
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .expect("a path")
            .trim_end_matches(".rs");
        // Test support for the loom models is not library code.
        if top == "loom_support" {
            continue;
        }
        let from = layer_of(top);
        let text = fs::read_to_string(file).expect("read a source file");
        for module in crate_paths(library_code(&text)) {
            let to = layer_of(&module);
            if rank(to) > rank(from) {
                wrong.push(format!(
                    "{} ({from}) uses crate::{module} ({to})",
                    relative.display()
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports that point up:\n{}",
        wrong.join("\n")
    );
}
