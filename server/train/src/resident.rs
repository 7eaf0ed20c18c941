//! The process's peak resident memory (the high-water mark of its resident set), for
//! the reports of `arlbook train` and `arlbook bench-train`.
//!
//! Linux keeps it as `VmHWM` in `/proc/self/status` (kB); PyTorch's side of the
//! benchmark reads the same number through `getrusage(RUSAGE_SELF).ru_maxrss`. Other
//! systems report nothing.

/// Bytes in a MiB.
const MIB: f64 = 1_048_576.0;

/// The peak resident memory of this process so far, in MiB, where the system keeps it.
pub fn peak_resident_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_high_water_mark(&status)
}

/// `VmHWM` of a `/proc/<pid>/status` text, in MiB.
fn parse_high_water_mark(status: &str) -> Option<f64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let mut words = line["VmHWM:".len()..].split_whitespace();
    let value: f64 = words.next()?.parse().ok()?;
    match words.next()? {
        "kB" => Some(value * 1024.0 / MIB),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_high_water_mark_is_read_in_mib() {
        let status = "Name:\tarlbook\nVmPeak:\t 4096 kB\nVmHWM:\t  524288 kB\nVmRSS:\t 1024 kB\n";
        assert_eq!(parse_high_water_mark(status), Some(512.0));
        assert_eq!(parse_high_water_mark("VmRSS:\t1 kB\n"), None);
        assert_eq!(parse_high_water_mark("VmHWM:\t1 MB\n"), None);
    }

    #[test]
    fn this_process_has_a_peak_on_linux() {
        if cfg!(target_os = "linux") {
            let peak = peak_resident_mib().expect("VmHWM on Linux");
            assert!(peak > 0.0, "{peak}");
        }
    }
}
