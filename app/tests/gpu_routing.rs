//! Which requests `?backend=auto` sends to WebGPU: every figure at its defaults asks
//! only for requests below `compute::GPU_MIN_WORK` (they finish on the CPU within about
//! a frame, which is faster than a trip to the device), and the Monte Carlo figures'
//! high settings ask for more (those go to the GPU). Printed per figure: the largest
//! request at the defaults and over the control sweep (`arlbook_app::sweep`).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use arlbook_app::chapters::FIGURES;
use arlbook_app::compute::{Accelerator, Answers, GPU_MIN_WORK, Pending, evaluate};
use arlbook_app::figure::{AnyFigure, State};
use arlbook_app::sweep::settings;
use arlbook_core::api;
use serde_json::Value;

/// Records the largest request it is asked to take and takes none (so every answer
/// comes from the CPU at once).
#[derive(Default)]
struct Sizer {
    largest: Cell<u64>,
}

impl Accelerator for Sizer {
    fn start(&self, _: &str, _: Value) -> Pending {
        unreachable!("the sizer takes no request")
    }

    fn takes(&self, name: &str, request: &Value) -> bool {
        let work = api::estimated_work(name, request).unwrap_or(0);
        self.largest.set(self.largest.get().max(work));
        false
    }
}

fn largest_request(figure: &dyn AnyFigure, state: &State) -> u64 {
    let sizer = Rc::new(Sizer::default());
    let answers = RefCell::new(Answers::default());
    let accelerator: Rc<dyn Accelerator> = sizer.clone();
    let mut future = std::pin::pin!(evaluate(
        Some(accelerator),
        "",
        &answers,
        || figure.evaluate(state).map(|_| ()),
        || true,
    ));
    let done = future
        .as_mut()
        .poll(&mut std::task::Context::from_waker(std::task::Waker::noop()));
    assert!(
        done.is_ready(),
        "{}: nothing is pending on the CPU",
        figure.meta().id
    );
    sizer.largest.get()
}

#[test]
fn figures_at_their_defaults_stay_on_the_cpu_and_monte_carlo_settings_can_reach_the_gpu() {
    let mut reaching = Vec::new();
    for figure in FIGURES {
        let meta = figure.meta();
        let at_defaults = largest_request(*figure, &State::defaults(meta.controls));
        let swept = settings(meta.controls)
            .iter()
            .map(|s| largest_request(*figure, &s.state))
            .max()
            .unwrap_or(0);
        eprintln!(
            "{:<18} defaults {at_defaults:>10}  largest over the sweep {swept:>10}",
            meta.id
        );
        assert!(
            at_defaults < GPU_MIN_WORK,
            "{}: {at_defaults} units at the defaults",
            meta.id
        );
        if swept >= GPU_MIN_WORK {
            reaching.push(meta.id);
        }
    }
    eprintln!("settings that reach WebGPU under ?backend=auto: {reaching:?}");
    assert!(
        !reaching.is_empty(),
        "no setting of any figure is worth the GPU"
    );
}
