//! Integration tests of svc-service: a real server on 127.0.0.1:0 with a temp database.

mod agencies;
mod agents;
mod auth;
mod cors;
mod faults;
mod hardening;
mod helpers;
mod hostile;
mod isolation;
mod operator;
mod ops;
mod practice_calls;
mod practice_helpers;
mod practice_outbox;
mod practice_tokens;
mod practice_webhooks;
mod real_calls;
mod roster;
mod skeleton;
