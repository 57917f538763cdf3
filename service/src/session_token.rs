//! Session tokens: compact JWTs (HS256) signed with the service key kept in the database, scoped
//! to one agent of one tenant, with a unique id (`jti`) whose single use the database enforces.
//!
//! Expiry is checked here against the service clock (not the system clock inside the JWT
//! library), so tests can move time. Malformed, forged or foreign tokens are all
//! [`TokenError::Invalid`]; a well-signed token past `exp` is [`TokenError::Expired`].

use std::fmt;

use chrono::{DateTime, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

/// The issuer written into every token.
const ISSUER: &str = "svc-service";

/// The claims of a session token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Issuer, always `svc-service`.
    pub iss: String,
    /// The service agent id the token is scoped to.
    pub sub: String,
    /// The tenant that minted it.
    pub tid: String,
    /// The unique token id (`tok_…`), the single-use key in the database.
    pub jti: String,
    /// Issued at, unix seconds.
    pub iat: i64,
    /// Expires at, unix seconds.
    pub exp: i64,
}

/// Why a token cannot be redeemed (before the database is asked whether it was spent).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// Malformed, badly signed, or not one of ours.
    #[error("the session token is malformed or was not issued by this service")]
    Invalid,
    /// Validly signed and past its expiry; its claims, to ask whether it was spent before it
    /// expired (a spent token is `TOKEN_ALREADY_USED` whatever its age).
    #[error("the session token expired")]
    Expired(Box<Claims>),
}

/// The service's token signing key (raw bytes, from the database).
#[derive(Clone)]
pub struct TokenKey {
    bytes: Vec<u8>,
}

impl fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TokenKey([redacted])")
    }
}

impl TokenKey {
    /// Wraps key bytes read from the database.
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        Self { bytes }
    }

    /// A fresh random 32-byte key.
    pub fn generate() -> Self {
        use rand::RngCore;
        let mut bytes = vec![0u8; 32];
        rand::rngs::OsRng.fill_bytes(&mut bytes);
        Self { bytes }
    }

    /// The raw bytes, to store.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Signs claims into a compact JWT.
    ///
    /// # Errors
    /// Only if serialisation fails, which a [`Claims`] cannot.
    pub fn mint(&self, claims: &Claims) -> Result<String, jsonwebtoken::errors::Error> {
        jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            claims,
            &EncodingKey::from_secret(&self.bytes),
        )
    }

    /// Checks a token's signature, shape and expiry against `now`.
    ///
    /// # Errors
    /// [`TokenError::Invalid`] or [`TokenError::Expired`].
    pub fn verify(&self, token: &str, now: DateTime<Utc>) -> Result<Claims, TokenError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.validate_exp = false;
        validation.required_spec_claims.clear();
        validation.set_issuer(&[ISSUER]);
        let data = jsonwebtoken::decode::<Claims>(
            token,
            &DecodingKey::from_secret(&self.bytes),
            &validation,
        )
        .map_err(|_| TokenError::Invalid)?;
        if now.timestamp() >= data.claims.exp {
            return Err(TokenError::Expired(Box::new(data.claims)));
        }
        Ok(data.claims)
    }
}

impl Claims {
    /// Claims for a new token of `agent_id` of `tenant_id` living `ttl_secs` from `now`.
    pub fn new(
        tenant_id: &str,
        agent_id: &str,
        jti: &str,
        now: DateTime<Utc>,
        ttl_secs: u64,
    ) -> Self {
        let iat = now.timestamp();
        Self {
            iss: ISSUER.to_string(),
            sub: agent_id.to_string(),
            tid: tenant_id.to_string(),
            jti: jti.to_string(),
            iat,
            exp: iat.saturating_add(i64::try_from(ttl_secs).unwrap_or(i64::MAX)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Duration, TimeZone};

    fn now() -> DateTime<Utc> {
        Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0)
            .single()
            .expect("valid date")
    }

    #[test]
    fn a_minted_token_verifies_until_it_expires() {
        let key = TokenKey::generate();
        let claims = Claims::new("ten_1", "svc_agent_1", "tok_1", now(), 300);
        let token = key.mint(&claims).expect("mint");
        assert_eq!(
            key.verify(&token, now() + Duration::seconds(299)),
            Ok(claims.clone())
        );
        assert_eq!(
            key.verify(&token, now() + Duration::seconds(300)),
            Err(TokenError::Expired(Box::new(claims)))
        );
    }

    #[test]
    fn a_token_signed_with_another_key_or_tampered_is_invalid() {
        let key = TokenKey::generate();
        let token = key
            .mint(&Claims::new("ten_1", "a", "j", now(), 300))
            .expect("mint");
        assert_eq!(
            TokenKey::generate().verify(&token, now()),
            Err(TokenError::Invalid)
        );
        let mut tampered = token.clone();
        tampered.push('x');
        assert_eq!(key.verify(&tampered, now()), Err(TokenError::Invalid));
        assert_eq!(key.verify("not.a.jwt", now()), Err(TokenError::Invalid));
        assert_eq!(key.verify("", now()), Err(TokenError::Invalid));
    }

    #[test]
    fn an_expired_forgery_is_invalid_not_expired() {
        let key = TokenKey::generate();
        let token = TokenKey::generate()
            .mint(&Claims::new("t", "a", "j", now(), 1))
            .expect("mint");
        assert_eq!(
            key.verify(&token, now() + Duration::days(1)),
            Err(TokenError::Invalid)
        );
    }

    #[test]
    fn the_key_debug_is_redacted() {
        assert_eq!(
            format!("{:?}", TokenKey::generate()),
            "TokenKey([redacted])"
        );
    }
}
