//! One server per data folder: `arlbook serve` holds an exclusive lock on
//! `<data>/arlbook.lock` while it runs, so a second server on the same `--data` exits
//! with a message instead of resuming the first one's running jobs and letting two
//! trainers write one folder. The lock belongs to the open file, so the operating
//! system releases it when the server exits, even by SIGKILL.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;

use anyhow::{Context, Result, bail};

/// The lock file in the data folder.
pub const LOCK_FILE: &str = "arlbook.lock";

/// The held lock; dropping it releases the folder.
#[derive(Debug)]
pub struct DataLock {
    _file: File,
}

/// Takes the lock on `data` (created if missing) or explains who holds it.
pub fn lock_data(data: &Path) -> Result<DataLock> {
    let path = data.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            bail!(
                "another arlbook serve (pid {}) is using the data folder {}; stop it or pass another --data",
                holder.trim(),
                data.display()
            );
        }
        Err(TryLockError::Error(e)) => {
            return Err(e).with_context(|| format!("locking {}", path.display()));
        }
    }
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| write!(file, "{}", std::process::id()))
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(DataLock { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_folder_is_refused_until_the_first_is_dropped() {
        let dir = std::env::temp_dir().join(format!("arlbook-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let first = lock_data(&dir).unwrap();
        let err = lock_data(&dir).unwrap_err().to_string();
        assert!(err.contains("another arlbook serve"), "{err}");
        assert!(err.contains(&std::process::id().to_string()), "{err}");
        drop(first);
        lock_data(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
