//! The contract's resources as Rust types. Reads are lenient where the contract says so: unknown
//! score keys and transcript turn keys are kept in `extra`, an unknown call `source` is kept as
//! [`CallSource::Other`], and unknown object fields are ignored.

use std::fmt;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use super::ids::{AgencyId, AgentId, CallId};

/// A call's source, an open set: the receiver crate's type, so a call read through the API and the
/// same call's webhook share one type (an unknown value is kept as [`CallSource::Other`]).
pub use svc_contract::CallSource;

/// An agency of the tenant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Agency {
    /// Service agency id (`svc_agency_…`).
    pub id: AgencyId,
    /// Display name; renamable.
    pub name: String,
    /// The tenant's key for the agency.
    pub platform_agency_id: Option<String>,
    /// Creation time (ISO 8601 UTC).
    pub created_at: String,
}

/// A registered agent (rep).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Agent {
    /// Service agent id (`svc_agent_…`).
    pub id: AgentId,
    /// First name.
    #[serde(default)]
    pub first_name: String,
    /// Last name.
    #[serde(default)]
    pub last_name: String,
    /// Email handle.
    pub email: Option<String>,
    /// National Producer Number handle.
    pub npn: Option<String>,
    /// The tenant's id for the agent.
    pub platform_agent_id: Option<String>,
    /// Service id of the agent's agency.
    pub agency_id: AgencyId,
    /// Creation time.
    pub created_at: String,
}

/// `POST /agencies` body.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UpsertAgency {
    /// The tenant's id for the agency.
    pub platform_agency_id: String,
    /// Name to create the agency with, or rename it to.
    pub name: String,
}

/// How a registration names the agency: exactly one of the two ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgencyRef {
    /// By the tenant's `platformAgencyId`.
    Platform(String),
    /// By the service `agencyId`.
    Service(AgencyId),
}

/// `POST /agents` body. At least one handle (`npn`, `email`, `platform_agent_id`) is required.
#[derive(Debug, Clone, PartialEq)]
pub struct RegisterAgent {
    /// First name.
    pub first_name: Option<String>,
    /// Last name.
    pub last_name: Option<String>,
    /// Email handle.
    pub email: Option<String>,
    /// NPN handle.
    pub npn: Option<String>,
    /// The tenant's id for the agent.
    pub platform_agent_id: Option<String>,
    /// The agency to register into.
    pub agency: AgencyRef,
}

impl Serialize for RegisterAgent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut body = Map::new();
        let mut put = |key: &str, value: &Option<String>| {
            if let Some(v) = value {
                body.insert(key.to_owned(), Value::String(v.clone()));
            }
        };
        put("firstName", &self.first_name);
        put("lastName", &self.last_name);
        put("email", &self.email);
        put("npn", &self.npn);
        put("platformAgentId", &self.platform_agent_id);
        match &self.agency {
            AgencyRef::Platform(id) => body.insert("platformAgencyId".into(), id.clone().into()),
            AgencyRef::Service(id) => body.insert("agencyId".into(), id.as_str().into()),
        };
        body.serialize(serializer)
    }
}

/// `POST /agents` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Registered {
    /// The new agent.
    pub agent: Agent,
    /// Its agency.
    pub agency: Agency,
}

/// One agent handle for `GET /agents` (the contract allows exactly one per lookup).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentHandle {
    /// Service agent id.
    AgentId(AgentId),
    /// Tenant agent id.
    PlatformAgentId(String),
    /// NPN (non-digits are stripped by the service).
    Npn(String),
    /// Email (matched case-insensitively).
    Email(String),
}

impl AgentHandle {
    pub(crate) fn query(&self) -> (&'static str, &str) {
        match self {
            Self::AgentId(v) => ("agentId", v.as_str()),
            Self::PlatformAgentId(v) => ("platformAgentId", v),
            Self::Npn(v) => ("npn", v),
            Self::Email(v) => ("email", v),
        }
    }
}

/// Filter for `GET /agents`: an optional handle and an optional agency, ANDed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentQuery {
    /// At most one handle.
    pub handle: Option<AgentHandle>,
    /// Restrict to one agency (service id).
    pub agency_id: Option<AgencyId>,
    /// Page size, 1-100.
    pub limit: Option<u32>,
}

/// A page of a cursor-paginated list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    /// The rows of this page.
    pub data: Vec<T>,
    /// Opaque cursor of the next page; `None` on the last page. Never parse it.
    pub next_cursor: Option<String>,
}

/// Who a session token is minted for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MintFor {
    /// The tenant's `platformAgentId`.
    PlatformAgentId(String),
    /// The service `agentId`.
    AgentId(AgentId),
}

/// `POST /session` response. The token is a secret: its `Debug` is redacted.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionToken {
    /// The JWT (single use, about five minutes).
    pub token: String,
    /// When it expires.
    pub expires_at: String,
}

impl fmt::Debug for SessionToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionToken")
            .field("token", &"[redacted]")
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// `POST /roleplay/session` body.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RedeemRequest {
    /// Drill to practise (`ma-full-sale` in v1).
    pub drill_key: String,
    /// `Beginner`, `Advanced` or `Elite`; the service defaults to `Advanced`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub difficulty: Option<String>,
    /// Best-effort persona filters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub filters: Option<PersonaFilters>,
}

/// Persona filters of a redeem.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PersonaFilters {
    /// US state code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// The AI customer of a practice call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Persona {
    /// Its name.
    pub name: String,
}

/// `POST /roleplay/session` response. The ticket is a secret: its `Debug` is redacted.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LiveSession {
    /// Single-use ticket for the live transport.
    pub connection_ticket: String,
    /// Where to open the live transport.
    pub connection_url: String,
    /// `ext_…` session id.
    pub session_id: String,
    /// Public id of the call.
    pub call_id: CallId,
    /// The persona picked.
    pub persona: Persona,
}

