//! The service's own copies of real-call recordings, and the signed links that serve them.
//!
//! - The archive is a directory of content-addressed files (`<sha256>.<ext>`), created 0700:
//!   two calls with the same recording share one file. The dialer's own path is never
//!   returned.
//! - A link is `<public base>/v1/audio/{callId}?exp=<unix seconds>&sig=<hex>`, where `sig` is
//!   HMAC-SHA256 of `audio:<callId>:<exp>` under a key the service keeps in its database. The
//!   signature is the credential (no API key); it expires [`LINK_TTL`] after it was made.
//! - Retention: an archive is kept [`RETENTION`] after it was ingested; the sweep then forgets
//!   it (the call reads with `audioUrl: null`) and deletes files no call refers to.
//! - Files are written without an fsync each (one per 1 KiB recording would cap ingestion at a
//!   few thousand records a second): a power cut can lose the last recordings written. A call
//!   whose archive file is missing or empty reads with `audioUrl: null`.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// How long an audio link works (15 minutes).
pub const LINK_TTL: Duration = Duration::from_secs(15 * 60);
/// How long an archived recording is kept after ingestion (the contract's 30 days).
pub const RETENTION: Duration = Duration::from_secs(30 * 86_400);

/// Why a recording could not be archived.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The recording itself cannot be read (gone or unreadable since it was checked): the call
    /// has no usable audio.
    #[error("cannot read the recording: {0}")]
    Source(#[source] io::Error),
    /// The archive cannot be written (disk full, permissions, a file in the way): says
    /// nothing about the call, which must not be dropped for it.
    #[error("cannot write the recording archive {dir}: {source}")]
    Archive {
        /// The archive directory.
        dir: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
}

/// The archive directory.
#[derive(Debug, Clone)]
pub struct Archive {
    dir: PathBuf,
}

impl Archive {
    /// The archive in `dir` (created on first store).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether `source` is a recording that can be archived: a readable, non-empty file.
    pub fn usable(source: &Path) -> bool {
        fs::metadata(source).is_ok_and(|m| m.is_file() && m.len() > 0) && File::open(source).is_ok()
    }

    /// Copies `source` into the archive under the hash of its content, dated `now` (the
    /// service's clock: the sweep leaves files written or reused lately alone, as a call
    /// referring to them may be about to be committed); returns the file name.
    ///
    /// # Errors
    /// [`ArchiveError::Source`] when the recording cannot be read, [`ArchiveError::Archive`]
    /// when the archive cannot be written.
    pub fn store(&self, source: &Path, now: SystemTime) -> Result<String, ArchiveError> {
        let mut input = File::open(source).map_err(ArchiveError::Source)?;
        let archive = |source| ArchiveError::Archive {
            dir: self.dir.clone(),
            source,
        };
        self.create_dir().map_err(archive)?;
        let temp = self
            .dir
            .join(format!(".incoming-{}", crate::ids::random_text(16)));
        let mut output = File::create(&temp).map_err(archive)?;
        let mut hasher = Sha256::new();
        let mut buffer = [0u8; 64 * 1024];
        let copied = (|| -> Result<(), ArchiveError> {
            loop {
                let read = input.read(&mut buffer).map_err(ArchiveError::Source)?;
                if read == 0 {
                    break;
                }
                hasher.update(&buffer[..read]);
                output.write_all(&buffer[..read]).map_err(archive)?;
            }
            Ok(())
        })();
        let copied = copied.and_then(|()| output.set_modified(now).map_err(archive));
        if let Err(error) = copied {
            let _ = fs::remove_file(&temp);
            return Err(error);
        }
        let name = format!("{}.{}", hex::encode(hasher.finalize()), extension(source));
        let target = self.dir.join(&name);
        if target.exists() {
            fs::remove_file(&temp).map_err(archive)?;
            // Reused: mark it as recent, so the sweep does not delete it before the call that
            // now refers to it is stored.
            File::options()
                .write(true)
                .open(&target)
                .and_then(|file| file.set_modified(now))
                .map_err(archive)?;
        } else {
            fs::rename(&temp, &target).map_err(archive)?;
        }
        Ok(name)
    }

    /// Whether an archived file is there to be served (present and not empty).
    pub fn holds(&self, name: &str) -> bool {
        fs::metadata(self.path(name)).is_ok_and(|m| m.is_file() && m.len() > 0)
    }

    /// Where an archived file is.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Deletes an archived file (a file already gone is not an error).
    ///
    /// # Errors
    /// The file exists but cannot be removed.
    pub fn remove(&self, name: &str) -> io::Result<()> {
        match fs::remove_file(self.path(name)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    fn create_dir(&self) -> io::Result<()> {
        if self.dir.is_dir() {
            return Ok(());
        }
        fs::create_dir_all(&self.dir)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            fs::set_permissions(&self.dir, fs::Permissions::from_mode(0o700))?;
        }
        Ok(())
    }
}

/// The audio types the archive takes and serves, by extension (lowercase). Nothing else is
/// ingested as a recording: the archive's files are served on the API's origin, and a file
/// served as HTML, SVG or script there would run as the API.
const AUDIO_TYPES: &[(&str, &str)] = &[
    ("wav", "audio/wav"),
    ("mp3", "audio/mpeg"),
    ("ogg", "audio/ogg"),
    ("oga", "audio/ogg"),
    ("opus", "audio/ogg"),
    ("m4a", "audio/mp4"),
    ("aac", "audio/aac"),
    ("flac", "audio/flac"),
    ("weba", "audio/webm"),
];

/// The `Content-Type` a recording at `path` is served with, by its extension; `None` when it
/// is not one of the audio types the archive takes.
pub fn audio_type(path: &Path) -> Option<&'static str> {
    let ext = path.extension()?.to_str()?.to_ascii_lowercase();
    AUDIO_TYPES
        .iter()
        .find(|(known, _)| *known == ext)
        .map(|(_, content_type)| *content_type)
}

/// The file extension an archived copy keeps (so it is served with its type): the source's,
/// lowercased; `bin` (never served) when it is not an audio one.
fn extension(source: &Path) -> String {
    match audio_type(source) {
        Some(_) => source
            .extension()
            .and_then(|e| e.to_str())
            .map_or_else(|| "bin".to_owned(), str::to_ascii_lowercase),
        None => "bin".to_owned(),
    }
}

/// Whether `name` is a file name the archive could have written for an audio recording
/// (links never name files, but the database is read back here: nothing else may be served,
/// including files of other types archived before types were checked).
pub fn is_archive_name(name: &str) -> bool {
    match name.split_once('.') {
        Some((hash, _)) => {
            hash.len() == 64
                && hash.chars().all(|c| c.is_ascii_hexdigit())
                && audio_type(Path::new(name)).is_some()
        }
        None => false,
    }
}

/// Signs and checks audio links.
#[derive(Clone)]
pub struct Links {
    key: Vec<u8>,
}

impl std::fmt::Debug for Links {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Links([redacted])")
    }
}

