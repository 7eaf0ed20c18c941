//! The compute API: one entry per figure computation, dispatched by name.
//!
//! The CLI (`arlbook compute <name>`), the HTTP server (`POST /api/compute/<name>`) and
//! the notebook all call [`compute`]. Each entry is a module with a serde `Request`
//! (unknown fields rejected, every field documented) and `Response`, and an
//! implementation of [`Entry`] that validates the request and calls [`crate::math`].
//!
//! ## Design
//! - The contract in `DESIGN.md` lists the names and main fields; tests outside the crate
//!   rely on them, so fields may be added but never renamed.
//! - Every bad input is a [`FieldError`] naming the JSON path of the field
//!   (`rewards[1][0]`), including serde's own complaints (wrong type, unknown field,
//!   missing field).
//! - Work is bounded: before it starts, each entry estimates its work from the request's
//!   sizes (random draws times the actions each draw scans, grid cells, pass@k's terms,
//!   simulated events) in units of [`MAX_WORK`], about a second of CPU and a bounded
//!   amount of memory per request, and refuses a request over it with a [`FieldError`]
//!   naming the field that drives the cost ([`check_work`]). Inputs whose results cannot
//!   be represented (a spread that overflows `f64`, an infinite cost) are refused too, and
//!   [`run`] turns any non-finite number left in a response into an error rather than a
//!   JSON `null`; the only `null`s are the ones an entry documents ([`Entry::NULLABLE`]).
//! - Work that is no longer wanted stops: the long loops check the caller's
//!   cancellation token ([`crate::cancel`]) and [`run`] refuses what a stopped
//!   computation left.
//! - Sampling entries take a `seed` and are deterministic for it.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{FieldError, Result};

pub use estimate::estimated_work;

mod estimate;
pub mod examples;
// One module per entry; each adds itself to `registry!` below, and one with a GPU
// kernel to `with_gpu_entries!` too.
pub mod bandit_gradient;
pub mod binomial_se;
pub mod clip_surrogate;
pub mod distill;
pub mod dpo;
pub mod gae;
#[cfg(feature = "gpu")]
pub mod gpu;

pub mod group_advantages;
pub mod grpo_toy;
pub mod importance_draws;
pub mod importance_sampling;
pub mod kl;
pub mod kl_estimators;
pub mod kl_regularized_optimum;
pub mod lag_filter;
pub mod masked_whiten;
pub mod mixed_group;
pub mod pass_at_k;
pub mod policy_loss;
pub mod renormalised;
pub mod rollout_budget;
pub mod shaping;

/// The work budget of one request, in work units: one unit is about one random draw with
/// its arithmetic, some 20 ns of one core in a release build, so the budget is about a
/// second of CPU. Calibrated on the CI machine (release build, one core): 50 M
/// importance-sampling draws take 0.9 s over 2 actions and 1.9 s over 24; 10 M take
/// 0.86 s over 100 and 6.1 s over 1000 (16 ns a draw plus 0.6 to 0.9 ns per action), so
/// a draw over `K` actions is charged `1 + K / 10` units ([`categorical_work`]); 50 M
/// pass@k factors take 0.1 s; 50 M three-action KL-estimator draws 0.6 s; a
/// million-cell `mixed-group` grid 0.24 s; a 500-point KL-regularised frontier over
/// 50 000 actions 1.1 s (charged two units per point and action).
///
/// Memory is bounded through the same budget: a number a response stores beyond the
/// request's own size (a grid cell, made from two short lists) is charged
/// [`WORK_PER_CELL`] units, so such a table holds at most `MAX_WORK / WORK_PER_CELL`
/// numbers (about 90 MB at the ~180 B one number costs from the computation to its
/// JSON); responses as long as the request (per-token losses) are bounded by the
/// request's size, and lists of estimates by each entry's cap on their count.
pub const MAX_WORK: u64 = 50_000_000;

