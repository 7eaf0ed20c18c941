//! The optimisers of the logit table: plain gradient descent, or Adam with `PyTorch`'s
//! defaults.
//!
//! ```text
//! sgd    z <- z - lr g
//! adam   m <- b1 m + (1 - b1) g,   v <- b2 v + (1 - b2) g^2          (b1 = 0.9, b2 = 0.999)
//!        z <- z - lr (m / (1 - b1^n)) / (sqrt(v / (1 - b2^n)) + eps)  (eps = 1e-8, n = updates so far)
//! ```
//!
//! Source: Kingma and Ba 2015, "Adam", Algorithm 1, with the epsilon outside the square
//! root as in `torch.optim.Adam` (no weight decay, no `AMSGrad`). The moments live as
//! long as the run, as a trainer's optimiser state does: every epoch of every step is
//! one update `n`.

use serde::{Deserialize, Serialize};

/// Adam's first-moment decay.
pub const ADAM_BETA1: f64 = 0.9;
/// Adam's second-moment decay.
pub const ADAM_BETA2: f64 = 0.999;
/// Adam's epsilon, added to the square root of the second moment.
pub const ADAM_EPS: f64 = 1e-8;

/// Which optimiser updates the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerKind {
    /// Plain gradient descent, `z <- z - lr g`.
    #[default]
    Sgd,
    /// Adam with `PyTorch`'s default moments and epsilon.
    Adam,
}

/// An optimiser with its state (Adam's moments and update count).
#[derive(Debug, Clone, PartialEq)]
pub struct Optimizer {
    kind: OptimizerKind,
    learning_rate: f64,
    first: Vec<f64>,
    second: Vec<f64>,
    updates: i32,
}

impl Optimizer {
    /// A fresh optimiser for `parameters` numbers.
    pub fn new(kind: OptimizerKind, learning_rate: f64, parameters: usize) -> Self {
        let moments = match kind {
            OptimizerKind::Sgd => 0,
            OptimizerKind::Adam => parameters,
        };
        Self {
            kind,
            learning_rate,
            first: vec![0.0; moments],
            second: vec![0.0; moments],
            updates: 0,
        }
    }

    /// Which optimiser this is.
    pub fn kind(&self) -> OptimizerKind {
        self.kind
    }

    /// Updates so far.
    pub fn updates(&self) -> i32 {
        self.updates
    }

    /// One update of `parameters` against `gradient` (same length).
    pub fn step(&mut self, parameters: &mut [f64], gradient: &[f64]) {
        self.updates = self.updates.saturating_add(1);
        let lr = self.learning_rate;
        match self.kind {
            OptimizerKind::Sgd => {
                for (z, &g) in parameters.iter_mut().zip(gradient) {
                    *z -= lr * g;
                }
            }
            OptimizerKind::Adam => {
                let correction1 = 1.0 - ADAM_BETA1.powi(self.updates);
                let correction2 = 1.0 - ADAM_BETA2.powi(self.updates);
                for (((z, &g), m), v) in parameters
                    .iter_mut()
                    .zip(gradient)
                    .zip(&mut self.first)
                    .zip(&mut self.second)
                {
                    *m = ADAM_BETA1 * *m + (1.0 - ADAM_BETA1) * g;
                    *v = ADAM_BETA2 * *v + (1.0 - ADAM_BETA2) * g * g;
                    *z -= lr * (*m / correction1) / ((*v / correction2).sqrt() + ADAM_EPS);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sgd_steps_against_the_gradient() {
        let mut z = vec![1.0, -1.0];
        let mut opt = Optimizer::new(OptimizerKind::Sgd, 0.5, 2);
        opt.step(&mut z, &[2.0, -4.0]);
        assert_eq!(z, vec![0.0, 1.0]);
    }

    #[test]
    fn adam_first_step_is_the_learning_rate_times_the_sign() {
        let mut z = vec![0.0, 0.0, 0.0];
        let mut opt = Optimizer::new(OptimizerKind::Adam, 0.1, 3);
        opt.step(&mut z, &[3.0, -0.001, 0.0]);
        // m / (1 - b1) = g and v / (1 - b2) = g^2, so the step is lr g / (|g| + eps).
        assert!((z[0] + 0.1 * 3.0 / (3.0 + ADAM_EPS)).abs() < 1e-15);
        assert!((z[1] - 0.1 * 0.001 / (0.001 + ADAM_EPS)).abs() < 1e-15);
        assert_eq!(z[2], 0.0);
        assert_eq!(opt.updates(), 1);
    }

    #[test]
    fn adam_with_a_zero_gradient_from_rest_does_not_move() {
        let mut z = vec![0.3, -0.7];
        let mut opt = Optimizer::new(OptimizerKind::Adam, 1.0, 2);
        for _ in 0..5 {
            opt.step(&mut z, &[0.0, 0.0]);
        }
        assert_eq!(z, vec![0.3, -0.7]);
    }
}
