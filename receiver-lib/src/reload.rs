//! A signing secret kept in a file and reloaded into a [`SharedKeyring`] when the file changes
//! or the process gets SIGHUP, so that a running receiver takes a rotated secret without a
//! restart.
//!
//! # Rotation, retries and reconcile
//!
//! The service rotates a signing secret at once, with no overlap: every later delivery, the
//! pending retry of a failed one included, is signed with the new secret. So:
//! - Write the new secret to the file as soon as the service hands it over. Deliveries that
//!   arrive before the receiver reloads fail with 401; the service retries each once, about
//!   five minutes later, signed with the new secret, which the receiver has by then. Nothing
//!   is lost when the reload comes within those five minutes (with the default one-second
//!   poll, it comes within a second or two).
//! - The secret the file held before stays accepted for a while ([`SecretFile::keep_replaced_for`],
//!   five minutes by default), for deliveries signed before the rotation and still on their
//!   way. Keep it short: a rotation often means the old secret leaked.
//! - A delivery whose retry also failed (the receiver was down, or the reload came too late)
//!   is gone for good: reconciling against `GET /calls` with an overlapping window
//!   (`svc-cli reconcile`) stores its call anyway. Run it on a schedule.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use thiserror::Error;

use svc_contract::{Keyring, SecretError, SharedKeyring, SigningSecret};

/// How long a replaced secret stays accepted by default.
pub const DEFAULT_KEEP_REPLACED: Duration = Duration::from_secs(300);
/// How often [`SecretFile::watch`] reads the file by default.
#[cfg(feature = "reload")]
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Why the secret file could not be used. Neither the secret nor any part of it is included.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SecretFileError {
    /// The file could not be read.
    #[error("cannot read the signing secret file {}: {reason}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// What reading it reported.
        reason: std::io::Error,
    },
    /// The file does not hold a usable secret (surrounding whitespace is ignored).
    #[error("the signing secret file {} does not hold a usable secret: {reason}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: SecretError,
    },
}

/// What [`SecretFile::reload`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reloaded {
    /// The file holds the secret already in use.
    Unchanged,
    /// The file holds a new secret: it is now the `current` key, and the one it replaces is
    /// kept, labelled `replaced`, for [`SecretFile::keep_replaced_for`].
    Replaced,
}

/// The secret in use and the one it replaced.
struct Loaded {
    /// An HMAC under the current secret of a fixed message: tells a new secret from the same
    /// one without keeping the secret's text.
    fingerprint: [u8; 32],
    current: SigningSecret,
    replaced: Option<(SigningSecret, i64)>,
}

/// A `whsec_…` signing secret read from a file (one secret, surrounding whitespace ignored),
/// published through a [`SharedKeyring`] that every [`svc_contract::Verifier`] built from
/// [`SecretFile::keys`] reads at each verification. See the module docs for how rotation,
/// the sender's retry and reconcile fit together.
///
/// ```no_run
/// # #[cfg(feature = "reload")]
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use svc_contract::Verifier;
/// use svc_receiver::reload::SecretFile;
///
/// let secret_file = SecretFile::open("/etc/svc/webhook-secret")?;
/// let verifier = Verifier::with_shared_keyring(secret_file.keys());
/// // Reload on change (read every second) and on SIGHUP, until the future given resolves.
/// tokio::spawn(secret_file.watch(std::future::pending()));
/// # Ok(()) }
/// ```
pub struct SecretFile {
    path: PathBuf,
    keys: SharedKeyring,
    keep_replaced_for: Duration,
    #[cfg(feature = "reload")]
    poll_interval: Duration,
    extra: Vec<(String, SigningSecret)>,
    loaded: Mutex<Loaded>,
}

impl std::fmt::Debug for SecretFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretFile")
            .field("path", &self.path)
            .field("keys", &self.keys)
            .field("keep_replaced_for", &self.keep_replaced_for)
            .finish_non_exhaustive()
    }
}

