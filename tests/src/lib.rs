//! Cross-crate tests of arlbook: article numbers, the CLI and the HTTP API, end to end.
