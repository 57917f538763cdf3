//! The worked example of `svc-reconcile` (`reconcile-lib/examples/own_table.rs`), a tenant's own
//! `scored_calls` table behind the `Sink` trait, reconciling the real service: every scored
//! call lands in the table once, a rerun adds nothing, and a real call re-dispositioned with no
//! webhook is updated in place and counted as a silent change (issue 23).

#[allow(dead_code, unreachable_pub)]
#[path = "../../../../reconcile-lib/examples/own_table.rs"]
mod example;

use super::helpers::*;

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

    let report = example::reconcile_into(tables.clone(), harness.client.clone())
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

    let again = example::reconcile_into(tables.clone(), harness.client.clone())
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
    let first = example::reconcile_into(tables.clone(), harness.client.clone())
        .await
        .expect("first");
    assert_eq!(first.totals.new as usize, real.len());

    let moved = &real[0];
    let before = detail(&harness.service, moved).await;
    let at_ms = super::started_ms(&before) + super::DAY_MS;
    redisposition(&harness.service, moved, &real_score(12, 10.0), at_ms).await;
    let second = example::reconcile_into(tables, harness.client.clone())
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
