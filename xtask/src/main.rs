//! Project automation for arlbook.
fn main() {}
