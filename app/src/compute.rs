//! The one place where figures call the core: `compute::<E>(&request)`, and where the
//! page decides whether the core answers on the CPU or through WebGPU.
//!
//! Every figure builds the typed request of an entry `E` of `arlbook_core::api` and
//! reads its typed response. On the way the request is written as JSON and the entry
//! is called by its name, exactly as the CLI and the HTTP server call it, so a number on
//! the page can be checked with `arlbook compute <name>`; the JSON answer is read back
//! into `E::Response`, and one that does not fit is an error naming `(response)` and
//! the field, never a default.
//!
//! ## CPU or GPU
//! A figure's computation is plain synchronous code; the GPU answers asynchronously.
//! [`evaluate`] bridges the two by replaying: it runs the figure inside a session in
//! which [`compute`]
//! - returns an answer it already has (from this evaluation or the previous one);
//! - computes on the CPU an entry without a kernel, or every entry when no
//!   [`Accelerator`] is given;
//! - computes on the CPU a request the accelerator does not take ([`Accelerator::takes`]:
//!   in the page, one smaller than [`GPU_MIN_WORK`] under `?backend=auto`);
//! - otherwise starts the entry on the accelerator and polls it once; an answer that
//!   needs no device work (an exact value, a rejected request) comes back at once, and
//!   one that waits for the device makes the figure stop with a "pending" error.
//!
//! [`evaluate`] then awaits that one pending answer and runs the figure again, until
//! it finishes without waiting. Figures are deterministic, so each replay makes the
//! same requests, and every run after the first finds its earlier answers in the
//! session. The figure's numbers are only shown when the last run completes, so the
//! page never shows a mix of old and new values. Answers of the previous evaluation
//! are kept ([`Answers`]), so moving one slider recomputes only the requests it
//! changes, and a redraw for a resize recomputes nothing.
//!
//! Outside a session (natively: the snapshot tests and `arlbook figure`) [`compute`]
//! is the core's CPU path, unchanged. [`compute_json`] is the same call untyped, for the
//! explorer, whose requests are whatever the reader types.

use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use arlbook_core::api::{self, Entry};
use arlbook_core::error::FieldError;
use serde_json::Value;

/// Where one answer was computed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Path {
    /// Through the core's WebGPU kernels.
    Gpu,
    /// On the CPU, with a short reason (`no WebGPU`, `no GPU kernel`).
    Cpu(String),
}

/// A response and where it was computed.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The entry's JSON response.
    pub response: Value,
    /// Where it came from.
    pub path: Path,
}

/// An answer the accelerator is still computing.
pub type Pending = Pin<Box<dyn Future<Output = Result<Answer, FieldError>>>>;

/// Something that computes the entries of [`api::GPU_ENTRIES`] asynchronously:
/// in the page, the core's WebGPU path.
pub trait Accelerator {
    /// Starts entry `name` on `request`. Only called for entries with a kernel.
    fn start(&self, name: &str, request: Value) -> Pending;

    /// Whether this request is worth the trip to the device; one that is not is
    /// computed on the CPU ([`SMALL_REQUEST`]). All are, unless an accelerator says.
    fn takes(&self, _name: &str, _request: &Value) -> bool {
        true
    }
}

/// Why a request with a kernel runs on the CPU beside WebGPU: it is smaller than
/// [`GPU_MIN_WORK`].
pub const SMALL_REQUEST: &str = "small request";

/// The least work (in the core's units, `api::MAX_WORK` being about a second of one
/// core) that `?backend=auto` sends to WebGPU: about 10 ms of the CPU natively, a
/// frame's worth in the page's wasm. Smaller requests finish on the CPU within a
/// frame, while a WebGPU answer costs a submission and an asynchronous readback first
/// (about 15 ms per figure redraw in headless Chromium, README "The notebook in the
/// browser"); larger ones (the Monte Carlo figures' high settings) are where a GPU
/// pays. `?backend=gpu` sends every request with a kernel.
pub const GPU_MIN_WORK: u64 = api::MAX_WORK / 100;

/// Whether `request` to entry `name` asks for at least `min_work` units
/// ([`api::estimated_work`]); a request that does not validate is not (computing it on
/// the CPU gives its error).
pub fn worth_the_gpu(name: &str, request: &Value, min_work: u64) -> bool {
    api::estimated_work(name, request).is_some_and(|work| work >= min_work)
}

