// Asynchronous collection with a staleness filter, one thread per replicate
// (core::math::lag::simulate: the same event loop, the same draw order, ties to the
// lowest worker index). Event times are f32 here and f64 on the CPU, so a replicate
// whose events come closer together than f32 resolves (or whose transcendental
// durations round differently) may order them differently: the GPU run is the same
// process and the same random words, but only `fixed` durations on exactly
// representable times are guaranteed to give the identical run.

struct Params {
    seed: vec2<u32>,
    replicates: u32,
    workers: u32,
    batch_size: u32,
    max_lag: u32,
    updates: u32,
    // 0 fixed, 1 uniform, 2 exponential, 3 lognormal.
    kind: u32,
    a: f32,
    b: f32,
    histogram_len: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
// workers finish times per replicate, then one elapsed time per replicate.
@group(0) @binding(1) var<storage, read_write> times: array<f32>;
// workers start versions per replicate, then one kept count per replicate.
@group(0) @binding(2) var<storage, read_write> versions: array<u32>;
// Completed rollouts per lag, pooled over replicates.
@group(0) @binding(3) var<storage, read_write> histogram: array<atomic<u32>>;

const TAU: f32 = 6.283185307179586;

fn draw_duration(s: ptr<function, RandomStream>) -> f32 {
    switch params.kind {
        case 0u: {
            return params.a;
        }
        case 1u: {
            return params.a + (params.b - params.a) * uniform_f32(s);
        }
        case 2u: {
            return -params.a * log(1.0 - uniform_f32(s));
        }
        default: {
            let u1 = 1.0 - uniform_f32(s);
            let u2 = uniform_f32(s);
            let z = sqrt(-2.0 * log(u1)) * cos(TAU * u2);
            return exp(params.a + params.b * z);
        }
    }
}

@compute @workgroup_size(64)
fn lag_sim(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = workgroup_index(wid, nwg) * 64u + lid;
    if r >= params.replicates {
        return;
    }
    let w_count = params.workers;
    let base = r * w_count;
    let tail = params.replicates * w_count;
    var s = stream_new(params.seed, vec2<u32>(r, 0u));
    for (var w = 0u; w < w_count; w += 1u) {
        times[base + w] = draw_duration(&s);
        versions[base + w] = 0u;
    }
    var version = 0u;
    var in_batch = 0u;
    var kept = 0u;
    var elapsed = 0.0;
    while version < params.updates {
        var worker = 0u;
        var now = times[base];
        for (var w = 1u; w < w_count; w += 1u) {
            let t = times[base + w];
            if t < now {
                now = t;
                worker = w;
            }
        }
        let lag = version - versions[base + worker];
        atomicAdd(&histogram[min(lag, params.histogram_len - 1u)], 1u);
        kept += select(0u, 1u, lag <= params.max_lag);
        in_batch += 1u;
        if in_batch == params.batch_size {
            in_batch = 0u;
            version += 1u;
            elapsed = now;
        }
        versions[base + worker] = version;
        times[base + worker] = now + draw_duration(&s);
    }
    times[tail + r] = elapsed;
    versions[tail + r] = kept;
}
