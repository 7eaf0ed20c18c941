//! WebGPU in the page: started once when the page loads, shared by every figure.
//!
//! [`Backend::start`] reads `?backend=cpu|gpu|auto`, and unless it is `cpu` asks the
//! browser for an adapter and opens the core's [`GpuContext`] in the background. Until
//! it is ready, and for good if it fails, `auto` figures compute on the CPU; `gpu`
//! figures wait for it (and fall back to the CPU, saying why, if it fails).
//! [`Backend::plan`] is reactive, so every figure recomputes when WebGPU comes up.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use arlbook_core::api::gpu::{ComputedOn, compute_async};
use arlbook_core::gpu::{GpuContext, GpuError};
use leptos::prelude::*;
use serde_json::Value;
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};

use super::browser;
use arlbook_core::error::FieldError;

use crate::compute::{
    Accelerator, Answer, Answers, Choice, Evaluation, GPU_MIN_WORK, Path, Pending, evaluate,
    evaluate_on_cpu, worth_the_gpu,
};

/// The core's WebGPU context and the adapter's name.
pub struct Gpu {
    context: Rc<GpuContext>,
    /// The adapter as the badge names it (`google swiftshader`).
    pub name: String,
    /// Milliseconds from asking for an adapter until the device was open and every
    /// kernel submitted for compilation.
    pub startup_ms: f64,
    /// The least work it takes ([`crate::compute::GPU_MIN_WORK`] under
    /// `?backend=auto`, 0 under `?backend=gpu`).
    min_work: u64,
}

impl Accelerator for Gpu {
    fn start(&self, name: &str, request: Value) -> Pending {
        let context = Rc::clone(&self.context);
        let name = name.to_owned();
        Box::pin(async move {
            let _hold = VirtualTimeHold::new();
            let computed = compute_async(&name, request, &context).await?;
            let path = match computed.backend {
                ComputedOn::Gpu => Path::Gpu,
                ComputedOn::Cpu(reason) => Path::Cpu(reason),
            };
            Ok(Answer {
                response: computed.response,
                path,
            })
        })
    }

    fn takes(&self, name: &str, request: &Value) -> bool {
        worth_the_gpu(name, request, self.min_work)
    }
}

/// Where the page's WebGPU stands.
#[derive(Clone)]
pub enum Status {
    /// `?backend=cpu`: not started.
    Off,
    /// Adapter and device requested.
    Starting,
    /// Ready.
    Ready(Rc<Gpu>),
    /// Not available: a short reason for the badge.
    Failed(String),
}

/// What a figure does now.
pub enum Plan {
    /// Compute on the CPU, for this reason.
    Cpu(String),
    /// Compute through WebGPU.
    Gpu(Rc<Gpu>),
    /// `?backend=gpu` while WebGPU starts: compute nothing yet.
    Wait,
}

/// The page's backend: the `?backend=` choice and the WebGPU status.
#[derive(Clone, Copy)]
pub struct Backend {
    /// What the URL asked for.
    pub choice: Choice,
    status: RwSignal<Status, LocalStorage>,
}

impl Backend {
    /// Reads the choice from the URL and, unless it is `cpu`, starts WebGPU.
    pub fn start() -> Self {
        let choice = Choice::from_pairs(&browser::query_pairs());
        let initial = if choice == Choice::Cpu {
            Status::Off
        } else {
            Status::Starting
        };
        let status = RwSignal::new_local(initial);
        if choice != Choice::Cpu {
            leptos::task::spawn_local(async move {
                let min_work = if choice == Choice::Gpu {
                    0
                } else {
                    GPU_MIN_WORK
                };
                let next = match open(min_work).await {
                    Ok(gpu) => {
                        leptos::logging::log!(
                            "arlbook: WebGPU ready on {} in {:.0} ms",
                            gpu.name,
                            gpu.startup_ms
                        );
                        Status::Ready(Rc::new(gpu))
                    }
                    Err(reason) => {
                        leptos::logging::log!("arlbook: computing on the CPU ({reason})");
                        Status::Failed(reason)
                    }
                };
                status.set(next);
            });
        }
        Self { choice, status }
    }

