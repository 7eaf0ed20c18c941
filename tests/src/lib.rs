//! Helpers for arlbook's end-to-end tests: run the real binary, a real server on
//! loopback, headless Chromium.
//!
//! The tests that use them are integration tests of `arlbook-server` (`server/tests/`):
//! cargo builds the `arlbook` binary for that test run and names it in
//! `env!("CARGO_BIN_EXE_arlbook")`, and the tests hand that path to [`cli::Arlbook`].
//! [`http::Server`] runs `arlbook serve` on a loopback port and speaks plain HTTP/1.1
//! over a TCP socket; [`browser`] drives headless Chromium for the notebook's browser
//! tests (`server/tests/e2e/`), loading pages and reading their DOM; [`webdriver`]
//! drives a Chromium session through `chromedriver` to move controls like a reader;
//! [`nats`] runs a NATS server with JetStream on loopback for the cluster tests;
//! [`scratch`] gives a test a folder that goes away when it passes.

pub mod browser;
pub mod cli;
pub mod http;
pub mod json;
pub mod nats;
pub mod scratch;
pub mod webdriver;
