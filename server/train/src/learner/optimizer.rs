//! The optimizer: AdamW, a warm-up then constant or cosine learning rate, and clipping
//! by the **global** gradient norm (burn's `GradientClippingConfig::Norm` clips each
//! parameter tensor on its own, which is not what PyTorch's `clip_grad_norm_`, TRL or
//! verl do).

use burn::module::{ModuleVisitor, Param};
use burn::optim::{AdamWConfig, GradientsParams, ModuleOptimizer};
use burn::prelude::*;

use crate::config::LrSchedule;

/// AdamW with `beta = (0.9, 0.95)`, `eps = 1e-8`, weight decay 0.01.
pub fn adamw() -> ModuleOptimizer {
    AdamWConfig::new()
        .with_beta_1(0.9)
        .with_beta_2(0.95)
        .with_epsilon(1e-8)
        .with_weight_decay(0.01)
        .init()
}

/// The learning rate at optimizer step `step` (0-based) of `total`: linear warm-up
/// over `warmup` steps to `peak`, then constant or cosine decay to `peak / 10`.
pub fn learning_rate(
    peak: f64,
    step: usize,
    warmup: usize,
    total: usize,
    schedule: LrSchedule,
) -> f64 {
    if step < warmup {
        return peak * (step + 1) as f64 / warmup as f64;
    }
    match schedule {
        LrSchedule::Constant => peak,
        LrSchedule::Cosine => {
            let span = total.saturating_sub(warmup).max(1) as f64;
            let progress = ((step - warmup) as f64 / span).min(1.0);
            let floor = peak / 10.0;
            floor + (peak - floor) * 0.5 * (1.0 + (std::f64::consts::PI * progress).cos())
        }
    }
}

struct SquaredNorm<'a> {
    grads: &'a GradientsParams,
    parts: Vec<Tensor<1>>,
}

impl ModuleVisitor for SquaredNorm<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(grad) = self.grads.get::<D>(param.id) {
            self.parts.push(grad.square().sum());
        }
    }
}

struct Scale<'a> {
    grads: &'a mut GradientsParams,
    factor: f64,
}

impl ModuleVisitor for Scale<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(grad) = self.grads.remove::<D>(param.id) {
            self.grads
                .register::<D>(param.id, grad.mul_scalar(self.factor));
        }
    }
}

/// The global L2 norm of `grads` over `model`'s parameters.
///
/// # Errors
/// When the norm cannot be read back from the device.
pub fn global_norm<M: Module>(model: &M, grads: &GradientsParams) -> anyhow::Result<f64> {
    let mut visitor = SquaredNorm {
        grads,
        parts: Vec::new(),
    };
    model.visit(&mut visitor);
    if visitor.parts.is_empty() {
        return Ok(0.0);
    }
    let norm = Tensor::cat(visitor.parts, 0)
        .sum()
        .sqrt()
        .try_into_scalar::<f32>()
        .map_err(|e| anyhow::anyhow!("reading the gradient norm back from the device: {e:?}"))?;
    Ok(f64::from(norm))
}

/// Scales `grads` so their global norm is at most `max_norm` (0 = no clipping) and
/// returns the norm before clipping.
///
/// # Errors
/// When the norm cannot be read back from the device.
pub fn clip_global_norm<M: Module>(
    model: &M,
    grads: &mut GradientsParams,
    max_norm: f64,
) -> anyhow::Result<f64> {
    let norm = global_norm(model, grads)?;
    if max_norm > 0.0 && norm > max_norm {
        model.visit(&mut Scale {
            grads,
            factor: max_norm / (norm + 1e-6),
        });
    }
    Ok(norm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warm_up_rises_linearly_and_cosine_ends_at_a_tenth() {
        assert!((learning_rate(1.0, 0, 4, 100, LrSchedule::Constant) - 0.25).abs() < 1e-12);
        assert!((learning_rate(1.0, 3, 4, 100, LrSchedule::Constant) - 1.0).abs() < 1e-12);
        assert!((learning_rate(1.0, 50, 4, 100, LrSchedule::Constant) - 1.0).abs() < 1e-12);
        assert!((learning_rate(1.0, 4, 4, 104, LrSchedule::Cosine) - 1.0).abs() < 1e-12);
        assert!((learning_rate(1.0, 104, 4, 104, LrSchedule::Cosine) - 0.1).abs() < 1e-12);
        assert!((learning_rate(1.0, 54, 4, 104, LrSchedule::Cosine) - 0.55).abs() < 1e-12);
    }
}