    /// The backend of a page whose root did not provide one: the CPU.
    pub fn cpu_only() -> Self {
        Self {
            choice: Choice::Cpu,
            status: RwSignal::new_local(Status::Off),
        }
    }

    /// What a figure does now (tracked: a change of status reruns the caller).
    pub fn plan(&self) -> Plan {
        match (self.status.get(), self.choice) {
            (Status::Ready(gpu), _) => Plan::Gpu(gpu),
            (Status::Off, _) => Plan::Cpu("?backend=cpu".to_owned()),
            (Status::Starting, Choice::Gpu) => Plan::Wait,
            (Status::Starting, _) => Plan::Cpu("WebGPU starting".to_owned()),
            (Status::Failed(reason), _) => Plan::Cpu(reason),
        }
    }

    /// The page header's badge: text and tooltip.
    pub fn badge(&self) -> (String, String) {
        match self.status.get() {
            Status::Off => (
                "CPU".to_owned(),
                "?backend=cpu: every figure computes on the CPU".to_owned(),
            ),
            Status::Starting => (
                "WebGPU starting…".to_owned(),
                "figures compute on the CPU until the GPU is ready".to_owned(),
            ),
            Status::Ready(gpu) => (
                format!("WebGPU ({})", gpu.name),
                if gpu.min_work == 0 {
                    format!(
                        "figures with a GPU kernel compute through WebGPU (started in {:.0} ms)",
                        gpu.startup_ms
                    )
                } else {
                    format!(
                        "figures with a GPU kernel compute through WebGPU when a request is \
                         large enough to pay for the trip, on the CPU otherwise (started in \
                         {:.0} ms; ?backend=gpu sends every request)",
                        gpu.startup_ms
                    )
                },
            ),
            Status::Failed(reason) => (
                format!("CPU ({reason})"),
                "figures compute on the CPU".to_owned(),
            ),
        }
    }
}

/// Asks the browser for an adapter (for its name, and a clear reason when there is
/// none), then opens the core's context on it and compiles every kernel.
async fn open(min_work: u64) -> Result<Gpu, String> {
    let _hold = VirtualTimeHold::new();
    let started = browser::now_ms();
    let name = adapter_name().await?;
    let context = GpuContext::new().await.map_err(|e| match e {
        GpuError::NoAdapter(_) => "no WebGPU adapter".to_owned(),
        other => format!("WebGPU failed: {other}"),
    })?;
    context.warm_up();
    Ok(Gpu {
        context: Rc::new(context),
        name,
        startup_ms: browser::now_ms() - started,
        min_work,
    })
}

/// `navigator.gpu.requestAdapter()`'s name: its description, else vendor and
/// architecture (Chromium leaves the description of `SwiftShader` empty).
async fn adapter_name() -> Result<String, String> {
    let get = |target: &JsValue, key: &str| js_sys::Reflect::get(target, &JsValue::from_str(key));
    let navigator = JsValue::from(window().navigator());
    let gpu = get(&navigator, "gpu").unwrap_or(JsValue::UNDEFINED);
    if gpu.is_undefined() || gpu.is_null() {
        return Err("no WebGPU".to_owned());
    }
    let request = get(&gpu, "requestAdapter")
        .ok()
        .and_then(|f| f.dyn_into::<js_sys::Function>().ok())
        .ok_or_else(|| "no WebGPU".to_owned())?;
    let promise = request
        .call0(&gpu)
        .ok()
        .and_then(|p| p.dyn_into::<js_sys::Promise>().ok())
        .ok_or_else(|| "no WebGPU".to_owned())?;
    let adapter = wasm_bindgen_futures::JsFuture::from(promise)
        .await
        .map_err(|_| "no WebGPU adapter".to_owned())?;
    if adapter.is_null() || adapter.is_undefined() {
        return Err("no WebGPU adapter".to_owned());
    }
    let info = get(&adapter, "info").unwrap_or(JsValue::UNDEFINED);
    let field = |key: &str| {
        get(&info, key)
            .ok()
            .and_then(|v| v.as_string())
            .unwrap_or_default()
    };
    let description = field("description");
    let name = if description.trim().is_empty() {
        format!("{} {}", field("vendor"), field("architecture"))
    } else {
        description
    };
    let name = name.trim();
    Ok(if name.is_empty() {
        "unnamed adapter".to_owned()
    } else {
        name.to_owned()
    })
}