/// The most random draws one request may ask for (samples × replicates, summed over the
/// draws each replicate makes): the work budget, a draw being one unit.
pub const MAX_DRAWS: u64 = MAX_WORK;

/// Work units charged for each number a response stores (a grid cell), for its memory.
pub const WORK_PER_CELL: u64 = 100;

/// One named computation of the API.
pub trait Entry {
    /// The name used on the command line and in the URL (`bandit-gradient`).
    const NAME: &'static str;
    /// One line saying what it computes (shown by `arlbook compute --list`).
    const SUMMARY: &'static str;
    /// The request, deserialised with unknown fields rejected. Serialisable too, so a
    /// typed caller (the notebook) can send it through the by-name path; its JSON reads
    /// back as the same request.
    type Request: DeserializeOwned + Serialize;
    /// The response; it reads back from its own JSON ([`parse_response`]).
    type Response: Serialize + DeserializeOwned;
    /// Validates the request and computes the response on the CPU (the reference).
    fn compute(request: &Self::Request) -> Result<Self::Response>;
    /// Top-level response fields that may hold JSON `null` (documented in the field's
    /// docs); a `null` anywhere else is a non-finite number, which [`run`] refuses.
    const NULLABLE: &'static [&'static str] = &[];
}

/// Name and one-line summary of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct EntryInfo {
    /// The entry's name.
    pub name: &'static str,
    /// What it computes.
    pub summary: &'static str,
}

macro_rules! registry {
    ($($module:ident :: $entry:ident),* $(,)?) => {
        /// Every entry of the API, in the order `--list` shows them.
        pub const ENTRIES: &[EntryInfo] = &[
            $(EntryInfo { name: $module::$entry::NAME, summary: $module::$entry::SUMMARY }),*
        ];

        /// Runs the entry called `name` on a JSON request and returns its JSON response.
        pub fn compute(name: &str, request: Value) -> Result<Value> {
            $(
                if name == $module::$entry::NAME {
                    return run::<$module::$entry>(request);
                }
            )*
            Err(unknown_name(name))
        }

        /// The top-level response fields entry `name` documents as nullable
        /// ([`Entry::NULLABLE`]; empty for an unknown name).
        pub fn nullable(name: &str) -> &'static [&'static str] {
            $(
                if name == $module::$entry::NAME {
                    return <$module::$entry as Entry>::NULLABLE;
                }
            )*
            &[]
        }

        /// Test support: entry `name`'s request read into its type and written back,
        /// and the response to that, read into its type and written back.
        #[cfg(test)]
        fn reserialise(name: &str, request: Value) -> Result<(Value, Value)> {
            $(
                if name == $module::$entry::NAME {
                    return tests::reserialise_entry::<$module::$entry>(request);
                }
            )*
            Err(unknown_name(name))
        }
    };
}

/// The one list of the entries that have a GPU kernel, each with the name of its kernel
/// function in [`gpu`]. It hands the list to the macro `$then`, so the same list makes
/// [`GPU_ENTRIES`] (below, with or without feature `gpu`) and the dispatch of
/// `gpu::compute_async` (in `gpu.rs`). An entry listed without a kernel function fails
/// the build with feature `gpu`; a kernel function that is not listed is dead code,
/// which the lint denies.
macro_rules! with_gpu_entries {
    ($then:ident) => {
        $then! {
            bandit_gradient::BanditGradient => bandit,
            importance_sampling::ImportanceSampling => importance,
            clip_surrogate::ClipSurrogate => clip,
            group_advantages::GroupAdvantagesEntry => advantages,
            policy_loss::PolicyLossEntry => loss,
            mixed_group::MixedGroup => mixed,
            lag_filter::LagFilter => lag,
            kl_estimators::KlEstimators => kl,
        }
    };
}
#[cfg(feature = "gpu")]
use with_gpu_entries;

