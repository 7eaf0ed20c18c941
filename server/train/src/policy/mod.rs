//! The policy and its generation, which the learner and the rollout workers share: the
//! transformer ([`model`]) and its hand-written CPU passes ([`fused`]), token sampling
//! with recorded behaviour log-probabilities ([`sampling`]), the model as a batched
//! generator ([`generate`], with [`generate::roll_out`], a batch of episodes to their
//! ends) and the lockstep episode driver ([`rollout`]).

pub mod fused;
pub mod generate;
pub mod model;
pub mod rollout;
pub mod rotary;
pub mod sampling;
