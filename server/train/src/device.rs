//! Choosing where the trainer runs: burn's wgpu backend on a hardware GPU, burn's CPU
//! backend (flex) otherwise.

use anyhow::{Result, bail};
use arlbook_core::gpu::GpuContext;
use burn::prelude::*;
use burn::tensor::DeviceKind;

use super::config::BackendChoice;

/// The chosen device (without autodiff) and a human name for logs.
pub fn choose(choice: BackendChoice) -> Result<(Device, String)> {
    match choice {
        BackendChoice::Cpu => Ok((Device::flex(), "cpu (burn flex)".to_owned())),
        BackendChoice::Gpu => match GpuContext::new_blocking() {
            Ok(ctx) => Ok((
                Device::wgpu(DeviceKind::DefaultDevice),
                format!("gpu (burn wgpu on {})", ctx.adapter_name()),
            )),
            Err(e) => bail!("backend: gpu was requested but no GPU adapter was found ({e})"),
        },
        BackendChoice::Auto => match GpuContext::new_blocking() {
            Ok(ctx) if !ctx.is_software() => Ok((
                Device::wgpu(DeviceKind::DefaultDevice),
                format!("gpu (burn wgpu on {})", ctx.adapter_name()),
            )),
            _ => Ok((Device::flex(), "cpu (burn flex)".to_owned())),
        },
    }
}
