//! The notebook in a real browser: the built bundle served by `arlbook serve`, opened in
//! headless Chromium, with the numbers on the page checked.
//!
//! Runs only with `ARLBOOK_E2E=1` (set by `cargo xtask test` after it has built the
//! bundle and found Chromium); otherwise it says so and passes. Settings:
//! `ARLBOOK_WEB_DIR` (default `web/dist`), `ARLBOOK_CHROMIUM` (default
//! `/usr/bin/chromium`), `ARLBOOK_E2E_OUT` (screenshots; default `target/e2e`).
//!
//! One test, one server, checks run in order and failures collected, so a single run
//! reports every broken number at once. Pages are read with Chromium's `--dump-dom`;
//! the reader's interactions (keys, clicks, typing) and the redraw timings go through
//! `chromedriver` ([`reader`]).

use std::cell::RefCell;
use std::path::PathBuf;

use arlbook_app::chapters::{Block, CHAPTERS, FIGURES};
use arlbook_app::compute::{Answers, evaluate_on_cpu};
use arlbook_app::figure::{AnyFigure, State};
use arlbook_tests::browser::{self, Gpu};
use arlbook_tests::cli::{Arlbook, workspace_root};
use arlbook_tests::http::Server;

mod embeds;
mod live;
mod play;
mod reader;
mod sweep;

fn enabled() -> bool {
    std::env::var("ARLBOOK_E2E").is_ok_and(|v| v == "1")
}

fn web_dir() -> PathBuf {
    std::env::var_os("ARLBOOK_WEB_DIR")
        .map_or_else(|| workspace_root().join("web").join("dist"), PathBuf::from)
}

fn out_dir() -> PathBuf {
    std::env::var_os("ARLBOOK_E2E_OUT").map_or_else(
        || workspace_root().join("target").join("e2e"),
        PathBuf::from,
    )
}

/// Checks collected over the run.
struct Checks {
    base: String,
    failures: Vec<String>,
}

impl Checks {
    fn load(&self, path: &str) -> String {
        self.load_with(path, Gpu::Disabled)
    }

    fn load_with(&self, path: &str, gpu: Gpu) -> String {
        let dom = browser::dump_dom_with(&format!("{}{path}", self.base), gpu);
        assert!(
            dom.contains("<body"),
            "chromium returned no page for {path}: {dom:.200}"
        );
        dom
    }

    fn number(&mut self, path: &str, dom: &str, id: &str, expected: f64, tolerance: f64) {
        match browser::readout(dom, id) {
            Some(value) if (value - expected).abs() <= tolerance => {}
            Some(value) => self.failures.push(format!(
                "{path}: {id} = {value}, expected {expected} ± {tolerance}"
            )),
            None => self.failures.push(format!("{path}: no readout {id}")),
        }
    }

    fn no_error(&mut self, path: &str, dom: &str, figure: &str) {
        let id = format!("{figure}-error");
        if browser::attribute(dom, &id, "hidden").is_none() {
            let message = browser::text(dom, &id).unwrap_or_default();
            self.failures
                .push(format!("{path}: figure {figure} shows an error: {message}"));
        }
    }
}

/// A named group of browser checks.
type CheckGroup = fn(&mut Checks);

#[test]
fn notebook_in_headless_chromium() {
    if !enabled() {
        eprintln!("browser tests skipped: `cargo xtask test` runs them (ARLBOOK_E2E=1)");
        return;
    }
    let server = Server::serve_web(&Arlbook::new(env!("CARGO_BIN_EXE_arlbook")), &web_dir());
    let mut checks = Checks {
        base: format!("http://{}", server.addr),
        failures: Vec::new(),
    };
    let groups: [(&str, CheckGroup); 15] = [
        ("article", article_numbers),
        ("explorer", explorer_computes),
        ("embed", embed_state_is_restored),
        ("embed-fit", embeds::every_embed_fits_its_frame),
        ("native", page_numbers_match_the_native_computation),
        ("webgpu", webgpu_matches_the_cpu),
        ("chapters", chapters_load_with_their_figures),
        ("reader", reader::controls_move_the_numbers),
        ("play", play::the_run_plays_and_pages_are_quiet),
        ("sweep", sweep::every_control_setting_gives_a_figure),
        ("narrow", sweep::the_narrowest_layout_holds),
        ("hover", sweep::a_hovered_token_is_shown_whole),
        ("latency", reader::redraw_latency),
        ("live", live::a_job_started_from_the_page_streams_to_its_end),
        ("static", live::without_a_server_the_recorded_run_is_shown),
    ];
    // `ARLBOOK_E2E_ONLY=reader,latency` runs only those groups (while working on them).
    let only = std::env::var("ARLBOOK_E2E_ONLY").unwrap_or_default();
    for (name, check) in groups {
        if only.is_empty() || only.split(',').any(|o| o.trim() == name) {
            let started = std::time::Instant::now();
            check(&mut checks);
            eprintln!("e2e: {name} took {:.1} s", started.elapsed().as_secs_f64());
        }
    }
    assert!(
        checks.failures.is_empty(),
        "browser checks failed:\n{}",
        checks.failures.join("\n")
    );
}

