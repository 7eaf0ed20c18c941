// Group-relative advantages over ragged groups (core::math::advantage::group_advantages).
// Up to three passes in one submit:
//   batch_stats       one workgroup over all rewards (only for batch scaling);
//   group_serial      one thread per short group: statistics, then its advantages;
//   group_wide        one workgroup per long group (listed after the offsets): the same
//                     with a 64-lane reduction.
// Short groups take no barrier at all: lavapipe runs barriers slowly, and a group of a
// few dozen rewards is cheaper for one thread than for a synchronised workgroup. Both
// paths use the two-pass mean and centred squares. A group whose rewards are all equal
// gets exactly 0, as on the CPU.

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
    // Groups longer than this go to group_wide.
    serial_max: u32,
    // How many group indices follow the offsets (the long groups).
    wide_groups: u32,
}

// Per group: mean, std, sum, all-equal flag; then the batch std at groups * STATS.
const STATS: u32 = 4u;

@group(0) @binding(0) var<uniform> params: Params;
// groups + 1 offsets, then the indices of the long groups.
@group(0) @binding(1) var<storage, read> offsets: array<u32>;
@group(0) @binding(2) var<storage, read> rewards: array<f32>;
@group(0) @binding(3) var<storage, read_write> stats: array<f32>;
@group(0) @binding(4) var<storage, read_write> advantages: array<f32>;

fn spread(squares: f32, n: u32) -> f32 {
    let denominator = select(f32(n), f32(n) - 1.0, params.std_kind == 1u);
    return sqrt(squares / denominator);
}

// The divisor of every advantage of a group with this std (batch_stats ran first).
fn divisor_for(deviation: f32) -> f32 {
    if params.scale == 0u {
        return deviation + params.eps;
    }
    if params.scale == 1u {
        return stats[params.groups * STATS] + params.eps;
    }
    return 1.0;
}

// s = (mean, std, sum, equal) of a group of n rewards.
fn advantage_of(r: f32, s: vec4<f32>, n: u32, divisor: f32) -> f32 {
    if s.w != 0.0 {
        return 0.0;
    }
    var centred = r - s.x;
    if params.baseline == 1u {
        centred = r - (s.z - r) / (f32(n) - 1.0);
    }
    return centred / divisor;
}

fn store_stats(g: u32, s: vec4<f32>) {
    stats[g * STATS] = s.x;
    stats[g * STATS + 1u] = s.y;
    stats[g * STATS + 2u] = s.z;
    stats[g * STATS + 3u] = s.w;
}

// Mean and std of rewards[start..end) by one thread; (mean, std, sum, equal).
fn serial_stats(start: u32, end: u32) -> vec4<f32> {
    let first = rewards[start];
    var sum = 0.0;
    var equal = true;
    for (var i = start; i < end; i++) {
        let r = rewards[i];
        sum += r;
        equal = equal && r == first;
    }
    if equal {
        return vec4<f32>(first, 0.0, sum, 1.0);
    }
    let n = end - start;
    let mean = sum / f32(n);
    var squares = 0.0;
    for (var i = start; i < end; i++) {
        let d = rewards[i] - mean;
        squares += d * d;
    }
    return vec4<f32>(mean, spread(squares, n), sum, 0.0);
}

// Mean and std of rewards[start..end) by the whole workgroup; (mean, std, sum, equal).
fn segment_stats(start: u32, end: u32, lid: u32) -> vec4<f32> {
    let n = end - start;
    let first = rewards[start];
    var sum = 0.0;
    var differ = 0.0;
    for (var i = start + lid; i < end; i += LANES) {
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
    for (var i = start + lid; i < end; i += LANES) {
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
fn batch_stats(@builtin(local_invocation_index) lid: u32) {
    let s = segment_stats(0u, params.rewards, lid);
    if lid == 0u {
        stats[params.groups * STATS] = s.y;
    }
}

@compute @workgroup_size(64)
fn group_serial(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let g = workgroup_index(wid, nwg) * 64u + lid;
    if g >= params.groups {
        return;
    }
    let start = offsets[g];
    let end = offsets[g + 1u];
    let n = end - start;
    if n > params.serial_max {
        return;
    }
    let s = serial_stats(start, end);
    store_stats(g, s);
    let divisor = divisor_for(s.y);
    for (var i = start; i < end; i++) {
        advantages[i] = advantage_of(rewards[i], s, n, divisor);
    }
}

@compute @workgroup_size(64)
fn group_wide(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let w = workgroup_index(wid, nwg);
    // Uniform control flow: every lane of a workgroup takes the same branch.
    if w >= params.wide_groups {
        return;
    }
    let g = offsets[params.groups + 1u + w];
    let start = offsets[g];
    let end = offsets[g + 1u];
    let n = end - start;
    let s = segment_stats(start, end, lid);
    if lid == 0u {
        store_stats(g, s);
    }
    let divisor = divisor_for(s.y);
    for (var i = start + lid; i < end; i += LANES) {
        advantages[i] = advantage_of(rewards[i], s, n, divisor);
    }
}
