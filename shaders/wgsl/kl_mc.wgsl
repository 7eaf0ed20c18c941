// KL estimator replicates, one thread per replicate (core::math::kl_estimation::
// sample_replicate, same draw order: one uniform per sample). The thread sums the
// per-action values of k1, k2 and k3 over its draws with compensated (Kahan) f32
// sums, so the output is three words per replicate whatever the number of actions;
// the host divides by N in f64.
//
// The draw compares one 24-bit uniform with the f32 running sums of pi by binary
// search (the first sum above u), exactly as the CPU does; a u at or beyond the
// rounded total goes to the last action with pi > 0.

struct Params {
    seed: vec2<u32>,
    replicates: u32,
    samples: u32,
    actions: u32,
    last_possible: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> cumulative: array<f32>;
// Three words per action: k1, k2, k3.
@group(0) @binding(2) var<storage, read> values: array<f32>;
// Three words per replicate: the sums of k1, k2, k3 over its draws.
@group(0) @binding(3) var<storage, read_write> sums: array<f32>;

fn draw_action(u: f32) -> u32 {
    var low = 0u;
    var high = params.actions;
    while low < high {
        let mid = (low + high) / 2u;
        if cumulative[mid] <= u {
            low = mid + 1u;
        } else {
            high = mid;
        }
    }
    if low >= params.actions {
        return params.last_possible;
    }
    return low;
}

@compute @workgroup_size(64)
fn kl_mc(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = workgroup_index(wid, nwg) * 64u + lid;
    if r >= params.replicates {
        return;
    }
    var s = stream_new(params.seed, vec2<u32>(r, 0u));
    var total = vec3<f32>(0.0);
    var carry = vec3<f32>(0.0);
    for (var i = 0u; i < params.samples; i += 1u) {
        let a = draw_action(uniform_f32(&s));
        let v = vec3<f32>(values[3u * a], values[3u * a + 1u], values[3u * a + 2u]);
        let y = v - carry;
        let t = total + y;
        carry = (t - total) - y;
        total = t;
    }
    sums[3u * r] = total.x;
    sums[3u * r + 1u] = total.y;
    sums[3u * r + 2u] = total.z;
}
