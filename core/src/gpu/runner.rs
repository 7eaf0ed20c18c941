//! One kernel run: upload, dispatch every entry point in order, read back once.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Waker};

use arlbook_shaders::{Kernel, WORKGROUP_SIZE};

use super::context::{GpuContext, GpuError};

/// Where the time of the last run went, in seconds (native only).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Timings {
    /// Buffer writes, encoding and submission.
    pub dispatch: f64,
    /// From submission until the queue finished the work.
    pub compute: f64,
    /// Mapping the result buffer and copying it out.
    pub readback: f64,
}

/// Idle buffers kept for later runs, keyed by usage and size class.
///
/// Sizes are rounded up to a class (a power of two up to 4 KiB, then steps of an eighth
/// of the enclosing power of two), so a figure whose slider changes the batch size a
/// little reuses the same buffers instead of allocating new ones; a class wastes at
/// most an eighth of a large buffer. Idle memory is capped at [`MAX_IDLE_BYTES`].
#[derive(Default)]
pub(crate) struct BufferPool {
    free: HashMap<(u32, u64), Vec<wgpu::Buffer>>,
    idle_bytes: u64,
    /// Buffers created since the context was made (for tests of the reuse).
    pub(crate) created: u64,
}

/// The most idle pooled memory kept; buffers given back beyond it are dropped.
const MAX_IDLE_BYTES: u64 = 256 << 20;

/// The size class of a `bytes`-byte buffer, never above `limit` unless `bytes` is.
fn size_class(bytes: u64, limit: u64) -> u64 {
    let bytes = padded(bytes);
    let power = bytes.next_power_of_two();
    let class = if bytes <= 4096 {
        power
    } else {
        bytes.next_multiple_of(power / 8)
    };
    class.min(limit).max(bytes)
}

impl BufferPool {
    fn take(
        &mut self,
        device: &wgpu::Device,
        usage: wgpu::BufferUsages,
        bytes: u64,
    ) -> wgpu::Buffer {
        let limits = device.limits();
        let limit = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        let size = size_class(bytes, limit);
        if let Some(buffer) = self.free.get_mut(&(usage.bits(), size)).and_then(Vec::pop) {
            self.idle_bytes -= size;
            return buffer;
        }
        self.created += 1;
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("arlbook pooled"),
            size,
            usage,
            mapped_at_creation: false,
        })
    }

    fn give_back(&mut self, buffer: wgpu::Buffer) {
        // A few buffers per class are plenty; drop the rest so memory stays bounded.
        let size = buffer.size();
        if self.idle_bytes + size > MAX_IDLE_BYTES {
            return;
        }
        let list = self.free.entry((buffer.usage().bits(), size)).or_default();
        if list.len() < 4 {
            list.push(buffer);
            self.idle_bytes += size;
        }
    }
}

/// One storage binding of a run (bindings 1.. in order).
pub(crate) enum Slot<'a> {
    /// Uploaded before the run.
    Input(&'a [u8]),
    /// Zeroed before the run; read back after it when `read_back`.
    Output { bytes: u64, read_back: bool },
}

/// A run of one kernel: parameters, storage bindings and the dispatches in order.
pub(crate) struct Job<'a> {
    pub(crate) kernel: &'static Kernel,
    /// The uniform block as 32-bit words (f32 values by their bits).
    pub(crate) params: &'a [u32],
    pub(crate) slots: Vec<Slot<'a>>,
    /// `(entry point index, workgroups)`.
    pub(crate) dispatches: Vec<(usize, u32)>,
}

/// Workgroups for `threads` threads of [`WORKGROUP_SIZE`].
pub(crate) fn groups_for(threads: usize) -> u32 {
    threads.div_ceil(WORKGROUP_SIZE as usize) as u32
}

/// A 2D grid for `groups` workgroups: x at most 65 535 (the kernels linearise it).
fn grid(groups: u32) -> (u32, u32) {
    const MAX: u32 = 65_535;
    if groups <= MAX {
        (groups.max(1), 1)
    } else {
        (MAX, groups.div_ceil(MAX))
    }
}

/// Rounds a byte size up to a multiple of 16 and at least 16 (empty bindings are invalid).
fn padded(bytes: u64) -> u64 {
    bytes.max(16).next_multiple_of(16)
}

/// `f32` values as words for a parameter block.
pub(crate) fn bits(value: f64) -> u32 {
    (value as f32).to_bits()
}

