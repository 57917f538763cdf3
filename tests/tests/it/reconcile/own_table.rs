//! The worked example of `svc-reconcile` (`reconcile-lib/examples/own_table.rs`), a tenant's own
//! `scored_calls` table behind the `Sink` trait, reconciling the real service: every scored
//! call lands in the table once, a rerun adds nothing, and a real call re-dispositioned with no
//! webhook is updated in place and counted as a silent change. The same tables also
//! receive the webhooks through `svc_reconcile::SinkHandler`: whichever path brings a call
//! first, it lands once and its rep is credited once; with no ledger of their own, the run
//! reports the calls whose webhook was lost as recovered.

// The webhooks example holds the reconcile example as its module `own_table`: one copy of
// the tenant's tables for both.
#[allow(dead_code, unreachable_pub)]
#[path = "../../../../reconcile-lib/examples/own_table_webhooks.rs"]
mod webhooks_example;
use webhooks_example::own_table as example;

use svc_reconcile::{Options, Outcome};

use super::helpers::*;
use super::webhooks::{Proxy, Receiver};

async fn table_rows(path: &std::path::Path) -> Vec<(String, f64)> {
    sql(path, |conn| {
        let mut query =
            conn.prepare("SELECT call_id, overall_score FROM scored_calls ORDER BY call_id")?;
        let rows = query
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<Vec<(String, f64)>, _>>()?;
        Ok(rows)
    })
    .await
}

#[tokio::test]
async fn a_tenants_own_table_receives_every_scored_call_once() {
    let harness = Harness::start().await;
    register_rep(&harness.client).await;
    let mut practice = vec![practice_call(&harness).await, practice_call(&harness).await];
    practice.sort();
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tenant.db");
    let tables = example::TenantTables::open(&path).expect("the tenant's tables");

    let report =
        example::reconcile_into(tables.clone(), harness.client.clone(), Options::default())
            .await
            .expect("a run");
    assert_eq!(report.totals.new, 2, "{report:#?}");
    let rows = table_rows(&path).await;
    let ids: Vec<String> = rows.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(ids, practice);
    for (id, score) in &rows {
        let served = detail(&harness.service, id).await;
        assert_eq!(
            Some(*score),
            served["score"]["overallScore"].as_f64(),
            "{id}"
        );
    }

    let again = example::reconcile_into(tables.clone(), harness.client.clone(), Options::default())
        .await
        .expect("a second run");
    assert_eq!(again.totals.new, 0);
    assert_eq!(table_rows(&path).await.len(), 2, "nothing twice");
}

#[tokio::test]
async fn a_redisposition_is_updated_in_the_tenants_table_as_a_silent_change() {
    let (harness, real) = super::reconciled_real_calls().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tenant.db");
    let tables = example::TenantTables::open(&path).expect("the tenant's tables");
    let first = example::reconcile_into(tables.clone(), harness.client.clone(), Options::default())
        .await
        .expect("first");
    assert_eq!(first.totals.new as usize, real.len());

    let moved = &real[0];
    let before = detail(&harness.service, moved).await;
    let at_ms = super::started_ms(&before) + super::DAY_MS;
    redisposition(&harness.service, moved, &real_score(12, 10.0), at_ms).await;
    let second = example::reconcile_into(tables, harness.client.clone(), Options::default())
        .await
        .expect("second");
    assert_eq!(second.totals.changed_silently, 1, "{second:#?}");
    assert_eq!(second.changed_call_ids, vec![moved.clone()]);
    let rows = table_rows(&path).await;
    let row = rows
        .iter()
        .find(|(id, _)| id == moved)
        .expect("still there once");
    assert_eq!(row.1, 12.0);
    assert_ne!(before["score"]["overallScore"].as_f64(), Some(12.0));
    assert_eq!(rows.len(), real.len());
}

/// Each call's row: (id, how it arrived).
async fn arrivals(path: &std::path::Path) -> Vec<(String, String)> {
    sql(path, |conn| {
        let mut query =
            conn.prepare("SELECT call_id, arrived_by FROM scored_calls ORDER BY call_id")?;
        let rows = query
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<Vec<(String, String)>, _>>()?;
        Ok(rows)
    })
    .await
}

async fn rep_credits(path: &std::path::Path) -> Vec<(String, i64)> {
    sql(path, |conn| {
        let mut query = conn.prepare("SELECT agent_id, calls FROM rep_scores ORDER BY agent_id")?;
        let rows = query
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))?
            .collect::<Result<Vec<(String, i64)>, _>>()?;
        Ok(rows)
    })
    .await
}

