//! Reading a signing secret for `webhook serve` and `webhook sign`: from an environment
//! variable or a file, surrounding whitespace ignored. The secret is never printed; a bad one
//! is a usage error (exit 2) that names where it came from.

use std::path::Path;

use svc_receiver::SigningSecret;

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

fn parse(source: &str, value: Option<String>) -> anyhow::Result<SigningSecret> {
    let value = value.ok_or_else(|| CliError::Usage(format!("{source} is not set")))?;
    SigningSecret::new(value.trim())
        .map_err(|e| CliError::Usage(format!("the secret in {source} is not valid: {e}")).into())
}
