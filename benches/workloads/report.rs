//! The output: JSON lines on stdout, and after every run a summary table
//! on stderr comparing each chronopool system with the best peer.
//!
//! "Best" per metric: higher is better for `runs_ratio`, lower is better
//! for every other metric (ns, ms, µs, bytes, CPU). The ratio column is
//! chronopool ÷ best peer for lower-is-better metrics and best peer ÷
//! chronopool for `runs_ratio`, so that in both cases ≤ 1 means chronopool
//! is at least as good.
//!
//! A system whose `runs_ratio` is below [`KEPT_UP`] did not do the work:
//! it fell behind the schedule, so its lateness and CPU figures in that
//! workload describe less work than asked. Such a peer is left out of
//! "best peer" for the workload's other metrics (it still counts for
//! `runs_ratio` itself); such a chronopool value is marked `!`. The table
//! footer repeats the rule and names what was left out.

use crate::systems::Kind;
use crate::workload::Workload;

/// A `runs_ratio` below this means the system did not keep up (see the
/// module doc).
const KEPT_UP: f64 = 0.99;

/// The metric that says whether a system did the work.
const RUNS_RATIO: &str = "runs_ratio";

/// One output figure: the median over the repetitions.
#[derive(Clone, Debug)]
pub struct Record {
    /// The system's name.
    pub system: &'static str,
    /// Chronopool's or a peer.
    pub kind: Kind,
    /// The workload.
    pub workload: Workload,
    /// The metric's name.
    pub metric: &'static str,
    /// The median.
    pub value: f64,
}

impl Record {
    /// The spec's JSON line.
    pub fn json(&self) -> String {
        format!(
            "{{\"system\":\"{}\",\"workload\":\"{}\",\"metric\":\"{}\",\"value\":{}}}",
            self.system,
            self.workload.name(),
            self.metric,
            json_number(self.value)
        )
    }
}

/// A JSON number with about 6 significant digits (at most 6 decimals),
/// trailing zeros dropped; `null` for what JSON cannot hold.
pub fn json_number(v: f64) -> String {
    if !v.is_finite() {
        return "null".into();
    }
    let magnitude = if v == 0.0 {
        0
    } else {
        v.abs().log10().floor() as i32
    };
    let decimals = (5 - magnitude).clamp(0, 6) as usize;
    let mut s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.truncate(s.trim_end_matches('0').trim_end_matches('.').len());
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

/// True where a larger value is better.
fn higher_is_better(metric: &str) -> bool {
    metric == RUNS_RATIO
}

/// True if `a` is better than `b` for `metric`.
fn better(metric: &str, a: f64, b: f64) -> bool {
    if higher_is_better(metric) {
        a > b
    } else {
        a < b
    }
}

/// The figures of one workload.
struct WorkloadFigures<'a> {
    records: Vec<&'a Record>,
}

impl<'a> WorkloadFigures<'a> {
    /// The value of `metric` for `system`.
    fn value(&self, system: &str, metric: &str) -> Option<f64> {
        self.records
            .iter()
            .find(|r| r.system == system && r.metric == metric)
            .map(|r| r.value)
    }

    /// Systems that did not keep up, with their `runs_ratio`.
    fn fell_behind(&self) -> Vec<(&'static str, Kind, f64)> {
        self.records
            .iter()
            .filter(|r| r.metric == RUNS_RATIO && r.value < KEPT_UP)
            .map(|r| (r.system, r.kind, r.value))
            .collect()
    }

    /// The metrics, in output order.
    fn metrics(&self) -> Vec<&'static str> {
        let mut m: Vec<&'static str> = Vec::new();
        for r in &self.records {
            if !m.contains(&r.metric) {
                m.push(r.metric);
            }
        }
        m
    }

    /// The best peer for `metric`, leaving out peers that fell behind
    /// (except for `runs_ratio` itself).
    fn best_peer(&self, metric: &str, behind: &[&str]) -> Option<&'a Record> {
        self.records
            .iter()
            .copied()
            .filter(|r| r.kind == Kind::Peer && r.metric == metric)
            .filter(|r| metric == RUNS_RATIO || !behind.contains(&r.system))
            .reduce(|best, r| {
                if better(metric, r.value, best.value) {
                    r
                } else {
                    best
                }
            })
    }
}

/// A figure for the table: about 4 significant digits.
fn fmt_value(v: f64) -> String {
    match v.abs() {
        a if a >= 1000.0 => format!("{v:.0}"),
        a if a >= 100.0 => format!("{v:.1}"),
        a if a >= 10.0 => format!("{v:.2}"),
        _ => format!("{v:.3}"),
    }
}