/// The article's worked numbers, read off embed pages whose state is in the URL.
fn article_numbers(checks: &mut Checks) {
    let root3 = 3.0_f64.sqrt();
    let cases: &[(&str, &[(&str, f64)])] = &[
        (
            "/embed/bandit?p=0.5&qa=0.75&qb=0.35",
            &[("bandit-exact", 0.1)],
        ),
        (
            "/embed/importance?mu=0.2&pi=0.6&qa=0.75&qb=0.35",
            &[
                ("importance-exact", 0.59),
                ("importance-weight-a", 3.0),
                ("importance-weight-b", 0.5),
            ],
        ),
        (
            "/embed/group-advantages?rewards=1,0,0,0",
            &[
                ("group-advantages-a-0-0", root3),
                ("group-advantages-a-0-1", -1.0 / root3),
            ],
        ),
        (
            "/embed/reductions?lengths=2,4,4,6&rewards=1,0,0,0",
            &[
                ("reductions-loss-seq-mean-token-mean", 0.0),
                ("reductions-loss-token-mean", 1.0 / (2.0 * root3)),
                ("reductions-loss-dr_grpo", 1.0 / (3.0 * root3)),
            ],
        ),
        (
            "/embed/mixed-groups?p=0.5&g=4",
            &[("mixed-groups-probability", 0.875)],
        ),
        (
            "/embed/pass-at-k?n=10&c=2&k=3",
            &[
                ("pass-at-k-estimate", 1.0 - 56.0 / 120.0),
                ("pass-at-k-plug-in", 1.0 - 0.8_f64.powi(3)),
            ],
        ),
        (
            "/embed/episode?task=article&policy=teacher",
            &[("episode-reward", 1.0), ("episode-visible", 1.0)],
        ),
        (
            "/embed/rollout-budget?b=32&g=4&k=100&l=2000&demos=1000&demo_alpha=0.25",
            &[
                ("rollout-budget-trajectories", 12_800.0),
                ("rollout-budget-tokens", 25.6e6),
                ("rollout-budget-demo-attempts", 4_000.0),
            ],
        ),
        // Closed forms computed outside the project (Python's math module):
        // pi* = pi_ref exp(r / beta) / Z on the chapter's six responses, and the KL
        // between the estimator figure's two softmax policies.
        (
            "/embed/kl-optimum?beta=0.5&best=1",
            &[
                ("kl-optimum-reward", 0.560_795_013_232_682),
                ("kl-optimum-kl", 0.232_387_483_533_734),
                ("kl-optimum-objective", 0.444_601_271_465_815),
                ("kl-optimum-p-best", 0.151_838_956_503_668_6),
            ],
        ),
        (
            "/embed/dpo?beta=0.2",
            &[
                ("dpo-p-best-optimum", 0.347_474_016_251_283_3),
                ("dpo-kl-expected", 0.0),
            ],
        ),
        (
            "/embed/kl-estimators?shift=2",
            &[("kl-estimators-true", 1.135_504_217_648_921_6)],
        ),
        (
            "/embed/clip?eps_low=0.2&eps_high=0.28&p_old=0.01",
            &[("clip-ratio-high", 1.28), ("clip-increment", 0.0028)],
        ),
    ];
    for (path, expected) in cases {
        let dom = checks.load(path);
        for (id, value) in *expected {
            checks.number(path, &dom, id, *value, 1e-12);
        }
    }
}

