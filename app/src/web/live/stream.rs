//! A job's metrics as server-sent events (`GET /api/jobs/{id}/metrics`): an
//! `EventSource` whose default `message` events are metrics rows and whose named `end`
//! event carries the job's final state. The source closes on `end` and when dropped.

use std::rc::Rc;

use wasm_bindgen::JsCast;
use wasm_bindgen::closure::Closure;
use web_sys::{Event, EventSource, MessageEvent};

/// What the stream reports.
pub enum StreamEvent {
    /// A connection opened. The server replays every row on each connection, so rows
    /// received before a reconnection are sent again.
    Opened,
    /// One metrics row (JSON text).
    Row(String),
    /// The job reached a final state (its name); the source is closed.
    End(String),
    /// The connection failed; `retrying` when the browser reconnects by itself.
    Error {
        /// Whether the browser will try again.
        retrying: bool,
    },
}

type Handler = Closure<dyn FnMut(Event)>;

/// An open metrics stream; dropping it closes the connection.
pub struct MetricsStream {
    source: EventSource,
    handlers: [Handler; 4],
}

fn message_data(event: &Event) -> String {
    event
        .dyn_ref::<MessageEvent>()
        .and_then(|m| m.data().as_string())
        .unwrap_or_default()
}

/// The `state` of an `end` event's `{"id", "state", "rows"}`.
fn end_state(data: &str) -> String {
    serde_json::from_str::<serde_json::Value>(data)
        .ok()
        .and_then(|v| v.get("state")?.as_str().map(str::to_owned))
        .unwrap_or_else(|| "finished".to_owned())
}

impl MetricsStream {
    /// Opens the stream of job `job`; `report` receives its events in order.
    pub fn open(job: i64, report: impl Fn(StreamEvent) + 'static) -> Result<Self, String> {
        let source = EventSource::new(&format!("/api/jobs/{job}/metrics"))
            .map_err(|_| "the browser refused to open the metrics stream".to_owned())?;
        let report: Rc<dyn Fn(StreamEvent)> = Rc::new(report);

        let on_open: Handler = {
            let report = Rc::clone(&report);
            Closure::new(move |_: Event| report(StreamEvent::Opened))
        };
        let on_message: Handler = {
            let report = Rc::clone(&report);
            Closure::new(move |event: Event| report(StreamEvent::Row(message_data(&event))))
        };
        let on_end: Handler = {
            let report = Rc::clone(&report);
            let source = source.clone();
            Closure::new(move |event: Event| {
                source.close();
                report(StreamEvent::End(end_state(&message_data(&event))));
            })
        };
        let on_error: Handler = {
            let source = source.clone();
            Closure::new(move |_: Event| {
                let retrying = source.ready_state() == EventSource::CONNECTING;
                report(StreamEvent::Error { retrying });
            })
        };
        source.set_onopen(Some(on_open.as_ref().unchecked_ref()));
        source.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        source.set_onerror(Some(on_error.as_ref().unchecked_ref()));
        source
            .add_event_listener_with_callback("end", on_end.as_ref().unchecked_ref())
            .map_err(|_| "could not listen for the stream's end".to_owned())?;
        Ok(Self {
            source,
            handlers: [on_open, on_message, on_end, on_error],
        })
    }
}

impl Drop for MetricsStream {
    fn drop(&mut self) {
        // Detach the handlers before they are freed: an event already queued must not
        // call into a dropped closure.
        self.source.close();
        self.source.set_onopen(None);
        self.source.set_onmessage(None);
        self.source.set_onerror(None);
        let [_, _, on_end, _] = &self.handlers;
        let _ = self
            .source
            .remove_event_listener_with_callback("end", on_end.as_ref().unchecked_ref());
    }
}
