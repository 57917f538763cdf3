//! What the paged lists (`GET /agents`, `GET /calls`) share: the page size rule (1 to 100,
//! default 50, never clamped). Their cursors are [`crate::cursor`]'s.

use crate::error::ApiError;

/// Default page size.
pub const DEFAULT_LIMIT: u32 = 50;
/// Largest page size.
pub const MAX_LIMIT: u32 = 100;

/// Parses a page size: 1 to 100, default 50, never clamped.
///
/// # Errors
/// `INVALID_REQUEST` for anything else.
pub fn parse_limit(raw: Option<&str>) -> Result<u32, ApiError> {
    let Some(raw) = raw else {
        return Ok(DEFAULT_LIMIT);
    };
    let invalid = || ApiError::invalid(format!("limit must be an integer from 1 to {MAX_LIMIT}"));
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(invalid());
    }
    match raw.parse::<u32>() {
        Ok(limit) if (1..=MAX_LIMIT).contains(&limit) => Ok(limit),
        _ => Err(invalid()),
    }
}
