//! The ledger of deliveries: recorded once per webhook id, how a call reached the store, the
//! grace period, and a delivered call recorded together with its delivery.

use super::*;

#[test]
fn a_delivery_is_recorded_once_per_webhook_id_and_starts_the_ledger() {
    on_each_backend(
        "a_delivery_is_recorded_once_per_webhook_id_and_starts_the_ledger",
        |store| {
            assert_eq!(store.ledger_since_ms().expect("since"), None);
            let scored = event("svc_call_1", true);
            assert!(record(store, "wh_1", &scored, "2026-03-01T10:05:31.000Z"));
            assert!(
                !record(store, "wh_1", &scored, "2026-03-01T10:10:31.000Z"),
                "a duplicate"
            );
            assert_eq!(store.delivery_count("wh_1").expect("count"), 1);
            assert_eq!(
                store.ledger_since_ms().expect("since"),
                svc_reconcile::time::ms(Some("2026-03-01T10:05:31.000Z"))
            );
            let failed = event("svc_call_2", false);
            assert!(record(store, "wh_2", &failed, "2026-03-01T11:00:00.000Z"));
            let kept = texts(
                store,
                "SELECT reason, reason_message FROM deliveries WHERE webhook_id = 'wh_2'",
            );
            let (reason, message) = (kept[0].clone(), kept[1].clone());
            assert_eq!(
                (reason.as_str(), message.as_str()),
                ("SCORING_INCOMPLETE", "rep never spoke")
            );
        },
    );
}

#[test]
fn how_a_call_reached_the_store_follows_the_ledger_and_the_grace_period() {
    on_each_backend(
        "how_a_call_reached_the_store_follows_the_ledger_and_the_grace_period",
        |store| {
            // The ledger started before the calls were scored (10:05).
            let since = svc_reconcile::time::ms(Some("2026-03-01T09:00:00.000Z"));
            let delivered = detail_json("svc_call_d", "roleplay", "2026-03-01T10:05:00.000Z", 70.0);
            record(
                store,
                "wh_d",
                &event("svc_call_d", true),
                "2026-03-01T10:05:31.000Z",
            );
            let missed = detail_json("svc_call_m", "roleplay", "2026-03-01T10:05:00.000Z", 70.0);
            let fresh = detail_json("svc_call_f", "roleplay", "2026-03-01T10:05:00.000Z", 70.0);
            let old = detail_json("svc_call_o", "roleplay", "2026-03-01T08:00:00.000Z", 70.0);
            let stored = store
                .store_calls(
                    &[
                        (None, detail(&delivered)),
                        (None, detail(&missed)),
                        (None, detail(&old)),
                    ],
                    &writer(AFTER_SCORING, since),
                )
                .expect("store");
            assert_eq!(
                stored,
                [
                    Stored::New(Arrival::Webhook),
                    Stored::New(Arrival::Recovered),
                    Stored::New(Arrival::Backfill),
                ]
            );
            // Scored after the grace cutoff: the webhook may still come.
            let stored = store
                .store_calls(
                    &[(None, detail(&fresh))],
                    &writer(AFTER_SCORING - 120_000, since),
                )
                .expect("store");
            assert_eq!(stored, [Stored::New(Arrival::Awaiting)]);
            // Nothing arrives. A run over the other source leaves it, as it would not report it.
            assert!(
                store
                    .settle_awaiting(AFTER_SCORING, 2, "x", &["real_call"])
                    .expect("settle")
                    .is_empty(),
                "left for a run over its own source"
            );
            // A later run over its source settles it as recovered.
            let recovered = store
                .settle_awaiting(AFTER_SCORING, 2, "2026-03-01T11:00:00.000Z", &["roleplay"])
                .expect("settle");
            assert_eq!(
                recovered,
                [("svc_call_f".to_owned(), "roleplay".to_owned())]
            );
            assert!(
                store
                    .settle_awaiting(AFTER_SCORING, 3, "x", &["roleplay"])
                    .expect("settle")
                    .is_empty(),
                "settled once"
            );
        },
    );
}

#[test]
fn a_webhook_arriving_in_the_grace_period_marks_the_call_delivered() {
    on_each_backend(
        "a_webhook_arriving_in_the_grace_period_marks_the_call_delivered",
        |store| {
            let since = Some(0);
            let fresh = detail_json("svc_call_f", "roleplay", "2026-03-01T10:05:00.000Z", 70.0);
            store
                .store_calls(&[(None, detail(&fresh))], &writer(0, since))
                .expect("store");
            record(
                store,
                "wh_f",
                &event("svc_call_f", true),
                "2026-03-01T10:06:00.000Z",
            );
            assert!(
                store
                    .settle_awaiting(AFTER_SCORING, 2, "x", &["roleplay"])
                    .expect("settle")
                    .is_empty(),
                "delivered, not recovered"
            );
            let delivery =
                texts(store, "SELECT delivery FROM calls WHERE id = 'svc_call_f'").remove(0);
            assert_eq!(delivery, "webhook");
        },
    );
}

#[test]
fn a_delivered_call_and_its_delivery_are_recorded_together_and_count_as_delivered() {
    on_each_backend(
        "a_delivered_call_and_its_delivery_are_recorded_together_and_count_as_delivered",
        |store| {
            let value = detail_json("svc_call_1", "roleplay", "2026-03-01T10:05:30.000Z", 81.0);
            let scored = event("svc_call_1", true);
            let body = serde_json::to_vec(&scored).expect("body");
            let delivery = NewDelivery {
                webhook_id: "wh_1",
                event: &scored,
                body: &body,
                verified_at: "2026-03-01T10:05:31.000Z",
            };
            let webhook_writer = Writer {
                by: "webhook",
                run_id: None,
                now: "2026-03-01T10:05:32.000Z".into(),
                ledger_since_ms: None,
                missed_before_ms: i64::MIN,
            };
            let first = store
                .record_delivered_call(&delivery, &detail(&value), &webhook_writer)
                .expect("stored");
            assert_eq!(first, Stored::New(Arrival::Webhook));
            let again = store
                .record_delivered_call(&delivery, &detail(&value), &webhook_writer)
                .expect("handed over again");
            assert_eq!(again, Stored::Unchanged);
            assert_eq!(store.delivery_count("wh_1").expect("count"), 1);
            assert_eq!(
                texts(store, "SELECT delivery FROM calls WHERE id = 'svc_call_1'"),
                vec!["webhook".to_owned()]
            );
            // Reconcile listing it later finds it held.
            let later = store
                .store_calls(
                    &[(Some(row(&value)), detail(&value))],
                    &writer(AFTER_SCORING, Some(0)),
                )
                .expect("reconcile");
            assert_eq!(later, vec![Stored::Unchanged]);
        },
    );
}