impl SecretFile {
    /// Reads the secret in `path` and publishes it as the `current` key of [`Self::keys`].
    ///
    /// # Errors
    /// [`SecretFileError`] when the file cannot be read or holds no usable secret.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, SecretFileError> {
        let path = path.as_ref().to_path_buf();
        let current = read_secret(&path)?;
        let loaded = Loaded {
            fingerprint: fingerprint(&current),
            current,
            replaced: None,
        };
        let file = Self {
            keys: SharedKeyring::new(Keyring::new()),
            path,
            keep_replaced_for: DEFAULT_KEEP_REPLACED,
            #[cfg(feature = "reload")]
            poll_interval: DEFAULT_POLL_INTERVAL,
            extra: Vec::new(),
            loaded: Mutex::new(loaded),
        };
        file.publish(&file.lock());
        Ok(file)
    }

    /// Also accepts `secret`, labelled `label`, whatever the file holds (a second secret kept
    /// elsewhere, say), for as long as this `SecretFile` publishes the keys.
    pub fn with_key(mut self, label: impl Into<String>, secret: SigningSecret) -> Self {
        self.extra.push((label.into(), secret));
        self.publish(&self.lock());
        self
    }

    /// Sets how long a secret the file no longer holds stays accepted after a reload
    /// (5 minutes by default).
    pub fn keep_replaced_for(mut self, keep: Duration) -> Self {
        self.keep_replaced_for = keep;
        self
    }

    /// Sets how often [`Self::watch`] reads the file (every second by default).
    #[cfg(feature = "reload")]
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval = every;
        self
    }

    /// The keyring to build verifiers from ([`svc_contract::Verifier::with_shared_keyring`]); a
    /// reload replaces its keys for all of them at once.
    pub fn keys(&self) -> SharedKeyring {
        self.keys.clone()
    }

    /// The file read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the file again at `now` (unix seconds). A new secret becomes the `current` key at
    /// once; the one it replaces stays accepted until `now` plus [`Self::keep_replaced_for`].
    ///
    /// # Errors
    /// [`SecretFileError`] when the file cannot be read or holds no usable secret; the keys in
    /// use are then left as they are.
    pub fn reload(&self, now: i64) -> Result<Reloaded, SecretFileError> {
        let secret = read_secret(&self.path)?;
        let fingerprint = fingerprint(&secret);
        let mut loaded = self.lock();
        if fingerprint == loaded.fingerprint {
            return Ok(Reloaded::Unchanged);
        }
        let keep = i64::try_from(self.keep_replaced_for.as_secs()).unwrap_or(i64::MAX);
        let replaced = std::mem::replace(&mut loaded.current, secret);
        loaded.replaced = Some((replaced, now.saturating_add(keep)));
        loaded.fingerprint = fingerprint;
        self.publish(&loaded);
        Ok(Reloaded::Replaced)
    }

    /// Reloads when the file changes (read every [`Self::poll_interval`]) and, on Unix, on
    /// SIGHUP, until `shutdown` resolves; logs each replacement (info) and each new failure to
    /// read the file (warn; the keys in use are kept). The SIGHUP handler is installed when
    /// this is called, not when the future first runs, so a SIGHUP sent once it has returned
    /// never takes the default action (ending the process). Call it inside a Tokio runtime.
    #[cfg(feature = "reload")]
    pub fn watch(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        #[cfg(unix)]
        let mut hangups = match tokio::signal::unix::signal(
            tokio::signal::unix::SignalKind::hangup(),
        ) {
            Ok(hangups) => Some(hangups),
            Err(err) => {
                tracing::warn!(error = %err, "cannot listen for SIGHUP; the secret file is still read on change");
                None
            }
        };
        async move {
            use svc_contract::{Clock, SystemClock};
            let mut shutdown = std::pin::pin!(shutdown);
            // The file was read when it was opened: the first read is one interval away.
            let first = tokio::time::Instant::now() + self.poll_interval;
            let mut ticks = tokio::time::interval_at(first, self.poll_interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut failing: Option<String> = None;
            loop {
                #[cfg(unix)]
                let hangup = async {
                    match hangups.as_mut() {
                        Some(hangups) => hangups.recv().await,
                        None => std::future::pending().await,
                    }
                };
                #[cfg(not(unix))]
                let hangup = std::future::pending::<Option<()>>();
                tokio::select! {
                    () = &mut shutdown => return,
                    _ = ticks.tick() => {}
                    Some(()) = hangup => tracing::info!(path = %self.path.display(), "SIGHUP: reading the signing secret file"),
                }
                match self.reload(SystemClock.now()) {
                    Ok(outcome) => {
                        if failing.take().is_some() {
                            tracing::info!(path = %self.path.display(), "the signing secret file is readable again");
                        }
                        if outcome == Reloaded::Replaced {
                            tracing::info!(path = %self.path.display(), keep_replaced_for = ?self.keep_replaced_for,
                                "signing secret replaced; the previous one is still accepted for a while");
                        }
                    }
                    Err(err) => {
                        let text = err.to_string();
                        if failing.as_deref() != Some(text.as_str()) {
                            tracing::warn!(error = %text, "keeping the signing secret in use");
                            failing = Some(text);
                        }
                    }
                }
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Loaded> {
        // Every write leaves `Loaded` whole, so a poisoned lock is still consistent.
        self.loaded
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Publishes the keys of `loaded` and the extra keys.
    fn publish(&self, loaded: &Loaded) {
        let mut keyring = Keyring::new().with_key("current", loaded.current.clone());
        if let Some((replaced, until)) = &loaded.replaced {
            keyring = keyring.with_expiring_key("replaced", replaced.clone(), *until);
        }
        for (label, secret) in &self.extra {
            keyring = keyring.with_key(label.clone(), secret.clone());
        }
        self.keys.replace(keyring);
    }
}

fn read_secret(path: &Path) -> Result<SigningSecret, SecretFileError> {
    let text = std::fs::read_to_string(path).map_err(|reason| SecretFileError::Read {
        path: path.to_path_buf(),
        reason,
    })?;
    SigningSecret::new(text.trim()).map_err(|reason| SecretFileError::Invalid {
        path: path.to_path_buf(),
        reason,
    })
}

fn fingerprint(secret: &SigningSecret) -> [u8; 32] {
    secret.fingerprint()
}
