//! An error and its causes on one line, for the message a command prints before it exits.
//!
//! `anyhow`'s `{:#}` joins every cause with `": "`; an error whose own message already holds
//! its cause's text (thiserror's `#[error("sqlite: {0}")]` on a `#[from]` field is the usual
//! shape) then reads twice ("sqlite: disk is full: disk is full"). [`chain`] leaves out a cause
//! whose text the line already ends with.

use std::error::Error;

/// `error`'s message, then each cause's, joined with `": "`, leaving out a cause the line
/// already ends with (its text is in the message before it).
pub fn chain(error: &(dyn Error + 'static)) -> String {
    let mut line = error.to_string();
    let mut cause = error.source();
    while let Some(next) = cause {
        let text = next.to_string();
        if !text.is_empty() && !line.ends_with(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = next.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::chain;

    #[derive(Debug)]
    struct Leaf;

    impl std::fmt::Display for Leaf {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("No space left on device")
        }
    }

    impl std::error::Error for Leaf {}

    /// A message that holds its cause's text, and names it as its source too.
    #[derive(Debug)]
    struct Repeats(Leaf);

    impl std::fmt::Display for Repeats {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "sqlite: {}", self.0)
        }
    }

    impl std::error::Error for Repeats {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    /// A message that only names its cause as the source.
    #[derive(Debug)]
    struct Context(Repeats);

    impl std::fmt::Display for Context {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("storing call svc_call_1")
        }
    }

    impl std::error::Error for Context {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_already_in_the_message_is_said_once() {
        assert_eq!(
            chain(&Context(Repeats(Leaf))),
            "storing call svc_call_1: sqlite: No space left on device"
        );
    }

    #[test]
    fn an_error_without_causes_is_its_message() {
        assert_eq!(chain(&Leaf), "No space left on device");
    }
}
