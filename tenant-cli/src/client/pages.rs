//! Cursor pagination as a stream: follows `nextCursor` until it is `null`, never looks inside a
//! cursor, and drops a row already yielded (a page can shift when calls arrive between requests).

use std::collections::HashSet;
use std::future::{Future, ready};

use futures_util::{Stream, TryStreamExt, stream};

use super::error::ClientError;
use super::types::{HasId, Page};

/// Turns a page fetcher into a stream of rows.
pub(super) fn paginate<T, F, Fut>(
    fetch: F,
) -> impl Stream<Item = Result<T, ClientError>> + Send + 'static
where
    T: HasId + Send + 'static,
    F: FnMut(Option<String>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Page<T>, ClientError>> + Send + 'static,
{
    // State: the fetcher and the cursor to fetch next (`None` once the last page was read).
    let pages = stream::try_unfold(
        (fetch, Some(None::<String>)),
        |(mut fetch, next)| async move {
            let Some(cursor) = next else { return Ok(None) };
            let page = fetch(cursor.clone()).await?;
            if page.next_cursor.is_some() && page.next_cursor == cursor {
                return Err(ClientError::Decode(
                    "the service handed back the same cursor twice".into(),
                ));
            }
            let next = page.next_cursor.map(Some);
            Ok(Some((page.data, (fetch, next))))
        },
    );
    let mut seen = HashSet::new();
    pages
        .map_ok(|rows| stream::iter(rows.into_iter().map(Ok)))
        .try_flatten()
        .try_filter(move |row| ready(seen.insert(row.id().to_owned())))
}
