//! Real calls from a dialer (contract sections 1 to 3 and 6): an agency switched on by the
//! operator has its dialer's calls ingested, attributed to a registered agent, archived,
//! scored and announced with `call.scored`; a re-disposition scores a call again, silently.
//!
//! # Layout
//! - [`record`]: the dialer record and what makes one invalid.
//! - [`attribution`]: which registered agent a call belongs to.
//! - [`audio`]: the archive of recordings, the signed links that serve them, retention.
//! - [`input`]: the ingest file read whole: a regular file or stdin, capped, UTF-8.
//! - [`ingest`]: the checks, drops and storage of a batch of records.
//! - [`redisposition`]: a new disposition scored again.
//! - [`replay`]: a past dialer file's `startedAt` moved into the last hours.
//! - [`sweep`]: the retention of archived recordings.
//!
//! Scoring itself is [`crate::scoring::real_call`]; the operator commands are in
//! [`crate::operator`].

pub mod attribution;
pub mod audio;
pub mod ingest;
pub mod input;
pub mod record;
pub mod redisposition;
pub mod replay;
pub mod sweep;
