//! `svc-cli demo`: the whole loop in one command, on temporary files. A sandbox that loses
//! about a fifth of its webhooks and sends a few twice; `webhook serve`'s receiver writing
//! into a fresh store; a roster import; a few dozen practice calls (strong, weak and silent
//! reps, so both outcomes of `call.scored` occur); a batch of real calls from a dialer file,
//! one of them re-dispositioned afterwards (its score changes with no webhook); the retries
//! let run out; then `reconcile`, and a check that the store holds every scored call exactly
//! once: the lost deliveries recovered, the silent change found.
//!
//! [`run`] does it and returns a [`Summary`]; `summary` prints it as a story or as JSON. A kept
//! demo (`--keep DIR`) also leaves the store's HTML report in `DIR/report.html`.

mod scripts;
pub mod summary;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use chrono::Utc;
use futures_util::{StreamExt, TryStreamExt, stream};
use indicatif::ProgressBar;
use serde_json::Value;
use svc_contract::{Keyring, SigningSecret};
use svc_service::sandbox::{DeliveryRow, Disposal, Disposition, Faults, relative_to_now};
use tokio::net::TcpListener;

use crate::commands::roster::{plan, run as roster_run};
use crate::files::write_atomically;
use crate::output::Output;
use crate::receiver::{self, ReceiverConfig};
use crate::reconcile;
use crate::sandbox::{Sandbox, SandboxOptions};
pub use scripts::Rep;
use summary::{Deliveries, PracticeCalls, RealCalls, Redispositioned, StoreCheck, Summary};
use svc_client::{CallId, CallQuery, CallSource, Client, MintFor, RedeemRequest};
use svc_reconcile::Options as ReconcileOptions;
use svc_store::Store;

/// The roster the demo imports (also `fixtures/sandbox/roster.csv`).
const ROSTER: &str = include_str!("../../../fixtures/sandbox/roster.csv");
/// The dialer's records (also `fixtures/sandbox/dialer-records.jsonl`).
const DIALER_RECORDS: &str = include_str!("../../../fixtures/sandbox/dialer-records.jsonl");
/// The recordings the records name, relative to the records' directory.
const RECORDINGS: [(&str, &[u8]); 7] = [
    (
        "recordings/call-1.wav",
        include_bytes!("../../../fixtures/sandbox/recordings/call-1.wav"),
    ),
    (
        "recordings/call-2.wav",
        include_bytes!("../../../fixtures/sandbox/recordings/call-2.wav"),
    ),
    (
        "recordings/call-3.wav",
        include_bytes!("../../../fixtures/sandbox/recordings/call-3.wav"),
    ),
    (
        "recordings/call-4.wav",
        include_bytes!("../../../fixtures/sandbox/recordings/call-4.wav"),
    ),
    (
        "recordings/call-5.wav",
        include_bytes!("../../../fixtures/sandbox/recordings/call-5.wav"),
    ),
    (
        "recordings/call-6.wav",
        include_bytes!("../../../fixtures/sandbox/recordings/call-6.wav"),
    ),
    (
        "recordings/empty.wav",
        include_bytes!("../../../fixtures/sandbox/recordings/empty.wav"),
    ),
];
/// The path the demo's receiver takes deliveries on.
const WEBHOOK_PATH: &str = "/webhooks";
/// Practice calls run at once.
const CALLS_AT_ONCE: usize = 4;
/// The longest the demo waits for scoring, deliveries and their retries to settle.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(45);

/// What the demo runs.
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Keep the sandbox's database and the store in this directory (new or empty) instead of
    /// temporary files.
    pub keep: Option<PathBuf>,
    /// Practice calls to make.
    pub practice_calls: usize,
    /// The sandbox's faults.
    pub faults: Faults,
}

impl Default for DemoOptions {
    /// 30 practice calls; a fifth of the deliveries dropped, a tenth sent twice.
    fn default() -> Self {
        Self {
            keep: None,
            practice_calls: 30,
            faults: Faults {
                drop_deliveries: 0.2,
                duplicate_deliveries: 0.1,
                seed: 2026,
                ..Faults::default()
            },
        }
    }
}

