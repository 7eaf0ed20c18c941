//! `arlbook serve`: the notebook's static files, the compute API and the training-job
//! API over HTTP.
//!
//! Routes (all described in `GET /api/openapi.json`):
//! - `GET /api/health`: liveness, version, running computations and connection counts.
//! - `GET /api/compute`, `GET /api/compute/{name}/example`, `POST /api/compute/{name}`:
//!   the compute API; a rejected input answers 422 with `{"error": {"field", "message"}}`.
//! - `GET /api/presets`: the training presets of `--configs DIR` (name, summary, every
//!   setting with defaults filled in).
//! - `POST /api/jobs`, `GET /api/jobs`, `GET /api/jobs/{id}`, `DELETE /api/jobs/{id}`,
//!   `GET /api/jobs/{id}/metrics` (server-sent events): training jobs ([`job_routes`] over [`crate::jobs`], the stream in [`metrics_stream`]).
//! - any other `/api/...` path: a JSON 404.
//! - everything else: the built notebook from `--web DIR` (default `web/dist`): its
//!   files, and `index.html` (status 200) for the app's own routes (see [`web_files`]).
//!
//! Loopback by default: binding another address needs `--allow-remote`, and then the
//! job-changing routes need a bearer token (`--token`, or one generated and printed).
//! Request bodies are capped ([`MAX_BODY_BYTES`], [`MAX_JOB_BODY_BYTES`] for jobs),
//! every request has a deadline ([`REQUEST_TIMEOUT`]), every error is JSON, and a
//! panic in a handler answers 500 instead of reaching the client as a closed socket.

use crate::output::outln;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use arlbook_core::FieldError;
use axum::Json;
use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use clap::Args;
use serde_json::json;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::limit::RequestBodyLimitLayer;

use crate::jobs::runner::{Limits, Runner};
use job_routes::JobsState;

mod compute_routes;
mod connections;
pub mod hardening;
mod job_routes;
mod listen;
mod metrics_stream;
pub mod openapi;
mod parser_errors;
mod same_origin;
mod web_files;

/// The largest accepted request body.
pub const MAX_BODY_BYTES: usize = 1 << 20;
/// The largest accepted job request (a training config is a few hundred bytes).
pub const MAX_JOB_BODY_BYTES: usize = 64 << 10;
/// How long one request may take by default before it is answered 408 (a metrics
/// stream only needs its headers within this time); `--request-timeout` sets it.
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
    /// Directory for the job database, and each job's config, metrics and checkpoints.
    #[arg(long, default_value = "data")]
    pub data: PathBuf,
    /// Directory of the training presets (`POST /api/jobs` with `{"preset": NAME}`
    /// reads `NAME.toml` there).
    #[arg(long, default_value = "configs")]
    pub configs: PathBuf,
    /// Training jobs that run at the same time; the rest wait in order.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub max_jobs: u16,
    /// Jobs that may wait to run (queued or interrupted); a submission beyond them is
    /// answered 429.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_queued: u32,
    /// A host name (besides IP addresses and localhost) under which the API answers,
    /// such as the machine's name on a LAN; repeatable. Other names are refused, so a
    /// page cannot reach the server by re-pointing its own DNS name (rebinding).
    #[arg(long = "allowed-host", value_name = "NAME")]
    pub allowed_hosts: Vec<String>,
    /// An origin (`https://course.example.org`) whose pages may send changing requests
    /// besides the server's own; repeatable.
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    pub allowed_origins: Vec<String>,
    /// Open connections at most (lowered to leave part of the process's descriptor limit
    /// free). At the cap, the connection idle longest is closed to make room for a new
    /// one; one whose request is being answered is never closed for room.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_connections: u32,
    /// Seconds a new connection has to send its first byte; then it is closed.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub first_byte_timeout: u64,
    /// Seconds a connection has to send its request headers once it has sent a byte,
    /// and to start its next request when idle; then it is closed.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub header_timeout: u64,
    /// Seconds a request may take before it is answered 408; a computation still
    /// running then is stopped.
    #[arg(long, default_value_t = REQUEST_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub request_timeout: u64,
    /// Bearer token for POST and DELETE /api/jobs. Required whenever the server listens
    /// beyond loopback (one is generated and printed if not given); on loopback it is
    /// only checked when given.
    #[arg(long)]
    pub token: Option<String>,
    /// A NATS broker whose `arlbook worker`s collect the rollouts of jobs submitted
    /// with `"distributed": true`. Without it, such jobs are refused and every job
    /// collects in its own process. Credentials: `ARLBOOK_NATS_TOKEN`, which the jobs
    /// inherit.
    #[arg(long, value_name = "URL")]
    pub nats: Option<String>,
}

/// `{"error": {"field", "message"}}` with `status`.
pub fn error_response(status: StatusCode, err: &FieldError) -> Response {
    (status, Json(json!({ "error": err }))).into_response()
}

async fn api_not_found() -> Response {
    error_response(
        StatusCode::NOT_FOUND,
        &FieldError::new(
            "(path)",
            "no such API route; GET /api/openapi.json lists them",
        ),
    )
}

async fn openapi_document() -> Json<serde_json::Value> {
    Json(openapi::document())
}