/// Which path the page asked for with `?backend=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Choice {
    /// WebGPU when an adapter is ready, the CPU meanwhile and otherwise.
    #[default]
    Auto,
    /// The CPU only.
    Cpu,
    /// WebGPU only: figures wait for it to start, and say so when it cannot.
    Gpu,
}

impl Choice {
    /// The URL query key.
    pub const KEY: &'static str = "backend";

    /// Reads `backend=cpu|gpu|auto` from URL pairs; anything else is `auto`.
    pub fn from_pairs(pairs: &[(String, String)]) -> Self {
        let value = pairs
            .iter()
            .rev()
            .find(|(key, _)| key == Self::KEY)
            .map(|(_, value)| value.trim().to_ascii_lowercase());
        match value.as_deref() {
            Some("cpu") => Self::Cpu,
            Some("gpu" | "webgpu") => Self::Gpu,
            _ => Self::Auto,
        }
    }
}

/// Why an entry without a kernel runs on the CPU.
pub const NO_KERNEL: &str = "no GPU kernel";

/// The error a figure stops with while an answer is pending; never shown.
const PENDING_FIELD: &str = "(pending)";

/// Answers kept between evaluations, keyed by entry name and request text.
#[derive(Default)]
pub struct Answers {
    by_request: HashMap<String, Result<Answer, FieldError>>,
    /// The path they were computed for (`None`: an accelerator; else the CPU reason);
    /// answers are not reused across a change of path, so the badge tells the truth.
    mode: Option<String>,
}

impl Answers {
    /// How many answers are kept.
    pub fn len(&self) -> usize {
        self.by_request.len()
    }

    /// Whether none are kept.
    pub fn is_empty(&self) -> bool {
        self.by_request.is_empty()
    }
}

/// The paths one evaluation used, for the badge.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Answers computed through WebGPU.
    pub gpu: usize,
    /// Answers computed on the CPU.
    pub cpu: usize,
    /// The distinct reasons for the CPU answers, in first-seen order.
    pub cpu_reasons: Vec<String>,
}

impl Summary {
    fn add(&mut self, path: &Path) {
        match path {
            Path::Gpu => self.gpu += 1,
            Path::Cpu(reason) => {
                self.cpu += 1;
                if !self.cpu_reasons.contains(reason) {
                    self.cpu_reasons.push(reason.clone());
                }
            }
        }
    }

    /// The badge text: `WebGPU (adapter)`, `WebGPU (adapter) + CPU`, `CPU (reason)`,
    /// or `CPU` for a figure that computed nothing through the API.
    pub fn label(&self, adapter: &str) -> String {
        match (self.gpu, self.cpu) {
            (0, 0) => "CPU".to_owned(),
            (0, _) => format!("CPU ({})", self.cpu_reasons.join("; ")),
            (_, 0) => format!("WebGPU ({adapter})"),
            _ => format!("WebGPU ({adapter}) + CPU"),
        }
    }

    /// A longer description for the badge's tooltip.
    pub fn detail(&self) -> String {
        let mut parts = Vec::new();
        if self.gpu > 0 {
            parts.push(format!("{} computation(s) on WebGPU", self.gpu));
        }
        if self.cpu > 0 {
            parts.push(format!(
                "{} on the CPU ({})",
                self.cpu,
                self.cpu_reasons.join("; ")
            ));
        }
        if parts.is_empty() {
            "no call to the compute API".to_owned()
        } else {
            parts.join(", ")
        }
    }

    /// `gpu`, `cpu`, `mixed`, or `none`: a stable value for tests and styling.
    pub fn kind(&self) -> &'static str {
        match (self.gpu, self.cpu) {
            (0, 0) => "none",
            (0, _) => "cpu",
            (_, 0) => "gpu",
            _ => "mixed",
        }
    }
}

/// The state of one evaluation, reachable from [`compute_json`].
struct Session {
    accelerator: Option<Rc<dyn Accelerator>>,
    /// Why GPU entries run on the CPU when there is no accelerator.
    cpu_reason: String,
    /// Answers available to this run.
    known: HashMap<String, Result<Answer, FieldError>>,
    /// The keys this run asked for, in order.
    asked: Vec<String>,
    /// The answer this run stopped for.
    pending: Option<(String, Pending)>,
}

