// Importance-sampling replicates, one thread per replicate (core::math::importance::
// sample_replicate, same draw order: one categorical draw per sample). The thread counts
// how often each action was drawn; the host turns counts into the ordinary and
// self-normalised estimates and the ESS in f64.
//
// The categorical draw compares one 24-bit uniform with the cumulative sums of mu taken
// in f32 in index order, exactly as RandomStream::categorical does on the CPU.

struct Params {
    seed: vec2<u32>,
    replicates: u32,
    samples: u32,
    actions: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> cumulative: array<f32>;
// actions words per replicate.
@group(0) @binding(2) var<storage, read_write> counts: array<u32>;

@compute @workgroup_size(64)
fn importance_mc(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = workgroup_index(wid, nwg) * 64u + lid;
    if r >= params.replicates {
        return;
    }
    let k = params.actions;
    let base = r * k;
    for (var a = 0u; a < k; a += 1u) {
        counts[base + a] = 0u;
    }
    var s = stream_new(params.seed, vec2<u32>(r, 0u));
    for (var i = 0u; i < params.samples; i += 1u) {
        let u = uniform_f32(&s);
        var chosen = k - 1u;
        for (var a = 0u; a < k; a += 1u) {
            if u < cumulative[a] {
                chosen = a;
                break;
            }
        }
        counts[base + chosen] += 1u;
    }
}
