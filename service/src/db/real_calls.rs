//! SQL of real calls: the agencies switched on for them, the agents a dialer record can be
//! attributed to, storing ingested calls (with their queued webhook) once per dialer call id,
//! re-dispositions, and the archived recordings (links and the retention sweep).

use std::collections::HashMap;

use rusqlite::{Connection, OptionalExtension, params};

use super::outbox;
use super::practice::active_endpoint;
use super::{Db, DbError};

/// How an agency's real calls are graded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rubric {
    /// The service's default rubric (with the compliance scorecard on health-plan sales).
    Default,
    /// The agency's own scorecard: `compliancePercent`, never a scorecard.
    Own,
}

impl Rubric {
    /// As stored and as the operator writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Rubric::Default => "default",
            Rubric::Own => "own",
        }
    }

    fn from_stored(text: &str) -> Self {
        if text == "own" {
            Rubric::Own
        } else {
            Rubric::Default
        }
    }
}

/// An agency as real-call ingestion sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RealCallAgency {
    /// Service agency id.
    pub id: String,
    /// The tenant's id for the agency.
    pub platform_agency_id: String,
    /// Whether its real calls are ingested.
    pub enabled: bool,
    /// Whether its dialer's agent ids are outside the tenant's namespace.
    pub third_party_dialer: bool,
    /// How its calls are graded.
    pub rubric: Rubric,
}

/// An agent a real call can be attributed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Service agent id.
    pub id: String,
    /// First name.
    pub first_name: String,
    /// Last name.
    pub last_name: String,
    /// Email, lowercased.
    pub email_lower: Option<String>,
    /// NPN, digits only.
    pub npn: Option<String>,
    /// The tenant's id for the agent.
    pub platform_agent_id: Option<String>,
}

/// A real call to store: scored or not, with the webhook to queue.
#[derive(Debug, Clone)]
pub struct NewRealCall {
    /// Public call id.
    pub id: String,
    /// Tenant.
    pub tenant_id: String,
    /// Service agency id.
    pub agency_id: String,
    /// The tenant's id for the agency.
    pub platform_agency_id: String,
    /// Service agent id.
    pub agent_id: String,
    /// The tenant's id for the agent.
    pub platform_agent_id: Option<String>,
    /// The dialer's id for the call, unique per agency.
    pub dialer_call_id: String,
    /// `sale`, `no_sale`, `callback` or `not_interested`.
    pub disposition: String,
    /// `health_plan_enrollment` or `other`.
    pub product_line: String,
    /// Start (ms).
    pub started_at: i64,
    /// Whole seconds.
    pub duration_sec: i64,
    /// Transcript JSON (turns with `startTime`/`endTime`).
    pub transcript: String,
    /// Score JSON; `None` when the call could not be scored.
    pub score: Option<String>,
    /// The archived recording's file name.
    pub audio_file: Option<String>,
    /// Webhook delivery id.
    pub webhook_id: String,
    /// Webhook body.
    pub webhook_body: String,
    /// The trace context of the scoring span (W3C `traceparent`), kept with the delivery.
    pub traceparent: Option<String>,
    /// Now (ms).
    pub now: i64,
}

/// What storing a [`NewRealCall`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stored {
    /// Stored now (and its webhook queued when the tenant has an active endpoint).
    New,
    /// A call with this dialer call id was already stored for the agency: nothing changed.
    Existing(String),
}

/// A stored real call, as a re-disposition reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RealCallRecord {
    /// Public call id.
    pub id: String,
    /// `scored` or `not_scored`.
    pub state: String,
    /// The current disposition.
    pub disposition: String,
    /// The product line.
    pub product_line: String,
    /// Transcript JSON.
    pub transcript: Option<String>,
    /// Score JSON.
    pub score: Option<String>,
    /// The agency's rubric.
    pub rubric: Rubric,
}

fn rubric_column(rubric: Rubric) -> &'static str {
    rubric.as_str()
}

