//! Where the base URL and API key come from, in order of precedence: a flag, then the environment
//! (`SVC_BASE_URL`, `SVC_API_KEY`), then a named profile of the config file (`--profile`,
//! `SVC_PROFILE`, default `default`). The file (`--config`, `SVC_CONFIG`, default
//! `$XDG_CONFIG_HOME/svc-cli/config.toml` or `~/.config/svc-cli/config.toml`) is TOML with
//! `[profiles.<name>]` tables holding `base_url` and `api_key`; it is written with mode 0600,
//! and reading one that group or others may read or write prints a warning on stderr (it never
//! fails for it). A missing default file is an empty config; a file named with `--config` or
//! `SVC_CONFIG` must exist, except for `config set`, which creates it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use svc_client::ApiKey;

/// Configuration problems (all exit 2).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The config file could not be read or written.
    #[error("config file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The config file is not valid TOML of the expected shape.
    #[error("config file {path} is not valid: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Parser message.
        message: String,
    },
    /// The named profile is not in the file.
    #[error("profile {0:?} not found in the config file")]
    UnknownProfile(String),
    /// No base URL anywhere.
    #[error("no base URL configured (use --base-url, SVC_BASE_URL or a config profile)")]
    MissingBaseUrl,
    /// The API key that takes precedence is empty (an unset variable expanded in a script,
    /// say); it is never sent.
    #[error("the API key from the {0} is empty")]
    EmptyApiKey(Source),
    /// No place to keep the config file.
    #[error("cannot find a config directory (set --config or SVC_CONFIG)")]
    NoConfigPath,
    /// The config file named with `--config` or `SVC_CONFIG` does not exist.
    #[error("config file {path} (named by {named_by}) does not exist")]
    NamedFileMissing {
        /// The file.
        path: PathBuf,
        /// `--config` or `SVC_CONFIG`.
        named_by: &'static str,
    },
}

/// One named profile.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    /// `{base_url}`, ending in `/v1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The API key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
}

impl fmt::Debug for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = self.api_key.as_ref().map(|_| "[redacted]");
        f.debug_struct("Profile")
            .field("base_url", &self.base_url)
            .field("api_key", &key)
            .finish()
    }
}

/// The config file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ConfigFile {
    /// Profiles by name.
    #[serde(default)]
    pub profiles: BTreeMap<String, Profile>,
}

impl ConfigFile {
    /// Reads the file; a missing file is an empty config (what `config set` starts from).
    ///
    /// # Errors
    /// Unreadable or invalid file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Ok(Self::read(path)?.unwrap_or_default())
    }

    /// Reads the file; `None` when it does not exist.
    ///
    /// # Errors
    /// Unreadable or invalid file.
    pub fn read(path: &Path) -> Result<Option<Self>, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(ConfigError::Io {
                    path: path.to_owned(),
                    source,
                });
            }
        };
        toml::from_str(&text)
            .map(Some)
            .map_err(|e| ConfigError::Parse {
                path: path.to_owned(),
                message: e.message().to_owned(),
            })
    }

    /// Writes the file (creating its directory), readable and writable by the owner only: it
    /// may hold a key, and whoever can change it can send the key to another server.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn save(&self, path: &Path) -> Result<(), ConfigError> {
        let io = |source| ConfigError::Io {
            path: path.to_owned(),
            source,
        };
        let text = toml::to_string_pretty(self).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(io)?;
        }
        // A sibling temp file with the final mode (created exclusively under a random name,
        // never through a link), then renamed over: never a moment where the key sits in a
        // world-readable file, and a link at the path is replaced, not written through.
        crate::files::write_atomically_as(path, text.as_bytes(), 0o600).map_err(io)
    }
}

/// Where a setting came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A command-line flag.
    Flag,
    /// An environment variable.
    Env,
    /// A profile of the config file.
    Profile(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Flag => f.write_str("flag"),
            Self::Env => f.write_str("environment"),
            Self::Profile(p) => write!(f, "config profile {p:?}"),
        }
    }
}

/// Where the config file is, and who said so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigPath {
    /// Named with `--config`.
    Flag(PathBuf),
    /// Named with `SVC_CONFIG`.
    Env(PathBuf),
    /// The user config directory's `svc-cli/config.toml`.
    Default(PathBuf),
}

impl ConfigPath {
    /// The file.
    pub fn path(&self) -> &Path {
        match self {
            Self::Flag(path) | Self::Env(path) | Self::Default(path) => path,
        }
    }

