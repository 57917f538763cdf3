//! Call rows and details kept exactly as the service sent them, beside their typed reading: a
//! local store keeps the service's own JSON (unknown fields and key order included) and indexes
//! the typed fields.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::error::ClientError;
use super::types::{CallDetail, CallRow, HasId, Page};

/// A `GET /calls` row: its JSON text as sent, and its typed reading.
#[derive(Debug, Clone, PartialEq)]
pub struct RawCallRow {
    /// The typed fields.
    pub row: CallRow,
    /// The row's JSON exactly as the service sent it.
    pub json: String,
}

impl HasId for RawCallRow {
    fn id(&self) -> &str {
        self.row.id.as_str()
    }
}

/// A `GET /calls/{callId}` body: its JSON text as sent (without insignificant whitespace), and
/// its typed reading.
#[derive(Debug, Clone, PartialEq)]
pub struct RawCallDetail {
    /// The typed fields.
    pub detail: CallDetail,
    /// The body exactly as the service sent it, whitespace between tokens removed (so it fits
    /// on one line); keys, their order and every value are untouched.
    pub json: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PageText<'a> {
    #[serde(borrow)]
    data: Vec<&'a RawValue>,
    #[serde(default)]
    next_cursor: Option<String>,
}

/// Reads a `GET /calls` page body.
pub(crate) fn page(bytes: &[u8]) -> Result<Page<RawCallRow>, ClientError> {
    let text: PageText<'_> = serde_json::from_slice(bytes)
        .map_err(|e| ClientError::Decode(format!("calls page: {e}")))?;
    let data = text
        .data
        .into_iter()
        .map(|raw| {
            let row: CallRow = serde_json::from_str(raw.get())
                .map_err(|e| ClientError::Decode(format!("call row: {e}")))?;
            Ok(RawCallRow {
                row,
                json: compact(raw.get()),
            })
        })
        .collect::<Result<_, ClientError>>()?;
    Ok(Page {
        data,
        next_cursor: text.next_cursor,
    })
}

impl RawCallDetail {
    /// Reads a `GET /calls/{callId}` body (one the client received, or one a caller captured
    /// or built, e.g. in a test).
    ///
    /// # Errors
    /// [`ClientError::Decode`] when the body is not UTF-8 or not a call detail.
    pub fn parse(bytes: &[u8]) -> Result<Self, ClientError> {
        let text = std::str::from_utf8(bytes)
            .map_err(|_| ClientError::Decode("call detail: the body is not UTF-8".into()))?;
        let detail: CallDetail = serde_json::from_str(text)
            .map_err(|e| ClientError::Decode(format!("call detail: {e}")))?;
        Ok(Self {
            detail,
            json: compact(text),
        })
    }
}

/// Removes the whitespace between the tokens of valid JSON text, leaving strings untouched.
///
/// Byte by byte outside strings; a string is copied whole up to its closing quote, found with
/// `memchr` (a call detail is mostly transcript text, so this is where the time goes). Only
/// ASCII whitespace between tokens is dropped, so the result stays valid UTF-8.
pub(crate) fn compact(json: &str) -> String {
    let bytes = json.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        if byte == b'"' {
            let end = string_end(bytes, at + 1);
            out.extend_from_slice(&bytes[at..end]);
            at = end;
        } else {
            if !matches!(byte, b' ' | b'\t' | b'\n' | b'\r') {
                out.push(byte);
            }
            at += 1;
        }
    }
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

/// The index just past the quote that closes the string whose content starts at `from` (the
/// end of `bytes` when it is not closed).
fn string_end(bytes: &[u8], mut from: usize) -> usize {
    while let Some(found) = bytes
        .get(from..)
        .and_then(|rest| memchr::memchr2(b'"', b'\\', rest))
    {
        let at = from + found;
        if bytes[at] == b'"' {
            return at + 1;
        }
        from = at + 2; // a backslash and the character it escapes
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_removes_whitespace_between_tokens_only() {
        let text = "{\n  \"a\" : \"x y\\\" \\n z\",\n  \"b\": [1, 2]\n}";
        assert_eq!(compact(text), "{\"a\":\"x y\\\" \\n z\",\"b\":[1,2]}");
    }

    #[test]
    fn compact_keeps_escapes_and_text_beyond_ascii() {
        let text = "[ \"a\\\\\" , \"\\\"\" ,\t\"é — 東京 \\u00e9\" ]";
        assert_eq!(compact(text), "[\"a\\\\\",\"\\\"\",\"é — 東京 \\u00e9\"]");
        assert_eq!(compact("\"open"), "\"open");
        assert_eq!(
            compact("\"ends in a backslash\\"),
            "\"ends in a backslash\\"
        );
    }

    proptest::proptest! {
        /// Any JSON value, pretty-printed then compacted, reads as serde_json's own compact
        /// text of it.
        #[test]
        fn compact_of_pretty_json_is_serde_json_compact(value in json_value()) {
            let pretty = serde_json::to_string_pretty(&value).expect("serialise");
            proptest::prop_assert_eq!(compact(&pretty), value.to_string());
        }
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = serde_json::Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            ".*".prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
                prop::collection::btree_map(".*", inner, 0..6)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    #[test]
    fn a_detail_keeps_unknown_keys_and_their_order() {
        let body = br#"{"zeta":1,"id":"svc_call_1","source":"real_call","durationSec":5,
            "score":{"overallScore":70,"summary":"s","feedback":"f","newKey":true},"alpha":null}"#;
        let raw = RawCallDetail::parse(body).expect("detail");
        assert_eq!(raw.detail.row.id.as_str(), "svc_call_1");
        assert!(raw.json.starts_with("{\"zeta\":1,\"id\""));
        assert!(raw.json.contains("\"newKey\":true"));
        assert!(raw.json.ends_with("\"alpha\":null}"));
    }

    #[test]
    fn a_detail_that_is_not_json_is_a_decode_error() {
        assert!(matches!(
            RawCallDetail::parse(b"<html>"),
            Err(ClientError::Decode(_))
        ));
    }
}
