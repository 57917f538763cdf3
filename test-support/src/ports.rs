//! Loopback ports named ahead of time, for a test that must write an address into a command
//! before the server behind it starts (the sandbox's `--webhook-url` names `webhook serve`'s
//! port, and `webhook serve` starts later).
//!
//! A port the kernel handed out for `127.0.0.1:0` and that was released is not held: any
//! `bind` to port 0 (another test's server) or outgoing connection in the meantime may get the
//! same one, and the server started later then fails to bind, or a test reaches somebody
//! else's server there. So these ports are taken outside the kernel's ephemeral range
//! (`net.ipv4.ip_local_port_range`), which port 0 and outgoing connections never use, and each
//! is handed out once: to one process (a lock file per port under the temporary directory, held
//! while the process lives, as CI runs the tests twice at once), and once in it.

use std::collections::BTreeMap;
use std::fs::File;
use std::hash::{BuildHasher as _, Hasher as _};
use std::net::TcpListener;
use std::sync::Mutex;

/// The lowest port handed out (well above the registered services of a usual machine).
const LOWEST: u16 = 10_000;
/// The kernel's ephemeral range when it does not say (Linux's default).
const EPHEMERAL: (u16, u16) = (32_768, 60_999);
/// The fewest ports a range outside the ephemeral one must hold to be used.
const ENOUGH: u16 = 1_000;

/// The ports this process handed out, each with its lock file when one could be taken.
static HANDED_OUT: Mutex<BTreeMap<u16, Option<File>>> = Mutex::new(BTreeMap::new());

/// A loopback port free now, outside the ephemeral range and not handed out before to this
/// process or another one running now: the server started on it later finds it free unless a
/// process binds it by number.
///
/// # Panics
/// When no port of the range can be bound (a machine whose every such port is taken).
#[must_use]
pub fn reserved_port() -> u16 {
    let (low, high) = outside_ephemeral();
    reserve_in(low, high)
        .unwrap_or_else(|| panic!("no free loopback port between {low} and {high}"))
}

/// A port of `low..=high` that no process holds and that binds now, held from then on by this
/// one; tried from a random start, so that processes side by side rarely try the same ports.
fn reserve_in(low: u16, high: u16) -> Option<u16> {
    let span = u64::from(high - low) + 1;
    let mut handed_out = HANDED_OUT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let start = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
        % span;
    let locks = std::env::temp_dir().join("svc-test-ports");
    let _ = std::fs::create_dir_all(&locks);
    for offset in 0..span {
        let port = low + u16::try_from((start + offset) % span).unwrap_or_default();
        if handed_out.contains_key(&port) {
            continue;
        }
        // Where the directory cannot be written, the random start alone keeps processes apart.
        let lock = File::create(locks.join(format!("{port}.lock"))).ok();
        if lock.as_ref().is_some_and(|file| file.try_lock().is_err())
            || TcpListener::bind(("127.0.0.1", port)).is_err()
        {
            continue;
        }
        handed_out.insert(port, lock);
        return Some(port);
    }
    None
}

/// The ports to hand out, first to last: below the kernel's ephemeral range, else above it
/// (a machine whose range starts low), else every port from [`LOWEST`] (no range is left
/// outside it: a collision is then possible again, as with port 0).
fn outside_ephemeral() -> (u16, u16) {
    let (first, last) = ephemeral_range();
    if first.saturating_sub(LOWEST) >= ENOUGH {
        (LOWEST, first - 1)
    } else if u16::MAX - last.max(LOWEST) >= ENOUGH {
        (last.max(LOWEST) + 1, u16::MAX)
    } else {
        (LOWEST, u16::MAX)
    }
}

/// The kernel's ephemeral range, first and last port.
fn ephemeral_range() -> (u16, u16) {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| {
            let mut ports = range.split_whitespace().map(str::parse::<u16>);
            Some((ports.next()?.ok()?, ports.next()?.ok()?))
        })
        .filter(|(first, last)| first <= last)
        .unwrap_or(EPHEMERAL)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn ports_are_outside_the_ephemeral_range_free_and_never_handed_out_twice() {
        let ports: Vec<u16> = (0..50).map(|_| reserved_port()).collect();
        let distinct: BTreeSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), ports.len(), "{ports:?}");
        let (low, high) = outside_ephemeral();
        for port in ports {
            assert!((low..=high).contains(&port), "{port}");
            TcpListener::bind(("127.0.0.1", port)).expect("the port is free");
        }
    }

    #[test]
    fn a_port_another_process_holds_is_not_handed_out_until_it_lets_go() {
        let port = reserved_port();
        // Let go of it here, then hold its lock as another process would (another open file:
        // `flock` locks of two opens conflict within one process too).
        drop(HANDED_OUT.lock().map(|mut ports| ports.remove(&port)));
        let other = File::create(std::env::temp_dir().join(format!("svc-test-ports/{port}.lock")))
            .expect("lock file");
        other.try_lock().expect("the lock is free again");
        assert_eq!(reserve_in(port, port), None, "held by another");
        drop(other);
        assert_eq!(reserve_in(port, port), Some(port), "let go of");
    }
}
