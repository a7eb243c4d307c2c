//! The output: one JSON line per figure on stdout.

use crate::workload::Workload;

/// One output figure: the median over the repetitions.
#[derive(Clone, Debug)]
pub struct Record {
    /// The system's name.
    pub system: &'static str,
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
