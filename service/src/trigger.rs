//! Triggered calls (`svc-cli sandbox trigger`, after `stripe trigger`): one scored call made now
//! for a rep of the roster, without a practice session or a dialer file, so a tenant sees its
//! `call.scored` webhook and finds the call through `GET /calls` and reconcile.
//!
//! The call is a real one of the service, scored by the service's own steps: a practice call is
//! stored as ended with a canned enrollment transcript and scored by the scoring worker's
//! [`score_call`]; a real call is built and scored as ingestion builds a dialer record
//! ([`build_real_call`]), without a recording, and stored with its webhook. An unscored outcome
//! comes from the same steps, fed what makes them refuse: a transcript in which the rep never
//! spoke, or (practice only) a call that never completed.

use chrono::{DateTime, Utc};
use serde_json::Number;

use crate::clock::Clock;
use crate::db::{Candidate, Db, DbError, NewTriggeredCall, TriggerAgent};
use crate::practice::transcript::{Role, Turn};
use crate::realcall::ingest::build_real_call;
use crate::realcall::record::{AgencyName, DialerRecord, DialerTurn, Rep};
use crate::scoring::real_call::{Disposition, ProductLine};
use crate::scoring::worker::score_call;

/// The drill a triggered practice call practised (the only one v1 scores).
const DRILL: &str = "ma-full-sale";
/// How long a triggered call lasted.
const DURATION_SECS: i64 = 240;
/// The most calls one trigger makes.
pub const MAX_COUNT: u32 = 100;

/// Which kind of call to make.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerSource {
    /// A practice call (`roleplay`).
    Roleplay,
    /// A dialer call (`real_call`).
    RealCall,
}

/// Why a triggered call is not scored (`success: false`, `SCORING_INCOMPLETE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotScoredCause {
    /// The rep never spoke.
    RepNeverSpoke,
    /// The call never completed (the live connection was cut off): practice calls only, as
    /// a real call that never completed is never stored.
    NeverCompleted,
}

impl NotScoredCause {
    /// Every cause, as written on the command line.
    pub const NAMES: [&'static str; 2] = ["rep-never-spoke", "never-completed"];

    /// Reads a cause as written on the command line.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "rep-never-spoke" => Some(Self::RepNeverSpoke),
            "never-completed" => Some(Self::NeverCompleted),
            _ => None,
        }
    }
}

/// What to trigger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trigger {
    /// Which kind of call.
    pub source: TriggerSource,
    /// `None`: scored; `Some`: not scored, for this cause.
    pub not_scored: Option<NotScoredCause>,
    /// The rep (service agent id, `platformAgentId`, email or NPN); `None`: the first
    /// registered.
    pub agent: Option<String>,
    /// How many calls (1 to [`MAX_COUNT`]).
    pub count: u32,
}

/// A call made by a trigger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Triggered {
    /// `svc_call_…`.
    pub call_id: String,
    /// Which kind of call.
    pub source: TriggerSource,
    /// Whether it was scored (listed by `GET /calls`).
    pub scored: bool,
    /// Whether its webhook was queued (the tenant has an active endpoint).
    pub webhook_queued: bool,
}

/// Why nothing was triggered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TriggerError {
    /// The roster holds no rep.
    #[error("the roster has no rep yet: register one first (`svc-cli agents register`, or `svc-cli sandbox --roster`)")]
    NoRep,
    /// No rep answers to the handle.
    #[error("no rep of the roster answers to {0:?} (a service agent id, platformAgentId, email or NPN)")]
    UnknownRep(String),
    /// A count out of range.
    #[error("the count must be 1 to {MAX_COUNT}, not {0}")]
    Count(u32),
    /// A cause the source cannot have.
    #[error("a real call that never completed is never stored, so it sends no webhook: use rep-never-spoke")]
    NeverCompletedRealCall,
    /// The agency of the rep is gone.
    #[error("the agency {0} of the rep is gone")]
    AgencyGone(String),
    /// The database failed.
    #[error(transparent)]
    Db(#[from] DbError),
}

/// Makes the calls `trigger` asks for, for `tenant_id`, each scored and its webhook queued
/// (the running service's outbox sends it). Returns them in order; on a storage failure the
/// calls made before it stay made.
///
/// # Errors
/// See [`TriggerError`]; nothing is made on any but [`TriggerError::Db`].
pub async fn trigger(
    db: &Db,
    clock: &Clock,
    tenant_id: &str,
    trigger: &Trigger,
) -> Result<Vec<Triggered>, TriggerError> {
    if trigger.count == 0 || trigger.count > MAX_COUNT {
        return Err(TriggerError::Count(trigger.count));
    }
    if trigger.source == TriggerSource::RealCall
        && trigger.not_scored == Some(NotScoredCause::NeverCompleted)
    {
        return Err(TriggerError::NeverCompletedRealCall);
    }
    let agent = db
        .trigger_agent(tenant_id, trigger.agent.clone())
        .await?
        .ok_or_else(|| match &trigger.agent {
            Some(handle) => TriggerError::UnknownRep(handle.clone()),
            None => TriggerError::NoRep,
        })?;
    let maker = Maker {
        db,
        clock,
        tenant_id,
        agent: &agent,
        trigger,
    };
    let mut made = Vec::new();
    for _ in 0..trigger.count {
        let call = match trigger.source {
            TriggerSource::Roleplay => maker.practice_call().await?,
            TriggerSource::RealCall => maker.real_call().await?,
        };
        made.push(call);
    }
    Ok(made)
}

