//! The retention sweep of archived recordings: recordings ingested more than
//! [`RETENTION`] ago are forgotten (their calls read with `audioUrl: null`) and files no call
//! refers to are deleted, including files an interrupted ingestion left behind. `serve` runs
//! it hourly; the operator runs it with `svc-service calls sweep-audio`.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::audio::{Archive, RETENTION, is_archive_name};
use crate::Stop;
use crate::clock::Clock;
use crate::db::{Db, DbError};

/// How often `serve` sweeps.
pub const EVERY: Duration = Duration::from_secs(3600);
/// A file no call refers to is deleted only once it is this old (an ingestion may be about to
/// commit the call that refers to it).
const ORPHAN_AGE: Duration = Duration::from_secs(3600);

/// What a sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Swept {
    /// Calls past retention that now read with `audioUrl: null`.
    pub expired: usize,
    /// Files deleted.
    pub deleted: usize,
}

/// Sweeps once, as of `now`.
///
/// # Errors
/// Storage failure; a file that cannot be deleted is logged and left for the next sweep.
pub async fn sweep(db: &Db, archive: &Archive, now: DateTime<Utc>) -> Result<Swept, DbError> {
    let cutoff = now - chrono::Duration::from_std(RETENTION).unwrap_or(chrono::Duration::MAX);
    let (expired, released) = db.release_audio(cutoff.timestamp_millis()).await?;
    let mut swept = Swept {
        expired,
        deleted: 0,
    };
    for name in &released {
        // A file an ingestion wrote or reused lately may be about to be referred to by a call
        // it has not committed yet: the orphan pass deletes it once old, if still unused. And
        // asked again just before deleting: an ingestion may have stored a call with the same
        // recording since (a call committed in the instant between would read with
        // `audioUrl: null`).
        if recently_written(&archive.path(name), now) || db.audio_in_use(name).await? {
            continue;
        }
        match archive.remove(name) {
            Ok(()) => swept.deleted += 1,
            Err(error) => {
                tracing::warn!(file = name, %error, "could not delete an archived recording")
            }
        }
    }
    // Files no call refers to: left by an ingestion that failed after archiving.
    let Ok(entries) = std::fs::read_dir(archive.dir()) else {
        return Ok(swept);
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let leftover = name.starts_with(".incoming-") || is_archive_name(&name);
        if leftover
            && !recently_written(&entry.path(), now)
            && !db.audio_in_use(&name).await?
            && archive.remove(&name).is_ok()
        {
            swept.deleted += 1;
        }
    }
    Ok(swept)
}

/// Whether the archived file at `path` was written or reused (`Archive::store` dates it by the
/// service's clock) less than [`ORPHAN_AGE`] before `now`; also when that cannot be told.
fn recently_written(path: &std::path::Path, now: DateTime<Utc>) -> bool {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|at| (now - DateTime::<Utc>::from(at)).to_std().ok())
        .is_none_or(|age| age < ORPHAN_AGE)
}

/// Sweeps every [`EVERY`] until `stop` is requested.
pub async fn run(db: Db, archive: Archive, clock: Clock, mut stop: Stop) {
    loop {
        match sweep(&db, &archive, clock.now()).await {
            Ok(swept) if swept != Swept::default() => {
                tracing::info!(
                    expired = swept.expired,
                    deleted = swept.deleted,
                    "swept archived recordings"
                );
            }
            Ok(_) => {}
            Err(error) => tracing::error!(%error, "sweeping archived recordings failed"),
        }
        tokio::select! {
            () = stop.requested() => return,
            () = tokio::time::sleep(EVERY) => {}
        }
    }
}
