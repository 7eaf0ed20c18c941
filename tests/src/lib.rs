//! Cross-crate tests of arlbook: article numbers, the CLI and the HTTP API, end to end.
//!
//! The helpers here run the real `arlbook` binary (built once per test process with
//! the same cargo that runs the tests) and talk to a real server on a loopback port
//! with plain HTTP/1.1 over a TCP socket; [`browser`] drives headless Chromium for the
//! notebook's browser tests (`tests/e2e/`).

pub mod browser;
pub mod cli;
pub mod http;