/// Little-endian words of `bytes` (lengths are multiples of 4).
pub(crate) fn words(bytes: &[u8]) -> Vec<u32> {
    bytemuck::pod_collect_to_vec(bytes)
}

/// `f32` values of `bytes`.
pub(crate) fn floats(bytes: &[u8]) -> Vec<f32> {
    bytemuck::pod_collect_to_vec(bytes)
}

struct MapState {
    result: Option<Result<(), wgpu::BufferAsyncError>>,
    waker: Option<Waker>,
}

/// Resolves when the buffer's `map_async` callback has fired.
struct Mapped(Arc<Mutex<MapState>>);

impl Future for Mapped {
    type Output = Result<(), wgpu::BufferAsyncError>;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match state.result.take() {
            Some(result) => Poll::Ready(result),
            None => {
                state.waker = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

// `Option` so native and browser builds share the call sites (the browser has no clock).
#[cfg(not(target_arch = "wasm32"))]
#[allow(clippy::unnecessary_wraps)]
fn now() -> Option<std::time::Instant> {
    Some(std::time::Instant::now())
}

#[cfg(target_arch = "wasm32")]
fn now() -> Option<()> {
    None
}

#[cfg(not(target_arch = "wasm32"))]
fn seconds(from: Option<std::time::Instant>, to: Option<std::time::Instant>) -> f64 {
    match (from, to) {
        (Some(a), Some(b)) => (b - a).as_secs_f64(),
        _ => 0.0,
    }
}

#[cfg(target_arch = "wasm32")]
fn seconds(_: Option<()>, _: Option<()>) -> f64 {
    0.0
}

/// Waits for the queue on native targets; the browser drives callbacks itself.
fn wait(ctx: &GpuContext) -> Result<(), GpuError> {
    ctx.device
        .poll(wgpu::PollType::wait_indefinitely())
        .map(|_| ())
        .map_err(|e| GpuError::Readback(e.to_string()))
}

/// The buffers of one run, taken from the pool.
struct Submitted {
    uniform: wgpu::Buffer,
    buffers: Vec<wgpu::Buffer>,
    staging: wgpu::Buffer,
    /// `(offset in staging, bytes)` for each slot that is read back.
    read_offsets: Vec<Option<(u64, u64)>>,
}

fn check_limits(ctx: &GpuContext, job: &Job<'_>) -> Result<(), GpuError> {
    let limit = ctx.max_binding_bytes();
    for slot in &job.slots {
        let bytes = match slot {
            Slot::Input(data) => data.len() as u64,
            Slot::Output { bytes, .. } => *bytes,
        };
        if bytes > limit {
            return Err(GpuError::TooLarge(format!(
                "{} needs a {bytes}-byte buffer; this device binds at most {limit}",
                job.kernel.name
            )));
        }
    }
    Ok(())
}

/// Takes buffers from the pool and uploads the inputs.
fn acquire(ctx: &GpuContext, job: &Job<'_>) -> Submitted {
    let storage =
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC;
    let uniform_usage = wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST;
    let staging_usage = wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST;
    let mut pool = ctx.pool.lock().unwrap_or_else(PoisonError::into_inner);
    let param_bytes: Vec<u8> = job.params.iter().flat_map(|w| w.to_le_bytes()).collect();
    let uniform = pool.take(&ctx.device, uniform_usage, param_bytes.len() as u64);
    ctx.queue.write_buffer(&uniform, 0, &param_bytes);
    let mut buffers = Vec::with_capacity(job.slots.len());
    let mut read_offsets = Vec::new();
    let mut staging_size = 0u64;
    for slot in &job.slots {
        match slot {
            Slot::Input(data) => {
                let buffer = pool.take(&ctx.device, storage, data.len() as u64);
                ctx.queue.write_buffer(&buffer, 0, data);
                buffers.push(buffer);
                read_offsets.push(None);
            }
            Slot::Output { bytes, read_back } => {
                buffers.push(pool.take(&ctx.device, storage, *bytes));
                if *read_back {
                    read_offsets.push(Some((staging_size, *bytes)));
                    staging_size += padded(*bytes);
                } else {
                    read_offsets.push(None);
                }
            }
        }
    }
    let staging = pool.take(&ctx.device, staging_usage, staging_size);
    Submitted {
        uniform,
        buffers,
        staging,
        read_offsets,
    }
}

/// Encodes the clears, the dispatches and the copies to the staging buffer; submits.
fn submit(ctx: &GpuContext, job: &Job<'_>, run: &Submitted) {
    let pipelines = ctx.pipelines(job.kernel);
    let mut entries = vec![wgpu::BindGroupEntry {
        binding: 0,
        resource: run.uniform.as_entire_binding(),
    }];
    for (i, buffer) in run.buffers.iter().enumerate() {
        entries.push(wgpu::BindGroupEntry {
            binding: i as u32 + 1,
            resource: buffer.as_entire_binding(),
        });
    }
    let bind_group = ctx.device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some(job.kernel.name),
        layout: &pipelines.layout,
        entries: &entries,
    });
    let mut encoder = ctx
        .device
        .create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some(job.kernel.name),
        });
    // Pooled buffers hold the previous run's data; outputs start from zero.
    for (slot, buffer) in job.slots.iter().zip(&run.buffers) {
        if let Slot::Output { bytes, .. } = slot {
            encoder.clear_buffer(buffer, 0, Some(padded(*bytes)));
        }
    }
    {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(job.kernel.name),
            timestamp_writes: None,
        });
        pass.set_bind_group(0, &bind_group, &[]);
        for &(entry, groups) in &job.dispatches {
            pass.set_pipeline(&pipelines.entries[entry]);
            let (x, y) = grid(groups);
            pass.dispatch_workgroups(x, y, 1);
        }
    }
    for (offset, buffer) in run.read_offsets.iter().zip(&run.buffers) {
        if let Some((at, bytes)) = offset {
            encoder.copy_buffer_to_buffer(buffer, 0, &run.staging, *at, padded(*bytes));
        }
    }
    ctx.queue.submit([encoder.finish()]);
}

