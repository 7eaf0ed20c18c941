//! The compute API on the GPU (feature `gpu`): the same names, requests and responses
//! as [`super::compute`], with the heavy part run by the WGSL kernels.
//!
//! Each entry with a kernel shares its validation and its response assembly with the
//! CPU path (the entries' `plan` / `respond` functions), so a request is rejected with
//! the same field on both backends and the response has the same shape. Entries
//! without a kernel, and requests a kernel cannot take (beyond a device limit, or a
//! result outside the `f32` range), are computed on the CPU; [`Computed::backend`] says
//! which path answered, outside the response, so the contract does not change.

use serde::Serialize;
use serde_json::Value;

use super::{
    Entry, bandit_gradient, clip_surrogate, group_advantages, importance_sampling, kl_estimators,
    lag_filter, mixed_group, parse_request, policy_loss, with_gpu_entries,
};
use crate::error::{FieldError, Result};
use crate::gpu::{self, GpuContext, GpuError};
use crate::math::convention::Convention;
use crate::math::{advantage, policy_loss as loss_math};

pub use super::GPU_ENTRIES;

/// Which path produced a response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ComputedOn {
    /// The GPU kernels.
    Gpu,
    /// The CPU reference, with the reason the GPU was not used.
    Cpu(String),
}

impl std::fmt::Display for ComputedOn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Gpu => write!(f, "gpu"),
            Self::Cpu(reason) => write!(f, "cpu ({reason})"),
        }
    }
}

/// A response and the path that computed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Computed {
    /// The entry's JSON response, the same shape as on the CPU.
    pub response: Value,
    /// Where it was computed.
    pub backend: ComputedOn,
}

fn to_value<T: Serialize>(response: &T) -> Result<Value> {
    serde_json::to_value(response)
        .map_err(|e| FieldError::new("(response)", format!("could not serialise: {e}")))
}

/// Validation errors are the request's fault; a [`GpuError`] is the device's.
type Attempt = Result<std::result::Result<Value, GpuError>>;

async fn bandit(request: Value, ctx: &GpuContext) -> Attempt {
    let request: bandit_gradient::Request = parse_request(request)?;
    let plan = bandit_gradient::plan(&request)?;
    let estimates = match plan.job {
        Some(job) => {
            match gpu::bandit::sample_estimates(
                ctx,
                &job.bandit,
                job.baseline,
                job.group_size,
                job.samples,
                job.estimates,
                job.seed,
            )
            .await
            {
                Ok(estimates) => estimates,
                Err(e) => return Ok(Err(e)),
            }
        }
        None => Vec::new(),
    };
    to_value(&bandit_gradient::respond(plan, estimates)).map(Ok)
}

async fn importance(request: Value, ctx: &GpuContext) -> Attempt {
    let request: importance_sampling::Request = parse_request(request)?;
    if request.draws.is_some() {
        return Ok(Err(GpuError::Unsupported(
            "estimates on the caller's draws have nothing to sample".to_owned(),
        )));
    }
    let plan = importance_sampling::plan(&request)?;
    match gpu::importance::sample_replicates(
        ctx,
        &plan.problem,
        plan.samples,
        plan.estimates,
        plan.seed,
    )
    .await
    {
        Ok(replicates) => to_value(&importance_sampling::respond(&plan, &replicates)).map(Ok),
        Err(e) => Ok(Err(e)),
    }
}

async fn kl(request: Value, ctx: &GpuContext) -> Attempt {
    let request: kl_estimators::Request = parse_request(request)?;
    let plan = kl_estimators::plan(&request)?;
    match gpu::kl_estimation::sample_replicates(
        ctx,
        &plan.problem,
        plan.samples,
        plan.replicates,
        plan.seed,
    )
    .await
    {
        Ok(estimates) => to_value(&kl_estimators::respond(&plan, &estimates)).map(Ok),
        Err(e) => Ok(Err(e)),
    }
}

async fn clip(request: Value, ctx: &GpuContext) -> Attempt {
    let request: clip_surrogate::Request = parse_request(request)?;
    let plan = clip_surrogate::plan(&request)?;
    match gpu::clip::clipped_surrogate(ctx, &request.ratio, &plan.advantage, &plan.widths).await {
        Ok(points) => to_value(&clip_surrogate::respond(plan, &points)).map(Ok),
        Err(e) => Ok(Err(e)),
    }
}

