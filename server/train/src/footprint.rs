//! What a config asks of the machine, estimated before anything is allocated, so a
//! config whose settings are each in range but whose product is absurd (48 layers of
//! width 4096 at context 8192) is refused with the numbers instead of growing until the
//! machine runs out of memory.
//!
//! Parameters `P = V d + C d + L (12 d^2 + 13 d) + 2 d + d V + V` (token and position
//! embeddings, per block the fused QKV, output, 4x MLP and two layer norms, the final
//! norm and the head; `V` the vocabulary, `C` the context, `L` layers, `d` width).
//! Training memory in f32: `4 P` for weights, gradients and AdamW's two moments, `P`
//! more for a KL reference, plus one microbatch's activations,
//! `rows x C x (L (16 d + 2 h C) + 3 V)` floats (block activations kept for backward,
//! attention scores and their gradient per head, logits with their softmax and
//! gradient), `rows` the larger of `grpo.microbatch_rows` and SFT's 8 episodes. An
//! estimate, within a small factor of burn's actual use; the budget is
//! `memory_budget_mb`.

use crate::config::TrainConfig;
use crate::sft::SFT_MICROBATCH_EPISODES;
use crate::trainer::vocab;

/// The estimate for one config.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Footprint {
    /// Trainable parameters.
    pub parameters: f64,
    /// Bytes of training memory (see the module docs).
    pub training_bytes: f64,
    /// Tokens a GRPO step may generate at most: every refill round's rollouts at the
    /// context limit.
    pub tokens_per_step: f64,
}

/// The most tokens one GRPO step may ask for.
pub const MAX_TOKENS_PER_STEP: f64 = 1e9;

/// The estimate for `config`.
pub fn estimate(config: &TrainConfig) -> Footprint {
    let m = &config.model;
    let (v, c, l, d, h) = (
        vocab() as f64,
        m.context as f64,
        m.layers as f64,
        m.width as f64,
        m.heads as f64,
    );
    let parameters = v * d + c * d + l * (12.0 * d * d + 13.0 * d) + 2.0 * d + d * v + v;
    let copies = if config.grpo.kl_beta > 0.0 { 5.0 } else { 4.0 };
    let rows = config.grpo.microbatch_rows.max(SFT_MICROBATCH_EPISODES) as f64;
    let activations = rows * c * (l * (16.0 * d + 2.0 * h * c) + 3.0 * v);
    let g = &config.grpo;
    let rollouts = (g.tasks_per_batch * g.group_size) as f64 * (g.max_refill_rounds + 1) as f64;
    Footprint {
        parameters,
        training_bytes: 4.0 * (copies * parameters + activations),
        tokens_per_step: rollouts * config.harness.max_context_tokens as f64,
    }
}

/// The first budget `config` exceeds, as `(field, message)`.
pub fn over_budget(config: &TrainConfig) -> Option<(&'static str, String)> {
    let f = estimate(config);
    let budget = config.memory_budget_mb as f64 * (1 << 20) as f64;
    if f.training_bytes > budget {
        return Some((
            "model",
            format!(
                "layers x width x context ask for about {:.3e} parameters and {:.0} MB of \
                 training memory (weights, gradients, AdamW moments and one microbatch's \
                 activations), over memory_budget_mb = {}; make the model smaller or raise the budget",
                f.parameters,
                f.training_bytes / (1 << 20) as f64,
                config.memory_budget_mb
            ),
        ));
    }
    if f.tokens_per_step > MAX_TOKENS_PER_STEP {
        return Some((
            "grpo.tasks_per_batch",
            format!(
                "tasks_per_batch x group_size x (max_refill_rounds + 1) x max_context_tokens \
                 = {:.3e} tokens a step may generate, over {MAX_TOKENS_PER_STEP:.0e}",
                f.tokens_per_step
            ),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_counts_the_model_s_parameters() {
        let config = TrainConfig::default();
        let model =
            crate::model::PolicyModel::new(&config.model, vocab(), &burn::prelude::Device::flex());
        let counted = burn::module::Module::num_params(&model) as f64;
        let estimated = estimate(&config).parameters;
        assert!(
            (estimated - counted).abs() <= 0.01 * counted,
            "estimate {estimated} vs burn's count {counted}"
        );
    }

    #[test]
    fn an_absurd_product_is_refused_and_the_repository_configs_are_not() {
        let mut config = TrainConfig::default();
        config.model.layers = 48;
        config.model.width = 4096;
        config.model.heads = 32;
        config.model.context = 8192;
        config.harness.max_context_tokens = 8192;
        let (field, message) = over_budget(&config).expect("refused");
        assert_eq!(field, "model");
        assert!(message.contains("memory_budget_mb"), "{message}");
        for name in ["cpu-small", "gpu"] {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../configs/");
            let text = std::fs::read_to_string(format!("{path}{name}.toml")).unwrap();
            let config = TrainConfig::from_toml(&text).unwrap();
            let f = estimate(&config);
            assert!(
                over_budget(&config).is_none(),
                "{name}: {f:?} within {} MB",
                config.memory_budget_mb
            );
        }
    }
}
