//! Microbatches on every core. burn's autodiff runs one backward pass at a time per
//! graph, and a graph is everything connected to the same parameter tensors: two threads
//! backpropagating through one model share a graph and take turns. A *replica*
//! (`model.valid().train()`) holds the same weights (no copy: the same buffers) under
//! new autodiff leaves, so its graph is its own, and each thread runs its microbatches'
//! forward and backward passes on its replica while the others run theirs. The
//! parameter ids are the model's, so each replica's gradients are the model's
//! gradients.
//!
//! Sums do not depend on the split: every microbatch's gradients come back on their
//! own, and are added in microbatch order, `((g_0 + g_1) + g_2) + ...`, as one thread
//! adding them one after another would. So a run gives the same numbers on one core and
//! on many (checked in this module's tests).
//!
//! On a GPU the device's queue already runs a microbatch in parallel, so one thread
//! drives the model itself ([`crate::policy::generate::rollout_threads`] decides).

use anyhow::Result;
use burn::module::Module;
use burn::optim::{GradientsAccumulator, GradientsParams};

use crate::policy::model::PolicyModel;

/// Runs `work` on every item of `microbatches` (each returning its loss's gradients with
/// respect to the model's parameters, and a value) on `threads` threads, and returns the
/// gradients summed in microbatch order and the values in that order. `work` gets the
/// model to differentiate: `model` itself with one thread, a replica otherwise. (The
/// fused CPU path, `crate::policy::fused`, builds no graph through the model and reads its
/// weights once per step instead; the replicas then only carry the parameter ids.)
///
/// Each thread takes the next microbatch nobody has taken yet, in microbatch order
/// (`arlbook_core::parallel::try_pulled`), so callers whose microbatches differ in
/// cost list the costliest first and the threads finish close together.
///
/// # Errors
/// The first error of `work`, in microbatch order.
pub fn accumulate_in_parallel<T: Sync, R: Send>(
    model: &PolicyModel,
    microbatches: &[T],
    threads: usize,
    work: impl Fn(&PolicyModel, &T) -> Result<(GradientsParams, R)> + Sync,
) -> Result<(GradientsParams, Vec<R>)> {
    let threads = threads.clamp(1, microbatches.len().max(1));
    let mut accumulator = GradientsAccumulator::<PolicyModel>::new();
    let mut values = Vec::with_capacity(microbatches.len());
    if threads == 1 {
        for item in microbatches {
            let (grads, value) = work(model, item)?;
            accumulator.accumulate(model, grads);
            values.push(value);
        }
        return Ok((accumulator.grads(), values));
    }
    let results = arlbook_core::parallel::try_pulled(
        microbatches,
        threads,
        || model.valid().train(),
        |replica, item| work(replica, item),
    )?;
    for (grads, value) in results {
        accumulator.accumulate(model, grads);
        values.push(value);
    }
    Ok((accumulator.grads(), values))
}

#[cfg(test)]
pub(crate) mod tests {
    use burn::module::{ModuleVisitor, Param};
    use burn::prelude::*;

    use super::*;
    use crate::config::ModelConfig;
    use crate::learner::loss::token_logprobs;
    use crate::run::trainer::vocab;

    /// Every parameter's gradient, in the model's visiting order (for the tests that
    /// compare two ways of computing them; `crate::policy::fused`'s too).
    pub(crate) fn collect(model: &PolicyModel, grads: &GradientsParams) -> Vec<Vec<f32>> {
        struct Collect<'a> {
            grads: &'a GradientsParams,
            found: Vec<Vec<f32>>,
        }

        impl ModuleVisitor for Collect<'_> {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
                let grad = self
                    .grads
                    .get::<D>(param.id)
                    .expect("a gradient per parameter");
                self.found
                    .push(grad.try_into_vec_as::<f32>().expect("read back"));
            }
        }

        let mut visitor = Collect {
            grads,
            found: Vec::new(),
        };
        model.visit(&mut visitor);
        visitor.found
    }

    #[test]
    fn gradients_summed_on_many_threads_equal_one_thread_s_bit_for_bit() {
        let device = Device::flex().autodiff();
        device.seed(11);
        let config = ModelConfig {
            layers: 1,
            width: 16,
            heads: 2,
            context: 32,
            ..ModelConfig::default()
        };
        let model = PolicyModel::new(&config, vocab(), &device);
        let v = vocab() as i32;
        // Five microbatches of different shapes (rows x positions).
        let microbatches: Vec<(usize, usize, i32)> =
            vec![(2, 9, 1), (3, 5, 2), (1, 12, 3), (2, 7, 4), (3, 3, 5)];
        let work = |m: &PolicyModel, &(n, t, salt): &(usize, usize, i32)| {
            let ids: Vec<i32> = (0..n * (t + 1))
                .map(|i| 6 + (i as i32 * 37 + salt * 101) % (v - 6))
                .collect();
            let rows: Vec<&[i32]> = ids.chunks(t + 1).collect();
            let inputs: Vec<i32> = rows.iter().flat_map(|r| r[..t].to_vec()).collect();
            let targets: Vec<i32> = rows.iter().flat_map(|r| r[1..].to_vec()).collect();
            let logits = m.forward(Tensor::from_data(TensorData::new(inputs, [n, t]), &device));
            let logp = token_logprobs(
                logits,
                Tensor::from_data(TensorData::new(targets, [n, t]), &device),
                1.0,
                None,
            );
            let loss = logp.sum().neg();
            let value = loss.clone().try_into_scalar::<f32>().expect("loss");
            Ok((GradientsParams::from_grads(loss.backward(), m), value))
        };
        let (one, losses_one) =
            accumulate_in_parallel(&model, &microbatches, 1, work).expect("one thread");
        let expected = collect(&model, &one);
        assert!(expected.iter().flatten().any(|&g| g != 0.0));
        for threads in [2, 3, 8] {
            let (many, losses) =
                accumulate_in_parallel(&model, &microbatches, threads, work).expect("threads");
            assert_eq!(losses, losses_one, "{threads} threads: losses in order");
            assert_eq!(
                collect(&model, &many),
                expected,
                "{threads} threads: gradients"
            );
        }
    }

    #[test]
    fn the_first_error_in_microbatch_order_comes_back() {
        let device = Device::flex().autodiff();
        let config = ModelConfig {
            layers: 1,
            width: 8,
            heads: 2,
            context: 8,
            ..ModelConfig::default()
        };
        let model = PolicyModel::new(&config, vocab(), &device);
        let items = [0usize, 1, 2, 3];
        let result = accumulate_in_parallel(
            &model,
            &items,
            2,
            |_, &i| -> Result<(GradientsParams, ())> { anyhow::bail!("microbatch {i} failed") },
        );
        let error = result.expect_err("an error").to_string();
        assert_eq!(error, "microbatch 0 failed");
    }
}
