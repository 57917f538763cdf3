//! The typed [`Db`] methods of practice calls, session tokens and the webhook outbox: each runs
//! the SQL of [`super::calls`] / [`super::outbox`] on the right connection (writes on the single
//! writer, in one transaction; reads on the pool).

use rusqlite::{Connection, OptionalExtension, params};

use super::call_reads::{self, CallDetailRecord, CallFilter, ListedCall};
use super::calls::{self, GoLive, LiveCall, NewMint, Spend, ToScore};
use super::outbox::{self, AttemptLog, Backlog, Claimed, DeliveryRow, Next};
use super::{Db, DbError};

/// How a mint names the rep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentRef {
    /// The service agent id.
    ServiceId(String),
    /// The tenant's `platformAgentId`.
    PlatformId(String),
}

/// The rep a token is minted for, with the ids calls echo.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionAgent {
    /// Service agent id.
    pub agent_id: String,
    /// Service agency id.
    pub agency_id: String,
    /// Tenant agent id.
    pub platform_agent_id: Option<String>,
    /// Tenant agency id.
    pub platform_agency_id: Option<String>,
}

/// What a mint attempt found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MintResult {
    /// The token row and its call were stored.
    Minted,
    /// The tenant's monthly allowance is spent; nothing was stored.
    QuotaExceeded,
}

/// The tenant's endpoint and secret as they are now (read at send time).
#[derive(Clone)]
pub struct Endpoint {
    /// The URL.
    pub url: String,
    /// The whole current `whsec_…` secret.
    pub secret: String,
    /// The tenant's injected faults (none by default).
    pub faults: crate::faults::Faults,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .field("secret", &"[redacted]")
            .finish()
    }
}

/// A scoring outcome to record, with the webhook body to queue when an endpoint is active.
#[derive(Debug, Clone)]
pub struct OutcomeRecord {
    /// The call.
    pub call_id: String,
    /// Its tenant.
    pub tenant_id: String,
    /// The score JSON, or `None` for not scored.
    pub score_json: Option<String>,
    /// The delivery id to use if a webhook is queued.
    pub webhook_id: String,
    /// The webhook body.
    pub body: String,
    /// The trace context of the scoring span (W3C `traceparent`), kept with the delivery.
    pub traceparent: Option<String>,
    /// Now (ms).
    pub now: i64,
}

pub(super) fn active_endpoint(
    conn: &Connection,
    tenant_id: &str,
) -> Result<Option<Endpoint>, DbError> {
    Ok(conn
        .prepare_cached(
            "SELECT webhook_url, signing_secret, faults FROM tenants
             WHERE id = ?1 AND active = 1 AND webhook_url IS NOT NULL",
        )?
        .query_row([tenant_id], |r| {
            Ok(Endpoint {
                url: r.get(0)?,
                secret: r.get(1)?,
                faults: super::tenants::decode_faults(r.get::<_, Option<String>>(2)?.as_deref()),
            })
        })
        .optional()?)
}

fn session_agent(
    conn: &Connection,
    tenant_id: &str,
    agent: &AgentRef,
) -> Result<Option<SessionAgent>, DbError> {
    let (column, value) = match agent {
        AgentRef::ServiceId(id) => ("a.id", id),
        AgentRef::PlatformId(id) => ("a.platform_agent_id", id),
    };
    let sql = format!(
        "SELECT a.id, a.agency_id, a.platform_agent_id, g.platform_agency_id
         FROM agents a JOIN agencies g ON g.id = a.agency_id
         WHERE a.tenant_id = ?1 AND {column} = ?2"
    );
    Ok(conn
        .prepare_cached(&sql)?
        .query_row(params![tenant_id, value], |r| {
            Ok(SessionAgent {
                agent_id: r.get(0)?,
                agency_id: r.get(1)?,
                platform_agent_id: r.get(2)?,
                platform_agency_id: r.get(3)?,
            })
        })
        .optional()?)
}