/// The appendix: the compute explorer answers its first entry's example request.
fn explorer_computes(checks: &mut Checks) {
    let dom = checks.load("/explorer");
    match browser::text(&dom, "response") {
        Some(text) if text.contains("&quot;exact&quot;") || text.contains("\"exact\"") => {}
        other => checks
            .failures
            .push(format!("/explorer: the response shows {other:?}")),
    }
}

/// A link with state opens that view: the control shows the value and the numbers
/// follow it, both on an embed page and (with prefixed keys) on a chapter page.
fn embed_state_is_restored(checks: &mut Checks) {
    let path = "/embed/bandit?p=0.3&qa=0.9&qb=0.35&n=8";
    let dom = checks.load(path);
    checks.number(path, &dom, "bandit-exact", 0.55 * 0.3 * 0.7, 1e-12);
    checks.number(path, &dom, "bandit-n", 8.0, 0.0);
    let shown = dom.contains("<output for=\"bandit-input-p\">0.3</output>");
    if !shown {
        checks
            .failures
            .push(format!("{path}: the p slider's output does not show 0.3"));
    }
    if !dom.contains("Read it in its chapter") {
        checks
            .failures
            .push(format!("{path}: no link back to the chapter"));
    }
    if !dom.contains("target=\"_top\"") {
        checks
            .failures
            .push(format!("{path}: the chapter link opens inside the frame"));
    }
    if browser::attribute(&dom, "bandit-input-p", "step").as_deref() != Some("0.01") {
        checks
            .failures
            .push(format!("{path}: the p slider lost its step"));
    }
    // A link's value between the slider's steps: the thumb is freed to sit on it.
    let path = "/embed/bandit?p=0.375";
    let dom = checks.load(path);
    if browser::attribute(&dom, "bandit-input-p", "step").as_deref() != Some("any")
        || !dom.contains("<output for=\"bandit-input-p\">0.375</output>")
    {
        checks.failures.push(format!(
            "{path}: the slider's thumb and number disagree on a value between steps"
        ));
    }
    let addr = checks.base.trim_start_matches("http://").to_owned();
    let (status, _) = arlbook_tests::http::request(&addr, "GET", "/favicon.ico", &[], b"");
    if status != 200 {
        checks
            .failures
            .push(format!("/favicon.ico answers {status}, not the icon"));
    }
    let path = "/chapter/grpo?group-advantages.rewards=1,1,0,0&group-advantages.scale=none";
    let dom = checks.load(path);
    // The rewards are also clickable cells, one per attempt, showing the URL's values.
    for (i, reward) in ["1", "1", "0", "0"].iter().enumerate() {
        let id = format!("group-advantages-cell-rewards-0-{i}");
        if browser::text(&dom, &id).as_deref() != Some(*reward) {
            checks
                .failures
                .push(format!("{path}: cell {id} does not show {reward}"));
        }
    }
    checks.number(path, &dom, "group-advantages-a-0-0", 0.5, 1e-12);
    checks.number(
        path,
        &dom,
        "reductions-loss-token-mean",
        1.0 / (2.0 * 3.0_f64.sqrt()),
        1e-12,
    );
}

/// Every figure at its defaults: the page (core compiled to wasm32) shows the numbers
/// that the same figure code computes natively.
fn page_numbers_match_the_native_computation(checks: &mut Checks) {
    for figure in FIGURES {
        let meta = figure.meta();
        let path = format!("/embed/{}", meta.id);
        let dom = checks.load(&path);
        checks.no_error(&path, &dom, meta.id);
        let native = figure
            .evaluate(&State::defaults(meta.controls))
            .unwrap_or_else(|e| panic!("{}: {}", meta.id, e.message));
        for readout in native.readouts() {
            // The host's libm and the wasm build's differ in the last bits of exp/ln,
            // and an iterative fit (the distillation figure) can grow that to ~1e-9.
            let tolerance = 1e-6 * readout.value.abs().max(1.0);
            checks.number(&path, &dom, &readout.id, readout.value, tolerance);
        }
        // No WebGPU in this run: the CPU, and (once the probe failed) not "starting".
        let badge = browser::text(&dom, &format!("{}-backend", meta.id)).unwrap_or_default();
        if !badge.starts_with("CPU") || badge.contains("starting") {
            checks
                .failures
                .push(format!("{path}: backend badge is {badge:?}"));
        }
    }
}

