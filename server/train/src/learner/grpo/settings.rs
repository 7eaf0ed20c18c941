//! The config's GRPO knobs as the core's and the loss's option types.

use arlbook_core::math::advantage::{AdvantageOptions, Baseline, Scale};
use arlbook_core::math::convention::Convention;
use arlbook_core::math::kl::KlEstimator;
use arlbook_core::math::policy_loss::library::VERL_TOKEN_LOG_RATIO_LIMIT;

use crate::config::{AdvantageScale, TrainConfig};
use crate::learner::loss::SurrogateSettings;

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
        convention: config.grpo.convention,
    }
}

/// The surrogate's clip widths, KL penalty, convention clamps and entropy bonus from
/// the config.
pub fn surrogate_settings(config: &TrainConfig) -> SurrogateSettings {
    let verl = config.grpo.convention == Convention::Verl;
    SurrogateSettings {
        eps_low: config.grpo.eps_low,
        eps_high: config.grpo.eps_high,
        dual_clip: config.grpo.dual_clip,
        beta: config.grpo.kl_beta,
        kl_estimator: config.grpo.kl_estimator,
        kl_clamp: verl && config.grpo.kl_estimator == KlEstimator::K3,
        log_ratio_limit: if verl {
            VERL_TOKEN_LOG_RATIO_LIMIT
        } else {
            f64::INFINITY
        },
        entropy_coef: config.grpo.entropy_coef,
    }
}
