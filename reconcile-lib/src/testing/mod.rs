//! The conformance suite of the [`Sink`] trait (feature `testing`): each behaviour a sink owes
//! the engine is a public async function over any sink, and [`sink_suite!`] turns them into
//! one `#[test]` each for your sink, in your own tests. The memory sink and `svc-cli`'s store
//! (SQLite and PostgreSQL) pass it in this workspace's tests.
//!
//! Turn the feature on as a dev-dependency, and give the macro a module name and a function
//! that makes a fresh, empty sink for one test (given the test's name, say to make a schema
//! of its own; `None` skips the test):
//!
//! ```toml
//! [dev-dependencies]
//! svc-reconcile = { version = "0.1", features = ["testing"] }
//! ```
//!
//! ```ignore
//! // tests/sink.rs
//! async fn fresh(_test: &str) -> Option<MyTables> {
//!     Some(MyTables::open_empty().await)
//! }
//!
//! // Every behaviour:
//! svc_reconcile::testing::sink_suite!(my_tables, fresh);
//! // Or only those of the parts a sink has (see below):
//! svc_reconcile::testing::sink_suite!(my_tables_core, fresh; required, lock);
//! ```
//!
//! The behaviours come in groups, after what a sink implements beyond the required methods:
//!
//! | group | what the sink has | behaviours |
//! |---|---|---|
//! | `required` | the required methods (every sink) | [`a_new_sink_knows_no_call_and_has_no_watermark`], [`new_calls_are_stored_once_and_known_by_their_scored_at`], [`a_changed_score_is_a_silent_change_and_an_older_detail_never_replaces_a_newer`], [`only_a_complete_window_moves_the_watermark`], [`a_call_is_new_once_whichever_path_brings_it_first`] |
//! | `kept_failures` | kept failures and runs ([`Sink::keeps_failures`], [`Sink::start_run`], [`Sink::failures_to_retry`]) | [`a_kept_failure_is_retried_by_later_runs_until_stored_or_out_of_attempts`] |
//! | `ledger` | a ledger of webhooks ([`Sink::ledger_since`], [`Sink::settle_awaiting`], [`Sink::awaiting`]) | [`with_a_ledger_a_call_without_webhook_awaits_then_is_recovered`] |
//! | `lock` | a run lock that excludes a second run ([`Sink::lock`] not `()`) | [`a_second_run_cannot_take_the_lock_while_the_first_holds_it`] |
//!
//! Each test runs on a multi-threaded runtime of its own (two workers, as
//! `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]`), so a sink may do blocking
//! work through `tokio::task::spawn_blocking`. A failed check panics saying what differed. The
//! functions can also be called one by one, from any async test, on a sink of your choosing
//! (each expects a fresh, empty one).

mod behaviours;
mod calls;

use std::future::Future;

use crate::Sink;

pub use behaviours::{
    a_call_is_new_once_whichever_path_brings_it_first,
    a_changed_score_is_a_silent_change_and_an_older_detail_never_replaces_a_newer,
    a_kept_failure_is_retried_by_later_runs_until_stored_or_out_of_attempts,
    a_new_sink_knows_no_call_and_has_no_watermark,
    a_second_run_cannot_take_the_lock_while_the_first_holds_it,
    new_calls_are_stored_once_and_known_by_their_scored_at,
    only_a_complete_window_moves_the_watermark,
    with_a_ledger_a_call_without_webhook_awaits_then_is_recovered,
};

/// Runs one behaviour of the suite for test `test`: makes the sink with `make` (`None` skips
/// the test, say for a database the environment does not name), then checks it, both on a
/// multi-threaded runtime of their own. What each test [`sink_suite!`] writes calls.
///
/// # Panics
/// When the runtime cannot be built, or the behaviour's checks fail.
pub fn run<S, M, Made, B, Checked>(test: &'static str, make: M, behaviour: B)
where
    S: Sink,
    M: FnOnce(&'static str) -> Made,
    Made: Future<Output = Option<S>>,
    B: FnOnce(S) -> Checked,
    Checked: Future<Output = ()>,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime for the sink suite");
    runtime.block_on(async {
        if let Some(sink) = make(test).await {
            behaviour(sink).await;
        }
    });
}

/// Writes the conformance suite for one kind of sink: a module `$name` with one `#[test]` per
/// behaviour, each on a fresh sink from `$make` (a function, or closure, from the test's name
/// to a future of `Option<sink>`: `None` skips it). With no groups, every behaviour; else those
/// of the groups named, out of `required`, `kept_failures`, `ledger` and `lock` (the module
/// documentation says which sink needs which).
///
/// ```
/// use svc_reconcile::MemorySink;
///
/// async fn fresh(_test: &str) -> Option<MemorySink> {
///     Some(MemorySink::default())
/// }
///
/// svc_reconcile::testing::sink_suite!(memory, fresh);
/// svc_reconcile::testing::sink_suite!(memory_required, fresh; required);
/// # fn main() {}
/// ```
#[doc(hidden)]
#[macro_export]
macro_rules! __sink_suite {
    ($name:ident, $make:expr $(,)?) => {
        $crate::testing::sink_suite!($name, $make; required, kept_failures, ledger, lock);
    };
    ($name:ident, $make:expr; $($group:ident),+ $(,)?) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            $($crate::testing::sink_suite!(@group $make, $group);)+
        }
    };
    (@group $make:expr, required) => {
        $crate::testing::sink_suite!(@test $make, a_new_sink_knows_no_call_and_has_no_watermark);
        $crate::testing::sink_suite!(@test $make, new_calls_are_stored_once_and_known_by_their_scored_at);
        $crate::testing::sink_suite!(@test $make, a_changed_score_is_a_silent_change_and_an_older_detail_never_replaces_a_newer);
        $crate::testing::sink_suite!(@test $make, only_a_complete_window_moves_the_watermark);
        $crate::testing::sink_suite!(@test $make, a_call_is_new_once_whichever_path_brings_it_first);
    };
    (@group $make:expr, kept_failures) => {
        $crate::testing::sink_suite!(@test $make, a_kept_failure_is_retried_by_later_runs_until_stored_or_out_of_attempts);
    };
    (@group $make:expr, ledger) => {
        $crate::testing::sink_suite!(@test $make, with_a_ledger_a_call_without_webhook_awaits_then_is_recovered);
    };
    (@group $make:expr, lock) => {
        $crate::testing::sink_suite!(@test $make, a_second_run_cannot_take_the_lock_while_the_first_holds_it);
    };
    (@test $make:expr, $behaviour:ident) => {
        #[test]
        fn $behaviour() {
            $crate::testing::run(stringify!($behaviour), $make, $crate::testing::$behaviour);
        }
    };
}

#[doc(inline)]
pub use crate::__sink_suite as sink_suite;
