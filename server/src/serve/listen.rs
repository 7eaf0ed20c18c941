//! The accept loop: HTTP/1.1 connections with deadlines on their first byte and their
//! headers, and a cap on how many are open that never shuts new clients out.
//!
//! - **First-byte deadline**: a new connection that sends no byte within
//!   `--first-byte-timeout` (5 s) is closed before hyper sees it. One byte in time is
//!   enough: the header deadline then applies.
//! - **Header deadline**: a request's headers must be complete within
//!   `--header-timeout` (30 s) of hyper starting to read them (for a new connection,
//!   from its first byte), whether the client sends nothing more or dribbles a line at
//!   a time. An idle keep-alive connection waits for its next request under this
//!   deadline too, not the first-byte one.
//! - **Connection cap**: at most `--max-connections` are open, lowered to leave
//!   [`RESERVED_DESCRIPTORS`] of the process's descriptor limit free for the database,
//!   the job logs and the training processes. At the cap the loop makes room before it
//!   takes on a connection that has come ([`super::connections`]): it closes the one
//!   idle longest (no byte since it was accepted or since its last response went out);
//!   if none is idle, the one whose unfinished headers began first. A connection whose
//!   request is being answered (a handler running, a response or a metrics stream
//!   being sent) is never closed for room: when every one is, the connection that came
//!   waits, accepted but not served (one descriptor beyond the cap, inside the
//!   reserve), and those after it wait in the kernel's backlog, until one closes or
//!   goes idle. Nothing is closed ahead of need. So silent sockets, however
//!   many one client opens, cannot keep a prompt request from being answered. A
//!   request whose first bytes arrive just as its idle connection is closed is lost
//!   with it, as when any server ends an idle keep-alive connection.
//! - **Counts**: `GET /api/health` reports the open connections, the cap, and how many
//!   were closed by the first-byte deadline or for room, and how often every
//!   connection was busy at the cap ([`ConnectionCounts`]).
//! - **Parser errors**: the answers hyper gives to requests it cannot parse get JSON
//!   bodies like every other error ([`super::parser_errors`]).
//! - **Shutdown**: on the stop signal the loop stops accepting, asks every connection
//!   to finish its current request, and waits for them (at most [`DRAIN_LIMIT`]).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use super::connections::{CountRequests, Registration, Registry, Watched};
use super::parser_errors::JsonParserErrors;

pub use super::connections::ConnectionCounts;

/// Descriptors kept free for everything but connections.
pub const RESERVED_DESCRIPTORS: usize = 64;
/// How long a shutdown waits for open connections to finish.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// Connection limits.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// A new connection's first byte must arrive within this time.
    pub first_byte_timeout: Duration,
    /// Request headers must be complete within this time.
    pub header_timeout: Duration,
    /// Open connections at most (before the descriptor limit lowers it).
    pub max_connections: usize,
}

/// The soft limit on open descriptors of this process (Linux), if it can be read.
fn descriptor_limit() -> Option<usize> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// The cap in force: the configured one, lowered to fit the descriptor limit.
pub fn effective_cap(configured: usize) -> usize {
    let fitting = descriptor_limit().map_or(configured, |limit| {
        limit.saturating_sub(RESERVED_DESCRIPTORS).max(1)
    });
    configured.min(fitting).max(1)
}

/// Resolves when the stop signal has been sent (or its sender is gone).
async fn stop_requested(mut stopping: watch::Receiver<bool>) {
    let _ = stopping.wait_for(|stop| *stop).await;
}

/// Serves `router` on `listener` under `limits` until `stop` resolves, keeping
/// `counts` up to date.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    counts: Arc<ConnectionCounts>,
    stop: impl Future<Output = ()>,
) {
    let cap = effective_cap(limits.max_connections);
    counts.set_cap(cap);
    let registry = Registry::new(counts);
    let (stopping_sender, stopping) = watch::channel(false);
    // HTTP/1 only: sniffing for HTTP/2 would wait for the first bytes with no deadline.
    let mut builder = Builder::new(TokioExecutor::new()).http1_only();
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let builder = Arc::new(builder);
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of descriptors or a connection reset before accept: the
                // connection is lost, the server goes on after a breath.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
        };
        // Room is made only for a connection that has come: none is closed ahead of
        // need. It waits here, unregistered, while every open one is busy.
        tokio::select! {
            () = &mut stop => break,
            () = registry.make_room(cap) => {}
        }
        let _ = stream.set_nodelay(true);
        tokio::spawn(serve_connection(
            stream,
            registry.register(),
            Arc::clone(&builder),
            router.clone(),
            limits.first_byte_timeout,
            stopping.clone(),
        ));
    }
    let _ = stopping_sender.send(true);
    let _ = tokio::time::timeout(DRAIN_LIMIT, registry.all_closed()).await;
}

/// Serves one connection, then takes it off the registry (after its socket is closed,
/// so the cap counts every open descriptor).
async fn serve_connection(
    stream: TcpStream,
    registration: Registration,
    builder: Arc<Builder<TokioExecutor>>,
    router: Router,
    first_byte_timeout: Duration,
    stopping: watch::Receiver<bool>,
) {
    serve_stream(
        stream,
        &registration,
        &builder,
        router,
        first_byte_timeout,
        stopping,
    )
    .await;
    drop(registration);
}

/// Waits for the connection's first byte (closing it at the first-byte deadline), then
/// hands it to hyper, until it ends, is chosen to close for room, or the server stops.
async fn serve_stream(
    stream: TcpStream,
    registration: &Registration,
    builder: &Builder<TokioExecutor>,
    router: Router,
    first_byte_timeout: Duration,
    stopping: watch::Receiver<bool>,
) {
    let connection = registration.connection();
    let mut first = [0_u8; 1];
    let waited = tokio::select! {
        () = connection.chosen_to_close() => return,
        () = stop_requested(stopping.clone()) => return,
        waited = tokio::time::timeout(first_byte_timeout, stream.peek(&mut first)) => waited,
    };
    match waited {
        Ok(Ok(read)) if read > 0 => connection.bytes_arrived(),
        // Closed by the client, or failed, before sending anything.
        Ok(_) => return,
        Err(_) => {
            registration.counts().first_byte_deadline_passed();
            return;
        }
    }
    let socket = TokioIo::new(JsonParserErrors::new(Watched::new(
        stream,
        Arc::clone(connection),
    )));
    let service = TowerToHyperService::new(CountRequests::new(router, Arc::clone(connection)));
    let served = builder.serve_connection(socket, service);
    tokio::pin!(served);
    tokio::select! {
        _ = served.as_mut() => {}
        () = connection.chosen_to_close() => {}
        () = stop_requested(stopping) => {
            served.as_mut().graceful_shutdown();
            let _ = served.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_descriptors_free() {
        let cap = effective_cap(usize::MAX);
        if let Some(limit) = descriptor_limit() {
            assert_eq!(cap, limit.saturating_sub(RESERVED_DESCRIPTORS).max(1));
        }
        assert_eq!(effective_cap(3), 3.min(cap));
        assert!(effective_cap(0) >= 1);
    }
}