macro_rules! gpu_entry_names {
    ($($module:ident :: $entry:ident => $kernel:ident),* $(,)?) => {
        /// The entries that have a GPU kernel: with feature `gpu`, [`gpu`] runs them
        /// through WGSL; every other entry always computes on the CPU. Known without the
        /// feature, so a caller can say where a request will run before it has a device.
        pub const GPU_ENTRIES: &[&str] = &[$(<$module::$entry as Entry>::NAME),*];
    };
}

with_gpu_entries!(gpu_entry_names);

registry! {
    bandit_gradient::BanditGradient,
    importance_sampling::ImportanceSampling,
    importance_draws::ImportanceSamplingDraws,
    clip_surrogate::ClipSurrogate,
    group_advantages::GroupAdvantagesEntry,
    policy_loss::PolicyLossEntry,
    kl::Kl,
    gae::GaeEntry,
    masked_whiten::MaskedWhiten,
    mixed_group::MixedGroup,
    shaping::Shaping,
    pass_at_k::PassAtK,
    binomial_se::BinomialSe,
    rollout_budget::RolloutBudget,
    lag_filter::LagFilter,
    distill::Distill,
    kl_regularized_optimum::KlRegularizedOptimum,
    dpo::Dpo,
    kl_estimators::KlEstimators,
    grpo_toy::GrpoToy,
}

fn unknown_name(name: &str) -> FieldError {
    let known: Vec<&str> = ENTRIES.iter().map(|e| e.name).collect();
    FieldError::new(
        "name",
        format!("unknown computation `{name}`; known: {}", known.join(", ")),
    )
}

/// Deserialises, computes and serialises one entry. A computation cancelled while it
/// ran ([`crate::cancel`]) ends in [`crate::cancel::cancelled_error`], whatever its
/// loops left behind.
pub fn run<E: Entry>(request: Value) -> Result<Value> {
    let request: E::Request = parse_request(request)?;
    let computed = E::compute(&request);
    if crate::cancel::requested() {
        return Err(crate::cancel::cancelled_error());
    }
    let response = computed?;
    let value = serde_json::to_value(&response)
        .map_err(|e| FieldError::new("(response)", format!("could not serialise: {e}")))?;
    check_no_null(&value, E::NULLABLE)?;
    Ok(value)
}

/// Refuses a response holding `null` outside the top-level fields `nullable`: `serde_json`
/// writes a non-finite `f64` as `null`, so such a response would silently lose a number.
/// The error names the response path (`(response).group_std[0]`).
pub fn check_no_null(response: &Value, nullable: &[&str]) -> Result<()> {
    fn walk(value: &Value, path: &mut String) -> Option<String> {
        match value {
            Value::Null => Some(path.clone()),
            Value::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
                let len = path.len();
                path.push('[');
                path.push_str(&i.to_string());
                path.push(']');
                let found = walk(item, path);
                path.truncate(len);
                found
            }),
            Value::Object(fields) => fields.iter().find_map(|(key, item)| {
                let len = path.len();
                path.push('.');
                path.push_str(key);
                let found = walk(item, path);
                path.truncate(len);
                found
            }),
            _ => None,
        }
    }
    let mut path = String::from("(response)");
    let found = match response {
        Value::Object(fields) => fields
            .iter()
            .filter(|(key, _)| !nullable.contains(&key.as_str()))
            .find_map(|(key, item)| {
                path = format!("(response).{key}");
                walk(item, &mut path)
            }),
        other => walk(other, &mut path),
    };
    match found {
        Some(path) => Err(FieldError::new(
            path,
            "the result is not a finite number: the inputs are too extreme to compute it in f64",
        )),
        None => Ok(()),
    }
}

/// Deserialises a request, turning serde's errors into a [`FieldError`] that names the
/// JSON path of the offending field (`(request)` for the request as a whole).
pub fn parse_request<T: DeserializeOwned>(request: Value) -> Result<T> {
    deserialize(request).map_err(|e| {
        if e.field.is_empty() {
            FieldError::new("(request)", e.message)
        } else {
            e
        }
    })
}

