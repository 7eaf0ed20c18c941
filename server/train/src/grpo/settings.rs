//! The config's GRPO knobs as the core's and the loss's option types.

use arlbook_core::math::advantage::{AdvantageOptions, Baseline, Scale};

use crate::config::{AdvantageScale, TrainConfig};
use crate::loss::SurrogateSettings;

/// Advantage options from the config.
pub fn advantage_options(config: &TrainConfig) -> AdvantageOptions {
    AdvantageOptions {
        baseline: if config.grpo.leave_one_out {
            Baseline::LeaveOneOut
        } else {
            Baseline::Mean
        },
        scale: match config.grpo.advantage_scale {
            AdvantageScale::Group => Scale::Group,
            AdvantageScale::Batch => Scale::Batch,
            AdvantageScale::None => Scale::None,
        },
        std: config.grpo.std_kind,
        eps: 1e-6,
        ..AdvantageOptions::default()
    }
}

/// The surrogate's clip widths and KL penalty from the config.
pub fn surrogate_settings(config: &TrainConfig) -> SurrogateSettings {
    SurrogateSettings {
        eps_low: config.grpo.eps_low,
        eps_high: config.grpo.eps_high,
        dual_clip: config.grpo.dual_clip,
        beta: config.grpo.kl_beta,
        kl_estimator: config.grpo.kl_estimator,
    }
}