/// What each call of one trigger is made with.
struct Maker<'a> {
    db: &'a Db,
    clock: &'a Clock,
    tenant_id: &'a str,
    agent: &'a TriggerAgent,
    trigger: &'a Trigger,
}

impl Maker<'_> {
    /// A practice call stored as ended, then scored by the scoring worker's step.
    async fn practice_call(&self) -> Result<Triggered, TriggerError> {
        let now = self.clock.now();
        let call_id = crate::ids::call_id();
        let transcript = match self.trigger.not_scored {
            Some(NotScoredCause::NeverCompleted) => None,
            cause => Some(
                serde_json::to_string(&turns(self.agent, cause.is_none()))
                    .map_err(|e| DbError::Corrupt(e.to_string()))?,
            ),
        };
        self.db.insert_ended_call(NewTriggeredCall {
            id: call_id.clone(),
            tenant_id: self.tenant_id.to_owned(),
            agent: self.agent.clone(),
            drill_key: DRILL.to_owned(),
            started_at: started_at(now),
            duration_sec: DURATION_SECS,
            transcript,
            now: now.timestamp_millis(),
        })
        .await?;
        // Another scorer (the running service's, woken by a call of its own) may take it first:
        // either way it is scored once, the state says how, and the webhook was queued if the
        // tenant had an endpoint.
        let queued = match score_call(self.db, self.clock, &call_id).await? {
            Some(queued) => queued,
            None => self.db.active_endpoint(self.tenant_id).await?.is_some(),
        };
        let scored = self.db.call_state(&call_id).await?.as_deref() == Some("scored");
        Ok(Triggered {
            call_id,
            source: TriggerSource::Roleplay,
            scored,
            webhook_queued: queued,
        })
    }

    /// A real call built and scored as ingestion does, stored with its webhook.
    async fn real_call(&self) -> Result<Triggered, TriggerError> {
        let now = self.clock.now();
        let agency = self.db
            .real_call_agency(self.tenant_id, &self.agent.agency_id)
            .await?
            .ok_or_else(|| TriggerError::AgencyGone(self.agent.agency_id.clone()))?;
        let spoke = self.trigger.not_scored.is_none();
        let record = DialerRecord {
            dialer_call_id: format!("trigger-{}", crate::ids::random_text(16)),
            agency: AgencyName::Id(agency.id.clone()),
            rep: Rep {
                npn: None,
                agent_id: self.agent.platform_agent_id.clone(),
                email: None,
                name: Some(format!("{} {}", self.agent.first_name, self.agent.last_name)),
            },
            started_at: started_at(now),
            duration_sec: DURATION_SECS,
            recording: None,
            transcript: Some(timed(turns(self.agent, spoke))),
            disposition: Disposition::Sale,
            product_line: ProductLine::HealthPlanEnrollment,
        };
        let candidate = Candidate {
            id: self.agent.id.clone(),
            first_name: self.agent.first_name.clone(),
            last_name: self.agent.last_name.clone(),
            email_lower: None,
            npn: None,
            platform_agent_id: self.agent.platform_agent_id.clone(),
        };
        let call = build_real_call(now, self.tenant_id, &agency, &candidate, record, None);
        let (call_id, scored) = (call.id.clone(), call.score.is_some());
        self.db.insert_real_calls(vec![call]).await?;
        // Stored with its webhook queued when the tenant has an endpoint, scored or not.
        let queued = self.db.active_endpoint(self.tenant_id).await?.is_some();
        Ok(Triggered {
            call_id,
            source: TriggerSource::RealCall,
            scored,
            webhook_queued: queued,
        })
    }
}

/// When a call that ends now started.
fn started_at(now: DateTime<Utc>) -> i64 {
    now.timestamp_millis()
        .saturating_sub(DURATION_SECS.saturating_mul(1000))
}

/// A health-plan enrollment call covering every stage of the rubric, with the rep named; when
/// the rep did not speak (`spoke` false), only the customer's turns.
fn turns(agent: &TriggerAgent, spoke: bool) -> Vec<Turn> {
    let name = format!("{} {}", agent.first_name, agent.last_name);
    let turns = vec![
        Turn::customer("Hello?"),
        Turn::agent(format!(
            "Hi, this is {name}, a licensed insurance agent. This call is recorded for quality \
             and compliance."
        )),
        Turn::agent(
            "We do not offer every plan available in your area; please contact Medicare.gov or \
             1-800-MEDICARE for all of your options.",
        ),
        Turn::agent("May I ask which doctors you see and which prescriptions you take?"),
        Turn::customer("I see Dr. Patel and I take metformin."),
        Turn::agent(
            "This plan keeps Dr. Patel in network, covers metformin, and has a zero premium \
             with low copays.",
        ),
        Turn::customer("I'm worried about the cost."),
        Turn::agent(
            "I understand the concern; your prescriptions are covered with a five dollar copay.",
        ),
        Turn::agent(
            "Would you like to enroll today? I can start the application and set your \
             effective date.",
        ),
        Turn::customer("Yes, let's do it."),
    ];
    if spoke {
        turns
    } else {
        turns
            .into_iter()
            .filter(|t| t.role == Role::Customer)
            .collect()
    }
}

/// The turns as a dialer sends them: each with its start and end, in seconds from the start.
fn timed(turns: Vec<Turn>) -> Vec<DialerTurn> {
    let step = DURATION_SECS / i64::try_from(turns.len().max(1)).unwrap_or(1);
    (0_i64..)
        .zip(turns)
        .map(|(i, turn)| DialerTurn {
            role: turn.role,
            content: turn.content,
            start_time: Some(Number::from(i * step)),
            end_time: Some(Number::from(i * step + step - 1)),
        })
        .collect()
}
