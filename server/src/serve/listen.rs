//! The accept loop: HTTP/1.1 connections with a deadline on their headers and a cap on
//! how many are open at once.
//!
//! - **Header deadline**: a connection whose request headers are not complete within
//!   the deadline (`--header-timeout`, 30 s) is closed, whether it sends nothing or
//!   dribbles a line at a time. The same deadline ends an idle keep-alive connection:
//!   it starts again each time the connection waits for its next request.
//! - **Connection cap**: at most `--max-connections` connections are open; beyond that
//!   the loop stops accepting and new connections wait in the kernel's backlog (using
//!   no descriptor of this process) until one closes. The cap is lowered to leave
//!   [`RESERVED_DESCRIPTORS`] of the process's descriptor limit free, so silent
//!   sockets cannot exhaust the descriptors the database, the job logs and the
//!   training processes need; with the header deadline they are cut after it.
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
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

use super::parser_errors::JsonParserErrors;

/// Descriptors kept free for everything but connections.
pub const RESERVED_DESCRIPTORS: usize = 64;
/// How long a shutdown waits for open connections to finish.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(5);

/// Connection limits.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
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

/// Serves `router` on `listener` under `limits` until `stop` resolves.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    stop: impl Future<Output = ()>,
) {
    let cap = effective_cap(limits.max_connections);
    let slots = Arc::new(Semaphore::new(cap));
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
        let slot = tokio::select! {
            () = &mut stop => break,
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
        };
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
        let _ = stream.set_nodelay(true);
        let builder = Arc::clone(&builder);
        let service = TowerToHyperService::new(router.clone());
        let mut stopping = stopping.clone();
        tokio::spawn(async move {
            let socket = TokioIo::new(JsonParserErrors::new(stream));
            let connection = builder.serve_connection(socket, service);
            tokio::pin!(connection);
            let stopped = async move {
                let _ = stopping.wait_for(|stop| *stop).await;
            };
            tokio::select! {
                _ = connection.as_mut() => {}
                () = stopped => {
                    connection.as_mut().graceful_shutdown();
                    let _ = connection.await;
                }
            }
            drop(slot);
        });
    }
    let _ = stopping_sender.send(true);
    // Every slot back means every connection has closed.
    let _ = tokio::time::timeout(DRAIN_LIMIT, slots.acquire_many(cap as u32)).await;
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
