//! Database URLs: telling one from a file path, and writing one with its password hidden, for
//! every message that names the database. A connection string is a URL only when it starts
//! with `postgres://` or `postgresql://`; any other is a libpq key=value string
//! (`host=db password='a b'`), whose password values are hidden by libpq's quoting rules.

use std::ops::Range;

/// Whether `location` names a PostgreSQL database (`postgres://…` or `postgresql://…`) rather
/// than a file.
pub fn is_postgres_url(location: &str) -> bool {
    let lower = location.get(..13).unwrap_or(location).to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// `url` with every credential replaced by `***`, for messages and logs.
///
/// Text that starts with `postgres://` or `postgresql://` (in any case, after any whitespace)
/// is a URL, as tokio-postgres's `Config::from_str` tells one: the password of its user info
/// and the value of every query parameter whose (percent-decoded) name holds `password` are
/// hidden. Anything else is a key=value connection string (`host=db user=svc password=…`),
/// even one whose values hold `://`: the value of every parameter whose name holds `password`
/// is hidden whole, quoted or not (`'p a\'ss'`), read as libpq and as tokio-postgres read it;
/// a string that does not parse (an unterminated quote) is hidden from its `password` on.
///
/// The URL is read as the driver (tokio-postgres) reads it, not as a web URL: the user info
/// runs to an `@` whatever comes before it, so a password holding a raw `/`, `?` or `#` is
/// hidden whole; a raw `@` in it is hidden too (the user info then ends at the last `@`
/// before the host's `/` or `?`).
pub fn redact_url(url: &str) -> String {
    let url_start = url.len() - url.trim_start().len();
    if !is_postgres_url(&url[url_start..]) {
        return redact_key_values(url);
    }
    // `postgres://` or `postgresql://`: its `://` is the first.
    let scheme_end = url_start + url[url_start..].find("://").unwrap_or(0);
    let (scheme, rest) = url.split_at(scheme_end + 3);
    let mut out = String::with_capacity(url.len());
    out.push_str(scheme);
    // A `?` in what would be a user name without a password is a query holding an `@` (as in
    // `postgres://db/calls?password=p@ss`): read as a query, so its values are hidden.
    let user_info =
        user_info_end(rest).filter(|&at| rest[..at].contains(':') || !rest[..at].contains('?'));
    let rest = match user_info {
        Some(at) => {
            let user_info = &rest[..at];
            match user_info.split_once(':') {
                Some((user, _)) => {
                    out.push_str(user);
                    out.push_str(":***");
                }
                None => out.push_str(user_info),
            }
            if user_info.contains('?') {
                // What the driver reads as user info began a query whose value held `:` and
                // `@` (`?application_name=http://u@x&password=…`): the rest is read as that
                // query's parameters, whatever `?` follows, so no password in it is shown.
                out.push('@');
                redact_query(&rest[at + 1..], &mut out);
                return out;
            }
            &rest[at..]
        }
        None => rest,
    };
    match rest.split_once('?') {
        Some((head, query)) => {
            out.push_str(head);
            out.push('?');
            redact_query(query, &mut out);
        }
        None => out.push_str(rest),
    }
    out
}

/// Where the user info of the URL after its scheme ends (the index of its `@`): the driver
/// takes everything up to the first `@`; a password holding a raw `@` extends it to the last
/// `@` before the host's end.
fn user_info_end(rest: &str) -> Option<usize> {
    let first = rest.find('@')?;
    let host_end = rest[first + 1..]
        .find(['/', '?'])
        .map_or(rest.len(), |end| first + 1 + end);
    rest[..host_end].rfind('@')
}

/// The query as the driver reads it (a name up to `=`, a value up to `&`), with the value of
/// each password parameter hidden, appended to `out`.
fn redact_query(mut query: &str, out: &mut String) {
    while !query.is_empty() {
        let Some(eq) = query.find('=') else {
            // Not a parameter the driver accepts; no value in it to hide.
            out.push_str(query);
            return;
        };
        let key = &query[..eq];
        let (value, next) = match query[eq + 1..].find('&') {
            Some(amp) => (&query[eq + 1..eq + 1 + amp], Some(eq + 1 + amp)),
            None => (&query[eq + 1..], None),
        };
        out.push_str(key);
        out.push('=');
        out.push_str(if is_secret(&percent_decode(key)) {
            "***"
        } else {
            value
        });
        match next {
            Some(amp) => {
                out.push('&');
                query = &query[amp + 1..];
            }
            None => return,
        }
    }
}

/// Whether a connection parameter named `key` holds a secret (`password`, `sslpassword`).
fn is_secret(key: &str) -> bool {
    key.trim().to_ascii_lowercase().contains("password")
}

/// `text` with its `%XX` escapes decoded (others kept), as the driver decodes names.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|b| char::from(*b).to_digit(16));
        match (bytes[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(high), Some(low)) => {
                // Two hex digits make a byte.
                decoded.push(u8::try_from(high * 16 + low).unwrap_or(b'%'));
                i += 3;
            }
            (byte, _, _) => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

/// A key=value connection string (`host=/tmp user=svc password='a b'`) with the value of each
/// password parameter replaced by `***`, read by libpq's rules: `key = value` pairs apart by
/// whitespace, a value quoted with `'` (`\` escaping the next character, so `\'` and `\\`)
/// or running to the next whitespace (`\` escaping there too).
///
/// libpq counts only ASCII whitespace (C `isspace`), tokio-postgres any Unicode whitespace, so
/// the string is read both ways and every value that either reading makes a password's is
/// hidden. A string either cannot read (a key without `=`, an unterminated quote) is hidden from
/// the first word holding `password` on, as no reading says where that password ends.
fn redact_key_values(text: &str) -> String {
    let readings = [is_c_space, char::is_whitespace].map(|space| secret_values(text, space));
    let [Some(libpq), Some(tokio)] = readings else {
        return hide_from_password(text);
    };
    let mut secrets: Vec<Range<usize>> = libpq.into_iter().chain(tokio).collect();
    secrets.sort_by_key(|secret| secret.start);
    // The two readings mostly find the same values; one hidden span for those that meet.
    let mut spans: Vec<Range<usize>> = Vec::with_capacity(secrets.len());
    for secret in secrets {
        match spans.last_mut() {
            Some(last) if secret.start <= last.end => last.end = last.end.max(secret.end),
            _ => spans.push(secret),
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for span in spans {
        out.push_str(&text[at..span.start]);
        out.push_str("***");
        at = span.end;
    }
    out.push_str(&text[at..]);
    out
}

/// The whitespace of libpq (C `isspace` in the C locale).
fn is_c_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\u{b}' | '\u{c}' | '\r')
}

/// Where in `text` the values of its password parameters are, as a driver that counts `space`
/// as whitespace reads the key=value string; `None` when it cannot read it (a key without `=`,
/// an unterminated quote).
fn secret_values(text: &str, space: fn(char) -> bool) -> Option<Vec<Range<usize>>> {
    let skip = |at: usize| {
        text[at..]
            .find(|c| !space(c))
            .map_or(text.len(), |len| at + len)
    };
    let mut secrets = Vec::new();
    let mut at = skip(0);
    while at < text.len() {
        let key_end = text[at..]
            .find(|c| space(c) || c == '=')
            .map_or(text.len(), |len| at + len);
        let key = &text[at..key_end];
        let eq = skip(key_end);
        if key.is_empty() || !text[eq..].starts_with('=') {
            return None;
        }
        let value_start = skip(eq + 1);
        let value_end = value_start + value_len(&text[value_start..], space)?;
        if is_secret(key) {
            secrets.push(value_start..value_end);
        }
        at = skip(value_end);
    }
    Some(secrets)
}

/// The length of the value `text` starts with: quoted with `'` (through the closing quote) or
/// running to the next `space`, `\` escaping the next character in either; `None` for a quote
/// that is never closed.
fn value_len(text: &str, space: fn(char) -> bool) -> Option<usize> {
    let quoted = text.starts_with('\'');
    let mut chars = text.char_indices().skip(usize::from(quoted));
    while let Some((at, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '\'' if quoted => return Some(at + 1),
            c if !quoted && space(c) => return Some(at),
            _ => {}
        }
    }
    (!quoted).then_some(text.len())
}

/// `text` cut before the word (whitespace to whitespace) that first holds `password` (in any
/// case), with `***` in place of the rest: for a connection string no reading can tell the end
/// of a password in.
fn hide_from_password(text: &str) -> String {
    // ASCII lowercasing keeps every byte where it was.
    let Some(found) = text.to_ascii_lowercase().find("password") else {
        return text.to_owned();
    };
    let word = text[..found]
        .char_indices()
        .rev()
        .find(|&(_, c)| c.is_whitespace())
        .map_or(0, |(at, c)| at + c.len_utf8());
    format!("{}***", &text[..word])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_of_a_url_is_hidden_and_the_rest_kept() {
        assert_eq!(
            redact_url("postgres://svc:s3cr%40t@db.example:5432/calls?sslmode=disable"),
            "postgres://svc:***@db.example:5432/calls?sslmode=disable"
        );
        assert_eq!(
            redact_url("postgresql://svc@%2Frun%2Fpg/calls?password=hunter2&x=1"),
            "postgresql://svc@%2Frun%2Fpg/calls?password=***&x=1"
        );
        assert_eq!(
            redact_url("host=/tmp user=svc password=hunter2"),
            "host=/tmp user=svc password=***"
        );
        assert_eq!(redact_url("postgres://db/calls"), "postgres://db/calls");
    }

    #[test]
    fn a_password_holding_a_raw_slash_question_mark_or_at_is_hidden_whole() {
        assert_eq!(
            redact_url("postgres://svc:pa/ss?wo#rd@db.example:5432/calls?sslmode=disable"),
            "postgres://svc:***@db.example:5432/calls?sslmode=disable"
        );
        assert_eq!(
            redact_url("postgres://svc:12/secret@db/calls"),
            "postgres://svc:***@db/calls"
        );
        assert_eq!(
            redact_url("postgres://svc:p@ss@db/calls"),
            "postgres://svc:***@db/calls"
        );
        assert_eq!(
            redact_url("postgresql://svc:s3cr%2Ft@[::1]:5432/calls"),
            "postgresql://svc:***@[::1]:5432/calls"
        );
    }

    #[test]
    fn every_password_parameter_is_hidden_whatever_its_name_is_spelled() {
        assert_eq!(
            redact_url("postgres://db/calls?user=svc&password=hunter2&password=again"),
            "postgres://db/calls?user=svc&password=***&password=***"
        );
        assert_eq!(
            redact_url("postgres://db/calls?pass%77ord=hunter2&sslmode=disable"),
            "postgres://db/calls?pass%77ord=***&sslmode=disable"
        );
        assert_eq!(
            redact_url("postgres://db/calls?%70%61%73%73%77%6F%72%64=hunter2"),
            "postgres://db/calls?%70%61%73%73%77%6F%72%64=***"
        );
        assert_eq!(
            redact_url("postgres://db/calls?PASSWORD=hunter2&sslpassword=key%20pass"),
            "postgres://db/calls?PASSWORD=***&sslpassword=***"
        );
        assert_eq!(
            redact_url("postgres://db/calls?password=p@ss"),
            "postgres://db/calls?password=***"
        );
        assert_eq!(
            redact_url("postgres://db?sslmode=disable&password=p@ss&user=svc"),
            "postgres://db?sslmode=disable&password=***&user=svc"
        );
        assert_eq!(
            redact_url("postgres://u:pw@db/calls?application_name=me@host&password=x/y?z"),
            "postgres://u:***@db/calls?application_name=me@host&password=***"
        );
    }

    #[test]
    fn quoted_and_escaped_values_of_a_connection_string_are_hidden_whole() {
        assert_eq!(
            redact_url("host=/tmp password = 'hunter 2 \\' more' user=svc"),
            "host=/tmp password = *** user=svc"
        );
        assert_eq!(
            redact_url("password=a\\ b dbname=calls"),
            "password=*** dbname=calls"
        );
        assert_eq!(redact_url("password=é\\"), "password=***");
    }

    /// `redact_url(text)`, checked to hold none of `secrets` and all of `kept`.
    fn redacted(text: &str, secrets: &[&str], kept: &[&str]) -> String {
        let out = redact_url(text);
        for secret in secrets {
            assert!(!out.contains(secret), "{secret:?} shows in {out:?}");
        }
        for part in kept {
            assert!(out.contains(part), "{part:?} is missing from {out:?}");
        }
        out
    }

    #[test]
    fn a_key_value_string_whose_values_hold_a_url_is_not_read_as_one() {
        assert_eq!(
            redacted(
                "host=db user=app password=s3cret application_name=http://x",
                &["s3cret"],
                &["host=db", "user=app", "application_name=http://x"],
            ),
            "host=db user=app password=*** application_name=http://x"
        );
        assert_eq!(
            redacted(
                "application_name=postgres://u:v@x host=db user=app password=s3cret",
                &["s3cret"],
                &["host=db", "user=app", "postgres://u:v@x"],
            ),
            "application_name=postgres://u:v@x host=db user=app password=***"
        );
        assert_eq!(
            redacted(
                "host=db user=app password=s3c://ret@x",
                &["s3c", "ret@x"],
                &["host=db", "user=app"],
            ),
            "host=db user=app password=***"
        );
    }

    #[test]
    fn a_url_is_told_by_its_scheme_in_any_case_after_any_whitespace() {
        assert_eq!(
            redacted(
                "  POSTGRESQL://app:s3cret@db/calls",
                &["s3cret"],
                &["app", "@db/calls"],
            ),
            "  POSTGRESQL://app:***@db/calls"
        );
        assert_eq!(
            redacted(
                "Postgres://app:s3cret@db/calls?password=s3cret2",
                &["s3cret"],
                &["app", "@db/calls"],
            ),
            "Postgres://app:***@db/calls?password=***"
        );
    }

    #[test]
    fn a_url_whose_query_holds_a_url_is_redacted_as_before() {
        assert_eq!(
            redacted(
                "postgres://app:s3cret@db:5432/calls?application_name=http://x&password=s3cret2",
                &["s3cret"],
                &["app", "@db:5432/calls", "application_name=http://x"],
            ),
            "postgres://app:***@db:5432/calls?application_name=http://x&password=***"
        );
        assert_eq!(
            redacted(
                "postgresql://db/calls?user=app&application_name=http://x&password=s3cret",
                &["s3cret"],
                &["db/calls", "user=app", "application_name=http://x"],
            ),
            "postgresql://db/calls?user=app&application_name=http://x&password=***"
        );
        // A value with `:` and `@` before the password: the driver takes what runs to the `@`
        // as user info, and the password after it stays hidden.
        assert_eq!(
            redacted(
                "postgres://db/calls?application_name=http://u@x&password=s3cret",
                &["s3cret"],
                &["db/calls"],
            ),
            "postgres://db/calls?application_name=http:***@x&password=***"
        );
        assert_eq!(
            redacted(
                "postgres://db/calls?application_name=http://u@x&password=s3cret?sslmode=disable",
                &["s3cret"],
                &["db/calls"],
            ),
            "postgres://db/calls?application_name=http:***@x&password=***"
        );
    }

    #[test]
    fn a_quoted_password_with_spaces_at_signs_and_escaped_quotes_is_hidden_whole() {
        assert_eq!(
            redacted(
                r"password='p a\'ss@x://y' host=db user=app",
                &["p a", "ss@x", "://y", "'"],
                &["host=db", "user=app"],
            ),
            "password=*** host=db user=app"
        );
        // `\\` is an escaped backslash: the quote after it ends the value.
        assert_eq!(
            redacted(
                r"host=db password = 's3c=r\\' user=app",
                &["s3c", "=r", "\\"],
                &["host=db", "user=app"],
            ),
            "host=db password = *** user=app"
        );
        assert_eq!(
            redacted(
                r"host=db sslpassword='k\'e y' user=app password=s3c\ r\'et@x",
                &["k\\'e", "e y", "s3c", "et@x"],
                &["host=db", "user=app"],
            ),
            "host=db sslpassword=*** user=app password=***"
        );
        // A closing quote ends the value whatever follows it.
        assert_eq!(
            redacted(
                "password='s3cret'host=db user=app",
                &["s3cret"],
                &["host=db", "user=app"],
            ),
            "password=***host=db user=app"
        );
    }

    #[test]
    fn a_password_is_hidden_whether_a_driver_counts_unicode_whitespace_or_not() {
        // tokio-postgres ends a value at any Unicode whitespace, libpq at ASCII whitespace
        // (vertical tab included).
        assert_eq!(
            redacted(
                "host=db\u{a0}password=s3cret user=app",
                &["s3cret"],
                &["host=db", "user=app"],
            ),
            "host=db\u{a0}password=*** user=app"
        );
        assert_eq!(
            redacted(
                "host=db\u{b}password=s3cret user=app",
                &["s3cret"],
                &["host=db", "user=app"],
            ),
            "host=db\u{b}password=*** user=app"
        );
        assert_eq!(
            redacted(
                "password=s3c\u{a0}ret=x host=db user=app",
                &["s3c", "ret"],
                &["host=db", "user=app"],
            ),
            "password=*** host=db user=app"
        );
    }

    #[test]
    fn a_string_that_does_not_parse_is_hidden_from_its_password_on() {
        assert_eq!(
            redacted(
                "host=db user=app password='s3c ret host=x",
                &["s3c", "ret"],
                &["host=db", "user=app"],
            ),
            "host=db user=app ***"
        );
        // The quote of the host never closes: where the password ends is anyone's guess.
        assert_eq!(
            redacted(
                "host='db user=app password=s3cret",
                &["s3cret"],
                &["host='db", "user=app"],
            ),
            "host='db user=app ***"
        );
        // A Windows path whose `\'` escapes the quote meant to close it.
        assert_eq!(
            redacted(
                r"host='C:\' user=app password='s3cret'",
                &["s3cret"],
                &["host='C:", "user=app"],
            ),
            r"host='C:\' user=app ***"
        );
        assert_eq!(
            redacted(
                "host=db user=app password s3cret",
                &["s3cret"],
                &["host=db", "user=app"],
            ),
            "host=db user=app ***"
        );
        assert_eq!(
            redacted(
                "host=db user=app PASSWORD='s3cret",
                &["s3cret"],
                &["host=db", "user=app"],
            ),
            "host=db user=app ***"
        );
    }

    #[test]
    fn urls_are_told_from_paths() {
        assert!(is_postgres_url("postgres://db/calls"));
        assert!(is_postgres_url("PostgreSQL://db/calls"));
        assert!(!is_postgres_url("calls.db"));
        assert!(!is_postgres_url("./postgres://x"));
    }
}
