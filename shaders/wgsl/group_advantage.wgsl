// Group-relative advantages over ragged groups (core::math::advantage::group_advantages).
// Three passes in one submit: per-group statistics (one workgroup per group, two-pass
// mean and centred squares), batch statistics (one workgroup over all rewards), then one
// thread per reward. A group whose rewards are all equal gets exactly 0, as on the CPU.

struct Params {
    groups: u32,
    rewards: u32,
    // 0 mean, 1 leave-one-out.
    baseline: u32,
    // 0 group, 1 batch, 2 none.
    scale: u32,
    // 0 population, 1 sample.
    std_kind: u32,
    eps: f32,
}

// Per group: mean, std, sum, all-equal flag; then the batch std at groups * STATS.
const STATS: u32 = 4u;

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> offsets: array<u32>;
@group(0) @binding(2) var<storage, read> rewards: array<f32>;
@group(0) @binding(3) var<storage, read_write> stats: array<f32>;
@group(0) @binding(4) var<storage, read_write> advantages: array<f32>;

fn spread(squares: f32, n: u32) -> f32 {
    let denominator = select(f32(n), f32(n) - 1.0, params.std_kind == 1u);
    return sqrt(squares / denominator);
}

// Mean and std of rewards[start..end) by the whole workgroup; (mean, std, sum, equal).
fn segment_stats(start: u32, end: u32, lid: u32, lanes: u32) -> vec4<f32> {
    let n = end - start;
    let first = rewards[start];
    var sum = 0.0;
    var differ = 0.0;
    for (var i = start + lid; i < end; i += lanes) {
        sum += rewards[i];
        differ += select(0.0, 1.0, rewards[i] != first);
    }
    lane_a[lid] = sum;
    lane_b[lid] = differ;
    lane_c[lid] = 0.0;
    lane_d[lid] = 0.0;
    reduce_lanes(lid, false);
    let total = lane_a[0];
    let equal = lane_b[0] == 0.0;
    workgroupBarrier();
    // No early return: barriers must stay in uniform control flow. When every reward is
    // equal the mean is the first reward exactly and the squares are all 0.
    let mean = select(total / f32(n), first, equal);
    var squares = 0.0;
    for (var i = start + lid; i < end; i += lanes) {
        let d = rewards[i] - mean;
        squares += d * d;
    }
    lane_a[lid] = squares;
    reduce_lanes(lid, false);
    let deviation = select(spread(lane_a[0], n), 0.0, equal);
    let result = vec4<f32>(mean, deviation, total, select(0.0, 1.0, equal));
    workgroupBarrier();
    return result;
}

@compute @workgroup_size(64)
fn group_stats(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = workgroup_index(wid, nwg);
    // Uniform control flow: every lane of a workgroup takes the same branch.
    if g >= params.groups {
        return;
    }
    let s = segment_stats(offsets[g], offsets[g + 1u], lid, LANES);
    if lid == 0u {
        stats[g * STATS] = s.x;
        stats[g * STATS + 1u] = s.y;
        stats[g * STATS + 2u] = s.z;
        stats[g * STATS + 3u] = s.w;
    }
}

@compute @workgroup_size(64)
fn batch_stats(@builtin(local_invocation_index) lid: u32) {
    let s = segment_stats(0u, params.rewards, lid, LANES);
    if lid == 0u {
        stats[params.groups * STATS] = s.y;
    }
}

@compute @workgroup_size(64)
fn advantages_per_reward(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = workgroup_index(wid, nwg) * 64u + lid;
    if i >= params.rewards {
        return;
    }
    let g = segment_of(i, params.groups);
    let mean = stats[g * STATS];
    let deviation = stats[g * STATS + 1u];
    let sum = stats[g * STATS + 2u];
    if stats[g * STATS + 3u] != 0.0 {
        advantages[i] = 0.0;
        return;
    }
    let r = rewards[i];
    let n = f32(offsets[g + 1u] - offsets[g]);
    var centred = r - mean;
    if params.baseline == 1u {
        centred = r - (sum - r) / (n - 1.0);
    }
    var divisor = 1.0;
    if params.scale == 0u {
        divisor = deviation + params.eps;
    } else if params.scale == 1u {
        divisor = stats[params.groups * STATS] + params.eps;
    }
    advantages[i] = centred / divisor;
}