impl Links {
    /// Links signed with `key`.
    pub fn new(key: Vec<u8>) -> Self {
        Self { key }
    }

    fn mac(&self, call_id: &str, exp: i64) -> Hmac<Sha256> {
        // HMAC takes a key of any length.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.key)
            .expect("HMAC accepts keys of any length");
        mac.update(format!("audio:{call_id}:{exp}").as_bytes());
        mac
    }

    /// The link's query: `exp` and `sig` for `call_id`, expiring at `exp` (unix seconds).
    pub fn sign(&self, call_id: &str, exp: i64) -> String {
        hex::encode(self.mac(call_id, exp).finalize().into_bytes())
    }

    /// Whether `sig` signs `call_id` and `exp`, compared in constant time.
    pub fn verify(&self, call_id: &str, exp: i64, sig: &str) -> bool {
        match hex::decode(sig) {
            Ok(bytes) => self.mac(call_id, exp).verify_slice(&bytes).is_ok(),
            Err(_) => false,
        }
    }

    /// The whole link for `call_id`, valid until `exp`.
    pub fn url(&self, base: &str, call_id: &str, exp: i64) -> String {
        format!(
            "{}/v1/audio/{call_id}?exp={exp}&sig={}",
            base.trim_end_matches('/'),
            self.sign(call_id, exp)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_recording_is_archived_once_under_its_hash() {
        let dir = tempfile::tempdir().expect("dir");
        let source = dir.path().join("Call.WAV");
        fs::write(&source, b"RIFF fake wave").expect("write");
        let archive = Archive::new(dir.path().join("archive"));
        let first = archive.store(&source, SystemTime::now()).expect("store");
        let again = archive.store(&source, SystemTime::now()).expect("store");
        assert_eq!(first, again);
        assert!(first.ends_with(".wav") && is_archive_name(&first));
        assert_eq!(
            fs::read(archive.path(&first)).expect("read"),
            b"RIFF fake wave"
        );
        assert_eq!(
            fs::read_dir(archive.dir()).expect("dir").count(),
            1,
            "no temp file left"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(archive.dir())
                .expect("meta")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o700);
        }
    }

    #[test]
    fn missing_or_empty_recordings_are_not_usable() {
        let dir = tempfile::tempdir().expect("dir");
        let empty = dir.path().join("empty.wav");
        fs::write(&empty, b"").expect("write");
        assert!(!Archive::usable(&empty));
        assert!(!Archive::usable(&dir.path().join("missing.wav")));
        assert!(!Archive::usable(dir.path()));
    }

    #[test]
    fn a_link_verifies_for_its_call_and_expiry_only() {
        let links = Links::new(b"key".to_vec());
        let sig = links.sign("svc_call_1", 1_000);
        assert!(links.verify("svc_call_1", 1_000, &sig));
        assert!(!links.verify("svc_call_2", 1_000, &sig));
        assert!(!links.verify("svc_call_1", 1_001, &sig));
        assert!(!links.verify("svc_call_1", 1_000, "zz"));
        assert!(
            links
                .url("http://h:1/", "svc_call_1", 1_000)
                .starts_with("http://h:1/v1/audio/svc_call_1?exp=1000&sig=")
        );
    }
}
