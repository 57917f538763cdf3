//! Benchmarks of the onboarding path: validating a 10,000-row roster CSV, and importing 1,000
//! rows against the in-process fake roster (wiremock) at different `--jobs`. Not run by CI:
//! `cargo bench -p svc-cli --bench roster`.

use std::io::Write;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use indicatif::ProgressBar;
use svc_cli::commands::roster::{plan, run};
use svc_client::{ApiKey, Client, RetryPolicy};
use svc_fixtures::roster::Roster;
use wiremock::MockServer;

fn roster_csv(rows: usize, agencies: usize) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    writeln!(
        file,
        "platformAgencyId,agencyName,firstName,lastName,email,npn,platformAgentId,notes"
    )
    .expect("write");
    for i in 0..rows {
        let agency = i % agencies.max(1);
        writeln!(file, "ag-{agency},Agency {agency},First{i},Last{i},rep{i}@agency{agency}.example,{:08},rep-{i},x", 10_000_000 + i)
            .expect("write");
    }
    file
}

fn validate(c: &mut Criterion) {
    let file = roster_csv(10_000, 50);
    let mut group = c.benchmark_group("roster validate");
    group.throughput(Throughput::Elements(10_000));
    group.bench_function("10k rows", |b| {
        b.iter(|| plan::read(file.path()).expect("valid file"))
    });
    group.finish();
}

fn import(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let file = roster_csv(1_000, 20);
    let mut group = c.benchmark_group("roster import (fake roster)");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .throughput(Throughput::Elements(1_000));
    for jobs in [1usize, 8, 32] {
        group.bench_with_input(BenchmarkId::new("jobs", jobs), &jobs, |b, &jobs| {
            b.to_async(&runtime).iter(|| async {
                // A fresh roster each time: every row is a real registration.
                let server = MockServer::start().await;
                Roster::mount(&server).await;
                let client = Client::builder(svc_fixtures::base_url(&server))
                    .api_key(ApiKey::new(svc_fixtures::API_KEY))
                    .retry(RetryPolicy::none())
                    .build()
                    .expect("client");
                let plan = plan::read(file.path()).expect("valid file");
                let results = run::execute(&client, plan, jobs, &ProgressBar::hidden())
                    .await
                    .expect("import");
                assert_eq!(results.len(), 1_000);
            });
        });
    }
    group.finish();
}

criterion_group!(benches, validate, import);
criterion_main!(benches);