/// Deserialises an entry's JSON response into its type: an error names `(response)`
/// and the path of the field that is missing or of the wrong type
/// (`(response).fitted.forward.kl`), so a caller never reads a default in its place.
pub fn parse_response<T: DeserializeOwned>(response: Value) -> Result<T> {
    deserialize(response).map_err(|e| e.within("(response)"))
}

/// Deserialises `value`; an error names the JSON path of the offending field (empty for
/// the value as a whole).
fn deserialize<T: DeserializeOwned>(value: Value) -> Result<T> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        let message = err.inner().to_string();
        // serde reports a missing field at the parent; name the field itself.
        let field = match missing_field_name(&message) {
            Some(missing) if path == "." => missing.to_owned(),
            Some(missing) => format!("{path}.{missing}"),
            None if path == "." => String::new(),
            None => path,
        };
        FieldError::new(field, message)
    })
}

fn missing_field_name(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("missing field `")?;
    rest.split('`').next()
}

/// A field that takes either one value or a list of them (a grid of inputs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany<T> {
    /// A single value.
    One(T),
    /// Several values, one result each.
    Many(Vec<T>),
}

impl<T: Clone> OneOrMany<T> {
    /// The values as a list (one entry for [`OneOrMany::One`]).
    pub fn to_vec(&self) -> Vec<T> {
        match self {
            Self::One(v) => vec![v.clone()],
            Self::Many(v) => v.clone(),
        }
    }

    /// Whether a list was given.
    pub fn is_many(&self) -> bool {
        matches!(self, Self::Many(_))
    }
}

/// Rejects requests whose draw count exceeds [`MAX_DRAWS`], naming `field`.
pub fn check_draws(field: &str, draws: u64) -> Result<()> {
    if draws > MAX_DRAWS {
        Err(FieldError::new(
            field,
            format!("asks for {draws} random draws; the limit per request is {MAX_DRAWS}"),
        ))
    } else {
        Ok(())
    }
}

/// Rejects requests whose estimated work exceeds [`MAX_WORK`] units, naming `field`, the
/// field that drives the cost.
pub fn check_work(field: &str, units: u64) -> Result<()> {
    if units > MAX_WORK {
        Err(FieldError::new(
            field,
            format!(
                "asks for about {units} units of work (draws, cells or terms); the budget per \
                 request is {MAX_WORK}, about a second of CPU"
            ),
        ))
    } else {
        Ok(())
    }
}

/// The work of `draws` categorical draws over `actions` actions: each draw scans the
/// cumulative probabilities, so it costs `1 + floor(actions / 10)` units (the
/// calibration in [`MAX_WORK`]; under 10 actions a draw is one unit, as in
/// [`MAX_DRAWS`]).
pub fn categorical_work(draws: u64, actions: usize) -> u64 {
    draws.saturating_mul(1 + units(actions) / 10)
}

/// The product of `factors`, saturating at `u64::MAX`: a cost that cannot overflow.
pub fn work(factors: &[u64]) -> u64 {
    factors.iter().fold(1u64, |acc, &f| acc.saturating_mul(f))
}

