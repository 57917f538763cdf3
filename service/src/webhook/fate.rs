//! What became of one webhook, read from its delivery row and attempt log: delivered (by which
//! attempt), lost for good, or still pending. The sandbox's per-webhook view
//! ([`crate::sandbox::SandboxDb::webhooks`]) is built on it.
//!
//! The fate is read from the attempts first: whichever attempt got a `2xx` in time delivered
//! the webhook, whatever its number (a first attempt, the retry, or an attempt made later by
//! hand). Only without one does the delivery's state decide: `pending` while an attempt is
//! still due (the first, or the single retry the contract allows, about 5 minutes after a
//! failed first attempt), otherwise lost: after two failures the service never sends the
//! event again (contract, section 6), and only reconciliation finds the call.

use super::client::answered_2xx;
use crate::db::DeliveryRow;

/// The fate of one webhook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WebhookFate {
    /// An attempt got a `2xx` in time: the first such attempt's number (1 for the first).
    Delivered {
        /// The attempt that delivered it.
        attempt: u32,
    },
    /// Every attempt failed (dropped, refused, timed out) and none is left to make.
    Lost,
    /// An attempt is still due: the first (not made yet, or put off by an injected delay) or
    /// the retry of a failed first attempt.
    Pending,
}

impl WebhookFate {
    /// The fate of `delivery`, from its attempts and its state.
    pub fn of(delivery: &DeliveryRow) -> Self {
        let delivered_by = (1_u32..)
            .zip(&delivery.attempts)
            .find(|(_, attempt)| answered_2xx(attempt.status, attempt.error.as_deref()))
            .map(|(number, _)| number);
        match (delivered_by, delivery.state.as_str()) {
            (Some(attempt), _) => Self::Delivered { attempt },
            (None, "pending") => Self::Pending,
            // The outbox marks a delivery `delivered` only after a 2xx it logged; should the
            // log lack it, the last attempt is the one that did it.
            (None, "delivered") => Self::Delivered {
                attempt: u32::try_from(delivery.attempts.len()).unwrap_or(u32::MAX),
            },
            (None, _) => Self::Lost,
        }
    }

    /// Its name, as listed: `delivered`, `lost` or `pending`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Delivered { .. } => "delivered",
            Self::Lost => "lost",
            Self::Pending => "pending",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::AttemptLog;

    fn attempt(status: Option<u16>, error: Option<&str>) -> AttemptLog {
        AttemptLog {
            attempted_at: 0,
            url: Some("http://127.0.0.1:9/hook".to_owned()),
            status,
            latency_ms: 3,
            error: error.map(str::to_owned),
            faults: Vec::new(),
            resend: false,
        }
    }

    fn delivery(state: &str, attempts: Vec<AttemptLog>) -> DeliveryRow {
        DeliveryRow {
            id: "wh_1".to_owned(),
            tenant_id: "ten_1".to_owned(),
            call_id: "svc_call_1".to_owned(),
            state: state.to_owned(),
            next_attempt_at: None,
            created_at: 0,
            attempts,
        }
    }

    #[test]
    fn a_2xx_delivers_whichever_attempt_got_it() {
        let refused = attempt(Some(401), None);
        let dropped = attempt(None, Some("fault injection: delivery dropped"));
        let ok = attempt(Some(204), None);
        assert_eq!(
            WebhookFate::of(&delivery("delivered", vec![ok.clone()])),
            WebhookFate::Delivered { attempt: 1 }
        );
        assert_eq!(
            WebhookFate::of(&delivery("delivered", vec![refused.clone(), ok.clone()])),
            WebhookFate::Delivered { attempt: 2 }
        );
        // An attempt made after the retry (by hand) that got a 2xx delivers it too, even
        // where the row still reads `failed`.
        assert_eq!(
            WebhookFate::of(&delivery("failed", vec![dropped.clone(), refused.clone(), ok])),
            WebhookFate::Delivered { attempt: 3 }
        );
    }

    #[test]
    fn two_failures_are_lost_and_a_due_attempt_is_pending() {
        let refused = attempt(Some(500), None);
        let timed_out = attempt(None, Some("timed out after 10 s"));
        assert_eq!(
            WebhookFate::of(&delivery("failed", vec![refused.clone(), timed_out])),
            WebhookFate::Lost
        );
        assert_eq!(
            WebhookFate::of(&delivery("pending", vec![refused])),
            WebhookFate::Pending,
            "the retry is still due"
        );
        assert_eq!(
            WebhookFate::of(&delivery("pending", Vec::new())),
            WebhookFate::Pending,
            "not attempted yet"
        );
        // A 200 that came with an error (the answer came after the deadline) is a failure.
        let late = attempt(Some(200), Some("timed out after 10 s"));
        assert_eq!(
            WebhookFate::of(&delivery("failed", vec![late.clone(), late])),
            WebhookFate::Lost
        );
    }
}
