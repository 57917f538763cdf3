//! The calls the behaviours store: a practice call's detail from `svc-fixtures` with the id,
//! times and score each behaviour needs, its list row, and batches of them.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use svc_client::{CallId, RawCallDetail, RawCallRow};

use crate::{Batch, BatchContext, FetchedCall};

pub(super) fn at(text: &str) -> DateTime<Utc> {
    crate::time::parse_ts(text).expect("timestamp")
}

/// A practice call's detail from the fixture, with its id, `scoredAt`, `updatedAt` and score.
pub(super) fn detail(id: &str, scored_at: &str, updated_at: &str, score: u32) -> RawCallDetail {
    let mut body = svc_fixtures::bodies::call_roleplay();
    body["id"] = json!(id);
    body["scoredAt"] = json!(scored_at);
    body["endedAt"] = json!(scored_at);
    body["updatedAt"] = json!(updated_at);
    body["score"]["overallScore"] = json!(score);
    RawCallDetail::parse(body.to_string().as_bytes()).expect("a call detail")
}

/// The list row of a call whose detail is `detail`.
pub(super) fn row_of(detail: &RawCallDetail) -> RawCallRow {
    let mut row: Value = serde_json::from_str(&detail.json).expect("JSON");
    if let Some(map) = row.as_object_mut() {
        for key in [
            "status",
            "transcript",
            "score",
            "audioUrl",
            "audioUrlExpiresAt",
            "waveform",
            "createdAt",
            "updatedAt",
        ] {
            map.remove(key);
        }
    }
    RawCallRow {
        row: serde_json::from_value(row.clone()).expect("a call row"),
        json: row.to_string(),
    }
}

pub(super) fn id(text: &str) -> CallId {
    CallId::from_service(text)
}

/// A batch context with no ledger.
pub(super) fn no_ledger() -> BatchContext {
    BatchContext {
        run_id: None,
        now: at("2026-01-20T00:00:00Z"),
        ledger_since: None,
        missed_before: at("2026-01-19T23:30:00Z"),
    }
}

pub(super) fn batch(calls: Vec<RawCallDetail>, context: BatchContext) -> Batch {
    Batch {
        calls: calls
            .into_iter()
            .map(|detail| FetchedCall {
                row: Some(row_of(&detail)),
                detail,
            })
            .collect(),
        failures: Vec::new(),
        rows_to_fill: Vec::new(),
        context,
    }
}
