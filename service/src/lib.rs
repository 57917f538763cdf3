//! A compact, complete implementation of the Roleplay and Call-Scoring Service v1 API
//! (axum + SQLite), run locally by tenants as a stateful sandbox and by our own tests.

#[path = "db/calls.rs"]
pub mod calls_sql;
pub mod live;
#[path = "db/outbox.rs"]
pub mod outbox_sql;
pub mod practice;
pub mod scoring;
pub mod session_token;
pub mod webhook;
