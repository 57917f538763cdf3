//! The documented exit codes and the one mapping from errors to them.

use crate::config::ConfigError;
use svc_client::live::LiveError;
use svc_client::{ClientError, ErrorClass};
use svc_store::RunLockError;
use svc_store::StoreError;

/// Success.
pub const OK: u8 = 0;
/// Failure: the request or the data needs fixing (or some rows of an import failed).
pub const FAILURE: u8 = 1;
/// Reconcile succeeded but found something cron should alert on: calls whose webhook never
/// arrived (recovered), or calls whose score changed with no webhook.
pub const FOUND: u8 = 3;
/// Usage: bad flags or arguments, missing configuration.
pub const USAGE: u8 = 2;
/// Authentication or authorisation: bad or revoked key, inactive tenant, IP not allowed, bad
/// session token.
pub const AUTH: u8 = 4;
/// Temporary failure worth retrying later (`EX_TEMPFAIL`): 429, 5xx, connection errors, timeouts.
pub const TEMPORARY: u8 = 75;

/// The exit-code table shown after `--help` (and in the README).
pub const HELP: &str = "\
Exit codes:
  0   success
  1   failure (bad request or data; a response body over 16 MiB; a failed row of an
      import, unless every failed row failed for a temporary reason; a practice run whose
      single-use token is now spent; a reconcile that could not store a listed call; an
      inbox requeue or discard of an id that is not a dead letter; a sandbox resend refused
      or not answered 2xx)
  2   usage error (bad flags or arguments, missing base URL or API key, a config file named
      by --config or SVC_CONFIG that does not exist, a store path in a missing directory or
      a file that is not a store; a plain-http base URL to a host that is not loopback,
      without --insecure-http; a redirect answered by the service, never followed)
  3   reconcile succeeded but recovered calls whose webhook never arrived, or found calls
      whose score changed with no webhook (alert on it)
  4   authentication or authorisation (INVALID_API_KEY, API_KEY_REVOKED, TENANT_INACTIVE,
      IP_NOT_ALLOWED, INVALID_TOKEN, TOKEN_EXPIRED, TOKEN_ALREADY_USED)
  75  temporary failure worth retrying (429, INTERNAL_ERROR, SERVICE_UNAVAILABLE, connection
      errors, timeouts; an import whose failed rows all failed so: rerun the same file later;
      another reconcile run holds the store's lock; the store stayed locked for an inbox
      command; the store's database cannot be reached or refused the credentials; the
      store's disk is full; a sandbox resend not made within --max-wait)

Environment: SVC_BASE_URL, SVC_API_KEY, SVC_PROFILE, SVC_CONFIG, SVC_INSECURE_HTTP, SVC_STORE,
NO_COLOR, RUST_LOG.";

/// Errors of the command layer that are not client or config errors.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad arguments found after parsing (exit 2).
    #[error("{0}")]
    Usage(String),
    /// A failure with its message (exit 1).
    #[error("{0}")]
    Failed(String),
    /// A temporary failure with its message: rerunning later can succeed (exit 75).
    #[error("{0}")]
    Temporary(String),
    /// The command already printed why it failed; exit with this code and print nothing more.
    #[error("exit code {0}")]
    Reported(u8),
}

/// The exit code for an error, from the first cause that decides it.
pub fn code_for(error: &anyhow::Error) -> u8 {
    for cause in error.chain() {
        if let Some(e) = cause.downcast_ref::<ClientError>() {
            return client_code(e);
        }
        if let Some(e) = cause.downcast_ref::<LiveError>() {
            return class_code(e.class());
        }
        if cause.downcast_ref::<ConfigError>().is_some() {
            return USAGE;
        }
        if let Some(e) = cause.downcast_ref::<StoreError>() {
            return store_code(e);
        }
        if let Some(e) = cause.downcast_ref::<RunLockError>() {
            return match e {
                RunLockError::Busy { .. } => TEMPORARY,
                _ => FAILURE,
            };
        }
        if let Some(e) = cause.downcast_ref::<CliError>() {
            return match e {
                CliError::Usage(_) => USAGE,
                CliError::Failed(_) => FAILURE,
                CliError::Temporary(_) => TEMPORARY,
                CliError::Reported(code) => *code,
            };
        }
    }
    FAILURE
}

/// What the command line adds to a library's error so its user knows which flag to reach for
/// (the libraries speak of their own API, never of flags): from the first cause that has one.
pub fn hint(error: &anyhow::Error) -> Option<&'static str> {
    error
        .chain()
        .find_map(|cause| match cause.downcast_ref::<ClientError>()? {
            ClientError::MissingApiKey => Some("use --api-key, SVC_API_KEY or a config profile"),
            ClientError::InsecureHttp { .. } => {
                Some("allow it with --insecure-http (or SVC_INSECURE_HTTP=1)")
            }
            _ => None,
        })
}

/// The exit code for a client error: a usage error (2) when the configuration must change (the
/// base URL, a missing key, plain HTTP not allowed, a redirect never followed), else its class.
pub fn client_code(error: &ClientError) -> u8 {
    match error {
        ClientError::BaseUrl { .. }
        | ClientError::MissingApiKey
        | ClientError::UserAgent
        | ClientError::InsecureHttp { .. }
        | ClientError::Redirect { .. } => USAGE,
        _ => class_code(error.class()),
    }
}

/// The exit code for a store error: temporary (75) when the database is busy, cannot be
/// reached or its disk is full, a usage error (2) when the store named is not one, else a failure.
pub fn store_code(error: &StoreError) -> u8 {
    if error.is_temporary() {
        TEMPORARY
    } else if error.is_usage() {
        USAGE
    } else {
        FAILURE
    }
}

/// The exit code of an error class.
pub fn class_code(class: ErrorClass) -> u8 {
    match class {
        ErrorClass::Auth => AUTH,
        ErrorClass::Temporary => TEMPORARY,
        ErrorClass::Failure => FAILURE,
    }
}
