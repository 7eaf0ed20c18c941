//! `GET /api/jobs/{id}/metrics`: the job's metrics rows as server-sent events.
//!
//! The stream first sends every row already in `metrics.jsonl`, then each row the
//! training process appends, one `data:` line per JSON row, and finally an `end` event
//! carrying the final state. It follows the file by row count: a resumed run cuts the
//! file back to its checkpoint and writes the same rows again, and those rows were
//! already sent, so no client sees a row twice.

use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use crate::jobs::runner::Runner;

/// How often the file is read again.
const POLL: Duration = Duration::from_millis(250);

/// The events of a channel as a `Stream`.
struct Events(mpsc::Receiver<Event>);

impl futures_core::Stream for Events {
    type Item = Result<Event, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx).map(|event| event.map(Ok))
    }
}

/// The SSE response for job `id` (which exists).
pub fn stream(
    runner: Arc<Runner>,
    id: i64,
    shutdown: watch::Receiver<bool>,
) -> Sse<impl futures_core::Stream<Item = Result<Event, Infallible>>> {
    let (sender, receiver) = mpsc::channel(64);
    let path = runner.job_dir(id).join("metrics.jsonl");
    tokio::spawn(follow(runner, id, path, sender, shutdown));
    Sse::new(Events(receiver)).keep_alive(KeepAlive::default())
}

async fn follow(
    runner: Arc<Runner>,
    id: i64,
    path: PathBuf,
    sender: mpsc::Sender<Event>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut sent = 0_usize;
    loop {
        // The state is read before the file, so the rows of a job seen as finished
        // are all in the file when it is read.
        let state = match runner.get(id) {
            Ok(Some(job)) => job.state,
            _ => return,
        };
        for line in complete_rows(&path).await.into_iter().skip(sent) {
            if sender.send(Event::default().data(line)).await.is_err() {
                return;
            }
            sent += 1;
        }
        if state.is_final() {
            let end = json!({"id": id, "state": state, "rows": sent});
            let _ = sender
                .send(Event::default().event("end").data(end.to_string()))
                .await;
            return;
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = sender.closed() => return,
            _ = shutdown.changed() => return,
        }
    }
}

/// The rows of a metrics file that are whole JSON lines (a line still being written
/// has no newline yet and waits for the next read).
async fn complete_rows(path: &Path) -> Vec<String> {
    let Ok(text) = tokio::fs::read_to_string(path).await else {
        return Vec::new();
    };
    let whole = text.rfind('\n').map_or("", |end| &text[..end]);
    whole
        .lines()
        .filter(|line| serde_json::from_str::<Value>(line).is_ok())
        .map(str::to_owned)
        .collect()
}

/// The last whole row of a metrics file.
pub fn last_row(path: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(path).ok()?;
    let whole = &text[..text.rfind('\n')?];
    whole
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
}
