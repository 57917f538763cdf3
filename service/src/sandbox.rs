//! The operator's side of a sandbox, as a small API: what the tenant tooling (`svc-cli sandbox`,
//! its rep console and `svc-cli demo`) does to a running service besides calling its HTTP API.
//!
//! [`run`](crate::run) serves the API; [`SandboxDb`] is the handle on the same database for
//! the steps no endpoint offers (contract section 1: real calls are "arranged out of band with
//! the service operator"): provision the one tenant, set its faults and webhook URL, switch an
//! agency on for real calls, ingest a dialer file, re-disposition a real call, and read a
//! call's state, the webhooks (each with its fate: delivered, lost for good, pending) and their
//! attempts (with the faults injected into each), and what is left to send, to know when scoring
//! and delivery have settled; trigger scored calls ([`SandboxDb::trigger`]) and ask the running
//! sandbox to resend deliveries ([`SandboxDb::request_resends`]).
//! [`operate`] runs the operator's real-call steps (`svc-service agency …` and `calls …`, with
//! their printed results and exit-code errors) from a typed [`OperatorStep`]: the caller's
//! command line converts its own flags into it.
//!
//! Everything else of the crate (its database layer, ingestion, scoring, the outbox) is
//! internal; the feature `internals` opens it for the workspace's own tests only.

use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, Utc};

use serde_json::Value;

use crate::clock::Clock;
use crate::db::{Db, DbError, NewTenant, ResendRefused, TenantChange};
use crate::realcall::audio::Archive;
use crate::realcall::ingest::{Ingest, IngestError};
use crate::realcall::redisposition::RedispositionError;

pub use crate::config::Config;
pub use crate::credentials::{ApiKey, SigningSecret};
pub use crate::db::{AttemptLog, Backlog, DeliveryRow, Rubric};
pub use crate::faults::{AppliedFault, Faults};
pub use crate::operator::step::{OperatorStep, operate};
pub use crate::operator::target::OperatorTarget;
pub use crate::operator::{Reported, Temporary, Usage};
pub use crate::realcall::ingest::{Disposal, Dropped, RecordOutcome};
pub use crate::realcall::redisposition::Redisposed;
pub use crate::realcall::replay::relative_to_now;
pub use crate::scoring::real_call::Disposition;
pub use crate::trigger::{
    MAX_COUNT as MAX_TRIGGER_COUNT, NotScoredCause, Trigger, TriggerError, TriggerSource, Triggered,
};
pub use crate::webhook::fate::WebhookFate;

/// Why an operator step failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// The service's database failed.
    #[error(transparent)]
    Db(#[from] DbError),
    /// The tenant is not in the database.
    #[error("the sandbox tenant {0} is gone")]
    TenantGone(String),
    /// The tenant has no agency with this platform id.
    #[error("the roster has no agency {0}")]
    NoAgency(String),
    /// The dialer records could not be ingested.
    #[error(transparent)]
    Ingest(#[from] IngestError),
    /// The re-disposition was refused.
    #[error(transparent)]
    Redisposition(#[from] RedispositionError),
}

/// A tenant created by [`SandboxDb::create_tenant`]: its id and, shown this once, its key and
/// signing secret (their `Debug` is redacted).
#[derive(Debug, Clone)]
pub struct NewCredentials {
    /// `ten_…`.
    pub tenant_id: String,
    /// The tenant's API key.
    pub api_key: ApiKey,
    /// The tenant's webhook signing secret.
    pub signing_secret: SigningSecret,
}

/// The settings of the sandbox's tenant that carry over from one start to the next.
#[derive(Debug, Clone, PartialEq)]
pub struct InForce {
    /// The faults injected.
    pub faults: Faults,
    /// Where webhooks go; `None`: nowhere (nothing is sent and nothing is queued, contract
    /// section 6).
    pub webhook_url: Option<String>,
}

/// One webhook attempt the sandbox made for its tenant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookAttempt {
    /// The delivery's `wh_…` id (`X-Service-Webhook-Id`), the same on each of its attempts.
    pub webhook_id: String,
    /// The call the delivery announces.
    pub call_id: String,
    /// 1 for the first attempt, 2 for the retry.
    pub attempt: u32,
    /// When it was made.
    pub attempted_at: DateTime<Utc>,
    /// Where it went (none when the tenant had no webhook URL).
    pub url: Option<String>,
    /// The HTTP status answered, if an answer came.
    pub status: Option<u16>,
    /// Milliseconds until the answer or the failure.
    pub latency_ms: i64,
    /// Why it failed, if it did.
    pub error: Option<String>,
    /// The faults injected into it.
    pub faults: Vec<AppliedFault>,
    /// Whether it was a resend asked for with [`SandboxDb::request_resends`].
    pub resend: bool,
}

impl WebhookAttempt {
    /// Whether it was answered 2xx.
    pub fn succeeded(&self) -> bool {
        self.error.is_none() && self.status.is_some_and(|s| (200..300).contains(&s))
    }

    fn from_log(webhook_id: String, call_id: String, attempt: u32, log: AttemptLog) -> Self {
        Self {
            webhook_id,
            call_id,
            attempt,
            attempted_at: DateTime::from_timestamp_millis(log.attempted_at)
                .unwrap_or(DateTime::UNIX_EPOCH),
            url: log.url,
            status: log.status,
            latency_ms: log.latency_ms,
            error: log.error,
            faults: log.faults,
            resend: log.resend,
        }
    }
}

/// Which deliveries to resend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResendWhich {
    /// These, by `wh_…` id.
    Ids(Vec<String>),
    /// Every delivery whose last attempt was not answered 2xx.
    Failed,
}

