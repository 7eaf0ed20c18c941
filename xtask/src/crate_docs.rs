//! The one sentence that says what each crate is, kept identical in three places:
//! the crate table of `ARCHITECTURE.md`, the crate's Cargo `description`, and the first
//! paragraph of its `//!` docs. Checked by this module's test (run by `cargo xtask
//! test` with xtask's own tests); every workspace member must have a row.

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Backticks dropped and whitespace runs made one space: the three places differ
    /// only in markup and line wrapping.
    fn normalise(text: &str) -> String {
        text.replace('`', "")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// `(crate, folder, sentence)` for each row of the crate table.
    fn table() -> Vec<(String, String, String)> {
        let text = read(&root().join("ARCHITECTURE.md"));
        let start = text
            .find("## Crates")
            .expect("ARCHITECTURE.md has a Crates section");
        text[start..]
            .lines()
            .skip_while(|line| !line.starts_with("|---"))
            .skip(1)
            .take_while(|line| line.starts_with('|'))
            .map(|line| {
                let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
                assert_eq!(cells.len(), 3, "a crate row has three cells: {line}");
                let name = cells[0].trim_matches('`').to_owned();
                let folder = cells[1].trim_matches('`').trim_end_matches('/').to_owned();
                (name, folder, normalise(cells[2]))
            })
            .collect()
    }

    fn cargo_field(manifest: &str, key: &str) -> Option<String> {
        manifest.lines().find_map(|line| {
            let value = line
                .strip_prefix(key)?
                .trim_start()
                .strip_prefix('=')?
                .trim();
            Some(value.trim_matches('"').to_owned())
        })
    }

    /// The first paragraph of a crate's `//!` docs.
    fn crate_doc(folder: &Path) -> String {
        let lib = folder.join("src/lib.rs");
        let path = if lib.exists() {
            lib
        } else {
            folder.join("src/main.rs")
        };
        let source = read(&path);
        let paragraph: Vec<&str> = source
            .lines()
            .map_while(|line| line.strip_prefix("//!"))
            .map(str::trim)
            .take_while(|line| !line.is_empty())
            .collect();
        normalise(&paragraph.join(" "))
    }

    #[test]
    fn each_crate_is_said_in_one_sentence_the_same_in_three_places() {
        let rows = table();
        assert!(!rows.is_empty(), "the crate table has rows");
        for (name, folder, sentence) in &rows {
            let dir = root().join(folder);
            let manifest = read(&dir.join("Cargo.toml"));
            assert_eq!(
                cargo_field(&manifest, "name").as_deref(),
                Some(name.as_str()),
                "{folder}/Cargo.toml names the crate of its row"
            );
            let description = cargo_field(&manifest, "description")
                .unwrap_or_else(|| panic!("{folder}/Cargo.toml has a description"));
            assert_eq!(
                &normalise(&description),
                sentence,
                "{name}: Cargo description"
            );
            assert_eq!(
                &crate_doc(&dir),
                sentence,
                "{name}: first paragraph of its docs"
            );
        }
        let workspace = read(&root().join("Cargo.toml"));
        let members = workspace
            .lines()
            .find_map(|line| line.strip_prefix("members = "))
            .expect("the workspace lists its members");
        for member in members.trim_matches(['[', ']']).split(',') {
            let member = member.trim().trim_matches('"');
            assert!(
                rows.iter().any(|(_, folder, _)| folder == member),
                "workspace member {member} has a row in ARCHITECTURE.md's crate table"
            );
        }
    }
}