thread_local! {
    /// Holds alive now.
    static HOLDS: Cell<u32> = const { Cell::new(0) };
    /// The message channel that keeps the event loop busy (made on first use).
    static PUMP: RefCell<Option<Pump>> = const { RefCell::new(None) };
}

struct Pump {
    sender: web_sys::MessagePort,
    _receiver: web_sys::MessagePort,
    _on_message: Closure<dyn FnMut()>,
}

impl Pump {
    fn new() -> Option<Self> {
        let channel = web_sys::MessageChannel::new().ok()?;
        let sender = channel.port2();
        let receiver = channel.port1();
        let echo = sender.clone();
        let on_message = Closure::<dyn FnMut()>::new(move || {
            if HOLDS.with(Cell::get) > 0 {
                let _ = echo.post_message(&JsValue::NULL);
            }
        });
        receiver.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        Some(Self {
            sender,
            _receiver: receiver,
            _on_message: on_message,
        })
    }
}

/// Keeps the page's event loop busy while GPU work is in flight, under automation only
/// (`navigator.webdriver`, e.g. Chromium with `--enable-automation`).
///
/// Headless Chromium's `--virtual-time-budget` fast-forwards the clock whenever the
/// page is idle, and a page awaiting a GPU readback looks idle, so the budget runs out
/// and the DOM is dumped before the numbers arrive. A message bounced between two
/// ports while a hold is alive keeps the page busy, which pauses virtual time until the
/// GPU answers. A reader's browser never takes this path.
struct VirtualTimeHold(());

impl VirtualTimeHold {
    fn new() -> Option<Self> {
        if !automated() {
            return None;
        }
        let before = HOLDS.with(|h| {
            let n = h.get();
            h.set(n + 1);
            n
        });
        if before == 0 {
            PUMP.with(|p| {
                let mut pump = p.borrow_mut();
                if pump.is_none() {
                    *pump = Pump::new();
                }
                if let Some(pump) = pump.as_ref() {
                    let _ = pump.sender.post_message(&JsValue::NULL);
                }
            });
        }
        Some(Self(()))
    }
}

impl Drop for VirtualTimeHold {
    fn drop(&mut self) {
        HOLDS.with(|h| h.set(h.get().saturating_sub(1)));
    }
}

fn automated() -> bool {
    js_sys::Reflect::get(
        &JsValue::from(window().navigator()),
        &JsValue::from_str("webdriver"),
    )
    .ok()
    .and_then(|v| v.as_bool())
    .unwrap_or(false)
}

/// Evaluates `figure` on `plan`'s path and hands the result to `done`, unless a later
/// call with the same `generation` has started meanwhile. On the CPU this happens
/// before it returns; through WebGPU, in a spawned task. Returns `false` when the plan
/// is to wait.
pub fn evaluate_on<T: 'static>(
    plan: Plan,
    answers: &Rc<RefCell<Answers>>,
    generation: &Rc<Cell<u64>>,
    figure: impl FnMut() -> Result<T, FieldError> + 'static,
    done: impl FnOnce(Evaluation<T>, Option<&Gpu>) + 'static,
) -> bool {
    let ticket = generation.get().wrapping_add(1);
    generation.set(ticket);
    match plan {
        Plan::Wait => false,
        Plan::Cpu(reason) => {
            done(evaluate_on_cpu(&reason, answers, figure), None);
            true
        }
        Plan::Gpu(gpu) => {
            let answers = Rc::clone(answers);
            let generation = Rc::clone(generation);
            leptos::task::spawn_local(async move {
                let wanted = move || generation.get() == ticket;
                let accelerator: Rc<dyn Accelerator> = gpu.clone();
                let evaluation = evaluate(Some(accelerator), "", &answers, figure, &wanted).await;
                if let Some(evaluation) = evaluation
                    && wanted()
                {
                    done(evaluation, Some(&gpu));
                }
            });
            true
        }
    }
}