/// The application's routes (without the listener).
pub fn router(
    web_dir: &Path,
    jobs: JobsState,
    token: hardening::Token,
    same_origin: same_origin::SameOrigin,
    request_timeout: Duration,
    connections: Arc<listen::ConnectionCounts>,
) -> Router {
    let web_dir: Arc<Path> = Arc::from(web_dir);
    let job_api = Router::new()
        .route("/api/presets", get(job_routes::presets))
        .route("/api/jobs", get(job_routes::list).post(job_routes::submit))
        .route(
            "/api/jobs/{id}",
            get(job_routes::get).delete(job_routes::cancel),
        )
        .route("/api/jobs/{id}/metrics", get(job_routes::metrics))
        .layer(axum::middleware::from_fn_with_state(
            token,
            hardening::require_token,
        ))
        .layer(RequestBodyLimitLayer::new(MAX_JOB_BODY_BYTES))
        .with_state(jobs);
    Router::new()
        .route(
            "/api/health",
            get(compute_routes::health).with_state(connections),
        )
        .route("/api/openapi.json", get(openapi_document))
        .route("/api/compute", get(compute_routes::list))
        .route("/api/compute/{name}/example", get(compute_routes::example))
        .route("/api/compute/{name}", post(compute_routes::compute))
        .route("/api/{*rest}", any(api_not_found))
        .merge(job_api)
        .fallback(move |request| {
            let web_dir = Arc::clone(&web_dir);
            async move { web_files::serve(&web_dir, request).await }
        })
        .layer(axum::middleware::from_fn_with_state(
            same_origin,
            same_origin::check,
        ))
        .layer(RequestBodyLimitLayer::new(MAX_BODY_BYTES))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            request_timeout,
        ))
        .layer(axum::middleware::from_fn_with_state(
            hardening::Deadline(request_timeout),
            hardening::json_errors,
        ))
        .layer(CatchPanicLayer::custom(hardening::panic_response))
}

/// The token the job routes require: the given one, or a generated one when the
/// server listens beyond loopback.
fn resolve_token(args: &ServeArgs) -> anyhow::Result<hardening::Token> {
    let token = match (&args.token, args.addr.ip().is_loopback()) {
        (Some(token), _) if token.trim().is_empty() => anyhow::bail!("--token must not be empty"),
        (Some(token), _) => Some(token.clone()),
        (None, true) => None,
        (None, false) => {
            let token = crate::jobs::identity::random_hex(16)
                .context("making a token (pass --token instead)")?;
            eprintln!("job API token (send `Authorization: Bearer <token>`): {token}");
            Some(token)
        }
    };
    Ok(hardening::Token(token.map(Arc::from)))
}

/// Resolves when the process is asked to stop (Ctrl-C, or SIGTERM on Unix).
async fn stop_signal() {
    let interrupt = async {
        // If the handler cannot be installed, serve until killed.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    {
        let terminate = async {
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(mut signal) => {
                    signal.recv().await;
                }
                Err(_) => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            () = interrupt => {}
            () = terminate => {}
        }
    }
    #[cfg(not(unix))]
    interrupt.await;
}

/// Starts the server and runs until Ctrl-C or SIGTERM; then the training processes
/// are stopped and their jobs left interrupted, to resume at the next start.
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
    let token = resolve_token(args)?;
    if let Some(url) = &args.nats {
        arlbook_cluster::broker::Broker::from_env(url, None).check()?;
    }
    std::fs::create_dir_all(&args.data)
        .with_context(|| format!("creating the data directory {}", args.data.display()))?;
    let _data_lock = crate::jobs::lock::lock_data(&args.data)?;
    let exe = std::env::current_exe().context("finding the arlbook binary to run jobs with")?;
    let limits = Limits {
        max_jobs: usize::from(args.max_jobs),
        max_queued: args.max_queued as usize,
    };
    let runner = Runner::open(&args.data, limits, exe)?;
    let (shutdown_sender, shutdown) = tokio::sync::watch::channel(false);
    let jobs = JobsState {
        runner: Arc::clone(&runner),
        configs: args.configs.clone(),
        broker: args.nats.clone(),
        shutdown,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let served = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(args.addr)
            .await
            .with_context(|| format!("binding {}", args.addr))?;
        let local = listener.local_addr().context("reading the bound address")?;
        outln!("arlbook is serving the notebook at http://{local}/");
        let same_origin = same_origin::SameOrigin {
            hosts: args
                .allowed_hosts
                .iter()
                .map(|h| h.to_ascii_lowercase())
                .collect(),
            origins: args.allowed_origins.iter().cloned().collect(),
        };
        let limits = listen::ConnectionLimits {
            first_byte_timeout: Duration::from_secs(args.first_byte_timeout),
            header_timeout: Duration::from_secs(args.header_timeout),
            max_connections: args.max_connections as usize,
        };
        let request_timeout = Duration::from_secs(args.request_timeout);
        let connections = Arc::new(listen::ConnectionCounts::default());
        let app = router(
            &args.web,
            jobs,
            token,
            same_origin,
            request_timeout,
            Arc::clone(&connections),
        );
        listen::serve(listener, app, limits, connections, async move {
            stop_signal().await;
            // Ends the metrics streams so their connections can close.
            let _ = shutdown_sender.send(true);
        })
        .await;
        anyhow::Ok(())
    });
    runner.shutdown();
    served
}