/// `usize` to `u64` for a cost, saturating (lossless on every supported target).
pub fn units(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_entry_has_a_unique_name() {
        let mut names: Vec<&str> = ENTRIES.iter().map(|e| e.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ENTRIES.len());
    }

    #[test]
    fn every_entry_has_an_example_that_computes() {
        for entry in ENTRIES {
            let request = examples::example(entry.name)
                .unwrap_or_else(|| panic!("no example for {}", entry.name));
            let response = compute(entry.name, request)
                .unwrap_or_else(|e| panic!("example of {} fails: {e}", entry.name));
            assert!(response.is_object(), "{}", entry.name);
        }
    }

    /// See [`super::reserialise`].
    pub(super) fn reserialise_entry<E: Entry>(request: Value) -> Result<(Value, Value)> {
        let typed: E::Request = parse_request(request)?;
        let request = serde_json::to_value(&typed).expect("a request serialises");
        let response = run::<E>(request.clone())?;
        let typed: E::Response = parse_response(response)?;
        let response = serde_json::to_value(&typed).expect("a response serialises");
        Ok((request, response))
    }

    /// Requests of other shapes than the examples': scalar and list variants of the
    /// untagged fields, optional parts present.
    fn more_requests() -> Vec<(&'static str, Value)> {
        vec![
            (
                "bandit-gradient",
                json!({"p": 0.3, "q": [0.75, 0.35], "estimates": 0}),
            ),
            (
                "bandit-gradient",
                json!({"logits": [0.1, 0.5, -0.2], "q": [1.0, 0.0, 0.5], "estimates": 0}),
            ),
            (
                "clip-surrogate",
                json!({"ratio": [0.5, 1.0, 1.5], "advantage": -1.0, "eps_low": 0.2,
                "eps_high": 0.28, "dual_clip": 3.0, "p_old": [0.01, 0.5]}),
            ),
            (
                "policy-loss",
                json!({"logp": [[-1.0, -1.2], [-0.5]], "old_logp": [[-1.1, -1.0], [-0.4]],
                "ref_logp": [[-1.0, -1.0], [-0.5]], "advantages": [[1.0, 0.5], [-1.0]],
                "beta": 0.1, "reduction": "dr_grpo", "constant": 4.0}),
            ),
            (
                "policy-loss",
                json!({"logp": [[-1.0, -1.2, 3.0], [-0.5, 9.0, 9.0]],
                "old_logp": [[-1.1, -1.0, 3.0], [-0.4, 9.0, 9.0]],
                "completion_mask": [[1, 1, 0], [1, 0, 0]], "advantages": [1.0, -1.0],
                "loss_type": "grpo", "entropies": [[0.5, 0.4, 7.0], [0.2, 7.0, 7.0]],
                "entropy_coef": 0.01, "gradient_accumulation_steps": 2}),
            ),
            (
                "policy-loss",
                json!({"logp": [[-1.0, -1.2], [-0.5]], "old_logp": [[-1.1, -1.0], [-0.4]],
                "advantages": [1.0, -1.0], "loss_type": "vespo", "vespo_k_pos": 1.5,
                "num_items_in_batch": 6, "num_processes": 2}),
            ),
            (
                "importance-sampling-draws",
                json!({"mu": [0.2, 0.8], "pi": [0.6, 0.4], "values": [0.75, 0.35],
                "draws": [[0, 1, 1], [1, 1, 0]], "self_normalized": true}),
            ),
            (
                "masked-whiten",
                json!({"values": [[1.0, 2.0, 4.0]], "mask": [[1, 1, 0]], "shift_mean": false}),
            ),
            (
                "mixed-group",
                json!({"p": 0.25, "group_size": 8, "mixed_groups": 3, "replicates": 50, "seed": 2}),
            ),
            ("mixed-group", json!({"p": [0.0], "group_size": [1, 4]})),
            (
                "pass-at-k",
                json!({"n": [10, 12], "c": [2, 0], "k": 3, "resamples": 50}),
            ),
            (
                "shaping",
                json!({"rewards": [0.0, 0.0, 0.0, 0.0, 1.0], "potentials": [0.0, 0.3, 0.3, 0.3, 0.3, 0.0],
                "gamma": 0.9, "bonus": 0.3, "bonus_mask": [true, false, false, true, false],
                "compare_horizon": 8}),
            ),
            (
                "gae",
                json!({"rewards": [0.0, 0.0], "values": [0.4, 0.5], "truncated": true, "bootstrap_value": 0.6}),
            ),
            (
                "distill",
                json!({"teacher_logits": [0.0, 1.0, -1.0, 0.5], "fit": true}),
            ),
            (
                "dpo",
                json!({"reference": [0.5, 0.3, 0.2], "policy": [0.4, 0.4, 0.2], "beta": 0.5,
                "pairs": [[0, 1], [2, 1]], "label_smoothing": 0.1, "rewards": [1.0, 0.0, 0.5], "fit": {}}),
            ),
            (
                "rollout-budget",
                json!({"tasks_per_batch": 8, "group_size": 2, "iterations": 3, "mean_tokens": 10.0}),
            ),
            (
                "kl-regularized-optimum",
                json!({"reference": [0.5, 0.5], "rewards": [0.0, 1.0], "beta": 1.0,
                "frontier": {"beta_min": 0.1, "beta_max": 10.0, "points": 3}}),
            ),
        ]
    }

    #[test]
    fn requests_and_responses_read_back_from_their_json() {
        let examples = ENTRIES
            .iter()
            .filter_map(|e| Some((e.name, examples::example(e.name)?)));
        for (name, request) in examples.chain(more_requests()) {
            let expected = compute(name, request.clone()).unwrap_or_else(|e| panic!("{name}: {e}"));
            let (written, response) =
                reserialise(name, request).unwrap_or_else(|e| panic!("{name}: {e}"));
            // The written request asks for the same thing, and reads back as itself.
            assert_eq!(compute(name, written.clone()).unwrap(), expected, "{name}");
            assert_eq!(
                reserialise(name, written.clone()).unwrap().0,
                written,
                "{name}"
            );
            // The typed response writes the same JSON as the entry.
            assert_eq!(response, expected, "{name}");
        }
    }

    #[test]
    fn a_response_that_does_not_fit_its_type_names_the_field() {
        let err = parse_response::<distill::Response>(json!({"teacher": [1.0], "fitted": {
            "forward": {"mean": 0.0, "width": 1.0, "probs": [1.0], "kl": 0.0},
            "reverse": {"mean": 0.0, "width": 1.0, "probs": [1.0]}
        }}))
        .unwrap_err();
        assert_eq!(err.field, "(response).fitted.reverse.kl");
        let err = parse_response::<binomial_se::Response>(json!({"se": "x"})).unwrap_err();
        assert_eq!(err.field, "(response).se");
        let err = parse_response::<binomial_se::Response>(json!([1.0])).unwrap_err();
        assert_eq!(err.field, "(response)");
        let err = parse_request::<binomial_se::Request>(json!([1.0])).unwrap_err();
        assert_eq!(err.field, "(request)");
    }

    #[test]
    fn request_defaults_are_the_serde_defaults() {
        fn same<T: Serialize + DeserializeOwned>(minimal: Value, default: &T) {
            let parsed: T = parse_request(minimal).unwrap();
            assert_eq!(
                serde_json::to_value(parsed).unwrap(),
                serde_json::to_value(default).unwrap()
            );
        }
        same(json!({"q": []}), &bandit_gradient::Request::default());
        same(
            json!({"n": [], "c": [], "k": 0}),
            &pass_at_k::Request::default(),
        );
        same(
            json!({"p": [], "group_size": []}),
            &mixed_group::Request::default(),
        );
        same(
            json!({"reference": [], "beta": 0.0}),
            &dpo::Request::default(),
        );
        same(json!({}), &dpo::FitRequest::default());
        same(
            json!({"logp": [], "old_logp": [], "advantages": []}),
            &policy_loss::Request::default(),
        );
    }

    #[test]
    fn gpu_entries_are_entries() {
        for name in GPU_ENTRIES {
            assert!(ENTRIES.iter().any(|e| e.name == *name), "{name}");
        }
    }

    #[test]
    fn unknown_name_lists_the_known_ones() {
        let err = compute("no-such-thing", json!({})).unwrap_err();
        assert_eq!(err.field, "name");
        assert!(err.message.contains("bandit-gradient"));
    }
}
