//! Which `Range` of an audio link's request is honoured (RFC 9110, sections 13.1.5 and 14).
//! The request's `Range` and `If-Range` are settled here and the file server
//! ([`tower_http::services::ServeFile`]) is handed at most one canonical byte range
//! (`bytes=<first>-<last>`, `bytes=<first>-` or `bytes=-<suffix>`), or none:
//!
//! | request | answer |
//! |---|---|
//! | one byte range that overlaps the file | `206` with that range (a suffix longer than the file, or a last byte past its end, is cut to the file, as RFC 9110 14.1.2 says) |
//! | one byte range wholly past the end, or a zero-length suffix (`bytes=-0`) | `416 RANGE_NOT_SATISFIABLE` with `Content-Range: bytes */<length>` |
//! | several ranges (`bytes=0-1,5-9`) | ignored: `200` with the whole file (no `multipart/byteranges`; a server may ignore `Range`, 14.2) |
//! | another unit (`items=0-1`), a malformed range (`bytes=a-b`, `bytes=5-2`) or two `Range` fields | ignored: `200` with the whole file (14.2: a server ignores a unit it does not understand, and may ignore an invalid one) |
//! | `If-Range` with an HTTP-date equal to the file's `Last-Modified` (to the second) | the range is honoured |
//! | `If-Range` with any other date, an entity tag (the link sends no `ETag`, so none matches), or something else | the range is ignored: `200` with the whole file (13.1.5) |
//! | a method other than `GET` (`HEAD`) | `Range` ignored: ranges are defined for `GET` only (14.2) |
//!
//! `Last-Modified` is a strong validator here: the archive is content-addressed, so the bytes
//! under one name never change (only its time moves, when another ingestion reuses it).

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderValue, Method, header};
use chrono::{DateTime, Utc};

/// Leaves on `request` only the `Range` the file server must honour for the file at `path`,
/// in canonical form, and no `If-Range` (settled here).
pub(super) async fn settle(request: &mut Request, path: &Path) {
    let metadata = tokio::fs::metadata(path).await.ok();
    let range = metadata.and_then(|metadata| {
        honoured(
            request.method(),
            request.headers(),
            metadata.len(),
            metadata.modified().ok(),
        )
    });
    let headers = request.headers_mut();
    headers.remove(header::RANGE);
    headers.remove(header::IF_RANGE);
    if let Some(range) = range {
        headers.insert(header::RANGE, range);
    }
}

/// The canonical `Range` to honour for a file of `len` bytes last modified at `modified`, or
/// `None` for the whole file.
fn honoured(
    method: &Method,
    headers: &HeaderMap,
    len: u64,
    modified: Option<SystemTime>,
) -> Option<HeaderValue> {
    if method != Method::GET {
        return None;
    }
    let mut ranges = headers.get_all(header::RANGE).iter();
    let (Some(range), None) = (ranges.next(), ranges.next()) else {
        return None;
    };
    let range = canonical(range.to_str().ok()?, len)?;
    let mut validators = headers.get_all(header::IF_RANGE).iter();
    match (validators.next(), validators.next()) {
        (None, _) => {}
        (Some(validator), None) if matches(validator, modified) => {}
        _ => return None,
    }
    HeaderValue::from_str(&range).ok()
}

/// One byte range in canonical form, or `None` when it is to be ignored (another unit,
/// several ranges, bad syntax). What is past the file stays past it, for the 416.
fn canonical(value: &str, len: u64) -> Option<String> {
    let (unit, set) = value.split_once('=')?;
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return None;
    }
    // A list may hold empty elements (RFC 9110 5.6.1); more than one range is ignored.
    let mut specs = set.split(',').map(str::trim).filter(|s| !s.is_empty());
    let (Some(spec), None) = (specs.next(), specs.next()) else {
        return None;
    };
    let (first, last) = spec.split_once('-')?;
    let (first, last) = (first.trim(), last.trim());
    if first.is_empty() {
        let suffix = position(last)?;
        // A suffix longer than the file is the whole file; `-0` stays unsatisfiable.
        return Some(if suffix > len {
            "bytes=0-".to_owned()
        } else {
            format!("bytes=-{suffix}")
        });
    }
    let first = position(first)?;
    if last.is_empty() {
        return Some(format!("bytes={first}-"));
    }
    let last = position(last)?;
    // A last position before the first is invalid, not unsatisfiable (14.1.1).
    (last >= first).then(|| format!("bytes={first}-{last}"))
}

/// A byte position: digits only (leading zeros allowed); one too large for `u64` is past any
/// file, so it saturates.
fn position(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(text.parse().unwrap_or(u64::MAX))
}

