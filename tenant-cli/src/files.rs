//! Files the command line writes whole (`--metrics-file`, `store report --out`, `config set`,
//! `demo --keep`), written atomically: a temporary file in the same directory, created
//! exclusively under an unpredictable hidden name, flushed to disk, then renamed over the
//! target, so a reader sees the previous file or the new one, whole, and a link planted at
//! either name is never written through.

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

/// Writes `contents` to `path` atomically (see the module's documentation). The file gets the
/// default permissions of a new file.
///
/// # Errors
/// The directory cannot be written, or the disk is full; the target is then left as it was,
/// and the temporary file removed.
pub fn write_atomically(path: &Path, contents: &[u8]) -> io::Result<()> {
    write_atomically_as(path, contents, 0o666)
}

/// Writes `contents` to `path` atomically, as [`write_atomically`], the new file created with
/// `mode` (less the umask; 0o600 for a file only its owner may read). Every file the command
/// line writes whole goes through here (`--metrics-file`, `store report --out`, `config set`,
/// `demo --keep`): the temporary file has an unpredictable name and is created exclusively
/// (`O_EXCL`: a link planted at its name is never followed, the write fails instead), then
/// renamed over the target, which replaces a symbolic link at `path` instead of writing
/// through it.
///
/// # Errors
/// As [`write_atomically`].
pub fn write_atomically_as(path: &Path, contents: &[u8], mode: u32) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "not a file path"))?;
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    let (temp, mut file) = create_temp(dir, &name.to_string_lossy(), mode)?;
    let written = (|| {
        file.write_all(contents)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written?;
    // The rename itself is durable once the directory is synced (not possible everywhere).
    if let Ok(dir) = std::fs::File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

/// A new, hidden temporary file in `dir` for the file `name`, created exclusively under a
/// random name (another try on the rare name already taken).
fn create_temp(dir: &Path, name: &str, mode: u32) -> io::Result<(PathBuf, std::fs::File)> {
    let mut tries = 0;
    loop {
        let temp = dir.join(format!(".{name}.{:016x}.tmp", rand::random::<u64>()));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
        #[cfg(not(unix))]
        let _ = mode;
        match options.open(&temp) {
            Ok(file) => return Ok((temp, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 8 => tries += 1,
            Err(e) => return Err(e),
        }
    }
}