#[tokio::test]
async fn one_sink_fed_by_webhooks_and_reconcile_holds_each_call_once_and_credits_its_rep_once() {
    let harness = Harness::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tenant.db");
    let tables = example::TenantTables::open(&path).expect("the tenant's tables");
    let secret = harness.service.signing_secret().await;
    let with_webhooks = Options {
        webhooks_since: Some(chrono::Utc::now() - chrono::Duration::minutes(1)),
        delivery_grace: std::time::Duration::ZERO,
        ..Options::default()
    };

    // The tenant's webhook receiver over the same tables, behind a proxy that can lose
    // deliveries or their answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/webhooks", listener.local_addr().expect("addr"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(webhooks_example::serve_webhooks(
        tables.clone(),
        harness.client.clone(),
        svc_contract::SigningSecret::new(&secret).expect("the tenant's secret"),
        dir.path().join("tenant.db.inbox"),
        listener,
        async move {
            let _ = stopped.await;
        },
    ));
    let proxy = Proxy::start(Receiver::at(url.clone(), stop)).await;
    harness.service.set_webhook_url(&proxy.url).await;
    let agent = register_rep(&harness.client).await;

    let mut by_webhook = vec![practice_call(&harness).await, practice_call(&harness).await];
    // Stored from its webhook, whose answer is lost: the service sends it again.
    proxy.set_lose_answers(true);
    by_webhook.push(practice_call(&harness).await);
    wait_delivery(&harness.service, &by_webhook[2], "failed", 2).await;
    proxy.set_lose_answers(false);
    // Lost on both attempts: only reconcile brings these.
    proxy.set_down(true);
    let mut by_reconcile = vec![practice_call(&harness).await, practice_call(&harness).await];
    for id in &by_reconcile {
        wait_delivery(&harness.service, id, "failed", 2).await;
    }
    proxy.set_down(false);
    by_webhook.sort();
    by_reconcile.sort();
    let expected = by_webhook.clone();
    eventually("the delivered calls in the tenant's table", || {
        let (path, expected) = (path.clone(), expected.clone());
        async move {
            let ids: Vec<String> = arrivals(&path)
                .await
                .into_iter()
                .map(|(id, _)| id)
                .collect();
            (ids == expected).then_some(())
        }
    })
    .await;

    // The tables keep no ledger: the run counts the lost calls as recovered from what the
    // sink answers, given since when webhooks feed it (no grace: they were lost).
    let report = example::reconcile_into(
        tables.clone(),
        harness.client.clone(),
        with_webhooks.clone(),
    )
    .await
    .expect("a run");
    assert_eq!(
        report.totals.new, 2,
        "only the lost calls are new: {report:#?}"
    );
    assert_eq!(report.totals.recovered, 2, "{report:#?}");
    assert_eq!(
        super::sorted(
            report
                .recovered_call_ids
                .iter()
                .map(|id| id.to_string())
                .collect()
        ),
        by_reconcile
    );
    assert_eq!(report.outcome, Outcome::Found, "what a tenant alerts on");

    // A late webhook of a call reconcile stored (a fresh delivery, as a service retrying much
    // later would send) changes nothing.
    let late = &by_reconcile[0];
    let served = detail(&harness.service, late).await;
    let event = serde_json::json!({
        "event": "call.scored",
        "success": true,
        "callId": late,
        "source": "roleplay",
        "agentId": served["agentId"],
        "agencyId": served["agencyId"],
        "occurredAt": served["scoredAt"],
        "requestId": "req_late",
    });
    let sender = svc_fixtures::webhooks::Sender::new(url.clone(), secret.clone());
    let answer = sender
        .send(
            "wh_late_0001",
            &event.to_string(),
            chrono::Utc::now().timestamp(),
        )
        .await
        .expect("the late delivery");
    assert_eq!(answer.status, 200, "{answer:?}");
    // Its worker reads the call and stores nothing new; wait for the inbox to settle it.
    let inbox = dir.path().join("tenant.db.inbox");
    eventually("the late delivery to be handled", || {
        let inbox = inbox.clone();
        async move {
            let pending: i64 = sql(&inbox, |conn| {
                conn.query_row(
                    "SELECT COUNT(*) FROM webhook_inbox WHERE id = 'wh_late_0001' AND state = 'done'",
                    [],
                    |row| row.get(0),
                )
            })
            .await;
            (pending == 1).then_some(())
        }
    })
    .await;

    let listed = super::sorted(listed_ids(&harness.service, "roleplay").await);
    let rows = arrivals(&path).await;
    let ids: Vec<String> = rows.iter().map(|(id, _)| id.clone()).collect();
    assert_eq!(ids, listed, "every scored call, each once");
    for (id, arrived_by) in &rows {
        let expected = if by_reconcile.contains(id) {
            "reconcile"
        } else {
            "webhook"
        };
        assert_eq!(arrived_by, expected, "call {id}");
    }
    assert_eq!(
        rep_credits(&path).await,
        vec![(agent.id.to_string(), 5)],
        "the rep is credited once per call"
    );
    let again = example::reconcile_into(tables, harness.client.clone(), with_webhooks)
        .await
        .expect("a rerun");
    assert_eq!(again.totals.new, 0);
    assert_eq!(again.outcome, Outcome::Clean, "{again:#?}");
    assert_eq!(rep_credits(&path).await, vec![(agent.id.to_string(), 5)]);
    drop(proxy);
    serving
        .await
        .expect("the receiver task")
        .expect("the receiver stops cleanly");
}
