//! Reading a signing secret for `webhook serve` and `webhook sign`: from an environment
//! variable or a file, surrounding whitespace ignored. The secret is never printed; a bad one
//! is a usage error (exit 2) that names where it came from. A secret file that group or others
//! may read or write gets a warning, as the config file does ([`open_to_others`]).
//! What a usable secret is (the `whsec_` prefix, printable ASCII, no whitespace, not the
//! documentation's placeholder) is `svc_contract::SigningSecret::new`'s to say.

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

fn parse(source: &str, value: Option<String>) -> anyhow::Result<SigningSecret> {
    let value = value.ok_or_else(|| CliError::Usage(format!("{source} is not set")))?;
    let invalid =
        |why: String| CliError::Usage(format!("the secret in {source} is not valid: {why}"));
    let value = value.trim();
    SigningSecret::new(value).map_err(|e| invalid(e.to_string()).into())
}