/// Announces each phase: a progress bar on a terminal, a plain line otherwise.
struct Phases<'a> {
    out: &'a Output,
}

impl Phases<'_> {
    fn start(&self, what: &str, len: u64) -> ProgressBar {
        if self.out.progress {
            self.out.progress_bar(len, what)
        } else {
            self.out.note(&format!("demo: {what}"));
            ProgressBar::hidden()
        }
    }
}

/// Runs the demo and returns what happened; [`Summary::ok`] says whether the store ended up
/// holding every scored call exactly once.
///
/// # Errors
/// A step that could not run at all (a port, a file, the sandbox): the self-check's verdict is
/// in the summary, not an error.
pub async fn run(options: &DemoOptions, out: &Output) -> anyhow::Result<Summary> {
    let started = Instant::now();
    let temporary;
    let dir: PathBuf = match &options.keep {
        Some(dir) => {
            prepare_kept(dir)?;
            dir.clone()
        }
        None => {
            temporary = tempfile::tempdir().context("creating a temporary directory")?;
            temporary.path().to_owned()
        }
    };
    let phases = Phases { out };

    let bar = phases.start("starting the sandbox and the receiver", 2);
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding the receiver")?;
    let hook_url = format!(
        "http://{}{WEBHOOK_PATH}",
        listener.local_addr().context("receiver address")?
    );
    let sandbox = Sandbox::start(SandboxOptions {
        listen: "127.0.0.1:0".parse().context("loopback address")?,
        faults: Some(options.faults),
        webhook_url: Some(hook_url),
        webhook_retry_delay: Duration::from_secs(1),
        ..SandboxOptions::new(dir.join("sandbox.db"))
    })
    .await?;
    bar.inc(1);
    let client = sandbox.client()?;
    let store_path = dir.join("store.db");
    let store = Store::open_or_create(&store_path)?;
    let secret = SigningSecret::new(&sandbox.credentials.signing_secret)
        .map_err(|e| anyhow!("the sandbox's signing secret: {e}"))?;
    let (stop_receiver, receiver_stopped) = tokio::sync::oneshot::channel::<()>();
    let receiver = tokio::spawn(receiver::run(
        ReceiverConfig {
            store: store.clone(),
            keyring: Keyring::single(secret),
            path: WEBHOOK_PATH.to_owned(),
            client: Some(client.clone()),
            inbox_lease: svc_receiver::inbox::InboxPolicy::default().lease,
        },
        listener,
        async move {
            let _ = receiver_stopped.await;
        },
    ));
    receiver_ready(&store, &receiver).await?;
    bar.inc(1);
    bar.finish_and_clear();

    let agents = import_roster(&client, &dir, &phases).await?;
    let practice = practice_calls(&client, &agents, options.practice_calls, &phases).await?;
    let (mut real, real_call_ids) = real_calls(&sandbox, &dir, &phases).await?;

    let bar = phases.start("waiting for scoring, deliveries and their retries", 1);
    let deliveries = settle(&sandbox, &store, &practice.call_ids, &bar).await?;
    bar.finish_and_clear();

    let redispositioned = redisposition_one(&sandbox, &store, &real_call_ids, &deliveries).await?;
    real.redispositioned = redispositioned.clone();

    let bar = phases.start("reconciling", 1);
    let reconcile_options = ReconcileOptions {
        // The retries are over: a call with no webhook by now missed it.
        delivery_grace: Duration::ZERO,
        ..ReconcileOptions::default()
    };
    let reconciler = svc_reconcile::Reconciler::new(
        client.clone(),
        std::sync::Arc::new(store.clone()),
        reconcile_options,
    );
    let guard = reconciler
        .lock(Duration::ZERO)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let report = reconcile::run(&reconciler, Some(&guard), &bar).await;
    drop(guard);
    bar.finish_and_clear();

    let check = check_store(&client, &store).await?;
    let _ = stop_receiver.send(());
    receiver
        .await
        .context("the receiver panicked")?
        .context("the receiver failed")?;
    let base_url = sandbox.base_url.clone();
    sandbox.stop().await?;

    let kept = match &options.keep {
        Some(_) => Some(summary::Kept {
            report: write_report(&store, &dir).await?,
            dir: dir.clone(),
            base_url,
        }),
        None => None,
    };
    let delivery_counts = Deliveries::count(&deliveries, &options.faults, &check.listed);
    let summary = Summary::new(
        practice,
        real,
        delivery_counts,
        report,
        check,
        kept,
        started.elapsed(),
    );
    Ok(summary)
}

