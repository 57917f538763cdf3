//! Runs one `svc-cli` process and measures it: wall time from spawn to exit, peak resident
//! memory (`VmHWM` of `/proc/<pid>/status`, polled every [`POLL`] while it runs), and its
//! stdout, drained as it comes (kept for a report, only counted for an export).

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// How often the child's peak RSS is read.
pub(crate) const POLL: Duration = Duration::from_millis(20);

/// What one run of the child did.
#[derive(Debug)]
pub(crate) struct Measured {
    /// From spawn to exit.
    pub(crate) wall: Duration,
    /// The largest `VmHWM` read, in KiB (`None`: never read, e.g. off Linux). A lower bound:
    /// growth in the last [`POLL`] before exit is missed, so a run of a few polls is vague.
    pub(crate) peak_rss_kib: Option<u64>,
    /// How many times `VmHWM` was read.
    pub(crate) rss_samples: u64,
    /// How it exited.
    pub(crate) status: ExitStatus,
    /// Bytes written on stdout.
    pub(crate) stdout_bytes: u64,
    /// Newlines written on stdout.
    pub(crate) stdout_lines: u64,
    /// Stdout itself, when asked for.
    pub(crate) stdout: Vec<u8>,
    /// Stderr (messages, errors).
    pub(crate) stderr: String,
}

/// Spawns `command` with stdout and stderr piped, and waits for it while polling its peak
/// RSS. Blocks: call it from a blocking thread when a runtime must keep serving meanwhile.
///
/// # Errors
/// The command cannot be spawned or waited for.
pub(crate) fn run(mut command: Command, keep_stdout: bool) -> std::io::Result<Measured> {
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = Instant::now();
    // `spawn` returns once the child has exec'd (std waits for the exec result), so the
    // first `VmHWM` read is the child's own, never that of the forked bench process.
    let mut child = command.spawn()?;
    let pid = child.id();
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let drain_stdout = thread::spawn(move || {
        let (mut bytes, mut lines, mut kept) = (0u64, 0u64, Vec::new());
        let mut buf = vec![0u8; 1 << 16];
        loop {
            match stdout.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    bytes += n as u64;
                    lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
                    if keep_stdout {
                        kept.extend_from_slice(&buf[..n]);
                    }
                }
            }
        }
        (bytes, lines, kept)
    });
    let drain_stderr = thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stderr.read_to_end(&mut text);
        String::from_utf8_lossy(&text).into_owned()
    });
    let exited = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(0));
    let samples = Arc::new(AtomicU64::new(0));
    let poller = {
        let (exited, peak, samples) = (exited.clone(), peak.clone(), samples.clone());
        thread::spawn(move || {
            let path = format!("/proc/{pid}/status");
            // Stops when the child has been waited for, or once it is a zombie (no VmHWM).
            while !exited.load(Ordering::Acquire) {
                match std::fs::read_to_string(&path)
                    .ok()
                    .as_deref()
                    .and_then(vm_hwm)
                {
                    Some(kib) => {
                        peak.fetch_max(kib, Ordering::AcqRel);
                        samples.fetch_add(1, Ordering::AcqRel);
                    }
                    None => break,
                }
                thread::sleep(POLL);
            }
        })
    };
    let status = child.wait()?;
    let wall = started.elapsed();
    exited.store(true, Ordering::Release);
    let _ = poller.join();
    let (stdout_bytes, stdout_lines, stdout) = drain_stdout.join().expect("stdout drain");
    let stderr = drain_stderr.join().expect("stderr drain");
    let peak = peak.load(Ordering::Acquire);
    Ok(Measured {
        wall,
        peak_rss_kib: (peak > 0).then_some(peak),
        rss_samples: samples.load(Ordering::Acquire),
        status,
        stdout_bytes,
        stdout_lines,
        stdout,
        stderr,
    })
}

/// The `VmHWM:` line of a `/proc/<pid>/status`, in KiB.
fn vm_hwm(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}
