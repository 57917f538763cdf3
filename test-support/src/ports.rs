//! Loopback ports named ahead of time, for a test that must write an address into a command
//! before the server behind it starts (the sandbox's `--webhook-url` names `webhook serve`'s
//! port, and `webhook serve` starts later).
//!
//! A port the kernel handed out for `127.0.0.1:0` and that was released is not held: any
//! `bind` to port 0 (another test's server) or outgoing connection in the meantime may get the
//! same one, and the server started later then fails to bind, or a test reaches somebody
//! else's server there. So these ports are taken below the kernel's ephemeral range
//! (`net.ipv4.ip_local_port_range`), which port 0 and outgoing connections never use, and each
//! is handed out once per process.

use std::collections::BTreeSet;
use std::hash::{BuildHasher as _, Hasher as _};
use std::net::TcpListener;
use std::sync::Mutex;

/// The lowest port handed out (well above the registered services of a usual machine).
const LOWEST: u16 = 10_000;
/// Where the ephemeral range starts when the kernel does not say (Linux's default).
const EPHEMERAL_START: u16 = 32_768;

static HANDED_OUT: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

/// A loopback port free now, outside the ephemeral range and not handed out before in this
/// process: the server started on it later finds it free unless a process binds it by number.
///
/// # Panics
/// When no port of the range can be bound (a machine whose every such port is taken).
#[must_use]
pub fn reserved_port() -> u16 {
    let end = ephemeral_start().max(LOWEST + 1);
    let span = u64::from(end - LOWEST);
    let mut handed_out = HANDED_OUT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // A random start, so that test processes running side by side rarely try the same ports.
    let start = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
        % span;
    for offset in 0..span {
        let port = LOWEST + u16::try_from((start + offset) % span).unwrap_or_default();
        if handed_out.contains(&port) || TcpListener::bind(("127.0.0.1", port)).is_err() {
            continue;
        }
        handed_out.insert(port);
        return port;
    }
    panic!("no free loopback port between {LOWEST} and {end}");
}

/// The first port of the kernel's ephemeral range.
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(EPHEMERAL_START)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_below_the_ephemeral_range_free_and_never_handed_out_twice() {
        let ports: Vec<u16> = (0..50).map(|_| reserved_port()).collect();
        let distinct: BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
        for port in ports {
            assert!((LOWEST..ephemeral_start()).contains(&port), "{port}");
            TcpListener::bind(("127.0.0.1", port)).expect("the port is free");
        }
    }
}
