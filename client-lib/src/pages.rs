//! Cursor pagination as a stream: follows `nextCursor` until it is `null`, never looks inside a
//! cursor, and drops a row already yielded (a page can shift when calls arrive between requests).

use std::collections::{HashSet, VecDeque};
use std::future::Future;

use futures_util::{Stream, TryStreamExt, stream};

use super::error::ClientError;
use super::types::{HasId, Page};

/// What the page stream does next.
enum Next {
    /// Fetch the page at this cursor (`None`: the first page).
    Fetch(Option<String>),
    /// The last page was read.
    Done,
    /// The service handed back a cursor already followed: fail with this message.
    Loop(String),
}

/// Turns a page fetcher into a stream of rows.
pub(super) fn paginate<T, F, Fut>(
    fetch: F,
) -> impl Stream<Item = Result<T, ClientError>> + Send + 'static
where
    T: HasId + Send + 'static,
    F: FnMut(Option<String>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Page<T>, ClientError>> + Send + 'static,
{
    paginate_pages(fetch, Remember::Every)
        .map_ok(|rows| stream::iter(rows.into_iter().map(Ok)))
        .try_flatten()
}

/// Which rows a page stream remembers, to drop a row a shifted page repeats.
#[derive(Debug, Clone, Copy)]
pub(super) enum Remember {
    /// Every row yielded (memory grows with the listing).
    Every,
    /// The rows of the last `n` pages: a repeat comes from a page shifting by the rows that
    /// arrived between two requests, so it is one of the rows just before; memory stays flat.
    LastPages(usize),
}

/// The ids yielded recently (or all of them).
struct Seen {
    remember: Remember,
    ids: HashSet<String>,
    pages: VecDeque<Vec<String>>,
}

impl Seen {
    fn keep_new<T: HasId>(&mut self, mut rows: Vec<T>) -> Vec<T> {
        rows.retain(|row| self.ids.insert(row.id().to_owned()));
        if let Remember::LastPages(n) = self.remember {
            self.pages
                .push_back(rows.iter().map(|r| r.id().to_owned()).collect());
            while self.pages.len() > n.max(1) {
                for id in self.pages.pop_front().unwrap_or_default() {
                    self.ids.remove(&id);
                }
            }
        }
        rows
    }
}

/// Turns a page fetcher into a stream of pages, each without the rows an earlier page yielded
/// (of those it remembers).
pub(super) fn paginate_pages<T, F, Fut>(
    fetch: F,
    remember: Remember,
) -> impl Stream<Item = Result<Vec<T>, ClientError>> + Send + 'static
where
    T: HasId + Send + 'static,
    F: FnMut(Option<String>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<Page<T>, ClientError>> + Send + 'static,
{
    // State: the fetcher, what to do next, and every cursor followed so far (a cursor handed
    // back again would loop for ever).
    let pages = stream::try_unfold(
        (fetch, Next::Fetch(None), HashSet::new()),
        |(mut fetch, next, mut followed)| async move {
            let cursor = match next {
                Next::Fetch(cursor) => cursor,
                Next::Done => return Ok(None),
                Next::Loop(message) => return Err(ClientError::Decode(message)),
            };
            let page = fetch(cursor).await?;
            let next = match page.next_cursor {
                None => Next::Done,
                Some(next) if followed.insert(next.clone()) => Next::Fetch(Some(next)),
                // This page's rows are good; the stream fails after them.
                Some(_) => Next::Loop(format!(
                    "the service handed back a cursor already followed (after {} cursors); \
                     stopping",
                    followed.len()
                )),
            };
            Ok(Some((page.data, (fetch, next, followed))))
        },
    );
    let mut seen = Seen {
        remember,
        ids: HashSet::new(),
        pages: VecDeque::new(),
    };
    pages.map_ok(move |rows| seen.keep_new(rows))
}

#[cfg(test)]
mod tests {
    use std::future::ready;

    use futures_util::StreamExt;

    use super::*;

    struct Row(String);

    impl HasId for Row {
        fn id(&self) -> &str {
            &self.0
        }
    }

    /// Pages whose cursors run A, B, then back to A, as a broken server might hand them.
    fn cycling(cursor: Option<String>) -> Page<Row> {
        let (row, next) = match cursor.as_deref() {
            None => ("r1", "A"),
            Some("A") => ("r2", "B"),
            _ => ("r3", "A"),
        };
        Page {
            data: vec![Row(row.to_owned())],
            next_cursor: Some(next.to_owned()),
        }
    }

    #[tokio::test]
    async fn remembering_the_last_pages_drops_a_repeat_at_a_boundary_and_forgets_older_rows() {
        let pages = |cursor: Option<String>| {
            let (ids, next): (&[&str], _) = match cursor.as_deref() {
                None => (&["a", "b"], Some("1")),
                Some("1") => (&["b", "c"], Some("2")),
                Some("2") => (&["d", "e"], Some("3")),
                _ => (&["a", "f"], None),
            };
            ready(Ok::<_, ClientError>(Page {
                data: ids.iter().map(|id| Row((*id).to_owned())).collect(),
                next_cursor: next.map(str::to_owned),
            }))
        };
        let stream = paginate_pages(pages, Remember::LastPages(2));
        let got: Vec<Vec<String>> = stream
            .map(|page| page.expect("page").into_iter().map(|r| r.0).collect())
            .collect()
            .await;
        assert_eq!(
            got,
            [vec!["a", "b"], vec!["c"], vec!["d", "e"], vec!["a", "f"]],
            "b repeated at a boundary is dropped; a, three pages back, is forgotten"
        );
    }

    #[tokio::test]
    async fn a_cursor_handed_back_again_ends_the_stream_with_an_error_instead_of_looping() {
        let stream = paginate(|cursor| ready(Ok::<_, ClientError>(cycling(cursor))));
        let items: Vec<Result<Row, ClientError>> = stream.take(10).collect().await;
        let ids: Vec<&str> = items
            .iter()
            .filter_map(|r| r.as_ref().ok())
            .map(Row::id)
            .collect();
        assert_eq!(
            ids,
            ["r1", "r2", "r3"],
            "every page before the loop is yielded"
        );
        assert!(
            matches!(items.last(), Some(Err(ClientError::Decode(message))) if message.contains("already followed")),
            "then the loop is an error"
        );
        assert_eq!(items.len(), 4, "and the stream ends there");
    }
}
