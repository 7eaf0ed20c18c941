//! The open connections and what each is doing, so that a full server closes the one
//! whose loss costs nothing instead of leaving new clients unanswered.
//!
//! Each open connection stands in one of three ways ([`Standing`]):
//! - **idle**: no byte has arrived since it was accepted or since its last response
//!   went out whole;
//! - **unfinished headers**: bytes of a request have arrived and hyper has not yet
//!   read its headers whole;
//! - **busy**: a request is being answered: its handler runs, or its response (a file,
//!   a metrics stream) is still being produced or waits to be handed to the kernel.
//!
//! Three wrappers keep the standing: [`Watched`] (the socket) notes bytes arriving and
//! writes flushed, [`CountRequests`] (the service) a request starting, and
//! [`CountedBody`] (the response body) that request's response ending.
//!
//! [`Registry::make_room`] holds the cap. When it is reached it closes the connection
//! idle longest; failing that, the one whose headers began arriving first. A busy
//! connection is never closed to make room: when every connection is busy, the wait
//! lasts until one closes or goes idle.
//! [`ConnectionCounts`] keeps the counts `GET /api/health` reports.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::Router;
use axum::body::{Body, Bytes, HttpBody};
use axum::http::{Request, Response};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;

/// Locks `mutex`; a panic elsewhere while it was held leaves plain data, still usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What the accept loop has done about connections since the start.
#[derive(Debug, Default)]
pub struct ConnectionCounts {
    cap: AtomicUsize,
    open: AtomicUsize,
    closed_first_byte_deadline: AtomicU64,
    closed_idle_for_room: AtomicU64,
    closed_unfinished_headers_for_room: AtomicU64,
    accept_paused_all_busy: AtomicU64,
}

impl ConnectionCounts {
    /// Records the cap in force.
    pub fn set_cap(&self, cap: usize) {
        self.cap.store(cap, Ordering::Relaxed);
    }

    /// Counts one connection closed for sending no byte within the first-byte deadline.
    pub fn first_byte_deadline_passed(&self) {
        self.closed_first_byte_deadline
            .fetch_add(1, Ordering::Relaxed);
    }

    /// The `connections` object of `GET /api/health`.
    pub fn report(&self) -> Value {
        json!({
            "open": self.open.load(Ordering::Relaxed),
            "cap": self.cap.load(Ordering::Relaxed),
            "closed_first_byte_deadline": self.closed_first_byte_deadline.load(Ordering::Relaxed),
            "closed_idle_for_room": self.closed_idle_for_room.load(Ordering::Relaxed),
            "closed_unfinished_headers_for_room":
                self.closed_unfinished_headers_for_room.load(Ordering::Relaxed),
            "accept_paused_all_busy": self.accept_paused_all_busy.load(Ordering::Relaxed),
        })
    }
}

/// How a connection stands (see the module docs), with the instant its standing began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// No byte since it was accepted or since its last response went out whole.
    Idle(Instant),
    /// A request's first bytes have arrived, its headers are not yet read whole.
    UnfinishedHeaders(Instant),
    /// A request is being answered.
    Busy,
}

#[derive(Debug)]
struct Activity {
    /// Requests whose response has not ended (a handler running or a body being sent).
    requests: usize,
    /// A response ended and its last bytes may still sit in hyper's write buffer.
    unflushed: bool,
    /// When the first byte of a request not yet dispatched arrived.
    headers_since: Option<Instant>,
    /// When the connection last became idle (its acceptance, or a response flushed).
    idle_since: Instant,
    /// Chosen to be closed to make room.
    closing: bool,
}

/// One open connection's standing, and the signal that closes it.
#[derive(Debug)]
pub struct Connection {
    activity: Mutex<Activity>,
    close: Notify,
    /// The registry's signal that a connection closed or went idle.
    changed: Arc<Notify>,
}

impl Connection {
    fn new(changed: Arc<Notify>) -> Self {
        Self {
            activity: Mutex::new(Activity {
                requests: 0,
                unflushed: false,
                headers_since: None,
                idle_since: Instant::now(),
                closing: false,
            }),
            close: Notify::new(),
            changed,
        }
    }

