//! Tests of `svc-client` against `svc-fixtures`' wiremock mocks of the v1 API.
//!
//! - [`endpoints`]: retries and 429, pagination, lenient reads, the error envelope, redaction.
//! - [`builder`]: what a caller sets: its own HTTP client, the User-Agent, typed error codes,
//!   messages that name no command-line flag.
//! - [`network`]: a slow or lossy network (`svc_test_support::proxy`): timeouts that cut a stalled
//!   body, resets, a black hole, and the bound of one call.

mod builder;
mod endpoints;
mod helpers;
mod network;
