//! Measuring a policy: greedy [`validation`] episodes, the SFT [`probe`] (failures by
//! cause, teacher-forced accuracy by action part), checkpoint [`eval`]uation with
//! paired, clustered intervals, the recovery diagnostic's forced wrong first patch
//! ([`opening`]) and a picture of a run ([`plot`]).

pub mod eval;
pub mod opening;
pub mod plot;
pub mod probe;
pub mod validation;
