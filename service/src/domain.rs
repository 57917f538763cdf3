//! Validated values of the roster: the contract's text rules in one place.
//!
//! Every string is trimmed; whitespace-only, control characters (NUL included) and values
//! over [`MAX_TEXT_LEN`] characters are `400 INVALID_REQUEST`. Tenant ids may not start
//! with a reserved service prefix. NPNs are digits only (non-digits stripped, 4–10 digits
//! remaining). Emails need one `@` with text on both sides.

use crate::error::ApiError;
use crate::ids::has_reserved_prefix;

/// Longest accepted text field, in characters (the contract is silent; this keeps
/// pathological bodies out of the database).
pub const MAX_TEXT_LEN: usize = 256;

/// A trimmed, non-empty, printable text field.
pub fn text(field: &str, raw: &str) -> Result<String, ApiError> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Err(ApiError::invalid(format!(
            "{field} must not be empty or whitespace"
        )));
    }
    if trimmed.chars().any(char::is_control) {
        return Err(ApiError::invalid(format!(
            "{field} must not contain control characters"
        )));
    }
    if trimmed.chars().count() > MAX_TEXT_LEN {
        return Err(ApiError::invalid(format!(
            "{field} must be at most {MAX_TEXT_LEN} characters"
        )));
    }
    Ok(trimmed.to_owned())
}

/// A required text field (`null` or absent is missing).
pub fn required_text(field: &str, raw: Option<&str>) -> Result<String, ApiError> {
    match raw {
        Some(raw) => text(field, raw),
        None => Err(ApiError::invalid(format!("{field} is required"))),
    }
}

/// A tenant id (`platformAgentId`, `platformAgencyId`): text without a reserved prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlatformId(String);

impl PlatformId {
    /// Validates a tenant id sent in `field`.
    ///
    /// # Errors
    /// `INVALID_REQUEST` on any text rule or a reserved prefix.
    pub fn parse(field: &str, raw: &str) -> Result<Self, ApiError> {
        let value = text(field, raw)?;
        if has_reserved_prefix(&value) {
            return Err(ApiError::invalid(format!(
                "{field} may not begin with svc_agent_ or svc_agency_"
            )));
        }
        Ok(PlatformId(value))
    }

    /// The id.
    pub fn into_inner(self) -> String {
        self.0
    }
}

/// An email address as sent (trimmed); compared case-insensitively by storage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Email(String);

impl Email {
    /// Validates an email sent in `field`.
    ///
    /// # Errors
    /// `INVALID_REQUEST` on any text rule or a value that is not `local@domain`.
    pub fn parse(field: &str, raw: &str) -> Result<Self, ApiError> {
        let value = text(field, raw)?;
        let shaped = value.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty() && !domain.is_empty() && !domain.contains('@')
        }) && !value.contains(char::is_whitespace);
        if !shaped {
            return Err(ApiError::invalid(format!(
                "{field} must be an email address"
            )));
        }
        Ok(Email(value))
    }

    /// The address as sent.
    pub fn into_inner(self) -> String {
        self.0
    }
}

/// A National Producer Number: 4–10 digits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Npn(String);

impl Npn {
    /// Strips non-digits from `raw` and checks 4–10 digits remain.
    ///
    /// # Errors
    /// `INVALID_REQUEST` otherwise (also for text over [`MAX_TEXT_LEN`]).
    pub fn parse(field: &str, raw: &str) -> Result<Self, ApiError> {
        if raw.chars().count() > MAX_TEXT_LEN {
            return Err(ApiError::invalid(format!(
                "{field} must be at most {MAX_TEXT_LEN} characters"
            )));
        }
        let digits: String = raw.chars().filter(char::is_ascii_digit).collect();
        if !(4..=10).contains(&digits.len()) {
            return Err(ApiError::invalid(format!(
                "{field} must contain 4 to 10 digits"
            )));
        }
        Ok(Npn(digits))
    }

    /// The digits.
    pub fn into_inner(self) -> String {
        self.0
    }
}

/// Parses an optional field with `parse` (`null` and absent are both `None`).
pub fn optional<T>(
    field: &str,
    raw: Option<&str>,
    parse: impl Fn(&str, &str) -> Result<T, ApiError>,
) -> Result<Option<T>, ApiError> {
    raw.map(|raw| parse(field, raw)).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_trimmed_and_rejects_blank_control_and_long_values() {
        assert_eq!(text("name", "  Acme ").ok().as_deref(), Some("Acme"));
        assert!(text("name", " \t ").is_err());
        assert!(text("name", "a\0b").is_err());
        assert!(text("name", &"x".repeat(MAX_TEXT_LEN + 1)).is_err());
        assert!(text("name", &"é".repeat(MAX_TEXT_LEN)).is_ok());
    }

    #[test]
    fn platform_ids_reject_reserved_prefixes_after_trimming() {
        assert!(PlatformId::parse("platformAgentId", " svc_agent_1").is_err());
        assert!(PlatformId::parse("platformAgencyId", "svc_agency_1").is_err());
        assert!(PlatformId::parse("platformAgentId", "svc_call_1").is_ok());
    }

    #[test]
    fn npns_keep_their_digits_and_need_four_to_ten() {
        assert_eq!(
            Npn::parse("npn", "12-34-56")
                .map(Npn::into_inner)
                .ok()
                .as_deref(),
            Some("123456")
        );
        assert!(Npn::parse("npn", "123").is_err());
        assert!(Npn::parse("npn", "12345678901").is_err());
        assert!(Npn::parse("npn", "abcd").is_err());
    }

    #[test]
    fn emails_need_one_at_sign_with_text_around_it() {
        assert!(Email::parse("email", "Ann@Example.com").is_ok());
        assert!(Email::parse("email", "ann").is_err());
        assert!(Email::parse("email", "@example.com").is_err());
        assert!(Email::parse("email", "a@b@c").is_err());
        assert!(Email::parse("email", "a b@c").is_err());
    }
}