    /// Reads the file to resolve settings from: a missing default file is an empty config, while
    /// a missing file the user named is an error (a typo must not silently drop the profiles).
    /// A file that group or others may read or write gets a warning on stderr (once a process).
    ///
    /// # Errors
    /// [`ConfigError::NamedFileMissing`], or an unreadable or invalid file.
    pub fn read_for_settings(&self) -> Result<ConfigFile, ConfigError> {
        let file = ConfigFile::read(self.path())?;
        if file.is_some() {
            warn_if_open_to_others(self.path());
        }
        let named_by = match (file, self) {
            (Some(file), _) => return Ok(file),
            (None, Self::Default(_)) => return Ok(ConfigFile::default()),
            (None, Self::Flag(_)) => "--config",
            (None, Self::Env(_)) => "SVC_CONFIG",
        };
        Err(ConfigError::NamedFileMissing {
            path: self.path().to_owned(),
            named_by,
        })
    }
}

/// Prints a warning on stderr, once a process, when group or others may read or write the
/// config file (its mode is wider than 0600): it may hold the API key, and whoever can write it
/// can point `base_url` at their own server and receive the key from the environment. Only a
/// warning: the file still works, and nothing is changed.
fn warn_if_open_to_others(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        static WARNED: std::sync::Once = std::sync::Once::new();
        let Ok(metadata) = std::fs::metadata(path) else {
            return;
        };
        let mode = metadata.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            WARNED.call_once(|| {
                crate::output::stderr_line(&format!(
                    "svc-cli: warning: the config file {} has mode {mode:04o}: group or others \
                     can read or write it, and it may hold an API key; run chmod 600 {}",
                    path.display(),
                    path.display()
                ));
            });
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// The raw inputs of resolution (flags, environment, file location).
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// `--base-url`.
    pub base_url_flag: Option<String>,
    /// `--api-key`.
    pub api_key_flag: Option<ApiKey>,
    /// `--profile`.
    pub profile_flag: Option<String>,
    /// `--config`.
    pub config_flag: Option<PathBuf>,
}

/// The resolved settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Base URL and where it came from.
    pub base_url: Option<(String, Source)>,
    /// API key and where it came from.
    pub api_key: Option<(ApiKey, Source)>,
    /// The profile used.
    pub profile: String,
    /// The config file consulted.
    pub config_path: Option<PathBuf>,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

impl Inputs {
    /// The profile name: `--profile` > `SVC_PROFILE` > `default`.
    pub fn profile(&self) -> String {
        self.profile_flag
            .clone()
            .or_else(|| env("SVC_PROFILE"))
            .unwrap_or_else(|| "default".into())
    }

    /// The config file path: `--config` > `SVC_CONFIG` > the user config directory.
    pub fn config_path(&self) -> Option<ConfigPath> {
        if let Some(path) = &self.config_flag {
            return Some(ConfigPath::Flag(path.clone()));
        }
        if let Some(path) = env("SVC_CONFIG") {
            return Some(ConfigPath::Env(PathBuf::from(path)));
        }
        let dir = env("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| env("HOME").map(|h| Path::new(&h).join(".config")))?;
        Some(ConfigPath::Default(dir.join("svc-cli").join("config.toml")))
    }

    /// Resolves flag > env > profile.
    ///
    /// # Errors
    /// An unreadable config file, a named one that does not exist, or a profile named explicitly
    /// that the file lacks.
    pub fn resolve(&self) -> Result<Settings, ConfigError> {
        let profile_name = self.profile();
        let config_path = self.config_path();
        let file = match &config_path {
            Some(path) => path.read_for_settings()?,
            None => ConfigFile::default(),
        };
        let explicit_profile = self.profile_flag.is_some() || env("SVC_PROFILE").is_some();
        let profile = match file.profiles.get(&profile_name) {
            Some(p) => p.clone(),
            None if explicit_profile => return Err(ConfigError::UnknownProfile(profile_name)),
            None => Profile::default(),
        };
        let from_profile =
            |v: Option<String>| v.map(|v| (v, Source::Profile(profile_name.clone())));
        let base_url = self
            .base_url_flag
            .clone()
            .map(|v| (v, Source::Flag))
            .or_else(|| env("SVC_BASE_URL").map(|v| (v, Source::Env)))
            .or_else(|| from_profile(profile.base_url.clone()));
        let api_key = self
            .api_key_flag
            .clone()
            .map(|k| (k, Source::Flag))
            .or_else(|| env("SVC_API_KEY").map(|v| (ApiKey::new(v), Source::Env)))
            .or_else(|| from_profile(profile.api_key.clone()).map(|(k, s)| (ApiKey::new(k), s)));
        if let Some((key, source)) = &api_key
            && key.expose().trim().is_empty()
        {
            return Err(ConfigError::EmptyApiKey(source.clone()));
        }
        Ok(Settings {
            base_url,
            api_key,
            profile: profile_name,
            config_path: config_path.map(|p| p.path().to_owned()),
        })
    }
}
