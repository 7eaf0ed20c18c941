//! The device, the pipeline cache and the buffer pool.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use arlbook_shaders::{Binding, Kernel};

use super::runner::{BufferPool, Timings};

/// Why the GPU path could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GpuError {
    /// No adapter (no GPU, no driver, no WebGPU in this browser).
    #[error("no GPU adapter found: {0}")]
    NoAdapter(String),
    /// The adapter would not give a device.
    #[error("could not open the GPU device: {0}")]
    Device(String),
    /// Mapping the result buffer failed (device lost, out of memory).
    #[error("reading the GPU result back failed: {0}")]
    Readback(String),
    /// The request does not fit the kernel or the device limits.
    #[error("too large for the GPU kernel: {0}")]
    TooLarge(String),
    /// The request needs a rule the kernel does not implement.
    #[error("not computed by the GPU kernel: {0}")]
    Unsupported(String),
}

/// The compiled pipelines of one kernel file, sharing one bind group layout.
pub(crate) struct Pipelines {
    pub(crate) layout: wgpu::BindGroupLayout,
    pub(crate) entries: Vec<wgpu::ComputePipeline>,
}

/// A wgpu device with its queue, compiled pipelines and reusable buffers.
pub struct GpuContext {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    pipelines: Mutex<HashMap<&'static str, Arc<Pipelines>>>,
    pub(crate) pool: Mutex<BufferPool>,
    pub(crate) last_timings: Mutex<Option<Timings>>,
}

impl std::fmt::Debug for GpuContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuContext")
            .field("adapter", &self.info.name)
            .field("backend", &self.info.backend)
            .finish_non_exhaustive()
    }
}

impl GpuContext {
    /// Finds an adapter (high performance preferred; `WGPU_BACKEND` and
    /// `WGPU_ADAPTER_NAME` are honoured on native) and opens a device with the adapter's
    /// own limits.
    pub async fn new() -> Result<Self, GpuError> {
        let instance =
            wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let options = wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        };
        let adapter = instance
            .request_adapter(&options)
            .await
            .map_err(|e| GpuError::NoAdapter(e.to_string()))?;
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("arlbook"),
                required_limits: adapter.limits(),
                ..Default::default()
            })
            .await
            .map_err(|e| GpuError::Device(e.to_string()))?;
        Ok(Self {
            device,
            queue,
            info: adapter.get_info(),
            pipelines: Mutex::new(HashMap::new()),
            pool: Mutex::new(BufferPool::default()),
            last_timings: Mutex::new(None),
        })
    }

    /// [`Self::new`], blocking (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new_blocking() -> Result<Self, GpuError> {
        super::block_on(Self::new())
    }

    /// The adapter's name and backend, e.g. `llvmpipe (LLVM 15.0.6, 256 bits) (Vulkan)`.
    pub fn adapter_name(&self) -> String {
        format!("{} ({:?})", self.info.name, self.info.backend)
    }

    /// Whether the adapter is a CPU implementation (lavapipe, `SwiftShader`, WARP).
    pub fn is_software(&self) -> bool {
        self.info.device_type == wgpu::DeviceType::Cpu
    }

    /// Timings of the most recent run (native only; `None` in the browser).
    pub fn last_timings(&self) -> Option<Timings> {
        *self
            .last_timings
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Largest storage buffer one binding may hold, in bytes.
    pub fn max_binding_bytes(&self) -> u64 {
        let limits = self.device.limits();
        limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size)
    }

    /// How many GPU buffers this context has allocated so far. Runs take their buffers
    /// from a pool keyed by usage and size class and give them back afterwards, so
    /// repeating a call of the same shape allocates nothing new.
    pub fn buffers_created(&self) -> u64 {
        self.pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .created
    }

    /// How many kernel files have been compiled into pipelines (each once, on first use
    /// or in [`Self::warm_up`]).
    pub fn kernels_compiled(&self) -> usize {
        self.pipelines
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Compiles every kernel now, so a later first call is not slowed by compilation.
    pub fn warm_up(&self) {
        for kernel in arlbook_shaders::KERNELS {
            self.pipelines(kernel);
        }
    }

    /// The pipelines of `kernel`, compiled on first use.
    pub(crate) fn pipelines(&self, kernel: &Kernel) -> Arc<Pipelines> {
        let mut cache = self
            .pipelines
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = cache.get(kernel.name) {
            return Arc::clone(found);
        }
        let built = Arc::new(self.build(kernel));
        cache.insert(kernel.name, Arc::clone(&built));
        built
    }

    fn build(&self, kernel: &Kernel) -> Pipelines {
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(kernel.name),
                source: wgpu::ShaderSource::Wgsl(kernel.source.into()),
            });
        let entries: Vec<wgpu::BindGroupLayoutEntry> = kernel
            .bindings
            .iter()
            .enumerate()
            .map(|(i, binding)| wgpu::BindGroupLayoutEntry {
                binding: i as u32,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: match binding {
                        Binding::Uniform => wgpu::BufferBindingType::Uniform,
                        Binding::ReadOnly => wgpu::BufferBindingType::Storage { read_only: true },
                        Binding::ReadWrite => wgpu::BufferBindingType::Storage { read_only: false },
                    },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                },
                count: None,
            })
            .collect();
        let layout = self
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some(kernel.name),
                entries: &entries,
            });
        let pipeline_layout = self
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(kernel.name),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
        let entries = kernel
            .entry_points
            .iter()
            .map(|entry| {
                self.device
                    .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                        label: Some(entry),
                        layout: Some(&pipeline_layout),
                        module: &module,
                        entry_point: Some(entry),
                        compilation_options: wgpu::PipelineCompilationOptions::default(),
                        cache: None,
                    })
            })
            .collect();
        Pipelines { layout, entries }
    }
}