/// Writes the store's HTML report beside it (`report.html`), for a kept demo.
async fn write_report(store: &Store, dir: &Path) -> anyhow::Result<PathBuf> {
    let path = dir.join("report.html");
    let report = store
        .blocking(|s| crate::html_report::HtmlReport::build(s, None, Utc::now()))
        .await?;
    let out = path.clone();
    tokio::task::spawn_blocking(move || report.write(&out))
        .await
        .context("writing the report")??;
    Ok(path)
}

/// Waits until the receiver has opened the store's ledger: a call scored before that would
/// count as history (backfilled), not as a lost delivery.
async fn receiver_ready(
    store: &Store,
    receiver: &tokio::task::JoinHandle<anyhow::Result<()>>,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    loop {
        if store.blocking(Store::ledger_since_ms).await?.is_some() {
            return Ok(());
        }
        if receiver.is_finished() {
            bail!("the receiver stopped before it was ready");
        }
        if Instant::now() > deadline {
            bail!("the receiver was not ready within {SETTLE_TIMEOUT:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A `--keep` directory must be new or hold no demo yet: the self-check counts one run.
fn prepare_kept(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for name in ["sandbox.db", "store.db"] {
        if dir.join(name).exists() {
            bail!(
                "{} already holds a demo ({name}); --keep needs a new or empty directory",
                dir.display()
            );
        }
    }
    Ok(())
}

/// A registered demo rep.
#[derive(Debug, Clone)]
struct Agent {
    platform_agent_id: String,
    name: String,
}

async fn import_roster(
    client: &Client,
    dir: &Path,
    phases: &Phases<'_>,
) -> anyhow::Result<Vec<Agent>> {
    let path = dir.join("roster.csv");
    // Never through a link planted in the kept directory.
    write_atomically(&path, ROSTER.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    let plan = plan::read(&path)?;
    let bar = phases.start("importing the roster", plan.valid.len() as u64);
    let results = roster_run::execute(client, plan, 4, &bar)
        .await
        .map_err(|stopped| anyhow!(stopped.cause).context("importing the demo roster"))?;
    bar.finish_and_clear();
    let mut agents = Vec::new();
    for result in results {
        if result.outcome.is_failure() {
            bail!(
                "the demo roster's line {} was not imported: {}",
                result.row.line,
                result.message.unwrap_or_default()
            );
        }
        if let Some(id) = result.row.platform_agent_id {
            let name = [result.row.first_name, result.row.last_name]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" ");
            agents.push(Agent {
                platform_agent_id: id,
                name,
            });
        }
    }
    if agents.is_empty() {
        bail!("the demo roster registered no agent");
    }
    Ok(agents)
}

async fn practice_calls(
    client: &Client,
    agents: &[Agent],
    count: usize,
    phases: &Phases<'_>,
) -> anyhow::Result<PracticeCalls> {
    let bar = phases.start("practice calls", count as u64);
    let calls: Vec<(CallId, Rep)> = stream::iter(0..count)
        .map(|n| {
            let agent = &agents[n % agents.len()];
            let rep = Rep::for_call(n);
            let bar = &bar;
            async move {
                let call = practice_call(client, agent, rep).await?;
                bar.inc(1);
                Ok::<_, anyhow::Error>((call, rep))
            }
        })
        .buffer_unordered(CALLS_AT_ONCE)
        .try_collect()
        .await?;
    bar.finish_and_clear();
    Ok(PracticeCalls::new(calls))
}

/// Mints a token for `agent`, redeems it and talks as `rep` would.
async fn practice_call(client: &Client, agent: &Agent, rep: Rep) -> anyhow::Result<CallId> {
    let token = client
        .mint_session(&MintFor::PlatformAgentId(agent.platform_agent_id.clone()))
        .await
        .context("minting a session token")?;
    let session = client
        .redeem(
            &token.token,
            &RedeemRequest {
                drill_key: "ma-full-sale".to_owned(),
                difficulty: None,
                filters: None,
            },
        )
        .await
        .context("redeeming the session token")?;
    let finished =
        svc_client::live::run_call(&session, &rep.lines(&agent.name), Duration::from_secs(10))
            .await
            .context("the live practice call")?;
    Ok(finished.call_id)
}

/// Switches the roster's agencies on for real calls and ingests the dialer file, its
/// `startedAt` moved to the last hour ([`relative_to_now`], as `sandbox ingest-real
/// --relative-to-now` does), so the calls sit in the windows reconcile lists.
async fn real_calls(
    sandbox: &Sandbox,
    dir: &Path,
    phases: &Phases<'_>,
) -> anyhow::Result<(RealCalls, Vec<(String, String)>)> {
    let tenant = sandbox.credentials.tenant_id.as_str();
    let lines: Vec<&str> = DIALER_RECORDS
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect();
    let bar = phases.start("real calls from the dialer file", lines.len() as u64);
    for (path, bytes) in RECORDINGS {
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        write_atomically(&target, bytes)
            .with_context(|| format!("writing {}", target.display()))?;
    }
    let mut agencies: BTreeSet<String> = BTreeSet::new();
    let mut records = lines
        .iter()
        .map(|line| serde_json::from_str::<Value>(line).map_err(|e| e.to_string()))
        .collect::<Vec<_>>();
    relative_to_now(&mut records, Utc::now());
    let mut dispositions = Vec::with_capacity(lines.len());
    for record in &records {
        let record = record
            .as_ref()
            .map_err(|e| anyhow!("the demo's dialer file: {e}"))?;
        if let Some(platform_id) = record.get("platformAgencyId").and_then(Value::as_str)
            && !agencies.contains(platform_id)
        {
            sandbox
                .db
                .enable_real_calls(tenant, platform_id)
                .await
                .with_context(|| format!("switching {platform_id} on for real calls"))?;
            agencies.insert(platform_id.to_owned());
        }
        dispositions.push(
            record
                .get("disposition")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        );
    }
    let outcomes = sandbox
        .db
        .ingest_real_calls(&sandbox.config, tenant, dir, records)
        .await?;
    bar.inc(outcomes.len() as u64);
    bar.finish_and_clear();
    let mut real = RealCalls {
        records: outcomes.len(),
        ..RealCalls::default()
    };
    let mut stored = Vec::new();
    for (outcome, disposition) in outcomes.into_iter().zip(dispositions) {
        match outcome.disposal {
            Disposal::Stored {
                call_id,
                scored: true,
            } => {
                real.scored += 1;
                stored.push((call_id, disposition));
            }
            Disposal::Stored { scored: false, .. } => real.not_scored += 1,
            Disposal::Dropped(reason) => {
                *real.dropped.entry(reason.as_str().to_owned()).or_default() += 1;
            }
            Disposal::AlreadyIngested { .. } => real.already_ingested += 1,
            Disposal::Invalid(reason) => real.invalid.push(reason),
        }
    }
    Ok((real, stored))
}

/// Waits until every practice call has its outcome, no delivery of the tenant is pending (the
/// dropped ones have failed twice) and the receiver has recorded every delivered one.
async fn settle(
    sandbox: &Sandbox,
    store: &Store,
    practice: &[(CallId, Rep)],
    bar: &ProgressBar,
) -> anyhow::Result<Vec<DeliveryRow>> {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    let tenant = sandbox.credentials.tenant_id.clone();
    loop {
        let mut waiting = Vec::new();
        for (call_id, _) in practice {
            let state = sandbox.db.call_state(call_id.as_str()).await?;
            if !matches!(state.as_deref(), Some("scored" | "not_scored")) {
                waiting.push(format!("call {call_id} ({})", state.unwrap_or_default()));
            }
        }
        let deliveries = sandbox.db.deliveries(&tenant).await?;
        for delivery in &deliveries {
            if delivery.state == "pending" {
                waiting.push(format!("delivery {} (pending)", delivery.id));
            } else if delivery.state == "delivered" {
                let id = delivery.id.clone();
                let count = store.blocking(move |s| s.delivery_count(&id)).await?;
                if count == 0 {
                    waiting.push(format!("delivery {} (not yet in the store)", delivery.id));
                }
            }
        }
        bar.tick();
        if waiting.is_empty() {
            return Ok(deliveries);
        }
        if Instant::now() > deadline {
            bail!(
                "scoring and deliveries did not settle within {SETTLE_TIMEOUT:?}; still waiting \
                 for: {}",
                waiting.join(", ")
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A dispatcher corrects a real call's disposition after the fact: a scored real call whose
/// webhook reached the store (a `sale` when there is one) becomes `not_interested` (or `sale`,
/// when it was `not_interested`), and the service scores it again without a webhook.
/// Reconcile must notice.
async fn redisposition_one(
    sandbox: &Sandbox,
    store: &Store,
    real_calls: &[(String, String)],
    deliveries: &[DeliveryRow],
) -> anyhow::Result<Option<Redispositioned>> {
    let delivered: BTreeSet<&str> = deliveries
        .iter()
        .filter(|d| d.state == "delivered")
        .map(|d| d.call_id.as_str())
        .collect();
    // A sale moves the score most when it turns out not to be one.
    let rank = |disposition: &str| match disposition {
        "sale" => 0,
        "callback" => 1,
        "no_sale" => 2,
        _ => 3,
    };
    let mut candidates: Vec<&(String, String)> = real_calls.iter().collect();
    candidates.sort_by_key(|(_, disposition)| rank(disposition));
    for (call_id, disposition) in candidates {
        if !delivered.contains(call_id.as_str()) {
            continue;
        }
        let id = call_id.clone();
        if store.blocking(move |s| s.call_detail(&id)).await?.is_none() {
            continue;
        }
        let (after, name) = if disposition == "not_interested" {
            (Disposition::Sale, "sale")
        } else {
            (Disposition::NotInterested, "not_interested")
        };
        let changed = sandbox
            .db
            .redisposition(&sandbox.credentials.tenant_id, call_id, after)
            .await
            .map_err(|e| anyhow!("re-dispositioning {call_id}: {e}"))?;
        let overall = |score: &Value| score.get("overallScore").and_then(Value::as_f64);
        return Ok(Some(Redispositioned {
            call_id: call_id.clone(),
            disposition_before: changed.disposition_before,
            disposition_after: name.to_owned(),
            score_before: overall(&changed.score_before),
            score_after: overall(&changed.score),
        }));
    }
    Ok(None)
}

/// Lists every scored call of both sources from the API and compares with the store.
async fn check_store(client: &Client, store: &Store) -> anyhow::Result<StoreCheck> {
    let from = svc_reconcile::time::format_ts(Utc::now() - chrono::Duration::days(1));
    let mut listed = BTreeSet::new();
    for source in [CallSource::Roleplay, CallSource::RealCall] {
        let rows: Vec<_> = client
            .calls(CallQuery::new(source, from.clone()))
            .try_collect()
            .await?;
        listed.extend(rows.into_iter().map(|row| row.id.to_string()));
    }
    let ids: Vec<String> = listed.iter().cloned().collect();
    let known = store.blocking(move |s| s.known_calls(&ids)).await?;
    let missing: Vec<String> = listed
        .iter()
        .filter(|id| !known.contains_key(*id))
        .cloned()
        .collect();
    let stats = store
        .blocking(|s| s.stats(Utc::now(), svc_reconcile::MAX_FAILURE_ATTEMPTS))
        .await?;
    let stored: u64 = stats.calls.iter().map(|c| c.calls).sum();
    Ok(StoreCheck {
        listed,
        stored,
        missing,
        ledger: stats.deliveries.total,
    })
}
