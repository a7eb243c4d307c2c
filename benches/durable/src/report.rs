//! The results: every repetition's figure per system and metric, their
//! medians as JSON lines on stdout, and a table with each
//! chronopool-durable system's ratio to the best peer on the same store
//! kind (SQLite or PostgreSQL) on stderr.

use std::collections::BTreeMap;

/// A metric, in the order of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Metric {
    InsertJobsPerS,
    LateP50Ms,
    LateP99Ms,
    RssMb,
    RecoveryMs,
    BurndownJobsPerS,
    ImmediateP50Ms,
    ImmediateP99Ms,
    ImmediatePolledP50Ms,
    ImmediatePolledP99Ms,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::InsertJobsPerS => "insert_jobs_per_s",
            Metric::LateP50Ms => "late_p50_ms",
            Metric::LateP99Ms => "late_p99_ms",
            Metric::RssMb => "rss_mb_for_1m_year_jobs",
            Metric::RecoveryMs => "recovery_ms",
            Metric::BurndownJobsPerS => "burndown_jobs_per_s",
            Metric::ImmediateP50Ms => "immediate_p50_ms",
            Metric::ImmediateP99Ms => "immediate_p99_ms",
            Metric::ImmediatePolledP50Ms => "immediate_polled_p50_ms",
            Metric::ImmediatePolledP99Ms => "immediate_polled_p99_ms",
        }
    }

    /// The workload of its JSON line: the shared spec's `durable` row for
    /// the first five, then the group's own name.
    pub fn workload(self) -> &'static str {
        match self {
            Metric::BurndownJobsPerS => "burndown",
            Metric::ImmediateP50Ms
            | Metric::ImmediateP99Ms
            | Metric::ImmediatePolledP50Ms
            | Metric::ImmediatePolledP99Ms => "immediate",
            _ => "durable",
        }
    }

    fn higher_is_better(self) -> bool {
        matches!(self, Metric::InsertJobsPerS | Metric::BurndownJobsPerS)
    }
}

/// Every figure, by system (in the order given) and metric.
pub struct Report {
    systems: Vec<&'static str>,
    figures: BTreeMap<(usize, Metric), Vec<f64>>,
}

/// The median (the mean of the middle two for an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn rounded(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

/// The store kind in a system's name: its last `-` part (`sqlite`,
/// `postgres`).
fn store_kind(system: &str) -> &str {
    system.rsplit('-').next().unwrap_or(system)
}

/// A ratio with two significant digits at least.
fn ratio(r: f64) -> String {
    if r != 0.0 && r.abs() < 0.1 {
        format!("{r:.1e}")
    } else {
        format!("{r:.2}")
    }
}

fn is_ours(system: &str) -> bool {
    system.starts_with("chronopool")
}

impl Report {
    pub fn new(systems: Vec<&'static str>) -> Self {
        Report {
            systems,
            figures: BTreeMap::new(),
        }
    }

    /// One repetition's `value` of `metric` for `system`.
    pub fn add(&mut self, system: &str, metric: Metric, value: f64) {
        let index = self
            .systems
            .iter()
            .position(|s| *s == system)
            .expect("a known system");
        self.figures.entry((index, metric)).or_default().push(value);
    }

    fn median_of(&self, system: usize, metric: Metric) -> Option<f64> {
        self.figures.get(&(system, metric)).map(|v| median(v))
    }

    /// The best median of `metric` among the peers (not chronopool) on
    /// `kind`'s store, and whose it is.
    fn best_peer(&self, kind: &str, metric: Metric) -> Option<(f64, &'static str)> {
        (0..self.systems.len())
            .filter(|&i| !is_ours(self.systems[i]) && store_kind(self.systems[i]) == kind)
            .filter_map(|i| self.median_of(i, metric).map(|v| (v, self.systems[i])))
            .reduce(|a, b| {
                if metric.higher_is_better() == (a.0 >= b.0) {
                    a
                } else {
                    b
                }
            })
    }

    /// The medians, one JSON line per system and metric, on stdout.
    pub fn print_json(&self) {
        for (&(system, metric), values) in &self.figures {
            println!(
                "{{\"system\":\"{}\",\"workload\":\"{}\",\"metric\":\"{}\",\"value\":{}}}",
                self.systems[system],
                metric.workload(),
                metric.name(),
                rounded(median(values))
            );
        }
    }

    /// The table of medians and ratios, on stderr: for each
    /// chronopool-durable system, its median over the best peer's on the
    /// same store kind (the peer named), and which way is better.
    pub fn print_table(&self) {
        let metrics: Vec<Metric> = {
            let mut m: Vec<Metric> = self.figures.keys().map(|&(_, m)| m).collect();
            m.sort();
            m.dedup();
            m
        };
        let ours: Vec<usize> = (0..self.systems.len())
            .filter(|&i| is_ours(self.systems[i]))
            .collect();
        let mut header = format!("{:<24}", "metric (median)");
        for s in &self.systems {
            header.push_str(&format!(" {s:>28}"));
        }
        for &o in &ours {
            header.push_str(&format!(
                " {:>30}",
                format!("{}: ours/best peer", store_kind(self.systems[o]))
            ));
        }
        eprintln!("{header}");
        for metric in metrics {
            let mut line = format!("{:<24}", metric.name());
            for i in 0..self.systems.len() {
                match self.median_of(i, metric) {
                    Some(v) => line.push_str(&format!(" {v:>28.1}")),
                    None => line.push_str(&format!(" {:>28}", "-")),
                }
            }
            for &o in &ours {
                let best = self.best_peer(store_kind(self.systems[o]), metric);
                match (self.median_of(o, metric), best) {
                    (Some(v), Some((p, peer))) if p != 0.0 => line.push_str(&format!(
                        " {:>30}",
                        format!(
                            "{}x ({})",
                            ratio(v / p),
                            peer.rsplit_once('-').map_or(peer, |(n, _)| n)
                        )
                    )),
                    _ => line.push_str(&format!(" {:>30}", "-")),
                }
            }
            line.push_str(if metric.higher_is_better() {
                "  (higher is better)"
            } else {
                "  (lower is better)"
            });
            eprintln!("{line}");
        }
    }
}
