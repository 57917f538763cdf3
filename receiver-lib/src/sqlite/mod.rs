//! Durable SQLite storage: the dedup store and the inbox, both written through one group-commit
//! writer thread per database file.

mod dedup;
mod inbox;
mod worker;
mod writer;

pub use dedup::SqliteDedupStore;
pub use inbox::{Accepted, InboxEntry, InboxPolicy, Settled, SqliteInbox};
pub use worker::{Step, process_next, run_inbox_worker};
