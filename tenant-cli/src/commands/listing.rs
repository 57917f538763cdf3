//! What the list commands share: fetch one page (at `--cursor`) or every page (`--all`), then
//! print it as the contract's `{ data, nextCursor }` envelope with `--json`, or as a table with a
//! count and the cursor of the next page on stderr.

use std::future::Future;

use futures_util::{Stream, TryStreamExt};
use serde::Serialize;

use crate::output::Output;
use svc_client::{ClientError, Page};

/// Fetches and prints a list. `every` (the client's stream over all pages) is driven when `all`
/// is set, `one` (the client's single-page request) otherwise; both are lazy, so the other one
/// sends nothing. `noun` names a row in the notes ("agent" gives "2 agent(s)" and
/// "more agents: …"); `print_rows` draws the table.
///
/// # Errors
/// The client's error, or stdout being closed.
pub(super) async fn print_pages<T: Serialize>(
    out: &Output,
    all: bool,
    every: impl Stream<Item = Result<T, ClientError>>,
    one: impl Future<Output = Result<Page<T>, ClientError>>,
    noun: &str,
    print_rows: impl FnOnce(&Output, &[T]) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let page = if all {
        Page {
            data: every.try_collect().await?,
            next_cursor: None,
        }
    } else {
        one.await?
    };
    if out.json {
        // `Page` serialises as the contract's envelope: `{ data, nextCursor }`.
        return out.json_data(&page);
    }
    print_rows(out, &page.data)?;
    out.note(&format!("{} {noun}(s)", page.data.len()));
    if let Some(cursor) = page.next_cursor {
        out.note(&format!("more {noun}s: --cursor {cursor} (or --all)"));
    }
    Ok(())
}