async fn advantages(request: Value, ctx: &GpuContext) -> Attempt {
    let request: group_advantages::Request = parse_request(request)?;
    let options = group_advantages::options(&request)?;
    if group_advantages::uses_trl_pipeline(&request) {
        return Ok(Err(GpuError::Unsupported(
            "TRL's reward pipeline (reward functions, clipping, KL penalty)".into(),
        )));
    }
    advantage::validate_rewards(&request.rewards, &options)?;
    let verl_singleton = options.convention == Convention::Verl
        && request.rewards.iter_rows().any(|row| row.len() == 1);
    if verl_singleton {
        return Ok(Err(GpuError::Unsupported(
            "verl's rule for a group of one".into(),
        )));
    }
    match gpu::advantage::group_advantages(ctx, &request.rewards, &options).await {
        Ok(out) => to_value(&group_advantages::respond(out, options.convention)).map(Ok),
        Err(e) => Ok(Err(e)),
    }
}

async fn loss(request: Value, ctx: &GpuContext) -> Attempt {
    let request: policy_loss::Request = parse_request(request)?;
    if let Some(reason) = policy_loss::cpu_only(&request) {
        return Ok(Err(GpuError::Unsupported(reason.into())));
    }
    let (input, config, pg_scale) = policy_loss::inputs(&request)?;
    loss_math::validate(&input, &config)?;
    match gpu::policy_loss::policy_loss_scaled(ctx, &input, &config, pg_scale.as_ref()).await {
        Ok(out) => {
            let response = policy_loss::respond(out);
            to_value(&policy_loss::finish(&request, &config, response)?).map(Ok)
        }
        Err(e) => Ok(Err(e)),
    }
}

async fn mixed(request: Value, ctx: &GpuContext) -> Attempt {
    let request: mixed_group::Request = parse_request(request)?;
    let plan = mixed_group::plan(&request)?;
    let runs = match plan.job {
        Some(job) => {
            match gpu::sampling::simulate_replicates(
                ctx,
                job.p,
                job.group_size,
                job.mixed_groups,
                job.max_groups,
                job.replicates,
                job.seed,
            )
            .await
            {
                Ok(runs) => runs,
                Err(e) => return Ok(Err(e)),
            }
        }
        None => Vec::new(),
    };
    to_value(&mixed_group::respond(plan, &runs)).map(Ok)
}

async fn lag(request: Value, ctx: &GpuContext) -> Attempt {
    let request: lag_filter::Request = parse_request(request)?;
    let plan = lag_filter::plan(&request)?;
    match gpu::lag::simulate_pooled(ctx, &plan.config, plan.replicates, plan.seed).await {
        Ok((pooled, fractions)) => to_value(&lag_filter::respond(pooled, fractions)).map(Ok),
        Err(e) => Ok(Err(e)),
    }
}

macro_rules! kernel_dispatch {
    ($($module:ident :: $entry:ident => $kernel:ident),* $(,)?) => {
        /// Runs the kernel of the entry called `name`; `None` when it has none.
        async fn run_kernel(name: &str, request: Value, ctx: &GpuContext) -> Option<Attempt> {
            $(
                if name == <$module::$entry as Entry>::NAME {
                    return Some($kernel(request, ctx).await);
                }
            )*
            None
        }
    };
}

// The dispatch comes from the same list as `GPU_ENTRIES` (`super::with_gpu_entries`).
with_gpu_entries!(kernel_dispatch);

/// Runs the entry called `name` on the GPU where it has a kernel, else on the CPU.
///
/// Errors: the request's own [`FieldError`] (the same as on the CPU), or a device
/// failure named `backend`.
pub async fn compute_async(name: &str, request: Value, ctx: &GpuContext) -> Result<Computed> {
    let Some(attempt) = run_kernel(name, request.clone(), ctx).await else {
        return Ok(Computed {
            response: super::compute(name, request)?,
            backend: ComputedOn::Cpu(format!("`{name}` has no GPU kernel")),
        });
    };
    let attempt = attempt?;
    match attempt {
        Ok(response) => {
            // As on the CPU (`api::run`): no undocumented null for a number.
            super::check_no_null(&response, super::nullable(name))?;
            Ok(Computed {
                response,
                backend: ComputedOn::Gpu,
            })
        }
        Err(GpuError::TooLarge(reason) | GpuError::Unsupported(reason)) => Ok(Computed {
            response: super::compute(name, request)?,
            backend: ComputedOn::Cpu(reason),
        }),
        Err(e) => Err(FieldError::new("backend", e.to_string())),
    }
}

/// [`compute_async`], blocking (native only).
#[cfg(not(target_arch = "wasm32"))]
pub fn compute(name: &str, request: Value, ctx: &GpuContext) -> Result<Computed> {
    gpu::block_on(compute_async(name, request, ctx))
}
