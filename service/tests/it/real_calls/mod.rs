//! Real calls from a dialer, as a tenant and the operator notice them: records
//! ingested through the library (`Ingest`, with the service's manual clock) and through the
//! operator binary, then read through the API of the running service (GET /calls
//! `source=real_call`, GET /calls/{callId}, the audio link) and the webhook sink.
//!
//! - [`ingest`]: drop reasons, invalid records, idempotent re-ingest, the allowance.
//! - [`attribution`]: the handles, in order, inside the record's agency.
//! - [`scoring`]: the bands, the scorecard rule and shape, a call that cannot be scored.
//! - [`audio`]: the signed link, `Range`, expiry and tampering, a missing archive file.
//! - [`confinement`]: recordings only from the ingest file's directory, only audio, served inert.
//! - [`retention`]: the sweep of archived recordings after 30 days.
//! - [`redisposition`]: a new score with no webhook.
//! - [`limits`]: bounds on records and on the ingest file (sizes, duplicate keys, FIFOs).
//! - [`listing`]: order and window by `startedAt`, the detail's shape.
//! - [`webhooks`]: both outcomes, signed.
//! - [`operator`], [`operator_ingest`]: the real `svc-service` binary (`agency …`, `calls …`).

mod attribution;
mod audio;
mod confinement;
mod full_disk;
mod ingest;
mod limits;
mod listing;
mod operator;
mod operator_ingest;
mod redisposition;
mod retention;
mod scoring;
mod support;
mod webhooks;
