//! GRPO on a toy sequence task with a tabular policy: small enough to train in the page,
//! exact enough to check against finite differences, and built so that the loss
//! reductions' length bias, Clip-Higher and the KL penalty each show.
//!
//! ## The task
//! Tokens are `0..V`; token 0 ([`END`]) ends a response and counts as one of its
//! tokens. A response `y = (y_0, .., y_{n-1})` stops at the end token or at the cap `L`
//! (then it has no end token). The reward is verifiable:
//!
//! ```text
//! r(y) = 1{target occurs in a row among the tokens before END} - lambda * n / L
//! ```
//!
//! The default target is `[2, 3]` over `V = 6`, `L = 8`, with `lambda = 0`.
//!
//! ## The policy
//! A table of logits per state `(position t, previous token)`, the start state using
//! the end token's index ([`START`]):
//!
//! ```text
//! pi_z(v | t, prev) = softmax(z[t][prev])_v
//! d log pi_z(y_k | s_k) / d z[s][j] = 1{s = s_k} (1{j = y_k} - pi_z(j | s))
//! ```
//!
//! so the gradient of any loss written in the sampled tokens' log-probabilities is
//! exact and costs `V` per token. The initial table, which is also the frozen KL
//! reference, has the end token at `end_logit`, one favoured token at
//! `favoured_logit` and every other logit at 0 in every row ([`InitialTable`]); with
//! `favoured_logit = 3` over `V = 6` the favoured token starts at 0.80 and the target
//! tokens at 0.04 each (a peaked "pretrained" start on which the target is rare).
//!
//! ## One training step
//! 1. Sample `B` groups of `G` responses from the current table `pi_old`.
//! 2. Score them, and compute group advantages with
//!    [`crate::math::advantage::group_advantages`] (mean or leave-one-out baseline;
//!    group, batch or no std scaling; population std, `eps = 1e-6`). With dynamic
//!    sampling (DAPO, Yu et al. 2025, section 3.2) the groups whose rewards are all
//!    equal are dropped (the batch is not refilled).
//! 3. For `E` epochs: the loss of [`crate::math::policy_loss`] on the kept responses
//!    (PPO's token-level clipped surrogate with the decoupled widths `eps_low`,
//!    `eps_high`, the chosen reduction of [`crate::math::reduction`] with the constant
//!    `C = L` for `dr_grpo` and `seq-mean-token-sum-norm`, and `beta` times a k1 / k2 /
//!    k3 estimate of `KL(pi || pi_ref)`), its gradient `d loss / d logp` chained to the
//!    table as above, and one optimiser step ([`optimizer`]: SGD, or Adam whose moments
//!    live for the whole run). The ratio is against `pi_old`, the table at the step's
//!    start.
//!
//! Each step records, from its rollouts before the update ([`Curves`]): mean reward,
//! pass rate, mean per-token entropy and exact `KL(pi || pi_ref)` at the sampled
//! tokens' states, mean length overall and of passing and failing responses, the
//! epochs' mean clip fractions (low, high), the fraction of groups that are not all
//! equal, and the tokens sampled.
//!
//! Randomness: one [`crate::rng::RandomStream`] per run, one categorical draw per
//! sampled token in a fixed order ([`train`]), so a run is a pure function of its
//! settings, seed and stream. Everything runs on the CPU (no WebGPU kernel: a run is
//! sequential in its steps, and one is a few milliseconds); no threads, clocks or files.
//!
//! ## What the toy shows
//! Measured over seeds by `core/tests/grpo_toy_claims.rs` (the numbers are its seeds'
//! means; every run there is a default request plus the settings named):
//! - **Length bias of the per-sequence mean** (Liu et al. 2025, Dr. GRPO, section
//!   3.1). Under `seq-mean-token-mean` each token of response `i` weighs
//!   `1 / (N L_i)`: a short passing response gets the larger push per token, a long
//!   failing one the smaller penalty per token. From the uniform start (defaults, 8
//!   seeds) the mean length over steps 150..200 is 4.0 tokens under
//!   `seq-mean-token-mean` against 6.6 under `token-mean` (shorter in every seed), and
//!   the failing responses are longer, 4.81 against 4.53 tokens over the run (longer
//!   in every seed). `dr_grpo` behaves like `token-mean` here. The failing half is
//!   small because the task is soon solved and failures become rare.
//! - **Clip-Higher** (Yu et al. 2025, DAPO, section 3.1). The ratio cap `1 + eps_high`
//!   limits how fast a token can grow in one step, and a rare token reaches it first.
//!   From the peaked start (`favoured_logit = 3`, 8 epochs per batch so that the clip
//!   binds, 16 seeds) with `eps_high = eps_low = 0.2` the target is found later (pass
//!   rate over steps 0..50: 0.44 against 0.66 with `eps_high = 0.4`) and the entropy
//!   ends lower (0.36 against 0.60 nats over steps 100..200; `eps_high = 0.28` gives
//!   0.49). What the toy does not show: from the uniform start, where the target is
//!   not rare, only the pass-rate gain remains; and with Adam, which moves every logit
//!   of the table at about the same rate whatever its probability, the entropy effect
//!   disappears and the pass-rate gain shrinks to a few points.
//! - **The KL penalty**. With `k3` (defaults, 8 seeds) the exact KL to the reference
//!   over steps 150..200 is 0.76, 0.47 and 0.36 nats for `beta` = 0, 0.05 and 0.2,
//!   falling in every seed; the pass rate pays for it.
//!
//! `k3`'s slope `1 - exp(ref_logp - logp)` grows without bound as a token falls below
//! the reference; with SGD at a large learning rate such a token can overshoot, and a
//! run whose table leaves `f64` (or [`table::MAX_LOGIT`]) stops with an error naming
//! `learning_rate`.

pub mod optimizer;
pub mod table;
pub mod task;
pub mod train;
pub mod update;

pub use optimizer::{Optimizer, OptimizerKind};
pub use table::{END, LogitTable, START};
pub use task::Task;
pub use train::{Curves, InitialTable, Run, ToyRun, ToySettings, build_batch, train};
pub use update::{Batch, UpdateSettings, UpdateStats, loss_and_gradient, update};

#[cfg(test)]
mod tests;
