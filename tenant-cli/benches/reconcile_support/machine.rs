//! How busy the machine is: `uptime` before the run, and from `/proc/stat` the share of CPU
//! time that was idle, used by this bench (the service and its `svc-cli` children), or used
//! by other processes over the run, so a reader can tell a quiet run from a noisy one.

use std::process::Command;

/// CPU counters at one instant, in clock ticks summed over every CPU.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CpuSample {
    total: u64,
    idle: u64,
    /// This process and its children that were waited for.
    own: u64,
}

/// Where the CPU time went between two samples, as shares of the total (0 to 1).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CpuShare {
    pub(crate) idle: f64,
    pub(crate) own: f64,
    pub(crate) others: f64,
}

/// Reads `/proc/stat` and `/proc/self/stat`; `None` off Linux.
pub(crate) fn sample() -> Option<CpuSample> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu: Vec<u64> = stat
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .map(|n| n.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user already).
    let total = cpu.iter().take(8).sum();
    let idle = cpu.get(3).copied().unwrap_or(0) + cpu.get(4).copied().unwrap_or(0);
    let own_stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // After the command name: state is field 3, utime..cstime are fields 14..17.
    let fields: Vec<u64> = own_stat
        .rsplit_once(')')?
        .1
        .split_whitespace()
        .map(|n| n.parse().unwrap_or(0))
        .collect();
    let own = fields.get(11..15)?.iter().sum();
    Some(CpuSample { total, idle, own })
}

/// The shares between `before` and `after`.
pub(crate) fn share(before: CpuSample, after: CpuSample) -> Option<CpuShare> {
    let total = after.total.checked_sub(before.total).filter(|&t| t > 0)? as f64;
    let idle = after.idle.saturating_sub(before.idle) as f64 / total;
    let own = (after.own.saturating_sub(before.own) as f64 / total).min(1.0 - idle);
    Some(CpuShare {
        idle,
        own,
        others: (1.0 - idle - own).max(0.0),
    })
}

/// The output of `uptime` (load averages), else `/proc/loadavg`.
pub(crate) fn uptime() -> String {
    Command::new("uptime")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .or_else(|| {
            std::fs::read_to_string("/proc/loadavg")
                .ok()
                .map(|l| format!("loadavg {}", l.trim()))
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The number of CPUs the bench may use.
pub(crate) fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}
