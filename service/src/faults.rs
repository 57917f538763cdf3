//! Fault injection, so that a tenant can rehearse what the real service does on a bad day:
//! webhooks lost on both attempts, sent twice, signed with the wrong key or late, and API
//! calls answered `429` or `500`. Per tenant, set by the operator (`tenant set-faults`, or at
//! `tenant create`), off by default and never active unless set.
//!
//! Every decision is deterministic for a given seed: whether a delivery is dropped, duplicated
//! or badly signed depends on the seed and the call id only ([`Faults::drops`] and its
//! siblings, public so that a test can predict which calls are affected); whether an API
//! request fails depends on the seed and the request's number for that tenant.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A tenant's faults. All zero: none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Faults {
    /// Share of deliveries that fail on both attempts (as if the endpoint were down).
    pub drop_deliveries: f64,
    /// Share of deliveries sent twice (same webhook id, a fresh signature).
    pub duplicate_deliveries: f64,
    /// How long every delivery waits before its first attempt (ms).
    pub delay_deliveries_ms: u64,
    /// Share of deliveries signed with a wrong key.
    pub bad_signature: f64,
    /// Share of API requests answered `429` with `Retry-After`.
    pub api_429: f64,
    /// Share of API requests answered `500 INTERNAL_ERROR`.
    pub api_500: f64,
    /// The seed every decision derives from.
    pub seed: u64,
}

/// The keys of a fault spec (`drop=0.2,duplicate=0.05,…`), as the operator and `svc-cli
/// sandbox --faults` write them.
pub const SPEC_KEYS: &str =
    "drop, duplicate, delay (e.g. 30s), bad-signature, api-429, api-500, seed";

impl Faults {
    /// Whether no fault is set.
    pub fn is_off(&self) -> bool {
        self.drop_deliveries <= 0.0
            && self.duplicate_deliveries <= 0.0
            && self.delay_deliveries_ms == 0
            && self.bad_signature <= 0.0
            && self.api_429 <= 0.0
            && self.api_500 <= 0.0
    }

    /// Whether the delivery of `call_id` is dropped (fails on both attempts).
    pub fn drops(&self, call_id: &str) -> bool {
        self.hits("drop", call_id, self.drop_deliveries)
    }

    /// Whether the delivery of `call_id` is sent twice.
    pub fn duplicates(&self, call_id: &str) -> bool {
        self.hits("duplicate", call_id, self.duplicate_deliveries)
    }

    /// Whether the delivery of `call_id` is signed with a wrong key.
    pub fn signs_badly(&self, call_id: &str) -> bool {
        self.hits("bad-signature", call_id, self.bad_signature)
    }

    /// How long deliveries wait before their first attempt.
    pub fn delay(&self) -> Duration {
        Duration::from_millis(self.delay_deliveries_ms)
    }

    /// What the tenant's API request number `n` (from 1) gets, if a fault.
    pub fn api_fault(&self, n: u64) -> Option<ApiFault> {
        let key = n.to_string();
        if self.hits("api-429", &key, self.api_429) {
            Some(ApiFault::TooManyRequests)
        } else if self.hits("api-500", &key, self.api_500) {
            Some(ApiFault::InternalError)
        } else {
            None
        }
    }

    /// The faults as a spec that [`Faults::parse_spec`] reads back (`drop=0.2,seed=7`), each
    /// fault set and the seed; `off` when none is set.
    pub fn spec(&self) -> String {
        if self.is_off() {
            return "off".to_owned();
        }
        let mut pairs = Vec::new();
        for (key, share) in [
            ("drop", self.drop_deliveries),
            ("duplicate", self.duplicate_deliveries),
            ("bad-signature", self.bad_signature),
            ("api-429", self.api_429),
            ("api-500", self.api_500),
        ] {
            if share > 0.0 {
                pairs.push(format!("{key}={share}"));
            }
        }
        match self.delay_deliveries_ms {
            0 => {}
            ms if ms % 1_000 == 0 => pairs.push(format!("delay={}s", ms / 1_000)),
            ms => pairs.push(format!("delay={ms}ms")),
        }
        pairs.push(format!("seed={}", self.seed));
        pairs.join(",")
    }