impl Db {
    /// The tenant's agency `agency_id` with its real-call settings.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn real_call_agency(
        &self,
        tenant_id: &str,
        agency_id: &str,
    ) -> Result<Option<RealCallAgency>, DbError> {
        let (tenant_id, agency_id) = (tenant_id.to_owned(), agency_id.to_owned());
        self.read(move |conn| real_call_agency(conn, &tenant_id, &agency_id))
            .await
    }

    /// The tenant's agency with the tenant's id `platform_agency_id`, with its real-call
    /// settings.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn real_call_agency_by_platform_id(
        &self,
        tenant_id: &str,
        platform_agency_id: &str,
    ) -> Result<Option<RealCallAgency>, DbError> {
        let (tenant_id, platform_id) = (tenant_id.to_owned(), platform_agency_id.to_owned());
        self.read(move |conn| {
            let id: Option<String> = conn
                .prepare_cached(
                    "SELECT id FROM agencies WHERE tenant_id = ?1 AND platform_agency_id = ?2",
                )?
                .query_row(params![tenant_id, platform_id], |r| r.get(0))
                .optional()?;
            match id {
                Some(id) => real_call_agency(conn, &tenant_id, &id),
                None => Ok(None),
            }
        })
        .await
    }

    /// Switches an agency's real calls on (`Some`: with these settings) or off (`None`).
    /// Returns the agency as now stored, or `None` when the tenant has no such agency.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn set_real_calls(
        &self,
        tenant_id: &str,
        agency_id: &str,
        settings: Option<(bool, Rubric)>,
    ) -> Result<Option<RealCallAgency>, DbError> {
        let (tenant_id, agency_id) = (tenant_id.to_owned(), agency_id.to_owned());
        self.write(move |tx| {
            let changed = match settings {
                Some((third_party, rubric)) => tx.execute(
                    "UPDATE agencies SET real_calls = 1, third_party_dialer = ?3, rubric = ?4
                     WHERE tenant_id = ?1 AND id = ?2",
                    params![tenant_id, agency_id, third_party, rubric_column(rubric)],
                )?,
                None => tx.execute(
                    "UPDATE agencies SET real_calls = 0 WHERE tenant_id = ?1 AND id = ?2",
                    params![tenant_id, agency_id],
                )?,
            };
            if changed == 0 {
                return Ok(None);
            }
            real_call_agency(tx, &tenant_id, &agency_id)
        })
        .await
    }

    /// Every agent of the agency, for attribution.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn agency_candidates(
        &self,
        tenant_id: &str,
        agency_id: &str,
    ) -> Result<Vec<Candidate>, DbError> {
        let (tenant_id, agency_id) = (tenant_id.to_owned(), agency_id.to_owned());
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT id, first_name, last_name, email_lower, npn, platform_agent_id
                 FROM agents WHERE tenant_id = ?1 AND agency_id = ?2 ORDER BY seq",
            )?;
            let rows = stmt.query_map(params![tenant_id, agency_id], |r| {
                Ok(Candidate {
                    id: r.get(0)?,
                    first_name: r.get(1)?,
                    last_name: r.get(2)?,
                    email_lower: r.get(3)?,
                    npn: r.get(4)?,
                    platform_agent_id: r.get(5)?,
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    /// The call already stored for the agency's dialer call id, if any.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn dialer_call(
        &self,
        agency_id: &str,
        dialer_call_id: &str,
    ) -> Result<Option<String>, DbError> {
        let (agency_id, dialer_call_id) = (agency_id.to_owned(), dialer_call_id.to_owned());
        self.read(move |conn| existing_dialer_call(conn, &agency_id, &dialer_call_id))
            .await
    }

    /// Of `dialer_call_ids`, those already stored for the agency, with their call ids (one
    /// read for a whole batch of records).
    ///
    /// # Errors
    /// Storage failure.
    pub async fn dialer_calls(
        &self,
        agency_id: &str,
        dialer_call_ids: Vec<String>,
    ) -> Result<HashMap<String, String>, DbError> {
        let agency_id = agency_id.to_owned();
        self.read(move |conn| {
            let mut found = HashMap::new();
            for dialer_call_id in dialer_call_ids {
                if let Some(call_id) = existing_dialer_call(conn, &agency_id, &dialer_call_id)? {
                    found.insert(dialer_call_id, call_id);
                }
            }
            Ok(found)
        })
        .await
    }

    /// Stores real calls in one transaction, each once per (agency, dialer call id), queueing
    /// the webhook of each new one when its tenant has an active endpoint.
    ///
    /// # Errors
    /// Storage failure (nothing of the batch is stored).
    pub async fn insert_real_calls(&self, calls: Vec<NewRealCall>) -> Result<Vec<Stored>, DbError> {
        self.write(move |tx| {
            calls
                .iter()
                .map(|call| insert_real_call(tx, call))
                .collect::<Result<Vec<_>, _>>()
        })
        .await
    }

    /// A real call of the tenant, as a re-disposition reads it.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn real_call(
        &self,
        tenant_id: &str,
        call_id: &str,
    ) -> Result<Option<RealCallRecord>, DbError> {
        let (tenant_id, call_id) = (tenant_id.to_owned(), call_id.to_owned());
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT c.id, c.state, c.disposition, c.product_line, c.transcript, c.score,
                            g.rubric
                     FROM calls c JOIN agencies g ON g.id = c.agency_id
                     WHERE c.tenant_id = ?1 AND c.id = ?2 AND c.source = 'real_call'",
                )?
                .query_row(params![tenant_id, call_id], |r| {
                    Ok(RealCallRecord {
                        id: r.get(0)?,
                        state: r.get(1)?,
                        disposition: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
                        product_line: r.get::<_, Option<String>>(3)?.unwrap_or_default(),
                        transcript: r.get(4)?,
                        score: r.get(5)?,
                        rubric: Rubric::from_stored(&r.get::<_, String>(6)?),
                    })
                })
                .optional()?)
        })
        .await
    }

    /// Records a re-disposition: the new disposition and score, `scoredAt` and `updatedAt`
    /// moved to `now`. Sends nothing (contract section 3).
    ///
    /// # Errors
    /// Storage failure.
    pub async fn redisposition(
        &self,
        call_id: &str,
        disposition: &str,
        score: &str,
        now: i64,
    ) -> Result<bool, DbError> {
        let (call_id, disposition, score) =
            (call_id.to_owned(), disposition.to_owned(), score.to_owned());
        self.write(move |tx| {
            Ok(tx.execute(
                "UPDATE calls SET disposition = ?2, score = ?3, scored_at = ?4, updated_at = ?4
                 WHERE id = ?1 AND source = 'real_call' AND state = 'scored'",
                params![call_id, disposition, score, now],
            )? == 1)
        })
        .await
    }

    /// The archived recording of a call (any tenant's: an audio link is its own credential).
    ///
    /// # Errors
    /// Storage failure.
    pub async fn audio_file(&self, call_id: &str) -> Result<Option<String>, DbError> {
        let call_id = call_id.to_owned();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached(
                    "SELECT audio_file FROM calls WHERE id = ?1 AND state = 'scored'
                     AND audio_file IS NOT NULL",
                )?
                .query_row([call_id], |r| r.get(0))
                .optional()?)
        })
        .await
    }

    /// Forgets the recordings archived at or before `before` (ms); returns how many calls
    /// lost their recording, and the file names no call refers to any more, for the caller to
    /// delete.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn release_audio(&self, before: i64) -> Result<(usize, Vec<String>), DbError> {
        self.write(move |tx| {
            // RETURNING gives the values after the update: read the names first.
            let released: Vec<String> = tx
                .prepare(
                    "SELECT audio_file FROM calls
                     WHERE audio_file IS NOT NULL AND audio_archived_at <= ?1",
                )?
                .query_map([before], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            tx.execute(
                "UPDATE calls SET audio_file = NULL
                 WHERE audio_file IS NOT NULL AND audio_archived_at <= ?1",
                [before],
            )?;
            let calls = released.len();
            let mut unused: Vec<String> = Vec::new();
            let mut still_used =
                tx.prepare_cached("SELECT EXISTS (SELECT 1 FROM calls WHERE audio_file = ?1)")?;
            for file in released {
                let used: bool = still_used.query_row([&file], |r| r.get(0))?;
                if !used && !unused.contains(&file) {
                    unused.push(file);
                }
            }
            Ok((calls, unused))
        })
        .await
    }

    /// Whether any call refers to the archive file `name`.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn audio_in_use(&self, name: &str) -> Result<bool, DbError> {
        let name = name.to_owned();
        self.read(move |conn| {
            Ok(conn
                .prepare_cached("SELECT EXISTS (SELECT 1 FROM calls WHERE audio_file = ?1)")?
                .query_row([name], |r| r.get(0))?)
        })
        .await
    }

    /// The HMAC key of audio links, created on first use and kept in the database.
    ///
    /// # Errors
    /// Storage failure.
    pub async fn audio_link_key(&self) -> Result<Vec<u8>, DbError> {
        let fresh: [u8; 32] = rand::random();
        self.write(move |tx| {
            tx.execute(
                "INSERT OR IGNORE INTO service_secrets (name, value) VALUES ('audio_link_key', ?1)",
                [fresh.as_slice()],
            )?;
            Ok(tx.query_row(
                "SELECT value FROM service_secrets WHERE name = 'audio_link_key'",
                [],
                |r| r.get(0),
            )?)
        })
        .await
    }
}