thread_local! {
    static SESSION: RefCell<Option<Session>> = const { RefCell::new(None) };
}

fn key(name: &str, request: &Value) -> String {
    format!("{name} {request}")
}

/// Runs entry `E` of the compute API on `request`: on the CPU, or inside an
/// [`evaluate`] session, on the path that session chose. The request travels as its
/// JSON under the entry's name ([`compute_json`]); the answer is read back into
/// `E::Response`, and an answer that does not fit is an error naming `(response)` and
/// the serde path of the field.
pub fn compute<E: Entry>(request: &E::Request) -> Result<E::Response, FieldError> {
    let request = serde_json::to_value(request)
        .map_err(|e| FieldError::new("(request)", format!("could not serialise: {e}")))?;
    api::parse_response(compute_json(E::NAME, request)?)
}

/// Runs the entry called `name` on a JSON request, as [`compute`] does, and returns its
/// JSON answer. Only for the explorer, which sends whatever JSON the reader typed to
/// any entry by name; figures use the typed [`compute`].
pub fn compute_json(name: &str, request: Value) -> Result<Value, FieldError> {
    let in_session = SESSION.with(|s| s.borrow().is_some());
    if !in_session {
        return api::compute(name, request);
    }
    let key = key(name, &request);
    let found = SESSION.with(|s| {
        let mut slot = s.borrow_mut();
        let session = slot.as_mut()?;
        session.asked.push(key.clone());
        session.known.get(&key).cloned()
    });
    if let Some(answer) = found {
        return answer.map(|a| a.response);
    }
    let accelerator = SESSION.with(|s| {
        s.borrow()
            .as_ref()
            .and_then(|session| session.accelerator.clone())
    });
    let has_kernel = api::GPU_ENTRIES.contains(&name);
    let answer = match accelerator {
        Some(accelerator) if has_kernel && !accelerator.takes(name, &request) => {
            cpu_answer(name, request, SMALL_REQUEST)
        }
        Some(_) if has_kernel && waiting() => {
            // One pending answer per run: the figure stops at the first one anyway,
            // unless it ignored that error; this one is asked for again next run.
            return Err(FieldError::new(PENDING_FIELD, "waiting for the GPU"));
        }
        Some(accelerator) if has_kernel => {
            // The session is not borrowed here: starting may run arbitrary code.
            let mut pending = accelerator.start(name, request);
            match pending
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
            {
                Poll::Ready(answer) => answer,
                Poll::Pending => {
                    SESSION.with(|s| {
                        if let Some(session) = s.borrow_mut().as_mut() {
                            session.pending = Some((key, pending));
                        }
                    });
                    return Err(FieldError::new(PENDING_FIELD, "waiting for the GPU"));
                }
            }
        }
        Some(_) => cpu_answer(name, request, NO_KERNEL),
        None => {
            let reason = if has_kernel {
                SESSION.with(|s| {
                    s.borrow()
                        .as_ref()
                        .map_or_else(String::new, |session| session.cpu_reason.clone())
                })
            } else {
                NO_KERNEL.to_owned()
            };
            cpu_answer(name, request, &reason)
        }
    };
    SESSION.with(|s| {
        if let Some(session) = s.borrow_mut().as_mut() {
            session.known.insert(key, answer.clone());
        }
    });
    answer.map(|a| a.response)
}

/// Whether the current run already waits for an answer.
fn waiting() -> bool {
    SESSION.with(|s| {
        s.borrow()
            .as_ref()
            .is_some_and(|session| session.pending.is_some())
    })
}

fn cpu_answer(name: &str, request: Value, reason: &str) -> Result<Answer, FieldError> {
    api::compute(name, request).map(|response| Answer {
        response,
        path: Path::Cpu(reason.to_owned()),
    })
}

/// What one run of a figure inside a session left behind.
struct RunOutcome<T> {
    result: Result<T, FieldError>,
    known: HashMap<String, Result<Answer, FieldError>>,
    asked: Vec<String>,
    pending: Option<(String, Pending)>,
}

