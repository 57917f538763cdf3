//! Durable SQLite storage: the dedup store and the inbox, both written through one group-commit
//! writer thread per database file (WAL, `synchronous=FULL`: a delivery is acknowledged only
//! once its row is on disk).
//!
//! Costs to know when sizing a receiver:
//! - Memory: each store keeps the ids and signatures it holds in memory (about 100 bytes per
//!   remembered delivery: 24 h of deliveries by default, plus the inbox's pending and dead
//!   ones), so that writing one is an append. A million remembered deliveries is about 100 MB.
//! - Opening reads every remembered row once to build that index.
//! - Several stores, or processes, may share one file and stay correct: a store that sees
//!   another connection's commit reloads its index before its next batch. That reload reads the
//!   whole file while holding the write lock (about 2 s per million remembered deliveries), at
//!   every switch between writers, so sharing suits light traffic only. Give each busy process
//!   its own inbox file; busy processes that must share deduplication are better served by a
//!   [`crate::dedup::DedupStore`] of their own over a server database.
//! - Disk: the WAL is rewound once it passes 32 MiB, so it stays about that size under load.

mod dedup;
mod inbox;
mod record;
mod writer;

/// The `rusqlite` this crate is built with: your connections must be of this version to be
/// handed to [`SqliteRecorder::record`].
pub use rusqlite;

pub use dedup::SqliteDedupStore;
pub use inbox::SqliteInbox;
pub(crate) use record::RecordProbe;
pub use record::SqliteRecorder;
