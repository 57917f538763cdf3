//! The transcript of a call: diarized turns with a role and content, in the order spoken.
//!
//! The roles are `agent` (the rep) and `customer` (the persona, or the caller on a real call);
//! GET /calls/{callId} returns the turns as stored here.

use serde::{Deserialize, Serialize};

/// Who spoke a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The rep practising the call.
    Agent,
    /// The AI persona playing the customer.
    Customer,
}

/// One turn of a transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// Who spoke.
    pub role: Role,
    /// What was said.
    pub content: String,
}

impl Turn {
    /// A turn spoken by the rep.
    pub fn agent(content: impl Into<String>) -> Self {
        Self {
            role: Role::Agent,
            content: content.into(),
        }
    }

    /// A turn spoken by the persona.
    pub fn customer(content: impl Into<String>) -> Self {
        Self {
            role: Role::Customer,
            content: content.into(),
        }
    }
}

/// True when the rep said anything that is not blank.
pub fn rep_spoke(turns: &[Turn]) -> bool {
    turns
        .iter()
        .any(|t| t.role == Role::Agent && !t.content.trim().is_empty())
}