/// The ratio chronopool vs. the best peer, oriented so that ≤ 1 means
/// chronopool is at least as good; `n/a` where a value is ≤ 0.
fn fmt_ratio(metric: &str, ours: f64, best: f64) -> String {
    if ours <= 0.0 || best <= 0.0 {
        return "n/a".into();
    }
    let r = if higher_is_better(metric) {
        best / ours
    } else {
        ours / best
    };
    if r < 0.1 {
        format!("{r:.3}")
    } else {
        format!("{r:.2}")
    }
}

/// The short label of a chronopool system for the ratio columns.
fn short(system: &str) -> &str {
    system.strip_prefix("chronopool-").unwrap_or(system)
}

/// Prints the summary table to stderr: one row per workload and metric,
/// chronopool's value per chronopool system, the best peer, and the
/// ratios; then the rules and what was left out.
pub fn print_summary(records: &[Record], ours: &[&'static str]) {
    let mut header: Vec<String> = vec!["workload".into(), "metric".into()];
    header.extend(ours.iter().map(|s| s.to_string()));
    header.extend(["best peer".into(), "peer".into()]);
    header.extend(ours.iter().map(|s| format!("{} ÷ best", short(s))));
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    for w in Workload::ALL {
        let figures = WorkloadFigures {
            records: records.iter().filter(|r| r.workload == w).collect(),
        };
        if !figures.records.is_empty() {
            rows.extend(workload_rows(w, &figures, ours, &mut notes));
        }
    }
    eprintln!("\nSummary (medians; chronopool beside the best peer of this run):");
    // Names left-aligned (workload, metric, peer), figures right-aligned.
    let peer_column = 3 + ours.len();
    print_table(&header, &rows, |i| i < 2 || i == peer_column);
    print_footer(&notes);
}

/// The rows of one workload; notes what fell behind.
fn workload_rows(
    w: Workload,
    figures: &WorkloadFigures<'_>,
    ours: &[&'static str],
    notes: &mut Vec<String>,
) -> Vec<Vec<String>> {
    let behind = figures.fell_behind();
    let behind_names: Vec<&str> = behind.iter().map(|b| b.0).collect();
    let metrics = figures.metrics();
    let mut rows = Vec::new();
    for &metric in &metrics {
        let best = figures.best_peer(metric, &behind_names);
        let mark = |system: &str| {
            if metric != RUNS_RATIO && behind_names.contains(&system) {
                "!"
            } else {
                ""
            }
        };
        let mut row = vec![w.name().to_string(), metric.to_string()];
        for &s in ours {
            row.push(
                figures
                    .value(s, metric)
                    .map_or("—".into(), |v| format!("{}{}", fmt_value(v), mark(s))),
            );
        }
        row.push(best.map_or("—".into(), |b| fmt_value(b.value)));
        row.push(best.map_or("—".into(), |b| b.system.to_string()));
        for &s in ours {
            let ratio = figures
                .value(s, metric)
                .zip(best)
                .map(|(v, b)| fmt_ratio(metric, v, b.value) + mark(s));
            row.push(ratio.unwrap_or_else(|| "—".into()));
        }
        rows.push(row);
    }
    let others: Vec<&str> = metrics
        .iter()
        .copied()
        .filter(|&m| m != RUNS_RATIO)
        .collect();
    for (system, kind, ratio) in behind {
        let what = match kind {
            Kind::Peer => "left out of \"best peer\" for",
            Kind::Chronopool => "its values marked ! for",
        };
        notes.push(format!(
            "{}: {system} did not keep up (runs_ratio {ratio:.3} < {KEPT_UP}): {what} {}",
            w.name(),
            others.join(", ")
        ));
    }
    rows
}

/// Prints rows under a header; column `i` is left-aligned if `left(i)`,
/// right-aligned otherwise.
fn print_table(header: &[String], rows: &[Vec<String>], left: impl Fn(usize) -> bool) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, &w))| {
                if left(i) {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        eprintln!("  {}", parts.join("  ").trim_end());
    };
    line(header);
    for row in rows {
        line(row);
    }
}

/// The rules behind the table, and what was left out.
fn print_footer(notes: &[String]) {
    eprintln!(
        "  ratio: chronopool ÷ best peer (lower is better: ns, ms, µs, bytes, CPU);\n\
         \x20        best peer ÷ chronopool for runs_ratio (higher is better):\n\
         \x20        either way ≤ 1 means chronopool is at least as good; n/a where a value is ≤ 0.\n\
         \x20 did not do the work: runs_ratio < {KEPT_UP} means the system fell behind its schedule,\n\
         \x20        so its other figures in that workload cover less work; such a peer is left\n\
         \x20        out of \"best peer\" for them, such a chronopool value is marked !.\n\
         \x20 best peer: among the peers run in this process only; —: no figure\n\
         \x20        (the system cannot do the workload, was not selected, or failed)."
    );
    for note in notes {
        eprintln!("  {note}");
    }
}