/// Why no resend was asked for.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResendError {
    /// No delivery of the tenant has this id.
    #[error(
        "no webhook {0} among the sandbox's deliveries (`svc-cli sandbox deliveries` lists them)"
    )]
    UnknownWebhook(String),
    /// The tenant has no webhook URL: a resend would send nothing.
    #[error("the sandbox has no webhook URL: restart it with --webhook-url URL, then resend")]
    NoWebhookUrl,
    /// The service's database failed.
    #[error(transparent)]
    Db(#[from] DbError),
}

/// A resend asked for, to follow with [`SandboxDb::resends`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResendTicket(i64);

/// A resend asked for and, once the running sandbox made it, its attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resend {
    /// The delivery's `wh_…` id.
    pub webhook_id: String,
    /// The attempt, once made (its `resend` is true).
    pub attempt: Option<WebhookAttempt>,
}

/// One webhook the sandbox queued for its tenant (a `call.scored` event, under one `wh_…` id
/// on every attempt): what became of it, and each attempt made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// Its `wh_…` id (`X-Service-Webhook-Id`).
    pub webhook_id: String,
    /// The call it announces.
    pub call_id: String,
    /// When it was queued (the call's outcome).
    pub queued_at: DateTime<Utc>,
    /// Delivered (by which attempt), lost for good, or pending.
    pub fate: WebhookFate,
    /// When its next attempt is due, while pending (an injected delay or the retry).
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// Its attempts, first first.
    pub attempts: Vec<WebhookAttempt>,
}

/// The attempts of `webhooks`, oldest first (by time, then webhook id and attempt number).
pub fn attempts_in_order(webhooks: Vec<Webhook>) -> Vec<WebhookAttempt> {
    let mut attempts: Vec<WebhookAttempt> = webhooks.into_iter().flat_map(|w| w.attempts).collect();
    attempts.sort_by(|a, b| {
        (a.attempted_at, &a.webhook_id, a.attempt).cmp(&(b.attempted_at, &b.webhook_id, b.attempt))
    });
    attempts
}

/// How often [`SandboxDb::wait_until_idle`] looks at the backlog.
const IDLE_POLL: Duration = Duration::from_millis(100);

/// The operator's handle on a sandbox's database (cheap to clone).
#[derive(Debug, Clone)]
pub struct SandboxDb {
    db: Db,
}

