//! Every job folder carries its job's identity, so a folder is never taken for another
//! job's: a random key, stored in the job's database row and in `<dir>/job.key`.
//!
//! - A new job whose folder already exists (the database was deleted or emptied, so
//!   ids start again at 1) does not inherit it: the old folder is moved aside to
//!   `<data>/jobs/orphaned-<id>-<unix ms>` and kept.
//! - Before a job's trainer starts, the folder's key must equal the row's; a folder
//!   with another key, or with checkpoints but no key, is refused and the job fails
//!   with that reason instead of resuming someone else's run. Rows written before
//!   keys existed (no key) are trusted as before.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The key file in a job folder.
pub const KEY_FILE: &str = "job.key";

/// `bytes` random bytes from the operating system, as lower-case hex.
pub fn random_hex(bytes: usize) -> Result<String> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut raw = vec![0_u8; bytes];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut raw))
        .context("reading /dev/urandom")?;
    Ok(raw
        .iter()
        .flat_map(|b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]])
        .map(char::from)
        .collect())
}

/// A fresh job key.
pub fn new_key() -> Result<String> {
    random_hex(16)
}

/// Makes `dir` a fresh folder for the job with `key`: an existing folder of the same
/// name is moved aside (and returned), then the folder is created with its key file.
pub fn claim(dir: &Path, key: &str, now_unix_ms: i64) -> Result<Option<PathBuf>> {
    let mut moved = None;
    if dir.exists() {
        let name = dir
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let aside = dir.with_file_name(format!("orphaned-{name}-{now_unix_ms}"));
        std::fs::rename(dir, &aside).with_context(|| {
            format!(
                "moving the old folder {} aside to {}",
                dir.display(),
                aside.display()
            )
        })?;
        moved = Some(aside);
    }
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::fs::write(dir.join(KEY_FILE), key)
        .with_context(|| format!("writing {}", dir.join(KEY_FILE).display()))?;
    Ok(moved)
}

/// Checks that `dir` belongs to the job whose row holds `key` (see the module docs).
pub fn verify(dir: &Path, key: Option<&str>, has_checkpoint: bool) -> Result<()> {
    let Some(key) = key else {
        return Ok(());
    };
    match std::fs::read_to_string(dir.join(KEY_FILE)) {
        Ok(found) if found.trim() == key => Ok(()),
        Ok(_) => bail!(
            "the folder {} belongs to another job (its {KEY_FILE} differs); refusing to run in it",
            dir.display()
        ),
        Err(_) if has_checkpoint => bail!(
            "the folder {} holds checkpoints but no {KEY_FILE}; refusing to resume a run that may be another job's",
            dir.display()
        ),
        Err(_) => {
            std::fs::create_dir_all(dir)
                .and_then(|()| std::fs::write(dir.join(KEY_FILE), key))
                .with_context(|| format!("writing {}", dir.join(KEY_FILE).display()))?;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_claimed_once_and_verified_by_its_key() {
        let base = std::env::temp_dir().join(format!("arlbook-identity-{}", std::process::id()));
        let dir = base.join("1");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("old-run.txt"), "someone else's").unwrap();
        let key = new_key().unwrap();
        assert_eq!(key.len(), 32);
        let aside = claim(&dir, &key, 42).unwrap().unwrap();
        assert_eq!(aside, base.join("orphaned-1-42"));
        assert!(
            aside.join("old-run.txt").is_file(),
            "the old folder is kept"
        );
        assert!(!dir.join("old-run.txt").exists());
        verify(&dir, Some(&key), true).unwrap();
        let other = verify(&dir, Some("another"), true).unwrap_err().to_string();
        assert!(other.contains("belongs to another job"), "{other}");
        verify(&dir, None, true).unwrap();
        std::fs::remove_file(dir.join(KEY_FILE)).unwrap();
        assert!(
            verify(&dir, Some(&key), true).is_err(),
            "checkpoints but no key"
        );
        verify(&dir, Some(&key), false).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join(KEY_FILE)).unwrap(), key);
        std::fs::remove_dir_all(&base).unwrap();
    }
}
