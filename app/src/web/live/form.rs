//! The form that starts a job: a preset, a few optional overrides, the bearer token,
//! and Start (`POST /api/jobs`). A refused request shows the server's field and
//! message next to the form, and marks the matching input.

use leptos::prelude::*;
use leptos::task::spawn_local;

use arlbook_core::error::FieldError;

use super::http;
use super::session::Session;
use crate::chapters::live::jobs::{self, Overrides, Preset};

/// The form's error: the config field and what is wrong with it.
type FormError = FieldError;

/// One optional override: a text input whose placeholder is the preset's value.
#[component]
fn OverrideInput(
    /// Element id.
    id: &'static str,
    /// Dotted config field (`grpo.steps`).
    field: &'static str,
    /// What it is.
    label: &'static str,
    value: RwSignal<String>,
    preset: Signal<Option<Preset>>,
    error: RwSignal<Option<FormError>>,
) -> impl IntoView {
    view! {
        <div class="control">
            <label for=id>{label} " " <code>{field}</code></label>
            <input
                type="text"
                id=id
                inputmode="numeric"
                autocomplete="off"
                placeholder=move || preset.with(|p| p.as_ref().and_then(|p| p.setting(field)).unwrap_or_default())
                aria-invalid=move || error.with(|e| e.as_ref().is_some_and(|e| e.field == field)).to_string()
                prop:value=value
                on:input=move |ev| value.set(event_target_value(&ev))
            />
        </div>
    }
}

/// A choice between the preset's setting of `field` (the first option, labelled by
/// `shown`) and the named `choices`.
#[component]
fn PresetChoice(
    id: &'static str,
    label: &'static str,
    field: &'static str,
    choices: &'static [&'static str],
    value: RwSignal<String>,
    preset: Signal<Option<Preset>>,
    shown: fn(Option<&str>) -> String,
) -> impl IntoView {
    view! {
        <div class="control">
            <label for=id>{label}</label>
            <select
                id=id
                aria-describedby="live-token-help"
                on:change=move |ev| value.set(event_target_value(&ev))
            >
                <option value="" selected=move || value.with(String::is_empty)>
                    {move || {
                        let setting = preset.with(|p| p.as_ref().and_then(|p| p.setting(field)));
                        format!("preset's ({})", shown(setting.as_deref()))
                    }}
                </option>
                {choices
                    .iter()
                    .map(|&name| {
                        view! {
                            <option value=name selected=move || value.with(|v| v == name)>
                                {name}
                            </option>
                        }
                    })
                    .collect_view()}
            </select>
        </div>
    }
}

/// The preset's arm as the choice shows it (`grpo` when the preset does not set it).
fn arm_shown(setting: Option<&str>) -> String {
    setting.unwrap_or("grpo").to_owned()
}

/// A preset's boolean as `on` / `off` (off when the preset does not set it).
fn on_off_shown(setting: Option<&str>) -> String {
    if setting == Some("true") { "on" } else { "off" }.to_owned()
}

/// The form's signals.
#[derive(Clone, Copy)]
struct Form {
    presets: RwSignal<Vec<Preset>>,
    chosen: RwSignal<String>,
    seed: RwSignal<String>,
    sft_steps: RwSignal<String>,
    recovery_steps: RwSignal<String>,
    grpo_steps: RwSignal<String>,
    arm: RwSignal<String>,
    selection: RwSignal<String>,
    error: RwSignal<Option<FormError>>,
    notice: RwSignal<String>,
    busy: RwSignal<bool>,
}

impl Form {
    fn new() -> Self {
        Self {
            presets: RwSignal::new(Vec::new()),
            chosen: RwSignal::new(String::new()),
            seed: RwSignal::new(String::new()),
            sft_steps: RwSignal::new(String::new()),
            recovery_steps: RwSignal::new(String::new()),
            grpo_steps: RwSignal::new(String::new()),
            arm: RwSignal::new(String::new()),
            selection: RwSignal::new(String::new()),
            error: RwSignal::new(None),
            notice: RwSignal::new(String::new()),
            busy: RwSignal::new(false),
        }
    }

    /// Reads `GET /api/presets` and chooses the first.
    fn load_presets(self) {
        spawn_local(async move {
            let loaded = http::get("/api/presets").await.and_then(|answer| {
                if answer.ok() {
                    jobs::parse_presets(&answer.body)
                } else {
                    Err(jobs::api_error(answer.status, &answer.body).message)
                }
            });
            match loaded {
                Ok(list) => {
                    if let Some(first) = list.first() {
                        self.chosen.set(first.name.clone());
                    }
                    self.presets.set(list);
                }
                Err(message) => self.error.set(Some(FormError {
                    field: "preset".to_owned(),
                    message: format!("the presets could not be loaded: {message}"),
                })),
            }
        });
    }