    /// Resolves once the connection is chosen to be closed to make room.
    pub async fn chosen_to_close(&self) {
        self.close.notified().await;
    }

    /// How the connection stands now.
    pub fn standing(&self) -> Standing {
        let activity = lock(&self.activity);
        if activity.requests > 0 || activity.unflushed {
            Standing::Busy
        } else if let Some(since) = activity.headers_since {
            Standing::UnfinishedHeaders(since)
        } else {
            Standing::Idle(activity.idle_since)
        }
    }

    /// Bytes arrived. Outside a request they begin the next request's headers (inside
    /// one they are its body, or a pipelined request hyper reads when it is done).
    pub fn bytes_arrived(&self) {
        let mut activity = lock(&self.activity);
        if activity.requests == 0 && activity.headers_since.is_none() {
            activity.headers_since = Some(Instant::now());
        }
    }

    /// hyper read a request's headers and called the service.
    fn request_started(&self) {
        let mut activity = lock(&self.activity);
        activity.requests += 1;
        activity.headers_since = None;
    }

    /// A request's response ended (its body was sent whole, or dropped).
    fn response_ended(&self) {
        let mut activity = lock(&self.activity);
        activity.requests = activity.requests.saturating_sub(1);
        activity.unflushed = true;
    }

    /// A flush of the socket completed: everything hyper wrote is with the kernel.
    fn flushed(&self) {
        let mut activity = lock(&self.activity);
        if activity.unflushed && activity.requests == 0 {
            activity.unflushed = false;
            activity.idle_since = Instant::now();
            drop(activity);
            self.changed.notify_one();
        }
    }

    /// Marks the connection for closing and signals it, unless it is already marked.
    fn choose_to_close(&self) {
        let mut activity = lock(&self.activity);
        if !activity.closing {
            activity.closing = true;
            self.close.notify_one();
        }
    }

    fn is_closing(&self) -> bool {
        lock(&self.activity).closing
    }
}

/// The open connections.
#[derive(Debug)]
pub struct Registry {
    open: Mutex<HashMap<u64, Arc<Connection>>>,
    next_id: AtomicU64,
    changed: Arc<Notify>,
    counts: Arc<ConnectionCounts>,
}

/// A connection's place in the registry; dropping it removes the connection.
#[derive(Debug)]
pub struct Registration {
    registry: Arc<Registry>,
    id: u64,
    connection: Arc<Connection>,
}

impl Registration {
    /// The registered connection.
    pub fn connection(&self) -> &Arc<Connection> {
        &self.connection
    }

    /// The registry's counts.
    pub fn counts(&self) -> &ConnectionCounts {
        &self.registry.counts
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut open = lock(&self.registry.open);
        open.remove(&self.id);
        self.registry
            .counts
            .open
            .store(open.len(), Ordering::Relaxed);
        drop(open);
        self.registry.changed.notify_one();
    }
}

impl Registry {
    /// An empty registry that keeps its counts in `counts`.
    pub fn new(counts: Arc<ConnectionCounts>) -> Arc<Self> {
        Arc::new(Self {
            open: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            changed: Arc::new(Notify::new()),
            counts,
        })
    }

    /// Registers a connection just accepted (idle from now).
    pub fn register(self: &Arc<Self>) -> Registration {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let connection = Arc::new(Connection::new(Arc::clone(&self.changed)));
        let mut open = lock(&self.open);
        open.insert(id, Arc::clone(&connection));
        self.counts.open.store(open.len(), Ordering::Relaxed);
        drop(open);
        Registration {
            registry: Arc::clone(self),
            id,
            connection,
        }
    }

    /// Connections open now.
    pub fn open_count(&self) -> usize {
        lock(&self.open).len()
    }

    /// Resolves once no connection is open.
    pub async fn all_closed(&self) {
        loop {
            let changed = self.changed.notified();
            if self.open_count() == 0 {
                return;
            }
            changed.await;
        }
    }

