//! The `arlbook` binary.
fn main() {}
