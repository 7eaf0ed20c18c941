use std::cell::Cell;

use arlbook_core::api::OneOrMany;
use arlbook_core::api::bandit_gradient::{self, BanditGradient};
use arlbook_core::api::binomial_se::{self, BinomialSe};
use arlbook_core::api::mixed_group::{self, MixedGroup};
use serde_json::json;

use super::*;

fn bandit(p: f64) -> bandit_gradient::Request {
    bandit_gradient::Request {
        p: Some(p),
        q: vec![0.75, 0.35],
        estimates: 0,
        ..bandit_gradient::Request::default()
    }
}

fn mixed(p: f64, group_size: u64) -> mixed_group::Request {
    mixed_group::Request {
        p: OneOrMany::One(p),
        group_size: OneOrMany::One(group_size),
        ..mixed_group::Request::default()
    }
}

/// The probability of a mixed group, from a response to scalar inputs.
fn probability(response: mixed_group::Response) -> Result<f64, FieldError> {
    response
        .probability
        .into_scalar()
        .ok_or_else(|| FieldError::new("(response).probability", "a table"))
}

#[test]
fn compute_reaches_the_core() {
    let response = compute::<BanditGradient>(&bandit(0.5)).unwrap();
    assert!((response.exact - 0.1).abs() < 1e-12);
}

#[test]
fn the_typed_call_sends_the_same_json_as_the_untyped_one() {
    let typed = compute::<BanditGradient>(&bandit(0.3)).unwrap();
    let untyped = compute_json(
        "bandit-gradient",
        json!({"p": 0.3, "q": [0.75, 0.35], "estimates": 0}),
    )
    .unwrap();
    assert_eq!(serde_json::to_value(typed).unwrap(), untyped);
}

#[test]
fn an_answer_that_does_not_fit_the_response_type_is_an_error_naming_the_field() {
    // An accelerator whose answer lacks a field: the figure gets an error, no default.
    struct Broken;
    impl Accelerator for Broken {
        fn start(&self, _: &str, _: Value) -> Pending {
            Box::pin(std::future::ready(Ok(Answer {
                response: json!({"exact": 0.1}),
                path: Path::Gpu,
            })))
        }
    }
    let answers = RefCell::new(Answers::default());
    let accelerator: Rc<dyn Accelerator> = Rc::new(Broken);
    let evaluation = block_on(evaluate(
        Some(accelerator),
        "",
        &answers,
        || compute::<BanditGradient>(&bandit(0.5)),
        || true,
    ))
    .unwrap();
    let err = evaluation.result.unwrap_err();
    assert_eq!(err.field, "(response).exact_per_action");
}

#[test]
fn backend_choice_is_read_from_the_query() {
    let pairs = |v: &str| {
        vec![
            ("p".to_owned(), "0.5".to_owned()),
            ("backend".to_owned(), v.to_owned()),
        ]
    };
    assert_eq!(Choice::from_pairs(&pairs("cpu")), Choice::Cpu);
    assert_eq!(Choice::from_pairs(&pairs("GPU")), Choice::Gpu);
    assert_eq!(Choice::from_pairs(&pairs("auto")), Choice::Auto);
    assert_eq!(Choice::from_pairs(&pairs("quantum")), Choice::Auto);
    assert_eq!(Choice::from_pairs(&[]), Choice::Auto);
}

/// Answers with the CPU reference, labelled GPU, after `delay` polls; counts starts;
/// takes requests of at least `min_work` units.
struct FakeGpu {
    delay: usize,
    starts: Cell<usize>,
    min_work: u64,
}

struct Delayed {
    left: usize,
    answer: Option<Result<Answer, FieldError>>,
}

impl Future for Delayed {
    type Output = Result<Answer, FieldError>;
    fn poll(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Self::Output> {
        if self.left == 0 {
            Poll::Ready(self.answer.take().expect("polled after ready"))
        } else {
            self.left -= 1;
            Poll::Pending
        }
    }
}

impl Accelerator for FakeGpu {
    fn start(&self, name: &str, request: Value) -> Pending {
        assert!(api::GPU_ENTRIES.contains(&name), "{name} has no kernel");
        self.starts.set(self.starts.get() + 1);
        let answer = api::compute(name, request).map(|response| Answer {
            response,
            path: Path::Gpu,
        });
        Box::pin(Delayed {
            left: self.delay,
            answer: Some(answer),
        })
    }

    fn takes(&self, name: &str, request: &Value) -> bool {
        worth_the_gpu(name, request, self.min_work)
    }
}

/// Polls to completion; the fakes never need a real waker.
fn block_on<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    loop {
        if let Poll::Ready(value) = future
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            return value;
        }
    }
}

