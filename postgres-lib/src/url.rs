//! Database URLs: telling one from a file path, and writing one with its password hidden, for
//! every message that names the database.

/// Whether `location` names a PostgreSQL database (`postgres://…` or `postgresql://…`) rather
/// than a file.
pub fn is_postgres_url(location: &str) -> bool {
    let lower = location.get(..13).unwrap_or(location).to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// `url` with every credential replaced by `***`, for messages and logs: the password of the
/// user info and the value of every query parameter whose (percent-decoded) name holds
/// `password`. A key=value connection string gets the same treatment (quoted values included).
///
/// The URL is read as the driver (tokio-postgres) reads it, not as a web URL: the user info
/// runs to an `@` whatever comes before it, so a password holding a raw `/`, `?` or `#` is
/// hidden whole; a raw `@` in it is hidden too (the user info then ends at the last `@`
/// before the host's `/` or `?`).
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return redact_key_values(url);
    };
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

/// A key=value connection string (`host=/tmp user=svc password='a b'`) with each password
/// value hidden, read as the driver reads it: values quoted with `'` (with `\` escapes) or
/// running to the next whitespace.
fn redact_key_values(text: &str) -> String {
    let bytes = text.as_bytes();
    let len = bytes.len();
    let mut out = String::with_capacity(len);
    let mut i = 0;
    loop {
        let start = i;
        while i < len && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        out.push_str(&text[start..i]);
        if i >= len {
            return out;
        }
        let key_start = i;
        while i < len && !bytes[i].is_ascii_whitespace() && bytes[i] != b'=' {
            i += 1;
        }
        let key = &text[key_start..i];
        while i < len && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < len && bytes[i] == b'=' {
            i += 1;
        }
        while i < len && bytes[i].is_ascii_whitespace() {
            i += 1;
        }
        out.push_str(&text[key_start..i]);
        let value_start = i;
        if i < len && bytes[i] == b'\'' {
            i += 1;
            while i < len {
                match bytes[i] {
                    b'\\' => i += 2,
                    b'\'' => {
                        i += 1;
                        break;
                    }
                    _ => i += 1,
                }
            }
        } else {
            while i < len && !bytes[i].is_ascii_whitespace() {
                i += if bytes[i] == b'\\' { 2 } else { 1 };
            }
        }
        // A trailing `\` steps past the end; every other stop is at an ASCII byte.
        i = i.min(len);
        while !text.is_char_boundary(i) {
            i += 1;
        }
        out.push_str(if is_secret(key) {
            "***"
        } else {
            &text[value_start..i]
        });
    }
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

    #[test]
    fn urls_are_told_from_paths() {
        assert!(is_postgres_url("postgres://db/calls"));
        assert!(is_postgres_url("PostgreSQL://db/calls"));
        assert!(!is_postgres_url("calls.db"));
        assert!(!is_postgres_url("./postgres://x"));
    }
}
