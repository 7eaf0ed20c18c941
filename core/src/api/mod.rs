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
//! - Work is bounded: each sampling entry caps its draw count ([`MAX_DRAWS`]), so a
//!   request cannot occupy a server for minutes.
//! - Sampling entries take a `seed` and are deterministic for it.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{FieldError, Result};

pub mod examples;
// One module per entry; each adds itself to `registry!` below.
pub mod bandit_gradient;
pub mod binomial_se;
pub mod clip_surrogate;
pub mod distill;
pub mod dpo;
pub mod gae;
#[cfg(feature = "gpu")]
pub mod gpu;

/// The entries that have a GPU kernel: with feature `gpu`, [`gpu`] runs them through
/// WGSL; every other entry always computes on the CPU. Known without the feature, so a
/// caller can say where a request will run before it has a device.
pub const GPU_ENTRIES: &[&str] = &[
    bandit_gradient::BanditGradient::NAME,
    importance_sampling::ImportanceSampling::NAME,
    clip_surrogate::ClipSurrogate::NAME,
    group_advantages::GroupAdvantagesEntry::NAME,
    policy_loss::PolicyLossEntry::NAME,
    mixed_group::MixedGroup::NAME,
    lag_filter::LagFilter::NAME,
    kl_estimators::KlEstimators::NAME,
];
pub mod group_advantages;
pub mod importance_sampling;
pub mod kl;
pub mod kl_estimators;
pub mod kl_regularized_optimum;
pub mod lag_filter;
pub mod mixed_group;
pub mod pass_at_k;
pub mod policy_loss;
pub mod rollout_budget;
pub mod shaping;

/// The most random draws one request may ask for (samples × replicates, summed over
/// the draws each replicate makes). About a second of CPU time.
pub const MAX_DRAWS: u64 = 50_000_000;

/// One named computation of the API.
pub trait Entry {
    /// The name used on the command line and in the URL (`bandit-gradient`).
    const NAME: &'static str;
    /// One line saying what it computes (shown by `arlbook compute --list`).
    const SUMMARY: &'static str;
    /// The request, deserialised with unknown fields rejected.
    type Request: DeserializeOwned;
    /// The response.
    type Response: Serialize;
    /// Validates the request and computes the response on the CPU (the reference).
    fn compute(request: &Self::Request) -> Result<Self::Response>;
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
    };
}

registry! {
    bandit_gradient::BanditGradient,
    importance_sampling::ImportanceSampling,
    clip_surrogate::ClipSurrogate,
    group_advantages::GroupAdvantagesEntry,
    policy_loss::PolicyLossEntry,
    kl::Kl,
    gae::GaeEntry,
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
}

fn unknown_name(name: &str) -> FieldError {
    let known: Vec<&str> = ENTRIES.iter().map(|e| e.name).collect();
    FieldError::new(
        "name",
        format!("unknown computation `{name}`; known: {}", known.join(", ")),
    )
}

/// Deserialises, computes and serialises one entry.
pub fn run<E: Entry>(request: Value) -> Result<Value> {
    let request: E::Request = parse_request(request)?;
    let response = E::compute(&request)?;
    serde_json::to_value(&response)
        .map_err(|e| FieldError::new("(response)", format!("could not serialise: {e}")))
}

/// Deserialises a request, turning serde's errors into a [`FieldError`] that names the
/// JSON path of the offending field.
pub fn parse_request<T: DeserializeOwned>(request: Value) -> Result<T> {
    serde_path_to_error::deserialize(request).map_err(|err| {
        let path = err.path().to_string();
        let message = err.inner().to_string();
        // serde reports a missing field at the parent; name the field itself.
        let field = match missing_field_name(&message) {
            Some(missing) if path == "." => missing.to_owned(),
            Some(missing) => format!("{path}.{missing}"),
            None if path == "." => "(request)".to_owned(),
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

    #[test]
    fn unknown_name_lists_the_known_ones() {
        let err = compute("no-such-thing", json!({})).unwrap_err();
        assert_eq!(err.field, "name");
        assert!(err.message.contains("bandit-gradient"));
    }
}