fn run_once<T>(
    accelerator: Option<Rc<dyn Accelerator>>,
    cpu_reason: &str,
    known: HashMap<String, Result<Answer, FieldError>>,
    figure: &mut impl FnMut() -> Result<T, FieldError>,
) -> RunOutcome<T> {
    SESSION.with(|s| {
        *s.borrow_mut() = Some(Session {
            accelerator,
            cpu_reason: cpu_reason.to_owned(),
            known,
            asked: Vec::new(),
            pending: None,
        });
    });
    let result = figure();
    let session = SESSION.with(|s| s.borrow_mut().take());
    let (known, asked, pending) =
        session.map_or_else(Default::default, |s| (s.known, s.asked, s.pending));
    RunOutcome {
        result,
        known,
        asked,
        pending,
    }
}

/// The result of an evaluation and the paths its answers took.
pub struct Evaluation<T> {
    /// The figure's result.
    pub result: Result<T, FieldError>,
    /// Where its answers were computed.
    pub summary: Summary,
}

/// The most runs of one evaluation: each run waits for one answer, and no figure
/// makes nearly this many GPU requests.
const MAX_RUNS: usize = 4096;

/// Evaluates `figure` (any code that calls [`compute`] or [`compute_json`]) on `accelerator`, or on the CPU
/// when there is none (`cpu_reason` says why). `answers` carries answers between
/// evaluations; it is replaced by the ones this evaluation used.
///
/// Returns `None` as soon as `wanted()` turns false after an await (the figure's state
/// moved on, so this result would be stale).
pub async fn evaluate<T>(
    accelerator: Option<Rc<dyn Accelerator>>,
    cpu_reason: &str,
    answers: &RefCell<Answers>,
    mut figure: impl FnMut() -> Result<T, FieldError>,
    wanted: impl Fn() -> bool,
) -> Option<Evaluation<T>> {
    let mode = accelerator.is_none().then(|| cpu_reason.to_owned());
    let mut known = {
        let mut kept = answers.borrow_mut();
        if kept.mode != mode {
            kept.by_request.clear();
            kept.mode.clone_from(&mode);
        }
        // A copy: an older evaluation of the same figure may still be running.
        kept.by_request.clone()
    };
    for _ in 0..MAX_RUNS {
        let outcome = run_once(accelerator.clone(), cpu_reason, known, &mut figure);
        known = outcome.known;
        let Some((key, pending)) = outcome.pending else {
            let mut summary = Summary::default();
            let mut used = HashMap::new();
            for asked in outcome.asked {
                if let Some(answer) = known.remove(&asked) {
                    if let Ok(a) = &answer {
                        summary.add(&a.path);
                    }
                    used.insert(asked, answer);
                }
            }
            answers.borrow_mut().by_request = used;
            return Some(Evaluation {
                result: outcome.result,
                summary,
            });
        };
        let answer = pending.await;
        if !wanted() {
            // Stale: keep what it learnt for the evaluation that replaced it.
            let mut kept = answers.borrow_mut();
            if kept.mode == mode {
                known.insert(key, answer);
                kept.by_request.extend(known);
            }
            return None;
        }
        known.insert(key, answer);
    }
    Some(Evaluation {
        result: Err(FieldError::new(
            "(figure)",
            "the figure kept asking for new GPU answers",
        )),
        summary: Summary::default(),
    })
}

/// [`evaluate`] without an accelerator: everything on the CPU, at once.
pub fn evaluate_on_cpu<T>(
    cpu_reason: &str,
    answers: &RefCell<Answers>,
    figure: impl FnMut() -> Result<T, FieldError>,
) -> Evaluation<T> {
    let mut future = std::pin::pin!(evaluate(None, cpu_reason, answers, figure, || true));
    // Without an accelerator nothing is ever pending, so one poll finishes.
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(Some(evaluation)) => evaluation,
        _ => Evaluation {
            result: Err(FieldError::new(
                "(figure)",
                "the CPU evaluation did not finish",
            )),
            summary: Summary::default(),
        },
    }
}

/// Whether `error` is the internal "pending" stop rather than a real error.
pub fn is_pending(error: &FieldError) -> bool {
    error.field == PENDING_FIELD
}

#[cfg(test)]
mod tests;