    /// Resolves once fewer than `cap` connections are open, closing one to make room
    /// when the cap is reached: the idle connection idle longest, else the one whose
    /// unfinished headers began first. A busy connection is never closed: when all are
    /// busy this waits until one closes or goes idle.
    pub async fn make_room(&self, cap: usize) {
        let mut paused = false;
        loop {
            // Created before the check: a change after it still ends the wait below.
            let changed = self.changed.notified();
            if self.try_make_room(cap, &mut paused) {
                return;
            }
            changed.await;
        }
    }

    /// One step of [`Self::make_room`]: whether there is room now; if not, a
    /// connection is chosen to close (unless one is already closing).
    fn try_make_room(&self, cap: usize, paused: &mut bool) -> bool {
        let open = lock(&self.open);
        if open.len() < cap {
            return true;
        }
        // One chosen connection at a time: wait for it to go before choosing another.
        if open.values().any(|c| c.is_closing()) {
            return false;
        }
        match choose(open.values()) {
            Some((connection, Standing::Idle(_))) => {
                connection.choose_to_close();
                self.counts
                    .closed_idle_for_room
                    .fetch_add(1, Ordering::Relaxed);
            }
            Some((connection, _)) => {
                connection.choose_to_close();
                self.counts
                    .closed_unfinished_headers_for_room
                    .fetch_add(1, Ordering::Relaxed);
            }
            None => {
                if !*paused {
                    *paused = true;
                    self.counts
                        .accept_paused_all_busy
                        .fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        false
    }
}

/// The connection to close for room: the one idle longest, else the one whose headers
/// began first; none when every one is busy.
fn choose<'a>(
    connections: impl Iterator<Item = &'a Arc<Connection>>,
) -> Option<(&'a Arc<Connection>, Standing)> {
    let rank = |standing: Standing| match standing {
        Standing::Idle(since) => Some((0, since)),
        Standing::UnfinishedHeaders(since) => Some((1, since)),
        Standing::Busy => None,
    };
    connections
        .filter_map(|c| {
            let standing = c.standing();
            rank(standing).map(|r| (r, c, standing))
        })
        .min_by_key(|(r, _, _)| *r)
        .map(|(_, c, standing)| (c, standing))
}

/// A socket that tells its connection when bytes arrive and when a flush completes.
#[derive(Debug)]
pub struct Watched<S> {
    inner: S,
    connection: Arc<Connection>,
}

impl<S> Watched<S> {
    /// Wraps `inner`, the socket of `connection`.
    pub fn new(inner: S, connection: Arc<Connection>) -> Self {
        Self { inner, connection }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let read = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(read, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.connection.bytes_arrived();
        }
        read
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let flushed = Pin::new(&mut this.inner).poll_flush(cx);
        if matches!(flushed, Poll::Ready(Ok(()))) {
            this.connection.flushed();
        }
        flushed
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// One request being answered; its drop ends it.
#[derive(Debug)]
struct InFlight(Arc<Connection>);

impl InFlight {
    fn start(connection: &Arc<Connection>) -> Self {
        connection.request_started();
        Self(Arc::clone(connection))
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.response_ended();
    }
}

/// A response body that keeps its request counted as being answered until hyper has
/// taken its last frame (or dropped it).
#[derive(Debug)]
pub struct CountedBody {
    body: Body,
    _in_flight: InFlight,
}

impl HttpBody for CountedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The application's router as one connection's service: each request counts as
/// being answered from its call until its response body ends.
#[derive(Debug, Clone)]
pub struct CountRequests {
    router: Router,
    connection: Arc<Connection>,
}

impl CountRequests {
    /// `router`, answering the requests of `connection`.
    pub fn new(router: Router, connection: Arc<Connection>) -> Self {
        Self { router, connection }
    }
}

impl<B> tower::Service<Request<B>> for CountRequests
where
    Router: tower::Service<Request<B>, Response = Response<Body>, Error = Infallible>,
    <Router as tower::Service<Request<B>>>::Future: Send + 'static,
{
    type Response = Response<CountedBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        tower::Service::<Request<B>>::poll_ready(&mut self.router, cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let in_flight = InFlight::start(&self.connection);
        let answer = self.router.call(request);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| CountedBody {
                body,
                _in_flight: in_flight,
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(registry: &Registry) -> Value {
        registry.counts.report()
    }

    #[test]
    fn a_connection_goes_idle_only_once_its_response_is_flushed() {
        let registry = Registry::new(Arc::default());
        let registration = registry.register();
        let connection = registration.connection();
        assert!(matches!(connection.standing(), Standing::Idle(_)));
        connection.bytes_arrived();
        assert!(matches!(
            connection.standing(),
            Standing::UnfinishedHeaders(_)
        ));
        let in_flight = InFlight::start(connection);
        assert_eq!(connection.standing(), Standing::Busy);
        // Body bytes inside the request change nothing.
        connection.bytes_arrived();
        assert_eq!(connection.standing(), Standing::Busy);
        drop(in_flight);
        assert_eq!(connection.standing(), Standing::Busy, "not yet flushed");
        connection.flushed();
        assert!(matches!(connection.standing(), Standing::Idle(_)));
        assert_eq!(counts(&registry)["open"], 1);
        drop(registration);
        assert_eq!(counts(&registry)["open"], 0);
        assert_eq!(registry.open_count(), 0);
    }

    #[test]
    fn room_is_made_from_idle_then_unfinished_connections_never_busy_ones() {
        let registry = Registry::new(Arc::default());
        let busy = registry.register();
        let _request = InFlight::start(busy.connection());
        let unfinished = registry.register();
        unfinished.connection().bytes_arrived();
        let idle_older = registry.register();
        let idle_newer = registry.register();
        let mut paused = false;
        // Below the cap: nothing is closed.
        assert!(registry.try_make_room(5, &mut paused));
        // At the cap: the connection idle longest goes first, and only one at a time.
        assert!(!registry.try_make_room(4, &mut paused));
        assert!(idle_older.connection().is_closing());
        assert!(!registry.try_make_room(4, &mut paused));
        assert!(!idle_newer.connection().is_closing());
        drop(idle_older);
        assert!(registry.try_make_room(4, &mut paused));
        assert!(!registry.try_make_room(3, &mut paused));
        assert!(idle_newer.connection().is_closing());
        drop(idle_newer);
        // No idle one left: the unfinished headers go.
        assert!(!registry.try_make_room(2, &mut paused));
        assert!(unfinished.connection().is_closing());
        drop(unfinished);
        // Only a busy connection left: it stays, and the wait is counted once.
        assert!(!registry.try_make_room(1, &mut paused));
        assert!(!registry.try_make_room(1, &mut paused));
        assert!(!busy.connection().is_closing());
        let counts = counts(&registry);
        assert_eq!(counts["closed_idle_for_room"], 2, "{counts}");
        assert_eq!(counts["closed_unfinished_headers_for_room"], 1, "{counts}");
        assert_eq!(counts["accept_paused_all_busy"], 1, "{counts}");
        assert!(paused);
    }

    #[tokio::test]
    async fn a_chosen_connection_is_signalled() {
        let registry = Registry::new(Arc::default());
        let idle = registry.register();
        let connection = Arc::clone(idle.connection());
        let closer = tokio::spawn(async move {
            connection.chosen_to_close().await;
            drop(idle);
        });
        // Resolves only once the chosen connection has dropped its registration.
        registry.make_room(1).await;
        assert_eq!(registry.open_count(), 0);
        closer.await.unwrap();
    }

    #[tokio::test]
    async fn a_wait_with_every_connection_busy_ends_when_one_goes_idle() {
        let registry = Registry::new(Arc::default());
        let busy = registry.register();
        busy.connection().bytes_arrived();
        let request = InFlight::start(busy.connection());
        let registry_in_task = Arc::clone(&registry);
        let waiting = tokio::spawn(async move { registry_in_task.make_room(1).await });
        tokio::task::yield_now().await;
        assert!(!busy.connection().is_closing());
        // The response ends and is flushed: the connection is idle, so it is chosen.
        drop(request);
        busy.connection().flushed();
        busy.connection().chosen_to_close().await;
        drop(busy);
        waiting.await.unwrap();
        assert_eq!(counts(&registry)["closed_idle_for_room"], 1);
    }
}
