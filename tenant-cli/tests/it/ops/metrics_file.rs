//! `reconcile --metrics-file`: the run's figures in the Prometheus text format, right after a
//! run that recovered deliveries, and written atomically: a reader polling the file while it
//! is rewritten only ever sees a whole file.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use svc_cli::files::write_atomically;
use svc_contract::CallSource;
use svc_fixtures::calls::ROLEPLAY;

use super::samples;
use crate::reconcile::{days_ago, fake, hours_ago, record_webhook};

/// Reads `path` over and over until `stop`, checking each read with `whole`; returns how many
/// reads saw a file.
fn poll(path: &Path, stop: &AtomicBool, whole: impl Fn(&[u8]) -> bool) -> usize {
    let mut seen = 0;
    while !stop.load(Ordering::Relaxed) {
        match std::fs::read(path) {
            Ok(bytes) => {
                assert!(
                    whole(&bytes),
                    "a reader saw part of a file ({} bytes)",
                    bytes.len()
                );
                seen += 1;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => panic!("read: {e}"),
        }
    }
    seen
}

#[test]
fn a_concurrent_reader_sees_the_old_file_or_the_new_one_never_part_of_either() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("svc.prom");
    // Large enough that a plain rewrite would be caught half-way.
    let a = vec![b'a'; 1 << 20];
    let b = vec![b'b'; 1 << 20];
    write_atomically(&path, &a).expect("first write");
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (path, stop) = (path.clone(), Arc::clone(&stop));
        let (a, b) = (a.clone(), b.clone());
        std::thread::spawn(move || poll(&path, &stop, |read| read == a || read == b))
    };
    for i in 0..100 {
        write_atomically(&path, if i % 2 == 0 { &b } else { &a }).expect("rewrite");
    }
    stop.store(true, Ordering::Relaxed);
    let reads = reader.join().expect("the reader saw whole files only");
    assert!(reads > 0, "the reader read while files were replaced");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(left, ["svc.prom"], "no temporary file is left behind");
}

#[tokio::test]
async fn after_a_run_that_recovered_deliveries_the_file_holds_its_figures() {
    let fake = fake().await;
    let ids = fake
        .calls
        .add_many(ROLEPLAY, [hours_ago(2), hours_ago(3), hours_ago(4)]);
    // The receiver has written the ledger for days; only the first call's webhook came.
    record_webhook(
        &fake.store,
        "svc_call_older",
        CallSource::Roleplay,
        days_ago(10),
    );
    record_webhook(&fake.store, &ids[0], CallSource::Roleplay, hours_ago(2));
    let metrics = fake.sandbox.path("svc.prom");
    let metrics_arg = metrics.to_str().expect("utf-8").to_owned();
    let flags = [
        "--source",
        "roleplay",
        "--delivery-grace",
        "0s",
        "--metrics-file",
        &metrics_arg,
    ];

    // A reader polls the file through every run: each read is a whole file.
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (path, stop) = (metrics.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            poll(&path, &stop, |read| {
                let text = std::str::from_utf8(read).expect("utf-8");
                text.ends_with('\n')
                    && text.contains("svc_cli_reconcile_last_success_timestamp_seconds{")
                    && !samples(text).is_empty()
            })
        })
    };
    let before = chrono::Utc::now().timestamp();
    let run = fake.reconcile(&flags).await;
    assert_eq!(run.code, 3, "recovered deliveries: {run:?}");
    let figures = samples(&std::fs::read_to_string(&metrics).expect("the metrics file"));
    let value = |series: &str| {
        *figures
            .get(series)
            .unwrap_or_else(|| panic!("no {series} in {figures:#?}"))
    };
    assert_eq!(
        value(r#"svc_cli_reconcile_run_new_calls{source="roleplay"}"#),
        3.0
    );
    assert_eq!(
        value(r#"svc_cli_reconcile_run_recovered_calls{source="roleplay"}"#),
        2.0
    );
    assert_eq!(
        value(r#"svc_cli_reconcile_run_changed_silently_calls{source="roleplay"}"#),
        0.0
    );
    assert_eq!(
        value(r#"svc_cli_reconcile_run_failed_calls{source="roleplay"}"#),
        0.0
    );
    assert_eq!(value("svc_cli_reconcile_run_success"), 1.0);
    assert_eq!(value("svc_cli_reconcile_run_exit_code"), 3.0);
    assert!(value("svc_cli_reconcile_run_duration_seconds") >= 0.0);
    // The fake answers with this host's clock: no skew beyond the Date header's second.
    let skew = value("svc_cli_reconcile_clock_skew_seconds");
    assert!(skew.abs() < 2.0, "clock skew {skew} s");
    let finished = value("svc_cli_reconcile_run_timestamp_seconds");
    let success = value(r#"svc_cli_reconcile_last_success_timestamp_seconds{source="roleplay"}"#);
    let after = chrono::Utc::now().timestamp() as f64;
    assert!(
        (before as f64 - 1.0..=after + 1.0).contains(&finished),
        "{finished}"
    );
    assert!(
        (before as f64 - 1.0..=finished).contains(&success),
        "the run that just completed roleplay: {success}"
    );
    assert!(
        !figures.keys().any(|k| k.contains("real_call")),
        "only the listed source"
    );

    // Two more runs rewrite the file while the reader polls it.
    for _ in 0..2 {
        let rerun = fake.reconcile(&flags).await;
        assert_eq!(rerun.code, 0, "{rerun:?}");
    }
    stop.store(true, Ordering::Relaxed);
    let reads = reader.join().expect("the reader saw whole files only");
    assert!(reads > 0, "the reader read the file");
    let figures = samples(&std::fs::read_to_string(&metrics).expect("the metrics file"));
    assert_eq!(
        figures[r#"svc_cli_reconcile_run_recovered_calls{source="roleplay"}"#], 0.0,
        "the last run's figures: nothing recovered again"
    );
    assert_eq!(figures["svc_cli_reconcile_run_exit_code"], 0.0);
}

#[tokio::test]
async fn a_dry_run_with_a_metrics_file_leaves_the_file_as_it_is_and_says_so() {
    let fake = fake().await;
    fake.calls.add_many(ROLEPLAY, [hours_ago(2)]);
    let metrics = fake.sandbox.path("svc.prom");
    let metrics_arg = metrics.to_str().expect("utf-8").to_owned();
    let dry = fake
        .reconcile(&["--dry-run", "--metrics-file", &metrics_arg])
        .await;
    assert_eq!(dry.code, 0, "not a usage error: {dry:?}");
    assert!(!metrics.exists(), "nothing written by a dry run");
    assert!(
        dry.stderr.contains("dry run: the metrics file") && dry.stderr.contains("not written"),
        "{dry:?}"
    );

    let run = fake.reconcile(&["--metrics-file", &metrics_arg]).await;
    assert_eq!(run.code, 0, "{run:?}");
    let written = std::fs::read_to_string(&metrics).expect("the metrics file");
    let dry = fake
        .reconcile(&["--dry-run", "--metrics-file", &metrics_arg])
        .await;
    assert_eq!(dry.code, 0, "{dry:?}");
    assert_eq!(
        std::fs::read_to_string(&metrics).expect("the metrics file"),
        written,
        "the last real run's figures stay"
    );
    // The HELP of new calls says what the figures showed: recovered can exceed new.
    let help = written
        .lines()
        .find(|l| l.starts_with("# HELP svc_cli_reconcile_run_new_calls "))
        .expect("a HELP line");
    assert!(
        !help.contains("recovered and backfilled included"),
        "{help}"
    );
    assert!(help.contains("recovered can exceed new"), "{help}");
}
