//! API-key authentication: the [`Tenant`] extractor. Each request reads the key and its
//! tenant fresh from the database (no cache), so operator changes apply at the next request.
//!
//! Checks, in order: a `Bearer svc_live_…` credential that is known (`401 INVALID_API_KEY`),
//! not revoked (`401 API_KEY_REVOKED`), of an active tenant (`403 TENANT_INACTIVE`), from an
//! address on the tenant's allowlist when it has one (`403 IP_NOT_ALLOWED`), within the
//! tenant's request rate limit when the operator set one (`429 RATE_LIMITED` with
//! `Retry-After`, see [`crate::ratelimit`]); then, for a tenant the operator set faults for,
//! the injected `429` or `500` of [`crate::faults`].
//!
//! The caller's address is the TCP peer. With `serve --trust-forwarded-for` it is the last
//! entry of `X-Forwarded-For` instead (the address the proxy in front of us saw); a missing
//! header falls back to the peer, an unparsable one matches no allowlist.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::HeaderMap;
use axum::http::request::Parts;

use crate::credentials::{API_KEY_PREFIX, ApiKey};
use crate::db::ApiKeyStatus;
use crate::error::ApiError;
use crate::faults::ApiFault;
use crate::state::AppState;

/// Longest credential considered (anything longer is not one of ours).
const MAX_CREDENTIAL_LEN: usize = 256;

/// The authenticated tenant of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tenant {
    /// Tenant id.
    pub id: String,
}

impl FromRequestParts<AppState> for Tenant {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let key = bearer_credential(&parts.headers).ok_or(ApiError::InvalidApiKey)?;
        if !key.starts_with(API_KEY_PREFIX) || key.len() > MAX_CREDENTIAL_LEN {
            return Err(ApiError::InvalidApiKey);
        }
        let record = state
            .db
            .authenticate(ApiKey::from_presented(key).hash())
            .await?
            .ok_or(ApiError::InvalidApiKey)?;
        if record.key_status == ApiKeyStatus::Revoked {
            return Err(ApiError::ApiKeyRevoked);
        }
        if !record.tenant_active {
            return Err(ApiError::TenantInactive);
        }
        if !record.ip_allowlist.is_empty() {
            let caller = caller_address(parts, state.config.trust_forwarded_for);
            let allowed = caller.is_some_and(|ip| {
                record
                    .ip_allowlist
                    .iter()
                    .any(|net| net.contains(&ip.to_canonical()))
            });
            if !allowed {
                return Err(ApiError::IpNotAllowed);
            }
        }
        if let Some(limit) = record.requests_per_second {
            let per_second = u32::try_from(limit.max(1)).unwrap_or(u32::MAX);
            if let Err(wait) = state.rate_limiter.check(&record.tenant_id, per_second) {
                return Err(ApiError::RateLimited(wait));
            }
        }
        if !record.faults.is_off() {
            let n = state.fault_requests.next(&record.tenant_id, &record.faults);
            if let Some(fault) = record.faults.api_fault(n) {
                let answer = match fault {
                    ApiFault::TooManyRequests => "429 RATE_LIMITED",
                    ApiFault::InternalError => "500 INTERNAL_ERROR",
                };
                tracing::warn!(
                    tenant_id = %record.tenant_id,
                    request = n,
                    method = %parts.method,
                    path = parts.uri.path(),
                    "fault injection: API request answered {answer}"
                );
                return Err(match fault {
                    ApiFault::TooManyRequests => {
                        ApiError::RateLimited(std::time::Duration::from_secs(1))
                    }
                    ApiFault::InternalError => ApiError::InjectedFault,
                });
            }
        }
        Ok(Tenant {
            id: record.tenant_id,
        })
    }
}

/// The credential of an `Authorization: Bearer <credential>` header (scheme
/// case-insensitive), if there is one.
pub fn bearer_credential(headers: &HeaderMap) -> Option<&str> {
    let value = headers
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, credential) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let credential = credential.trim();
    (!credential.is_empty()).then_some(credential)
}

/// The caller's address under the server's proxy-trust setting.
pub fn caller_address(parts: &Parts, trust_forwarded_for: bool) -> Option<IpAddr> {
    if trust_forwarded_for {
        let forwarded: Vec<&str> = parts
            .headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .collect();
        if let Some(last) = forwarded.last() {
            return last
                .rsplit(',')
                .next()
                .and_then(|entry| entry.trim().parse::<IpAddr>().ok());
        }
    }
    parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip())
}