/// Maps the staging buffer once and copies out every read-back slot.
async fn read_back(ctx: &GpuContext, run: &Submitted) -> Result<Vec<Vec<u8>>, GpuError> {
    let state = Arc::new(Mutex::new(MapState {
        result: None,
        waker: None,
    }));
    let callback_state = Arc::clone(&state);
    run.staging
        .map_async(wgpu::MapMode::Read, .., move |result| {
            let mut s = callback_state
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            s.result = Some(result);
            if let Some(waker) = s.waker.take() {
                waker.wake();
            }
        });
    wait(ctx)?;
    Mapped(state)
        .await
        .map_err(|e| GpuError::Readback(e.to_string()))?;
    let outputs = {
        let view = run
            .staging
            .get_mapped_range(..)
            .map_err(|e| GpuError::Readback(e.to_string()))?;
        run.read_offsets
            .iter()
            .flatten()
            .map(|&(at, bytes)| view[at as usize..(at + bytes) as usize].to_vec())
            .collect()
    };
    run.staging.unmap();
    Ok(outputs)
}

fn release(ctx: &GpuContext, run: Submitted) {
    let mut pool = ctx.pool.lock().unwrap_or_else(PoisonError::into_inner);
    pool.give_back(run.uniform);
    pool.give_back(run.staging);
    for buffer in run.buffers {
        pool.give_back(buffer);
    }
}

/// Runs `job`: one submission, one mapped readback. Returns the contents of the
/// `read_back` outputs, in slot order.
pub(crate) async fn run(ctx: &GpuContext, job: &Job<'_>) -> Result<Vec<Vec<u8>>, GpuError> {
    check_limits(ctx, job)?;
    let started = now();
    let buffers = acquire(ctx, job);
    submit(ctx, job, &buffers);
    let submitted = now();
    wait(ctx)?;
    let computed = now();
    let outputs = read_back(ctx, &buffers).await;
    let finished = now();
    release(ctx, buffers);
    *ctx.last_timings
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(Timings {
        dispatch: seconds(started, submitted),
        compute: seconds(submitted, computed),
        readback: seconds(computed, finished),
    });
    outputs
}

/// The fixed cost of one run: a one-word kernel-free submission and its readback.
pub async fn empty_round_trip(ctx: &GpuContext) -> Result<(), GpuError> {
    run(
        ctx,
        &Job {
            kernel: &arlbook_shaders::RNG_STREAM,
            params: &[0; 6],
            slots: vec![Slot::Output {
                bytes: 16,
                read_back: true,
            }],
            dispatches: Vec::new(),
        },
    )
    .await
    .map(|_| ())
}