impl SandboxDb {
    /// Opens (and creates or migrates) the database at `path`.
    ///
    /// # Errors
    /// A file that cannot be opened, or is not a service database.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, SandboxError> {
        Ok(Self {
            db: Db::open(path).await?,
        })
    }

    /// Whether the database holds tenant `tenant_id`.
    ///
    /// # Errors
    /// A database error.
    pub async fn holds_tenant(&self, tenant_id: &str) -> Result<bool, SandboxError> {
        Ok(self.db.tenant(tenant_id).await?.is_some())
    }

    /// Whether the database holds any tenant.
    ///
    /// # Errors
    /// A database error.
    pub async fn has_tenants(&self) -> Result<bool, SandboxError> {
        Ok(!self.db.list_tenants().await?.is_empty())
    }

    /// Creates a tenant named `name` with a new key and signing secret, the webhook URL (none
    /// when blank) and the faults given.
    ///
    /// # Errors
    /// A database error.
    pub async fn create_tenant(
        &self,
        name: &str,
        webhook_url: Option<String>,
        faults: Faults,
    ) -> Result<NewCredentials, SandboxError> {
        let key = ApiKey::generate();
        let secret = SigningSecret::generate();
        let tenant_id = crate::ids::tenant_id();
        self.db
            .create_tenant(NewTenant {
                id: tenant_id.clone(),
                webhook_url: webhook_url.filter(|u| !u.trim().is_empty()),
                signing_secret: secret.clone(),
                faults,
                now_ms: chrono::Utc::now().timestamp_millis(),
                ..NewTenant::new(name, key.hash())
            })
            .await?;
        Ok(NewCredentials {
            tenant_id,
            api_key: key,
            signing_secret: secret,
        })
    }

    /// Sets the faults the service injects for `tenant_id`.
    ///
    /// # Errors
    /// A database error, or no such tenant.
    pub async fn set_faults(&self, tenant_id: &str, faults: Faults) -> Result<(), SandboxError> {
        self.change(tenant_id, TenantChange::Faults(faults)).await
    }

    /// Sets (or, with `None`, clears) the webhook URL of `tenant_id`.
    ///
    /// # Errors
    /// A database error, or no such tenant.
    pub async fn set_webhook_url(
        &self,
        tenant_id: &str,
        url: Option<String>,
    ) -> Result<(), SandboxError> {
        self.change(tenant_id, TenantChange::WebhookUrl(url)).await
    }

    /// The faults and webhook URL in force for `tenant_id` (what the sandbox says at start).
    ///
    /// # Errors
    /// A database error, or no such tenant.
    pub async fn in_force(&self, tenant_id: &str) -> Result<InForce, SandboxError> {
        let tenant = self
            .db
            .tenant(tenant_id)
            .await?
            .ok_or_else(|| SandboxError::TenantGone(tenant_id.to_owned()))?;
        Ok(InForce {
            faults: tenant.faults,
            webhook_url: tenant.webhook_url,
        })
    }

    async fn change(&self, tenant_id: &str, change: TenantChange) -> Result<(), SandboxError> {
        match self.db.update_tenant(tenant_id, change).await? {
            Some(_) => Ok(()),
            None => Err(SandboxError::TenantGone(tenant_id.to_owned())),
        }
    }

    /// A call's state (`live`, `scoring`, `scored`, `not_scored`…), `None` for an unknown id.
    ///
    /// # Errors
    /// A database error.
    pub async fn call_state(&self, call_id: &str) -> Result<Option<String>, SandboxError> {
        Ok(self.db.call_state(call_id).await?)
    }

    /// Every webhook delivery of `tenant_id`, newest first, with its attempts.
    ///
    /// # Errors
    /// A database error.
    pub async fn deliveries(&self, tenant_id: &str) -> Result<Vec<DeliveryRow>, SandboxError> {
        Ok(self
            .db
            .list_deliveries(Some(tenant_id.to_owned()), u32::MAX)
            .await?)
    }

    /// Every webhook queued for `tenant_id`, oldest first (by when it was queued, then id),
    /// each with its fate and its attempts: one read, so the two agree.
    ///
    /// # Errors
    /// A database error.
    pub async fn webhooks(&self, tenant_id: &str) -> Result<Vec<Webhook>, SandboxError> {
        let millis = |ms: i64| DateTime::from_timestamp_millis(ms).unwrap_or(DateTime::UNIX_EPOCH);
        let mut webhooks: Vec<Webhook> = self
            .deliveries(tenant_id)
            .await?
            .into_iter()
            .map(|delivery| {
                let fate = WebhookFate::of(&delivery);
                let DeliveryRow {
                    id,
                    call_id,
                    attempts,
                    next_attempt_at,
                    created_at,
                    ..
                } = delivery;
                let attempts = (1_u32..)
                    .zip(attempts)
                    .map(|(number, log)| {
                        WebhookAttempt::from_log(id.clone(), call_id.clone(), number, log)
                    })
                    .collect();
                Webhook {
                    webhook_id: id,
                    call_id,
                    queued_at: millis(created_at),
                    fate,
                    next_attempt_at: (fate == WebhookFate::Pending)
                        .then_some(next_attempt_at)
                        .flatten()
                        .map(millis),
                    attempts,
                }
            })
            .collect();
        webhooks.sort_by(|a, b| (a.queued_at, &a.webhook_id).cmp(&(b.queued_at, &b.webhook_id)));
        Ok(webhooks)
    }

    /// Every webhook attempt made for `tenant_id`, oldest first (by time, then webhook id and
    /// attempt number).
    ///
    /// # Errors
    /// A database error.
    pub async fn webhook_attempts(
        &self,
        tenant_id: &str,
    ) -> Result<Vec<WebhookAttempt>, SandboxError> {
        Ok(attempts_in_order(self.webhooks(tenant_id).await?))
    }

    /// What `tenant_id` still has to be sent: pending first attempts and retries, and calls
    /// being scored (each queues a delivery once scored).
    ///
    /// # Errors
    /// A database error.
    pub async fn backlog(&self, tenant_id: &str) -> Result<Backlog, SandboxError> {
        Ok(self.db.delivery_backlog(tenant_id).await?)
    }

    /// Waits, for at most `within`, until `tenant_id` has nothing left to send
    /// ([`Backlog::is_idle`]: every first attempt made, every retry made or given up, no call
    /// being scored); returns the last backlog read, idle or not. Only a running sandbox
    /// drains its backlog: on a stopped one this waits the whole of `within`.
    ///
    /// # Errors
    /// A database error.
    pub async fn wait_until_idle(
        &self,
        tenant_id: &str,
        within: Duration,
    ) -> Result<Backlog, SandboxError> {
        let start = tokio::time::Instant::now();
        // A wait too long to represent is as good as for ever: a year.
        let deadline = start
            .checked_add(within)
            .unwrap_or_else(|| start + Duration::from_secs(365 * 86_400));
        loop {
            let backlog = self.backlog(tenant_id).await?;
            if backlog.is_idle() || tokio::time::Instant::now() >= deadline {
                return Ok(backlog);
            }
            tokio::time::sleep_until(deadline.min(tokio::time::Instant::now() + IDLE_POLL)).await;
        }
    }

    /// Makes the scored calls `trigger` asks for, now, for `tenant_id` (see [`Trigger`]):
    /// real calls of the service, listed by `GET /calls` when scored, each with its
    /// `call.scored` webhook queued for the running sandbox to send.
    ///
    /// # Errors
    /// A count out of range, an unknown rep, a cause the source cannot have (nothing made), or
    /// a database error (the calls made before it stay made).
    pub async fn trigger(
        &self,
        tenant_id: &str,
        trigger: &Trigger,
    ) -> Result<Vec<Triggered>, TriggerError> {
        crate::trigger::trigger(&self.db, &Clock::System, tenant_id, trigger).await
    }

    /// Asks the running sandbox to send deliveries of `tenant_id` again: each once, now, as an
    /// attempt of its own marked as a resend, with the same webhook id and body, signed
    /// afresh; with the tenant's faults only when `with_faults`. A resend is outside the
    /// retry policy: a failed one is not retried, and the delivery's own retry (if pending)
    /// still goes out. Returns one ticket per delivery (none for [`ResendWhich::Failed`] when
    /// nothing failed), in the order of `which` (oldest first for `Failed`); only a running
    /// sandbox makes them.
    ///
    /// # Errors
    /// An id that is not one of the tenant's deliveries, no webhook URL (nothing is asked
    /// for), or a database error.
    pub async fn request_resends(
        &self,
        tenant_id: &str,
        which: ResendWhich,
        with_faults: bool,
    ) -> Result<Vec<(String, ResendTicket)>, ResendError> {
        if self.db.active_endpoint(tenant_id).await?.is_none() {
            return Err(ResendError::NoWebhookUrl);
        }
        let ids = match which {
            ResendWhich::Ids(ids) => ids,
            ResendWhich::Failed => {
                let mut failed: Vec<DeliveryRow> = self
                    .db
                    .list_deliveries(Some(tenant_id.to_owned()), u32::MAX)
                    .await?
                    .into_iter()
                    .filter(|d| {
                        d.attempts.last().is_some_and(|last| {
                            last.error.is_some()
                                || !last.status.is_some_and(|s| (200..300).contains(&s))
                        })
                    })
                    .collect();
                failed.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
                failed.into_iter().map(|d| d.id).collect()
            }
        };
        let now = Utc::now().timestamp_millis();
        match self
            .db
            .queue_resends(tenant_id, ids.clone(), with_faults, now)
            .await?
        {
            Ok(seqs) => Ok(ids
                .into_iter()
                .zip(seqs.into_iter().map(ResendTicket))
                .collect()),
            Err(ResendRefused::UnknownWebhook(id)) => Err(ResendError::UnknownWebhook(id)),
        }
    }

    /// The resends of `tickets`, made or not, in that order.
    ///
    /// # Errors
    /// A database error.
    pub async fn resends(&self, tickets: &[ResendTicket]) -> Result<Vec<Resend>, SandboxError> {
        let seqs = tickets.iter().map(|t| t.0).collect();
        let rows = self.db.resends(seqs).await?;
        Ok(rows
            .into_iter()
            .map(|row| Resend {
                attempt: match (row.log, row.attempt) {
                    (Some(log), Some(number)) => Some(WebhookAttempt::from_log(
                        row.webhook_id.clone(),
                        row.call_id,
                        number,
                        log,
                    )),
                    _ => None,
                },
                webhook_id: row.webhook_id,
            })
            .collect())
    }

    /// Switches the agency whose platform id is `platform_agency_id` on for real calls (the
    /// service's default rubric, its own dialer), as the operator does out of band.
    ///
    /// # Errors
    /// A database error, or no such agency.
    pub async fn enable_real_calls(
        &self,
        tenant_id: &str,
        platform_agency_id: &str,
    ) -> Result<(), SandboxError> {
        let no_agency = || SandboxError::NoAgency(platform_agency_id.to_owned());
        let agency = self
            .db
            .real_call_agency_by_platform_id(tenant_id, platform_agency_id)
            .await?
            .ok_or_else(no_agency)?;
        self.db
            .set_real_calls(tenant_id, &agency.id, Some((false, Rubric::Default)))
            .await?
            .ok_or_else(no_agency)?;
        Ok(())
    }

    /// Ingests dialer records (each a parsed line, or why it did not parse) whose recordings
    /// are files under `recordings`, archiving the audio under `config`'s audio directory:
    /// one outcome per record, in order.
    ///
    /// # Errors
    /// A database or archive error (records already stored stay stored).
    pub async fn ingest_real_calls(
        &self,
        config: &Config,
        tenant_id: &str,
        recordings: impl Into<PathBuf>,
        records: Vec<Result<Value, String>>,
    ) -> Result<Vec<RecordOutcome>, SandboxError> {
        let archive = Archive::new(config.audio_dir());
        let ingest = Ingest::new(self.db.clone(), archive, Clock::System, recordings.into());
        Ok(ingest.ingest(tenant_id, records).await?)
    }

    /// Changes a scored real call's disposition after the fact; the service scores it again
    /// and sends no webhook (contract section 3).
    ///
    /// # Errors
    /// A database error, or no such scored real call.
    pub async fn redisposition(
        &self,
        tenant_id: &str,
        call_id: &str,
        disposition: Disposition,
    ) -> Result<Redisposed, SandboxError> {
        Ok(crate::realcall::redisposition::redisposition(
            &self.db,
            &Clock::System,
            tenant_id,
            call_id,
            disposition,
        )
        .await?)
    }
}