fn real_call_agency(
    conn: &Connection,
    tenant_id: &str,
    agency_id: &str,
) -> Result<Option<RealCallAgency>, DbError> {
    Ok(conn
        .prepare_cached(
            "SELECT id, platform_agency_id, real_calls, third_party_dialer, rubric
             FROM agencies WHERE tenant_id = ?1 AND id = ?2",
        )?
        .query_row(params![tenant_id, agency_id], |r| {
            Ok(RealCallAgency {
                id: r.get(0)?,
                platform_agency_id: r.get(1)?,
                enabled: r.get(2)?,
                third_party_dialer: r.get(3)?,
                rubric: Rubric::from_stored(&r.get::<_, String>(4)?),
            })
        })
        .optional()?)
}

fn existing_dialer_call(
    conn: &Connection,
    agency_id: &str,
    dialer_call_id: &str,
) -> Result<Option<String>, DbError> {
    Ok(conn
        .prepare_cached("SELECT id FROM calls WHERE agency_id = ?1 AND dialer_call_id = ?2")?
        .query_row([agency_id, dialer_call_id], |r| r.get(0))
        .optional()?)
}

fn insert_real_call(conn: &Connection, call: &NewRealCall) -> Result<Stored, DbError> {
    if let Some(existing) = existing_dialer_call(conn, &call.agency_id, &call.dialer_call_id)? {
        return Ok(Stored::Existing(existing));
    }
    let ended = call
        .started_at
        .saturating_add(call.duration_sec.saturating_mul(1000));
    let state = if call.score.is_some() {
        "scored"
    } else {
        "not_scored"
    };
    conn.prepare_cached(
        "INSERT INTO calls (id, tenant_id, source, state, agent_id, agency_id, platform_agent_id,
            platform_agency_id, started_at, ended_at, duration_sec, list_at, scored_at, transcript,
            score, dialer_call_id, disposition, product_line, audio_file, audio_archived_at,
            created_at, updated_at)
         VALUES (?1, ?2, 'real_call', ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?8, ?11, ?12, ?13, ?14, ?15,
            ?16, ?17, ?18, ?11, ?11)",
    )?
    .execute(params![
        call.id,
        call.tenant_id,
        state,
        call.agent_id,
        call.agency_id,
        call.platform_agent_id,
        call.platform_agency_id,
        call.started_at,
        ended,
        call.duration_sec,
        call.now,
        call.transcript,
        call.score,
        call.dialer_call_id,
        call.disposition,
        call.product_line,
        call.audio_file,
        call.audio_file.as_ref().map(|_| call.now),
    ])?;
    if active_endpoint(conn, &call.tenant_id)?.is_some() {
        let delivery = outbox::NewDelivery {
            id: &call.webhook_id,
            tenant_id: &call.tenant_id,
            call_id: &call.id,
            body: &call.webhook_body,
            traceparent: call.traceparent.as_deref(),
        };
        outbox::enqueue(conn, delivery, call.now)?;
    }
    Ok(Stored::New)
}
