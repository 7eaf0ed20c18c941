//! `cargo xtask serve`: build the notebook, then run `arlbook serve` on it.

use crate::cmd::cargo;
use crate::web;

/// Builds the web bundle and starts the server (it prints the URL).
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let options = web::WebOptions::parse(args);
    let dist = web::build(&options)?;
    let mut serve = cargo();
    serve.args(["run", "-p", "arlbook-server", "--", "serve", "--web"]);
    serve.arg(&dist);
    // Pass the server's own options through (--addr, --data, --allow-remote).
    serve.args(args.iter().filter(|a| a.as_str() != "--dev"));
    crate::cmd::run(&mut serve)
}
