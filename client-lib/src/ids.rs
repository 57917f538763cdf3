//! The service's own ids ([`AgentId`], [`AgencyId`], [`CallId`]) as distinct types, so an agency
//! id cannot be passed where an agent id is expected. Parsing (`FromStr`, `TryFrom<String>`: what
//! the command line uses) checks the contract's prefix; deserialising does not, since the service
//! is the source of truth for the ids it sends. The tenant's own ids stay `String`s.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A value that is not an id of the expected kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// Nothing was given.
    #[error("expected {kind} id (starting `{prefix}`), got an empty value")]
    Empty {
        /// What was expected ("an agent").
        kind: &'static str,
        /// The prefix the id must start with.
        prefix: &'static str,
    },
    /// The value does not start with the prefix, or has nothing after it.
    #[error("expected {kind} id starting `{prefix}`, got `{value}`")]
    Prefix {
        /// What was expected ("an agent").
        kind: &'static str,
        /// The prefix the id must start with.
        prefix: &'static str,
        /// What was given (surrounding whitespace removed).
        value: String,
    },
}

/// Checks `value` (surrounding whitespace removed) against `prefix`: it must start with it and
/// have something after it.
fn check(value: &str, kind: &'static str, prefix: &'static str) -> Result<String, IdError> {
    let value = value.trim();
    if value.is_empty() {
        return Err(IdError::Empty { kind, prefix });
    }
    match value.strip_prefix(prefix) {
        Some(rest) if !rest.is_empty() => Ok(value.to_owned()),
        _ => Err(IdError::Prefix {
            kind,
            prefix,
            value: value.to_owned(),
        }),
    }
}

/// Declares one service id type with its prefix and the traits every id shares.
macro_rules! service_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// The prefix every id of this kind starts with.
            pub const PREFIX: &'static str = $prefix;

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id as an owned string.
            pub fn into_string(self) -> String {
                self.0
            }

            /// An id the service sent outside a typed body (an error's `details`, a webhook's
            /// `callId`), taken as is: no prefix check, since the service is the authority.
            pub fn from_service(value: impl Into<String>) -> Self {
                Self(value.into())
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl FromStr for $name {
            type Err = IdError;

            /// Parses an id given by a person: surrounding whitespace is removed, the prefix is
            /// required.
            fn from_str(value: &str) -> Result<Self, IdError> {
                check(value, $kind, $prefix).map(Self)
            }
        }

        impl TryFrom<String> for $name {
            type Error = IdError;

            fn try_from(value: String) -> Result<Self, IdError> {
                value.parse()
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }
    };
}

service_id!(
    /// A service agent id (`svc_agent_…`).
    AgentId,
    "svc_agent_",
    "an agent"
);

service_id!(
    /// A service agency id (`svc_agency_…`).
    AgencyId,
    "svc_agency_",
    "an agency"
);

service_id!(
    /// A public call id (`svc_call_…`).
    CallId,
    "svc_call_",
    "a call"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_with_its_prefix_parses_and_keeps_its_text() {
        let agent: AgentId = "svc_agent_fx0001".parse().expect("agent id");
        assert_eq!(agent.as_str(), "svc_agent_fx0001");
        assert_eq!(agent.to_string(), "svc_agent_fx0001");
        let agency = AgencyId::try_from("svc_agency_fx0001".to_owned()).expect("agency id");
        assert_eq!(agency.as_ref(), "svc_agency_fx0001");
        let call: CallId = " svc_call_7 ".parse().expect("call id");
        assert_eq!(call, "svc_call_7");
    }

    #[test]
    fn an_id_of_another_kind_is_refused_with_the_expected_prefix() {
        let error = "svc_agency_x"
            .parse::<AgentId>()
            .expect_err("agency id as agent");
        assert_eq!(
            error.to_string(),
            "expected an agent id starting `svc_agent_`, got `svc_agency_x`"
        );
        assert!("svc_agent_x".parse::<AgencyId>().is_err());
        assert!("svc_agent_x".parse::<CallId>().is_err());
        assert!("rep-1001".parse::<AgentId>().is_err());
        // The prefix is case-sensitive, like the service's ids.
        assert!("SVC_AGENT_x".parse::<AgentId>().is_err());
    }

    #[test]
    fn an_empty_value_or_a_bare_prefix_is_refused() {
        assert_eq!(
            "".parse::<CallId>().expect_err("empty").to_string(),
            "expected a call id (starting `svc_call_`), got an empty value"
        );
        assert!(matches!(
            "   ".parse::<AgencyId>(),
            Err(IdError::Empty { .. })
        ));
        assert!(matches!(
            "svc_agent_".parse::<AgentId>(),
            Err(IdError::Prefix { .. })
        ));
    }

    #[test]
    fn deserialising_takes_any_string_the_service_sends_and_serialises_it_back() {
        let id: AgentId = serde_json::from_str("\"legacy-7\"").expect("lenient read");
        assert_eq!(id.as_str(), "legacy-7");
        assert_eq!(
            serde_json::to_string(&id).expect("serialise"),
            "\"legacy-7\""
        );
    }
}
