//! Which addresses a webhook may be delivered to. A tenant's URL could name (or resolve to)
//! the service's own network: loopback, link-local (cloud metadata at 169.254.169.254),
//! private, unique-local, unspecified, broadcast and multicast addresses are refused. The check
//! runs at connect time, on the addresses actually connected to ([`FilteringResolver`] for
//! names, [`allowed`] for IP literals), so a name that resolves elsewhere later (DNS
//! rebinding) cannot get around it. Local testing (`--allow-http-webhooks`, where loopback is
//! the point) and `--allow-private-webhooks` turn the check off.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Whether a webhook may be delivered to `ip`.
pub fn allowed(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => allowed_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => allowed_v4(v4),
            None => allowed_v6(v6),
        },
    }
}

fn allowed_v4(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || a == 0
        // 100.64.0.0/10, carrier-grade NAT: shared, not public.
        || (a == 100 && (64..128).contains(&b)))
}

fn allowed_v6(ip: Ipv6Addr) -> bool {
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        // fc00::/7 unique-local, fe80::/10 link-local.
        || (first & 0xfe00) == 0xfc00
        || (first & 0xffc0) == 0xfe80)
}

/// A DNS resolver that drops the addresses a webhook may not reach, and fails when none is
/// left.
#[derive(Debug, Clone, Copy, Default)]
pub struct FilteringResolver;

impl Resolve for FilteringResolver {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let usable: Vec<SocketAddr> = resolved
                .iter()
                .copied()
                .filter(|addr| allowed(addr.ip()))
                .collect();
            if usable.is_empty() {
                return Err(format!(
                    "{host} resolves only to addresses webhooks may not reach (private, loopback, link-local, …)"
                )
                .into());
            }
            let addrs: Addrs = Box::new(usable.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_addresses_are_refused_and_public_ones_allowed() {
        for refused in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "100.64.0.1",
            "::1",
            "::",
            "fd00::1",
            "fe80::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
        ] {
            let ip: IpAddr = refused.parse().expect(refused);
            assert!(!allowed(ip), "{refused} must be refused");
        }
        for public in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
        ] {
            let ip: IpAddr = public.parse().expect(public);
            assert!(allowed(ip), "{public} must be allowed");
        }
    }
}
