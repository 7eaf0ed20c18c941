//! `arlbook serve`: the notebook's static files and the compute API over HTTP.
//!
//! Routes:
//! - `GET /api/health`: liveness and version.
//! - `GET /api/compute`: the computations, with a one-line summary each.
//! - `GET /api/compute/{name}/example`: an example request.
//! - `POST /api/compute/{name}`: one computation; a rejected input answers 422 with
//!   `{"error": {"field", "message"}}`, an unknown name 404.
//! - everything else: the built notebook from `--web DIR` (default `web/dist`).
//!
//! Loopback by default: binding another address needs `--allow-remote`. Request bodies
//! are capped ([`MAX_BODY_BYTES`]) and every request has a deadline ([`REQUEST_TIMEOUT`]).

use crate::output::outln;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::routing::{get, post};
use clap::Args;
use tower_http::services::{ServeDir, ServeFile};

mod compute_routes;

/// The largest accepted request body.
pub const MAX_BODY_BYTES: usize = 1 << 20;
/// How long one request may take before it is answered 408.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Arguments of `arlbook serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,
    /// Allow listening on an address other than loopback.
    #[arg(long)]
    pub allow_remote: bool,
    /// Directory of the built notebook (index.html, the wasm bundle).
    #[arg(long, default_value = "web/dist")]
    pub web: PathBuf,
    /// Directory for jobs, checkpoints and metrics.
    #[arg(long, default_value = "data")]
    pub data: PathBuf,
}

/// The application's routes (without the listener), for tests and for `run`.
pub fn router(web_dir: &std::path::Path) -> Router {
    let index = web_dir.join("index.html");
    let static_files = ServeDir::new(web_dir).not_found_service(ServeFile::new(index));
    Router::new()
        .route("/api/health", get(compute_routes::health))
        .route("/api/compute", get(compute_routes::list))
        .route("/api/compute/{name}/example", get(compute_routes::example))
        .route("/api/compute/{name}", post(compute_routes::compute))
        .fallback_service(static_files)
        .layer(tower_http::limit::RequestBodyLimitLayer::new(
            MAX_BODY_BYTES,
        ))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            axum::http::StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT,
        ))
}

/// Starts the server and runs until Ctrl-C.
pub fn run(args: &ServeArgs) -> anyhow::Result<()> {
    if !args.addr.ip().is_loopback() && !args.allow_remote {
        anyhow::bail!(
            "refusing to listen on {} (not loopback); pass --allow-remote to expose the server",
            args.addr
        );
    }
    if !args.addr.ip().is_loopback() {
        eprintln!(
            "warning: listening on {}: anyone who can reach this address can use the API",
            args.addr
        );
    }
    if !args.web.join("index.html").is_file() {
        eprintln!(
            "warning: no notebook build in {} (run `cargo xtask build-web`); serving the API only",
            args.web.display()
        );
    }
    std::fs::create_dir_all(&args.data)
        .with_context(|| format!("creating the data directory {}", args.data.display()))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .with_context(|| format!("binding {}", args.addr))?;
        let local = listener.local_addr().context("reading the bound address")?;
        outln!("arlbook is serving the notebook at http://{local}/");
        axum::serve(listener, router(&args.web))
            .with_graceful_shutdown(async {
                // If the signal handler cannot be installed, serve until killed.
                if tokio::signal::ctrl_c().await.is_err() {
                    std::future::pending::<()>().await;
                }
            })
            .await
            .context("serving HTTP")
    })
}