    /// A uniform draw in [0, 1) from (seed, kind, key), compared with `share`.
    fn hits(&self, kind: &str, key: &str, share: f64) -> bool {
        if share <= 0.0 {
            return false;
        }
        let mut hasher = Sha256::new();
        hasher.update(self.seed.to_le_bytes());
        hasher.update(kind.as_bytes());
        hasher.update([0]);
        hasher.update(key.as_bytes());
        let digest = hasher.finalize();
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        let draw = (u64::from_le_bytes(first) >> 11) as f64 / (1u64 << 53) as f64;
        draw < share
    }

    /// Reads a spec: `key=value` pairs of [`SPEC_KEYS`] separated by commas, spaces or both
    /// (`drop=0.2, seed=7` as pasted from a wrapped line reads as `drop=0.2,seed=7`); shares
    /// are 0 to 1.
    ///
    /// # Errors
    /// A message naming the bad pair and where it is in the spec.
    pub fn parse_spec(spec: &str) -> Result<Self, String> {
        let mut faults = Self::default();
        let pairs = spec
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|p| !p.is_empty());
        for (n, pair) in (1..).zip(pairs) {
            Self::read_pair(&mut faults, pair)
                .map_err(|e| format!("pair {n}, {pair:?}: {e}"))?;
        }
        Ok(faults)
    }

    /// Sets the fault one `key=value` pair names.
    fn read_pair(faults: &mut Self, pair: &str) -> Result<(), String> {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("not key=value (keys: {SPEC_KEYS})"))?;
        let share = || -> Result<f64, String> {
            value
                .parse::<f64>()
                .ok()
                .filter(|p| (0.0..=1.0).contains(p))
                .ok_or_else(|| format!("{key} must be a share from 0 to 1, got {value:?}"))
        };
        match key {
            "drop" => faults.drop_deliveries = share()?,
            "duplicate" => faults.duplicate_deliveries = share()?,
            "bad-signature" => faults.bad_signature = share()?,
            "api-429" => faults.api_429 = share()?,
            "api-500" => faults.api_500 = share()?,
            "delay" => {
                faults.delay_deliveries_ms =
                    u64::try_from(parse_duration(value)?.as_millis()).unwrap_or(u64::MAX)
            }
            "seed" => {
                faults.seed = value
                    .parse()
                    .map_err(|_| format!("seed must be a whole number, got {value:?}"))?
            }
            _ => return Err(format!("unknown fault {key:?} (keys: {SPEC_KEYS})")),
        }
        Ok(())
    }
}

/// A fault applied to one webhook delivery attempt, as the attempt log records it (and the
/// sandbox lists it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppliedFault {
    /// The first attempt waited for the injected delay.
    Delayed,
    /// Nothing was sent, as if the endpoint were down.
    Dropped,
    /// The delivery was sent a second time, with the same webhook id.
    SentTwice,
    /// The delivery was signed with a key that is not the tenant's.
    BadSignature,
}

impl AppliedFault {
    /// Every fault, in the order an attempt applies them.
    pub const ALL: [Self; 4] = [
        Self::Delayed,
        Self::Dropped,
        Self::BadSignature,
        Self::SentTwice,
    ];

    /// The fault's name, as stored and printed (`delayed`, `dropped`, `sent_twice`,
    /// `bad_signature`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delayed => "delayed",
            Self::Dropped => "dropped",
            Self::SentTwice => "sent_twice",
            Self::BadSignature => "bad_signature",
        }
    }

    /// The fault named `name`, if one.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.as_str() == name.trim())
    }
}

/// Numbers each tenant's API requests since its faults were last set, for
/// [`Faults::api_fault`] (so the same faults fail the same requests of a run, however many
/// requests came before). Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct RequestCounter {
    counts: std::sync::Arc<std::sync::Mutex<std::collections::HashMap<String, u64>>>,
}