/// A figure asking two kernel entries and one without a kernel; counts its runs.
fn figure(runs: &Cell<usize>, p: f64) -> Result<(f64, f64, f64), FieldError> {
    runs.set(runs.get() + 1);
    let exact = compute::<BanditGradient>(&bandit(p))?;
    let mixed = compute::<MixedGroup>(&mixed(p, 4))?;
    let se = compute::<BinomialSe>(&binomial_se::Request { p, n: 100 })?;
    Ok((exact.exact, probability(mixed)?, se.se))
}

fn fake(delay: usize) -> Rc<FakeGpu> {
    Rc::new(FakeGpu {
        delay,
        starts: Cell::new(0),
        min_work: 0,
    })
}

#[test]
fn requests_below_the_accelerator_s_minimum_work_stay_on_the_cpu() {
    // 2 x 24 x 100 = 4,800 draws at the figure's defaults; 2 x 2,400 x 1,000 = 4.8 M.
    let sampled = |samples: usize, estimates: usize| bandit_gradient::Request {
        samples,
        estimates,
        group_size: 4,
        ..bandit(0.5)
    };
    let small = sampled(24, 100);
    let large = sampled(2_400, 1_000);
    let gpu = Rc::new(FakeGpu {
        delay: 1,
        starts: Cell::new(0),
        min_work: GPU_MIN_WORK,
    });
    for (request, on_gpu) in [(small, false), (large, true)] {
        let answers = RefCell::new(Answers::default());
        let accelerator: Rc<dyn Accelerator> = gpu.clone();
        let evaluation = block_on(evaluate(
            Some(accelerator),
            "unused",
            &answers,
            || compute::<BanditGradient>(&request),
            || true,
        ))
        .unwrap();
        let expected = compute::<BanditGradient>(&request).unwrap();
        assert_eq!(
            serde_json::to_value(evaluation.result.unwrap()).unwrap(),
            serde_json::to_value(expected).unwrap()
        );
        if on_gpu {
            assert_eq!((evaluation.summary.gpu, evaluation.summary.cpu), (1, 0));
        } else {
            assert_eq!((evaluation.summary.gpu, evaluation.summary.cpu), (0, 1));
            assert_eq!(
                evaluation.summary.cpu_reasons,
                vec![SMALL_REQUEST.to_owned()]
            );
        }
    }
    assert_eq!(
        gpu.starts.get(),
        1,
        "only the large request went to the device"
    );
    // A request that does not validate is not sent: the CPU reports its error.
    assert!(!worth_the_gpu("bandit-gradient", &json!({"q": [2.0]}), 0));
}

#[test]
fn pending_answers_are_awaited_and_the_figure_replayed() {
    let gpu = fake(2);
    let answers = RefCell::new(Answers::default());
    let runs = Cell::new(0);
    let accelerator: Rc<dyn Accelerator> = gpu.clone();
    let evaluation = block_on(evaluate(
        Some(accelerator),
        "unused",
        &answers,
        || figure(&runs, 0.5),
        || true,
    ))
    .unwrap();
    let cpu = figure(&Cell::new(0), 0.5).unwrap();
    assert_eq!(evaluation.result.unwrap(), cpu);
    // Two kernel entries, each pending once: three runs, two starts.
    assert_eq!(runs.get(), 3);
    assert_eq!(gpu.starts.get(), 2);
    assert_eq!(evaluation.summary.gpu, 2);
    assert_eq!(evaluation.summary.cpu, 1);
    assert_eq!(evaluation.summary.cpu_reasons, vec![NO_KERNEL.to_owned()]);
    assert_eq!(evaluation.summary.kind(), "mixed");
    assert_eq!(answers.borrow().len(), 3);
}

#[test]
fn kept_answers_make_a_repeat_evaluation_start_nothing() {
    let gpu = fake(1);
    let answers = RefCell::new(Answers::default());
    let runs = Cell::new(0);
    for _ in 0..2 {
        let accelerator: Rc<dyn Accelerator> = gpu.clone();
        block_on(evaluate(
            Some(accelerator),
            "",
            &answers,
            || figure(&runs, 0.3),
            || true,
        ))
        .unwrap()
        .result
        .unwrap();
    }
    assert_eq!(
        gpu.starts.get(),
        2,
        "the second evaluation reused both answers"
    );
    assert_eq!(runs.get(), 3 + 1);
    // A new state keeps nothing it does not ask for.
    let accelerator: Rc<dyn Accelerator> = gpu.clone();
    block_on(evaluate(
        Some(accelerator),
        "",
        &answers,
        || figure(&runs, 0.4),
        || true,
    ))
    .unwrap();
    assert_eq!(gpu.starts.get(), 4);
    assert_eq!(answers.borrow().len(), 3);
}

