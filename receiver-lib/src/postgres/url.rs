//! Database URLs: telling one from a file path, and writing one with its password hidden, for
//! every message that names the database.

/// Whether `location` names a PostgreSQL database (`postgres://…` or `postgresql://…`) rather
/// than a file.
pub fn is_postgres_url(location: &str) -> bool {
    let lower = location.get(..13).unwrap_or(location).to_ascii_lowercase();
    lower.starts_with("postgres://") || lower.starts_with("postgresql://")
}

/// `url` with its password (in the user info, or a `password=` parameter) replaced by `***`,
/// for messages and logs. A key=value connection string gets the same treatment.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return redact_params(url, ' ');
    };
    let (scheme, rest) = url.split_at(scheme_end + 3);
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rfind('@') {
        Some(at) => {
            let (user_info, host) = authority.split_at(at);
            match user_info.find(':') {
                Some(colon) => format!("{}:***{host}", &user_info[..colon]),
                None => authority.to_owned(),
            }
        }
        None => authority.to_owned(),
    };
    let tail = match tail.find('?') {
        Some(q) => format!("{}?{}", &tail[..q], redact_params(&tail[q + 1..], '&')),
        None => tail.to_owned(),
    };
    format!("{scheme}{authority}{tail}")
}

/// `key=value` pairs split by `separator`, with the value of `password` hidden.
fn redact_params(params: &str, separator: char) -> String {
    params
        .split(separator)
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if key.trim().eq_ignore_ascii_case("password") => format!("{key}=***"),
            _ => pair.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(&separator.to_string())
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
    fn urls_are_told_from_paths() {
        assert!(is_postgres_url("postgres://db/calls"));
        assert!(is_postgres_url("PostgreSQL://db/calls"));
        assert!(!is_postgres_url("calls.db"));
        assert!(!is_postgres_url("./postgres://x"));
    }
}
