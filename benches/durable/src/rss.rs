//! The resident set of this process, after giving freed memory back.

/// `VmRSS` of `/proc/self/status` after `malloc_trim(0)`, in MB
/// (1 MB = 1,048,576 bytes).
pub fn trimmed_rss_mb() -> f64 {
    // SAFETY: malloc_trim has no preconditions.
    unsafe {
        libc::malloc_trim(0);
    }
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .expect("VmRSS in /proc/self/status");
    kb * 1024.0 / 1_048_576.0
}
