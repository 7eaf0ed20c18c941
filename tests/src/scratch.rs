//! A test's scratch folder under the system temporary directory, removed when the test
//! passes and kept when it fails (its logs are what a failure is read from).

use std::path::{Path, PathBuf};

/// `<temp>/arlbook-<name>-<pid>`, created empty; removed on drop unless the thread is
/// panicking. Processes a test starts can be pointed into it (`TMPDIR`), so what they
/// leave behind when killed goes with it.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl Scratch {
    /// A fresh, empty folder (a leftover of an earlier run with the same name and
    /// process id is removed first).
    ///
    /// # Panics
    /// If the folder cannot be created.
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("arlbook-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        Self(dir)
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Scratch;

    #[test]
    fn a_passing_test_leaves_nothing_behind() {
        let scratch = Scratch::new("scratch-self-test");
        std::fs::write(scratch.join("file"), "x").unwrap();
        let path = scratch.path().to_owned();
        assert!(path.join("file").exists());
        drop(scratch);
        assert!(!path.exists());
    }

    #[test]
    fn a_failing_test_keeps_its_folder() {
        let path =
            std::env::temp_dir().join(format!("arlbook-scratch-kept-{}", std::process::id()));
        let kept = path.clone();
        let result = std::thread::spawn(move || {
            let scratch = Scratch::new("scratch-kept");
            assert_eq!(scratch.path(), kept);
            panic!("the test failed");
        })
        .join();
        assert!(result.is_err());
        assert!(path.exists());
        std::fs::remove_dir_all(&path).unwrap();
    }
}