    /// Checks the overrides, sends `POST /api/jobs` and watches the new job.
    fn submit(self, session: Session) {
        let overrides = Overrides {
            seed: self.seed.get_untracked(),
            sft_steps: self.sft_steps.get_untracked(),
            recovery_steps: self.recovery_steps.get_untracked(),
            grpo_steps: self.grpo_steps.get_untracked(),
            arm: self.arm.get_untracked(),
            selection: self.selection.get_untracked(),
        };
        let body = match jobs::job_request(&self.chosen.get_untracked(), &overrides) {
            Ok(body) => body.to_string(),
            Err(err) => {
                self.error.set(Some(err));
                return;
            }
        };
        self.error.set(None);
        self.notice.set("Submitting…".to_owned());
        self.busy.set(true);
        let token = session.token.get_untracked();
        spawn_local(async move {
            let answer = http::send("POST", "/api/jobs", Some(&body), &token).await;
            self.busy.set(false);
            self.notice.set(String::new());
            match answer {
                Ok(answer) if answer.ok() => match jobs::created_id(&answer.body) {
                    Some(id) => {
                        self.notice.set(format!("Job {id} queued; watching it."));
                        session.watch(id);
                    }
                    None => self.notice.set("Job queued.".to_owned()),
                },
                Ok(answer) => self
                    .error
                    .set(Some(jobs::api_error(answer.status, &answer.body))),
                Err(message) => self.error.set(Some(FormError {
                    field: "(network)".to_owned(),
                    message,
                })),
            }
            session.refresh_jobs();
        });
    }
}

/// The start form.
#[component]
pub fn JobForm(session: Session) -> impl IntoView {
    let form = Form::new();
    let Form {
        presets,
        chosen,
        seed,
        sft_steps,
        recovery_steps,
        grpo_steps,
        arm,
        selection,
        error,
        notice,
        busy,
    } = form;
    let preset = Signal::derive(move || {
        presets.with(|list| chosen.with(|name| list.iter().find(|p| p.name == *name).cloned()))
    });
    form.load_presets();

    view! {
        <form
            class="live-form"
            aria-labelledby="live-form-title"
            on:submit=move |ev| {
                ev.prevent_default();
                form.submit(session);
            }
        >
            <h3 id="live-form-title">"Start a run"</h3>
            <div class="controls">
                <div class="control">
                    <label for="live-preset">"preset"</label>
                    <select
                        id="live-preset"
                        aria-describedby="live-preset-summary"
                        on:change=move |ev| chosen.set(event_target_value(&ev))
                    >
                        {move || {
                            presets
                                .get()
                                .into_iter()
                                .map(|p| {
                                    let name = p.name.clone();
                                    let value = p.name.clone();
                                    view! {
                                        <option value=value selected=move || chosen.with(|c| *c == name)>
                                            {p.name}
                                        </option>
                                    }
                                })
                                .collect_view()
                        }}
                    </select>
                </div>
                <p class="summary" id="live-preset-summary">
                    {move || preset.with(|p| p.as_ref().map(|p| p.summary.clone()).unwrap_or_default())}
                </p>
                <OverrideInput id="live-seed" field="seed" label="random" value=seed preset=preset error=error/>
                <OverrideInput id="live-sft-steps" field="sft.steps" label="SFT steps" value=sft_steps preset=preset error=error/>
                <OverrideInput id="live-recovery-steps" field="sft.recovery_steps" label="recovery steps" value=recovery_steps preset=preset error=error/>
                <OverrideInput id="live-grpo-steps" field="grpo.steps" label="GRPO steps" value=grpo_steps preset=preset error=error/>
                <PresetChoice id="live-arm" label="RL arm" field="arm" choices=&jobs::ARMS value=arm preset=preset shown=arm_shown/>
                <PresetChoice id="live-selection" label="choose on validation" field="selection.enabled" choices=&["on", "off"] value=selection preset=preset shown=on_off_shown/>
                <div class="control">
                    <label for="live-token">"token"</label>
                    <input
                        type="password"
                        id="live-token"
                        autocomplete="off"
                        aria-describedby="live-token-help"
                        prop:value=move || session.token.get()
                        on:input=move |ev| session.token.set(event_target_value(&ev))
                    />
                </div>
            </div>
            <p class="summary" id="live-token-help">
                "Empty fields keep the preset's value (shown greyed). The RL arm after SFT is \
                 GRPO or rejection-sampling SFT (rs: the same rollouts, trained on the \
                 successful ones only). Choosing on validation scores the candidate \
                 checkpoints on held-out tasks before and after RL (several minutes on a \
                 CPU). The token is needed only when the server listens \
                 beyond this machine; it is sent as a bearer token."
            </p>
            <div class="actions">
                <button type="submit" id="live-start" disabled=move || busy.get()>"Start"</button>
                <span id="live-notice" role="status">{move || notice.get()}</span>
            </div>
            <p
                class="error"
                id="live-error"
                role="alert"
                hidden=move || error.with(Option::is_none)
                data-field=move || error.with(|e| e.as_ref().map(|e| e.field.clone()).unwrap_or_default())
            >
                {move || error.with(|e| e.as_ref().map(ToString::to_string).unwrap_or_default())}
            </p>
        </form>
    }
}
