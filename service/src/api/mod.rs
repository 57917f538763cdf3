//! The HTTP API under `/v1`: one module per resource, each exposing `router()`, merged here.
//! Handlers are thin: extract, validate through [`crate::domain`], call [`crate::db::Db`],
//! shape the response.

pub mod agencies;
pub mod agents;
pub mod audio;
pub mod call_detail;
pub mod calls;
pub mod openapi;
pub mod paging;
pub mod roleplay;
pub mod session;
pub mod webhook_doc;

use axum::Router;

use crate::state::AppState;

/// Every `/v1` route (paths relative to `/v1`).
pub fn routes() -> Router<AppState> {
    Router::new()
        .merge(agencies::router())
        .merge(agents::router())
        .merge(session::router())
        .merge(roleplay::router())
        .merge(calls::router())
        .merge(audio::router())
        .merge(crate::live::socket::router())
        .merge(openapi::router())
}