/// Whether the figure at its defaults asks for an entry with a GPU kernel: the CPU
/// evaluation gives such entries the reason passed in, and the others `no GPU kernel`.
fn uses_a_kernel(figure: &dyn AnyFigure) -> bool {
    let meta = figure.meta();
    let answers = RefCell::new(Answers::default());
    let evaluation = evaluate_on_cpu("probe", &answers, || {
        figure.evaluate(&State::defaults(meta.controls))
    });
    evaluation.summary.cpu_reasons.iter().any(|r| r == "probe")
}

/// With WebGPU exposed (`SwiftShader`), each figure that has a kernel is opened with
/// `?backend=gpu` and with `?backend=cpu`: the badges say which path ran and every
/// readout agrees.
///
/// Tolerance, as in the core's conformance suite (`core/tests/gpu_conformance.rs`):
/// `|gpu - cpu| <= 1e-4 |cpu| + 1e-5 S`, with `S` the largest magnitude among the
/// figure's readouts. Monte Carlo kernels draw the same Philox words as the CPU and
/// return integer counts, so their readouts agree far closer (`f64` rounding); the
/// `f32` kernels (clip surrogate, group advantages, policy loss) use the bound. The
/// policy-lag simulation keeps event times in `f32` on the GPU, so a rare replicate
/// can order two events differently: its readouts are compared within Monte Carlo
/// error instead (`0.05` relative).
fn webgpu_matches_the_cpu(checks: &mut Checks) {
    for figure in FIGURES {
        let meta = figure.meta();
        if !uses_a_kernel(*figure) {
            continue;
        }
        let cpu_path = format!("/embed/{}?backend=cpu", meta.id);
        let gpu_path = format!("/embed/{}?backend=gpu", meta.id);
        let cpu = checks.load_with(&cpu_path, Gpu::Webgpu);
        let gpu = checks.load_with(&gpu_path, Gpu::Webgpu);
        checks.no_error(&cpu_path, &cpu, meta.id);
        checks.no_error(&gpu_path, &gpu, meta.id);
        let badge_id = format!("{}-backend", meta.id);
        let cpu_badge = browser::text(&cpu, &badge_id).unwrap_or_default();
        if !cpu_badge.starts_with("CPU (?backend=cpu") {
            checks
                .failures
                .push(format!("{cpu_path}: backend badge is {cpu_badge:?}"));
        }
        let gpu_badge = browser::text(&gpu, &badge_id).unwrap_or_default();
        let gpu_kind = browser::attribute(&gpu, &badge_id, "data-backend").unwrap_or_default();
        if !gpu_badge.starts_with("WebGPU (") || !matches!(gpu_kind.as_str(), "gpu" | "mixed") {
            checks.failures.push(format!(
                "{gpu_path}: backend badge is {gpu_badge:?} ({gpu_kind})"
            ));
        }
        let native = figure
            .evaluate(&State::defaults(meta.controls))
            .unwrap_or_else(|e| panic!("{}: {}", meta.id, e.message));
        let ids: Vec<String> = native.readouts().into_iter().map(|r| r.id).collect();
        let on_cpu: Vec<Option<f64>> = ids.iter().map(|id| browser::readout(&cpu, id)).collect();
        let scale = on_cpu.iter().flatten().fold(0.0_f64, |m, v| m.max(v.abs()));
        let mut worst = 0.0_f64;
        for (id, c) in ids.iter().zip(&on_cpu) {
            let (Some(c), Some(g)) = (*c, browser::readout(&gpu, id)) else {
                checks
                    .failures
                    .push(format!("{gpu_path}: readout {id} missing on one path"));
                continue;
            };
            let tolerance = if meta.id == "lag" {
                0.05 * c.abs().max(1e-3 * scale)
            } else {
                1e-4 * c.abs() + 1e-5 * scale
            };
            worst = worst.max((g - c).abs() / tolerance);
            if (g - c).abs() > tolerance {
                checks.failures.push(format!(
                    "{gpu_path}: {id} = {g} on WebGPU, {c} on the CPU (tolerance {tolerance:e})"
                ));
            }
        }
        eprintln!(
            "webgpu vs cpu: {:<18} {gpu_badge}: {} readouts, largest difference {worst:.1e} of its tolerance",
            meta.id,
            ids.len()
        );
    }
    // `auto` (no query) starts WebGPU when there is an adapter, and the page header says
    // so; a figure's small requests stay on the CPU (faster than a trip to the device,
    // `compute::GPU_MIN_WORK`), and a large Monte Carlo setting goes to the GPU.
    let path = "/chapter/grpo";
    let dom = checks.load_with(path, Gpu::Webgpu);
    let header = browser::text(&dom, "backend-badge").unwrap_or_default();
    let figure = browser::text(&dom, "reductions-backend").unwrap_or_default();
    let small_on_cpu = figure.starts_with("CPU (") && figure.contains("small request");
    if !(header.starts_with("WebGPU (") && small_on_cpu) {
        checks.failures.push(format!(
            "{path}: with WebGPU the header says {header:?} and the reductions figure {figure:?}"
        ));
    }
    // 200 runs until 32 mixed groups of 4 at p = 0.01: about 650,000 draws.
    let path = "/embed/mixed-groups?b=32";
    let dom = checks.load_with(path, Gpu::Webgpu);
    let figure = browser::text(&dom, "mixed-groups-backend").unwrap_or_default();
    if !figure.starts_with("WebGPU (") {
        checks.failures.push(format!(
            "{path}: a large simulation under ?backend=auto computed on {figure:?}"
        ));
    }
}