impl RequestCounter {
    /// The number of the tenant's next request under `faults`, from 1.
    pub fn next(&self, tenant_id: &str, faults: &Faults) -> u64 {
        let key = format!("{tenant_id} {faults:?}");
        let mut counts = self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !counts.contains_key(&key) {
            counts.retain(|k, _| !k.starts_with(&format!("{tenant_id} ")));
        }
        let count = counts.entry(key).or_insert(0);
        *count += 1;
        *count
    }
}

/// An API request answered with a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiFault {
    /// `429` with `Retry-After: 1`.
    TooManyRequests,
    /// `500 INTERNAL_ERROR`.
    InternalError,
}

/// A duration such as `500ms`, `30s`, `5m` or `1h`.
///
/// # Errors
/// A message saying what form is expected.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let bad = || format!("{text:?} is not a duration such as 500ms, 30s, 5m or 1h");
    let digits = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = text.split_at(digits);
    let number: u64 = number.parse().map_err(|_| bad())?;
    let millis = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(bad()),
    };
    Ok(Duration::from_millis(number.saturating_mul(millis)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_reads_every_fault_and_refuses_what_it_does_not_know() {
        let faults = Faults::parse_spec(
            "drop=0.2, duplicate=0.05,delay=30s,bad-signature=0.1,api-429=0.1,api-500=0.01,seed=7",
        )
        .expect("spec");
        assert_eq!(faults.drop_deliveries, 0.2);
        assert_eq!(faults.delay(), Duration::from_secs(30));
        assert_eq!(faults.seed, 7);
        assert!(!faults.is_off());
        assert!(Faults::parse_spec("").expect("empty").is_off());
        for bad in ["drop=2", "drop", "nope=1", "delay=5x", "seed=-1"] {
            assert!(Faults::parse_spec(bad).is_err(), "{bad}");
        }
        // Issue 44: spaces separate pairs as commas do, and an error names the pair.
        assert_eq!(
            Faults::parse_spec("api-429=0.1, api-500=0.01 seed=7"),
            Faults::parse_spec("api-429=0.1,api-500=0.01,seed=7")
        );
        assert_eq!(
            Faults::parse_spec("drop=0.2, api-500=2,seed=7"),
            Err(r#"pair 2, "api-500=2": api-500 must be a share from 0 to 1, got "2""#.to_owned())
        );
    }

    #[test]
    fn a_spec_reads_back_what_it_printed() {
        let faults = Faults::parse_spec("drop=0.2,api-500=0.01,delay=1500ms,seed=7").expect("spec");
        assert_eq!(faults.spec(), "drop=0.2,api-500=0.01,delay=1500ms,seed=7");
        assert_eq!(Faults::parse_spec(&faults.spec()), Ok(faults));
        let whole = Faults::parse_spec("delay=30s").expect("spec");
        assert_eq!(whole.spec(), "delay=30s,seed=0");
        assert_eq!(Faults::default().spec(), "off");
    }

    #[test]
    fn decisions_are_deterministic_and_near_their_share() {
        let faults = Faults {
            drop_deliveries: 0.2,
            seed: 42,
            ..Faults::default()
        };
        let ids: Vec<String> = (0..2_000).map(|n| format!("svc_call_{n}")).collect();
        let dropped = ids.iter().filter(|id| faults.drops(id)).count();
        assert!((300..500).contains(&dropped), "{dropped} of 2000");
        let again = ids.iter().filter(|id| faults.drops(id)).count();
        assert_eq!(dropped, again, "same seed, same calls");
        let other = Faults { seed: 43, ..faults };
        assert_ne!(
            ids.iter().map(|id| faults.drops(id)).collect::<Vec<_>>(),
            ids.iter().map(|id| other.drops(id)).collect::<Vec<_>>(),
            "another seed, other calls"
        );
        assert!(!Faults::default().drops("svc_call_1"), "off by default");
    }
}