impl Db {
    /// The session-token signing key, created on first use and kept in the database.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn session_token_key(&self) -> Result<Vec<u8>, DbError> {
        let fresh: [u8; 32] = rand::random();
        self.write(move |tx| Ok(calls::token_key(tx, &fresh)?))
            .await
    }

    /// The tenant's rep named by `agent`, with its agency (another tenant's is `None`).
    ///
    /// # Errors
    /// Storage failure.
    pub async fn session_agent(
        &self,
        tenant_id: &str,
        agent: AgentRef,
    ) -> Result<Option<SessionAgent>, DbError> {
        let tenant_id = tenant_id.to_owned();
        self.read(move |conn| session_agent(conn, &tenant_id, &agent))
            .await
    }

    /// Stores a minted token and its call unless the tenant's allowance for the month
    /// `[month_start, month_end)` is spent. The check and the insert are one transaction.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn mint_session(
        &self,
        mint: NewMint,
        month_start: i64,
        month_end: i64,
    ) -> Result<MintResult, DbError> {
        self.write(move |tx| {
            let allowance: Option<i64> = tx
                .query_row(
                    "SELECT monthly_allowance_minutes FROM tenants WHERE id = ?1",
                    [&mint.tenant_id],
                    |r| r.get(0),
                )
                .optional()?
                .flatten();
            if let Some(minutes) = allowance {
                // Each call in progress and each token outstanding holds a minute of what is
                // left, so that tokens minted under a nearly spent allowance cannot run many
                // calls at once.
                let used = calls::usage_secs(tx, &mint.tenant_id, month_start, month_end)?;
                let reserved = calls::reserved_secs(tx, &mint.tenant_id, mint.now)?;
                if used.saturating_add(reserved) >= minutes.saturating_mul(60) {
                    return Ok(MintResult::QuotaExceeded);
                }
            }
            calls::insert_mint(tx, &mint)?;
            Ok(MintResult::Minted)
        })
        .await
    }

    /// Spends a token atomically (see `calls::spend_token`).
    ///
    /// # Errors
    /// Storage failure.
    pub async fn spend_session_token(
        &self,
        jti: &str,
        tenant_id: &str,
        agent_id: &str,
        now: i64,
    ) -> Result<Spend, DbError> {
        let (jti, tenant_id, agent_id) =
            (jti.to_owned(), tenant_id.to_owned(), agent_id.to_owned());
        self.write(move |tx| Ok(calls::spend_token(tx, &jti, &tenant_id, &agent_id, now)?))
            .await
    }

    /// Moves a redeemed call to `live`.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn go_live(&self, live: GoLive) -> Result<bool, DbError> {
        self.write(move |tx| Ok(calls::go_live(tx, &live)?)).await
    }

    /// Accepts a connection ticket once.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn claim_ticket(
        &self,
        session_id: &str,
        ticket_hash: &str,
        now: i64,
    ) -> Result<Option<LiveCall>, DbError> {
        let (session_id, ticket_hash) = (session_id.to_owned(), ticket_hash.to_owned());
        // A read first: a bad or replayed ticket (anyone can open the socket and send one)
        // must not take the single writer from every other tenant's requests.
        let claimable = {
            let (session_id, ticket_hash) = (session_id.clone(), ticket_hash.clone());
            self.read(move |conn| Ok(calls::ticket_claimable(conn, &session_id, &ticket_hash)?))
                .await?
        };
        if !claimable {
            return Ok(None);
        }
        self.write(move |tx| Ok(calls::claim_ticket(tx, &session_id, &ticket_hash, now)?))
            .await
    }

    /// Ends a live call with its transcript; the duration in seconds, or `None` if not live.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn end_call(
        &self,
        call_id: &str,
        transcript_json: String,
        now: i64,
    ) -> Result<Option<i64>, DbError> {
        let call_id = call_id.to_owned();
        self.write(move |tx| Ok(calls::end_call(tx, &call_id, &transcript_json, now)?))
            .await
    }

    /// Ends a live call without its transcript (storing it failed): the call is then not
    /// scored, and its minutes count. The duration in seconds, or `None` if not live.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn end_call_without_transcript(
        &self,
        call_id: &str,
        now: i64,
    ) -> Result<Option<i64>, DbError> {
        let call_id = call_id.to_owned();
        self.write(move |tx| Ok(calls::end_call_without_transcript(tx, &call_id, now)?))
            .await
    }

    /// Caps the database file at its current size plus `pages` pages on the writer connection,
    /// so that writes needing more fail with `SQLITE_FULL` (tests use it to simulate a full
    /// disk).
    ///
    /// # Errors
    /// Storage failure.
    #[doc(hidden)]
    pub async fn cap_file_for_tests(&self, pages: i64) -> Result<(), DbError> {
        let inner = std::sync::Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            let conn = inner
                .writer
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let count: i64 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
            conn.pragma_update(None, "max_page_count", count + pages)?;
            Ok(())
        })
        .await?
    }

    /// Ends a live call nobody ever connected to (at the ceiling), with an empty transcript.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn end_unconnected_call(&self, call_id: &str, now: i64) -> Result<bool, DbError> {
        let call_id = call_id.to_owned();
        self.write(move |tx| {
            let connected: Option<Option<i64>> = tx
                .query_row(
                    "SELECT ticket_used_at FROM calls WHERE id = ?1 AND state = 'live'",
                    [&call_id],
                    |r| r.get(0),
                )
                .optional()?;
            match connected {
                Some(None) => Ok(calls::end_call(tx, &call_id, "[]", now)?.is_some()),
                _ => Ok(false),
            }
        })
        .await
    }

    /// Ends every call still `live` (run at startup: their connections died with the previous
    /// process, so they never completed), lasting at most `ceiling_ms`. Returns how many.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn abandon_live_calls(&self, now: i64, ceiling_ms: i64) -> Result<usize, DbError> {
        self.write(move |tx| {
            let ids = calls::live_calls(tx)?;
            for id in &ids {
                calls::abandon_live_call(tx, id, now, ceiling_ms)?;
            }
            Ok(ids.len())
        })
        .await
    }

    /// Calls waiting to be scored, oldest first.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn calls_to_score(&self) -> Result<Vec<String>, DbError> {
        self.read(|conn| Ok(calls::calls_to_score(conn)?)).await
    }

    /// Whether the tenant's token `jti` was spent (redeemed).
    ///
    /// # Errors
    /// Storage failure.
    pub async fn token_spent(&self, jti: &str, tenant_id: &str) -> Result<bool, DbError> {
        let (jti, tenant_id) = (jti.to_owned(), tenant_id.to_owned());
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM session_tokens
                     WHERE jti = ?1 AND tenant_id = ?2 AND spent_at IS NOT NULL)",
                )?
                .query_row(params![jti, tenant_id], |r| r.get(0))?)
        })
        .await
    }

    /// Marks a call `scoring` and returns what scoring needs.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn begin_scoring(&self, call_id: &str, now: i64) -> Result<Option<ToScore>, DbError> {
        let call_id = call_id.to_owned();
        self.write(move |tx| Ok(calls::begin_scoring(tx, &call_id, now)?))
            .await
    }

    /// Records a call's outcome and, in the same transaction, queues its webhook when the
    /// tenant has an active endpoint at this moment. Returns whether a delivery was queued.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn record_outcome(&self, outcome: OutcomeRecord) -> Result<bool, DbError> {
        self.write(move |tx| {
            if !calls::record_outcome(
                tx,
                &outcome.call_id,
                outcome.score_json.as_deref(),
                outcome.now,
            )? {
                return Ok(false);
            }
            if active_endpoint(tx, &outcome.tenant_id)?.is_none() {
                return Ok(false);
            }
            let delivery = outbox::NewDelivery {
                id: &outcome.webhook_id,
                tenant_id: &outcome.tenant_id,
                call_id: &outcome.call_id,
                body: &outcome.body,
                traceparent: outcome.traceparent.as_deref(),
            };
            outbox::enqueue(tx, delivery, outcome.now)?;
            Ok(true)
        })
        .await
    }

    /// One scored call of the tenant, with transcript and score.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn scored_call(
        &self,
        tenant_id: &str,
        call_id: &str,
    ) -> Result<Option<CallDetailRecord>, DbError> {
        let (tenant_id, call_id) = (tenant_id.to_owned(), call_id.to_owned());
        self.read(move |conn| Ok(call_reads::scored_call(conn, &tenant_id, &call_id)?))
            .await
    }

    /// A page of scored calls (`limit + 1` rows at most).
    ///
    /// # Errors
    /// Storage failure.
    pub async fn list_calls(&self, filter: CallFilter) -> Result<Vec<ListedCall>, DbError> {
        self.read(move |conn| Ok(call_reads::list_calls(conn, &filter)?))
            .await
    }

    /// Claims the earliest due delivery.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn claim_delivery(&self, now: i64) -> Result<Option<Claimed>, DbError> {
        self.write(move |tx| Ok(outbox::claim_due(tx, now)?)).await
    }

    /// The tenant's active endpoint and current secret, if any.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn active_endpoint(&self, tenant_id: &str) -> Result<Option<Endpoint>, DbError> {
        let tenant_id = tenant_id.to_owned();
        self.read(move |conn| active_endpoint(conn, &tenant_id))
            .await
    }

    /// Puts a delivery's first attempt off until `at` (an injected delay).
    ///
    /// # Errors
    /// Storage failure.
    pub async fn defer_delivery(&self, id: &str, at: i64) -> Result<(), DbError> {
        let id = id.to_owned();
        self.write(move |tx| Ok(outbox::defer(tx, &id, at)?)).await
    }

    /// Logs an attempt and moves the delivery on.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn record_attempt(
        &self,
        id: &str,
        attempt: AttemptLog,
        next: Next,
    ) -> Result<(), DbError> {
        let id = id.to_owned();
        self.write(move |tx| Ok(outbox::record_attempt(tx, &id, &attempt, next)?))
            .await
    }

    /// When the next pending delivery falls due.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn next_delivery_due(&self) -> Result<Option<i64>, DbError> {
        self.read(|conn| Ok(outbox::next_due(conn)?)).await
    }

    /// Deliveries with their attempts, newest first.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn list_deliveries(
        &self,
        tenant_id: Option<String>,
        limit: u32,
    ) -> Result<Vec<DeliveryRow>, DbError> {
        self.read(move |conn| Ok(outbox::list_deliveries(conn, tenant_id.as_deref(), limit)?))
            .await
    }

    /// What `tenant_id` still has to be sent (see [`Backlog`]).
    ///
    /// # Errors
    /// Storage failure.
    pub async fn delivery_backlog(&self, tenant_id: &str) -> Result<Backlog, DbError> {
        let tenant_id = tenant_id.to_owned();
        self.read(move |conn| Ok(outbox::backlog(conn, &tenant_id)?))
            .await
    }

    /// The state of a call (`created`, `live`, `ended`, `scoring`, `scored`, `not_scored`), for
    /// tests and operators.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn call_state(&self, call_id: &str) -> Result<Option<String>, DbError> {
        let call_id = call_id.to_owned();
        self.read(move |conn| {
            Ok(conn
                .query_row("SELECT state FROM calls WHERE id = ?1", [&call_id], |r| {
                    r.get(0)
                })
                .optional()?)
        })
        .await
    }

    /// Stores already-scored calls in bulk, in one transaction (imports and benchmarks).
    ///
    /// # Errors
    /// Storage failure.
    pub async fn insert_scored_calls(
        &self,
        calls: Vec<call_reads::ScoredCall>,
    ) -> Result<(), DbError> {
        self.write(move |tx| {
            for call in &calls {
                call_reads::insert_scored(tx, call)?;
            }
            Ok(())
        })
        .await
    }

    /// Queues a delivery directly (imports and benchmarks; the service queues through
    /// [`Db::record_outcome`]).
    ///
    /// # Errors
    /// Storage failure.
    pub async fn enqueue_delivery(
        &self,
        id: &str,
        tenant_id: &str,
        call_id: &str,
        body: String,
        now: i64,
    ) -> Result<(), DbError> {
        let (id, tenant_id, call_id) = (id.to_owned(), tenant_id.to_owned(), call_id.to_owned());
        self.write(move |tx| {
            let delivery = outbox::NewDelivery {
                id: &id,
                tenant_id: &tenant_id,
                call_id: &call_id,
                body: &body,
                traceparent: None,
            };
            Ok(outbox::enqueue(tx, delivery, now)?)
        })
        .await
    }
}