/// Every chapter opens, shows its title and its figures without errors; one
/// screenshot each (and one at phone width) goes to the output folder.
fn chapters_load_with_their_figures(checks: &mut Checks) {
    let out = out_dir();
    std::fs::create_dir_all(&out).expect("creating the screenshot folder");
    let dom = checks.load("/");
    for chapter in CHAPTERS {
        if !dom.contains(&format!("href=\"/chapter/{}\"", chapter.id)) {
            checks
                .failures
                .push(format!("contents: no link to chapter {}", chapter.id));
        }
        // Each entry's thumbnail is drawn (`data-drawn` is 1, or the error).
        let thumb = format!("thumb-{}", chapter.id);
        match browser::attribute(&dom, &thumb, "data-drawn").as_deref() {
            Some("1") => {}
            other => checks
                .failures
                .push(format!("contents: thumbnail {thumb} is {other:?}")),
        }
    }
    // The page opens on the GRPO-over-a-run figure, live, whole, without an error.
    checks.no_error("/", &dom, "grpo-run");
    if browser::attribute(&dom, "grpo-run", "data-complete").as_deref() != Some("1")
        || browser::readout(&dom, "grpo-run-step") != Some(200.0)
    {
        checks
            .failures
            .push("contents: the GRPO run did not reach step 200".to_owned());
    }
    for chapter in CHAPTERS {
        let path = format!("/chapter/{}", chapter.id);
        let dom = checks.load(&path);
        if !dom.contains(chapter.title) {
            checks
                .failures
                .push(format!("{path}: title {:?} missing", chapter.title));
        }
        if !dom.contains("<math")
            && chapter
                .blocks
                .iter()
                .any(|b| matches!(b, Block::Display(_)))
        {
            checks.failures.push(format!("{path}: no rendered math"));
        }
        for block in chapter.blocks {
            if let Block::Figure(id) = block {
                checks.no_error(&path, &dom, id);
                if !dom.contains(&format!("id=\"{id}-canvas\"")) {
                    checks.failures.push(format!("{path}: no canvas for {id}"));
                }
            }
        }
        // A desktop and a phone width (where multi-panel figures stack their panels).
        for (width, height) in [(1280, 2600), (360, 3200)] {
            let shot = out.join(format!("chapter-{}-{width}.png", chapter.id));
            browser::screenshot(&format!("{}{path}", checks.base), &shot, width, height);
            if !shot.is_file() {
                checks
                    .failures
                    .push(format!("{path}: no screenshot at {width} px written"));
            }
        }
    }
    // Every embed at the size its embed code suggests.
    for figure in FIGURES {
        let meta = figure.meta();
        let shot = out.join(format!("embed-{}.png", meta.id));
        browser::screenshot(
            &format!("{}/embed/{}", checks.base, meta.id),
            &shot,
            arlbook_app::figure::EMBED_WIDTH,
            meta.embed_height(),
        );
        if !shot.is_file() {
            checks
                .failures
                .push(format!("/embed/{}: no screenshot written", meta.id));
        }
    }
    eprintln!("screenshots in {}", out.display());
}
