//! Reading a signing secret for `webhook serve` and `webhook sign`: from an environment
//! variable or a file, surrounding whitespace ignored. The secret is never printed; a bad one
//! is a usage error (exit 2) that names where it came from. A secret file that group or others
//! may read or write gets a warning, as the config file does ([`open_to_others`]).
//!
//! Beyond what `svc_receiver::SigningSecret::new` checks (the `whsec_` prefix, something after
//! it, no whitespace), a secret must be printable ASCII ([`check_printable`]): the contract
//! fixes only the prefix, and the service issues `whsec_` and 40 letters and digits, so a
//! character outside printable ASCII means a placeholder was pasted (`whsec_…`, as the
//! documentation writes one) or the secret was mangled on the way, never a secret the service
//! would sign with.

use std::path::Path;

use svc_contract::SigningSecret;

use crate::exit::CliError;

/// The secret in environment variable `var`.
///
/// # Errors
/// [`CliError::Usage`] when the variable is not set or holds no usable secret.
pub(crate) fn from_env(var: &str) -> anyhow::Result<SigningSecret> {
    parse(
        &format!("environment variable {var}"),
        std::env::var(var).ok(),
    )
}

/// The secret in the file at `path`.
///
/// # Errors
/// [`CliError::Usage`] when the file cannot be read or holds no usable secret.
pub(crate) fn from_file(path: &Path) -> anyhow::Result<SigningSecret> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        CliError::Usage(format!(
            "cannot read the secret file {}: {e}",
            path.display()
        ))
    })?;
    parse(&format!("the file {}", path.display()), Some(text))
}

/// Checks the secret in the file at `path` for [`check_printable`] only, for `webhook serve
/// --secret-file`, whose reading and other checks are `svc_receiver::reload::SecretFile`'s
/// (a file that cannot be read is left for it to report).
///
/// # Errors
/// [`CliError::Usage`] when the file's secret is not printable ASCII.
pub(crate) fn check_file(path: &Path) -> anyhow::Result<()> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(());
    };
    check_printable(text.trim()).map_err(|why| {
        CliError::Usage(format!(
            "the secret in the file {} is not valid: {why}",
            path.display()
        ))
        .into()
    })
}

/// The warning to show when group or others may read or write the secret file at `path`
/// (its mode is wider than 0600): they could sign deliveries the receiver accepts. Only a
/// warning: the file still works, and nothing is changed.
pub(crate) fn open_to_others(path: &Path) -> Option<String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
        (mode & 0o077 != 0).then(|| {
            format!(
                "svc-cli: warning: the secret file {} has mode {mode:04o}: group or others can \
                 read or write it, and it holds the webhook signing secret (whoever reads it can \
                 sign deliveries); run chmod 600 {}",
                path.display(),
                path.display()
            )
        })
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// Checks that `secret` holds printable ASCII only, as every secret the service issues does.
///
/// # Errors
/// Why not, naming the character's kind and never the secret: the documentation's placeholder
/// `whsec_…` (its ellipsis is one character, U+2026) gets a message of its own.
pub(crate) fn check_printable(secret: &str) -> Result<(), String> {
    if secret.contains('\u{2026}') {
        return Err(
            "it holds '…' (U+2026): that is the documentation's placeholder whsec_…, not a \
             secret; use the secret `svc-cli sandbox` printed or the operator handed over"
                .to_owned(),
        );
    }
    if secret
        .chars()
        .all(|c| c.is_ascii_graphic() || c.is_whitespace())
    {
        // Whitespace is SigningSecret::new's to report.
        return Ok(());
    }
    Err(
        "it holds a character that is not printable ASCII: a signing secret is whsec_ followed \
         by ASCII letters and digits; copy it again whole"
            .to_owned(),
    )
}

fn parse(source: &str, value: Option<String>) -> anyhow::Result<SigningSecret> {
    let value = value.ok_or_else(|| CliError::Usage(format!("{source} is not set")))?;
    let invalid =
        |why: String| CliError::Usage(format!("the secret in {source} is not valid: {why}"));
    let value = value.trim();
    let secret = SigningSecret::new(value).map_err(|e| invalid(e.to_string()))?;
    check_printable(value).map_err(invalid)?;
    Ok(secret)
}
