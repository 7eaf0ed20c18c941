// Sampled policy-gradient estimates on the two-action bandit, one thread per replicate
// (core::math::bandit::sample_estimate, same draw order: per sample, one uniform for the
// action, then one for the reward).
//
// The thread keeps integer counts only. Per group, with n_A actions A, n_R rewards and
// n_AR rewarded A actions: sum_i R_i s_i = n_AR - p n_R and sum_i s_i = n_A - G p, so the
// group-mean term sum R s - (sum R / G) sum s = (G n_AR - n_R n_A) / G has no p in it.
// Writing the counts (a 64-bit signed sum for the group-mean numerator) lets the host
// finish each estimate in f64, equal to the CPU path up to f64 rounding.

struct Params {
    seed: vec2<u32>,
    replicates: u32,
    samples: u32,
    group_size: u32,
    p: f32,
    q_a: f32,
    q_b: f32,
}

@group(0) @binding(0) var<uniform> params: Params;
// Four words per replicate: sum n_AR, sum n_R, then sum (G n_AR - n_R n_A) as (lo, hi).
@group(0) @binding(1) var<storage, read_write> counts: array<u32>;

// 64-bit integers as (lo, hi) pairs.
fn wide_mul(a: u32, b: u32) -> vec2<u32> {
    return vec2<u32>(a * b, mul_hi(a, b));
}

fn wide_add(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    let lo = a.x + b.x;
    return vec2<u32>(lo, a.y + b.y + select(0u, 1u, lo < a.x));
}

fn wide_sub(a: vec2<u32>, b: vec2<u32>) -> vec2<u32> {
    return vec2<u32>(a.x - b.x, a.y - b.y - select(0u, 1u, a.x < b.x));
}

@compute @workgroup_size(64)
fn bandit_mc(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = workgroup_index(wid, nwg) * 64u + lid;
    if r >= params.replicates {
        return;
    }
    var s = stream_new(params.seed, vec2<u32>(r, 0u));
    let g = params.group_size;
    var sum_ar = 0u;
    var sum_r = 0u;
    var centred = vec2<u32>(0u, 0u);
    for (var group = 0u; group < params.samples / g; group += 1u) {
        var n_a = 0u;
        var n_r = 0u;
        var n_ar = 0u;
        for (var i = 0u; i < g; i += 1u) {
            let chose_a = bernoulli_f32(&s, params.p);
            let q = select(params.q_b, params.q_a, chose_a);
            if bernoulli_f32(&s, q) {
                n_r += 1u;
                n_ar += select(0u, 1u, chose_a);
            }
            n_a += select(0u, 1u, chose_a);
        }
        sum_ar += n_ar;
        sum_r += n_r;
        centred = wide_sub(wide_add(centred, wide_mul(g, n_ar)), wide_mul(n_r, n_a));
    }
    counts[4u * r] = sum_ar;
    counts[4u * r + 1u] = sum_r;
    counts[4u * r + 2u] = centred.x;
    counts[4u * r + 3u] = centred.y;
}