#[test]
fn answers_ready_at_once_need_no_replay() {
    let gpu = fake(0);
    let answers = RefCell::new(Answers::default());
    let runs = Cell::new(0);
    let accelerator: Rc<dyn Accelerator> = gpu;
    let evaluation = block_on(evaluate(
        Some(accelerator),
        "",
        &answers,
        || figure(&runs, 0.5),
        || true,
    ))
    .unwrap();
    assert_eq!(runs.get(), 1);
    assert_eq!(evaluation.summary.gpu, 2);
}

#[test]
fn a_stale_evaluation_stops_after_its_await() {
    let answers = RefCell::new(Answers::default());
    let runs = Cell::new(0);
    let accelerator: Rc<dyn Accelerator> = fake(1);
    let evaluation = block_on(evaluate(
        Some(accelerator),
        "",
        &answers,
        || figure(&runs, 0.5),
        || false,
    ));
    assert!(evaluation.is_none());
    assert_eq!(runs.get(), 1);
    assert_eq!(
        answers.borrow().len(),
        1,
        "what it learnt is kept for the next one"
    );
}

#[test]
fn without_an_accelerator_everything_runs_on_the_cpu_with_its_reason() {
    let answers = RefCell::new(Answers::default());
    let runs = Cell::new(0);
    let evaluation = evaluate_on_cpu("no WebGPU", &answers, || figure(&runs, 0.5));
    assert_eq!(runs.get(), 1);
    assert_eq!(evaluation.summary.gpu, 0);
    assert_eq!(evaluation.summary.cpu, 3);
    assert_eq!(
        evaluation.summary.cpu_reasons,
        vec!["no WebGPU".to_owned(), NO_KERNEL.to_owned()]
    );
    assert_eq!(
        evaluation.summary.label("x"),
        "CPU (no WebGPU; no GPU kernel)"
    );
    // Outside the session, compute is plain CPU again.
    assert!(SESSION.with(|s| s.borrow().is_none()));
}

#[test]
fn a_change_of_path_discards_kept_answers() {
    let answers = RefCell::new(Answers::default());
    let runs = Cell::new(0);
    evaluate_on_cpu("WebGPU starting", &answers, || figure(&runs, 0.5));
    let accelerator: Rc<dyn Accelerator> = fake(0);
    let evaluation = block_on(evaluate(
        Some(accelerator),
        "",
        &answers,
        || figure(&runs, 0.5),
        || true,
    ))
    .unwrap();
    assert_eq!(
        evaluation.summary.gpu, 2,
        "no CPU answer was reused on the GPU path"
    );
    let evaluation = evaluate_on_cpu("no WebGPU", &answers, || figure(&runs, 0.5));
    assert_eq!(evaluation.summary.cpu_reasons[0], "no WebGPU");
}

#[test]
fn a_rejected_request_is_the_figures_error_on_both_paths() {
    let bad = || compute::<MixedGroup>(&mixed(1.5, 4));
    let answers = RefCell::new(Answers::default());
    let on_cpu = evaluate_on_cpu("", &answers, bad).result.unwrap_err();
    let accelerator: Rc<dyn Accelerator> = fake(1);
    let on_gpu = block_on(evaluate(Some(accelerator), "", &answers, bad, || true))
        .unwrap()
        .result
        .unwrap_err();
    assert_eq!(on_cpu, on_gpu);
    assert!(!is_pending(&on_gpu));
}

#[test]
fn a_figure_that_ignores_the_pending_stop_still_gets_every_answer() {
    let answers = RefCell::new(Answers::default());
    let gpu = fake(1);
    let accelerator: Rc<dyn Accelerator> = gpu.clone();
    let evaluation = block_on(evaluate(
        Some(accelerator),
        "",
        &answers,
        || {
            let a = compute::<MixedGroup>(&mixed(0.5, 4));
            let b = compute::<MixedGroup>(&mixed(0.5, 8));
            Ok((probability(a?)?, probability(b?)?))
        },
        || true,
    ))
    .unwrap();
    let (a, b) = evaluation.result.unwrap();
    assert!((a - 0.875).abs() < 1e-12);
    assert!((b - (1.0 - 2.0 * 0.5_f64.powi(8))).abs() < 1e-12);
    assert_eq!(gpu.starts.get(), 2);
}

#[test]
fn badge_labels_say_where_the_numbers_came_from() {
    let mut summary = Summary::default();
    assert_eq!(summary.label("a"), "CPU");
    assert_eq!(summary.kind(), "none");
    summary.add(&Path::Gpu);
    assert_eq!(summary.label("SwiftShader"), "WebGPU (SwiftShader)");
    assert_eq!(summary.kind(), "gpu");
    summary.add(&Path::Cpu(NO_KERNEL.to_owned()));
    assert_eq!(summary.label("SwiftShader"), "WebGPU (SwiftShader) + CPU");
    assert!(summary.detail().contains("no GPU kernel"));
}