impl fmt::Debug for LiveSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveSession")
            .field("connection_ticket", &"[redacted]")
            .field("connection_url", &self.connection_url)
            .field("session_id", &self.session_id)
            .field("call_id", &self.call_id)
            .field("persona", &self.persona)
            .finish()
    }
}

/// A call as listed by `GET /calls` (no score, no transcript).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallRow {
    /// Public call id.
    pub id: CallId,
    /// Where the call came from.
    pub source: CallSource,
    /// Minting-time rep label.
    #[serde(default)]
    pub external_user_id: Option<String>,
    /// Minting-time agency label.
    #[serde(default)]
    pub external_agency_id: Option<String>,
    /// Drill practised; `None` for real calls.
    #[serde(default)]
    pub drill_key: Option<String>,
    /// Start time.
    #[serde(default)]
    pub started_at: Option<String>,
    /// End time.
    #[serde(default)]
    pub ended_at: Option<String>,
    /// Duration in seconds.
    pub duration_sec: i64,
    /// When scored.
    #[serde(default)]
    pub scored_at: Option<String>,
    /// Service agent id.
    #[serde(default)]
    pub agent_id: Option<AgentId>,
    /// Service agency id.
    #[serde(default)]
    pub agency_id: Option<AgencyId>,
    /// Tenant agent id.
    #[serde(default)]
    pub platform_agent_id: Option<String>,
    /// Tenant agency id.
    #[serde(default)]
    pub platform_agency_id: Option<String>,
}

/// One diarized transcript turn; extra keys are kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    /// Speaker role.
    #[serde(default)]
    pub role: String,
    /// What was said.
    #[serde(default)]
    pub content: String,
    /// Seconds from call start (real calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<f64>,
    /// Seconds from call start (real calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<f64>,
    /// Keys this client does not know, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A call's score; the key set is open, unknown keys are kept in `extra`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Score {
    /// 0-100, higher is better.
    pub overall_score: f64,
    /// Short summary.
    pub summary: String,
    /// Coaching feedback.
    pub feedback: String,
    /// 0-100 when assessed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compliance_percent: Option<f64>,
    /// Real calls only; inner shape not fixed by the contract.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compliance_scorecard: Option<Value>,
    /// Keys this client does not know, kept as sent.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// `GET /calls/{callId}`: the list row plus transcript, score and audio.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallDetail {
    /// The list-row fields.
    #[serde(flatten)]
    pub row: CallRow,
    /// Always `scored` in v1.
    #[serde(default)]
    pub status: String,
    /// Diarized turns.
    #[serde(default)]
    pub transcript: Vec<Turn>,
    /// The score.
    pub score: Score,
    /// Signed audio link (real calls), or `None`.
    #[serde(default)]
    pub audio_url: Option<String>,
    /// When `audio_url` stops working.
    #[serde(default)]
    pub audio_url_expires_at: Option<String>,
    /// Reserved; `null` in v1.
    #[serde(default)]
    pub waveform: Option<Value>,
    /// Creation time.
    #[serde(default)]
    pub created_at: Option<String>,
    /// Last update.
    #[serde(default)]
    pub updated_at: Option<String>,
}

/// Filters of `GET /calls`. `source` and `from` are required by the contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallQuery {
    /// Which source to list.
    pub source: CallSource,
    /// Inclusive lower bound (ISO 8601).
    pub from: String,
    /// Inclusive upper bound.
    pub to: Option<String>,
    /// Service agent id.
    pub agent_id: Option<AgentId>,
    /// Service agency id.
    pub agency_id: Option<AgencyId>,
    /// Tenant agent id.
    pub platform_agent_id: Option<String>,
    /// Tenant agency id.
    pub platform_agency_id: Option<String>,
    /// Earlier rep label.
    pub external_user_id: Option<String>,
    /// Earlier agency label.
    pub external_agency_id: Option<String>,
    /// Page size, 1-100.
    pub limit: Option<u32>,
}

impl CallQuery {
    /// A query for one source from a lower bound, with no other filter.
    pub fn new(source: CallSource, from: impl Into<String>) -> Self {
        Self {
            source,
            from: from.into(),
            to: None,
            agent_id: None,
            agency_id: None,
            platform_agent_id: None,
            platform_agency_id: None,
            external_user_id: None,
            external_agency_id: None,
            limit: None,
        }
    }

    pub(crate) fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = vec![
            ("source", self.source.as_str().to_owned()),
            ("from", self.from.clone()),
        ];
        let optional = [
            ("to", self.to.as_deref()),
            ("agentId", self.agent_id.as_ref().map(AgentId::as_str)),
            ("agencyId", self.agency_id.as_ref().map(AgencyId::as_str)),
            ("platformAgentId", self.platform_agent_id.as_deref()),
            ("platformAgencyId", self.platform_agency_id.as_deref()),
            ("externalUserId", self.external_user_id.as_deref()),
            ("externalAgencyId", self.external_agency_id.as_deref()),
        ];
        pairs.extend(
            optional
                .into_iter()
                .filter_map(|(k, v)| v.map(|v| (k, v.to_owned()))),
        );
        if let Some(limit) = self.limit {
            pairs.push(("limit", limit.to_string()));
        }
        pairs
    }
}

/// Rows with a stable id, so a paginated stream can drop a row a shifted page repeats.
pub trait HasId {
    /// The row's id.
    fn id(&self) -> &str;
}

impl HasId for Agent {
    fn id(&self) -> &str {
        self.id.as_str()
    }
}

impl HasId for CallRow {
    fn id(&self) -> &str {
        self.id.as_str()
    }
}
