//! A compact, complete implementation of the Roleplay and Call-Scoring Service v1 API
//! (axum + SQLite), run locally by tenants as a stateful sandbox and by our own tests.

pub mod live;
pub mod practice;
pub mod session_token;
pub mod webhook;