/// Whether an `If-Range` validator matches the file: an HTTP-date equal to its
/// `Last-Modified` to the second. An entity tag never does (no `ETag` is sent).
fn matches(validator: &HeaderValue, modified: Option<SystemTime>) -> bool {
    let Some(modified) = modified.and_then(|at| at.duration_since(UNIX_EPOCH).ok()) else {
        return false;
    };
    let Ok(text) = validator.to_str() else {
        return false;
    };
    let text = text.trim();
    if text.starts_with('"') || text.starts_with("W/") {
        return false;
    }
    http_date(text).is_some_and(|at| at.timestamp() == modified.as_secs() as i64)
}

/// An HTTP-date (RFC 9110 5.6.7): the IMF-fixdate servers send, or either obsolete form.
fn http_date(text: &str) -> Option<DateTime<Utc>> {
    let imf = text
        .strip_suffix(" GMT")
        .and_then(|t| chrono::NaiveDateTime::parse_from_str(t, "%a, %d %b %Y %H:%M:%S").ok());
    let rfc850 = || {
        text.strip_suffix(" GMT")
            .and_then(|t| chrono::NaiveDateTime::parse_from_str(t, "%A, %d-%b-%y %H:%M:%S").ok())
    };
    let asctime = || chrono::NaiveDateTime::parse_from_str(text, "%a %b %e %H:%M:%S %Y").ok();
    imf.or_else(rfc850)
        .or_else(asctime)
        .map(|naive| naive.and_utc())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const LEN: u64 = 25;

    /// Sun, 06 Nov 1994 08:49:37 GMT, RFC 9110's example date.
    fn modified() -> Option<SystemTime> {
        Some(UNIX_EPOCH + Duration::from_secs(784_111_777))
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.append(
                header::HeaderName::from_bytes(name.as_bytes()).expect("name"),
                HeaderValue::from_str(value).expect("value"),
            );
        }
        headers
    }

    fn get(pairs: &[(&str, &str)]) -> Option<String> {
        honoured(&Method::GET, &headers(pairs), LEN, modified())
            .map(|v| v.to_str().expect("ascii").to_owned())
    }

    #[test]
    fn one_byte_range_is_honoured_in_canonical_form() {
        for (range, canonical) in [
            ("bytes=4-11", "bytes=4-11"),
            ("Bytes = 04-011", "bytes=4-11"),
            ("bytes=4-", "bytes=4-"),
            ("bytes=-4", "bytes=-4"),
            ("bytes=-99", "bytes=0-"),
            ("bytes=, 4-11 ,", "bytes=4-11"),
            // Past the end stays past it: the file server answers 416.
            ("bytes=99999999-", "bytes=99999999-"),
            (
                "bytes=99999999999999999999999-",
                "bytes=18446744073709551615-",
            ),
            ("bytes=-0", "bytes=-0"),
        ] {
            assert_eq!(
                get(&[("range", range)]).as_deref(),
                Some(canonical),
                "{range}"
            );
        }
    }

    #[test]
    fn several_ranges_another_unit_or_bad_syntax_are_ignored() {
        for range in [
            "bytes=0-1,5-9",
            "bytes=0-1, -3",
            "items=0-1",
            "bytes 0-1",
            "bytes=a-b",
            "bytes=5-2",
            "bytes=-",
            "bytes=",
            "bytes=+1-2",
        ] {
            assert_eq!(get(&[("range", range)]), None, "{range}");
        }
        assert_eq!(get(&[("range", "bytes=0-1"), ("range", "bytes=2-3")]), None);
        assert_eq!(
            honoured(
                &Method::HEAD,
                &headers(&[("range", "bytes=0-1")]),
                LEN,
                modified()
            ),
            None
        );
    }

    #[test]
    fn if_range_keeps_the_range_only_for_the_files_own_date() {
        let range = ("range", "bytes=4-11");
        for same in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
        ] {
            assert_eq!(
                get(&[range, ("if-range", same)]).as_deref(),
                Some("bytes=4-11"),
                "{same}"
            );
        }
        for other in [
            "Sun, 06 Nov 1994 08:49:38 GMT",
            "Sun, 06 Nov 1994 08:49:36 GMT",
            "\"an-etag\"",
            "W/\"an-etag\"",
            "yesterday",
        ] {
            assert_eq!(get(&[range, ("if-range", other)]), None, "{other}");
        }
        let same = ("if-range", "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(get(&[range, same, same]), None, "two validators");
        assert_eq!(
            honoured(&Method::GET, &headers(&[range, same]), LEN, None),
            None,
            "no known modification time"
        );
    }
}
