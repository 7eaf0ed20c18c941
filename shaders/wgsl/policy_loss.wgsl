// The policy loss over ragged sequences (core::math::policy_loss::policy_loss), in one
// submit. Each sequence is cut into chunks of at most 64 tokens (the host writes the
// chunk table), so every sum is taken without a barrier:
//   chunk_log_ratio  one thread per chunk: sum of its log-ratios (sequence ratio only);
//   row_log_ratio    one thread per sequence: mean log-ratio from its chunks (GSPO);
//   token_terms      one thread per token: ratio, surrogate loss, KL, gradient;
//   chunk_sums       one thread per chunk: sums of loss, KL, ratio, clip flags; max ratio;
//   row_sums         one thread per sequence: the same over its chunks;
//   batch_sums       one workgroup: the weighted sums over sequences (the reduction).
// Rounding grows with the chunk length plus the number of chunks in a sequence, not with
// the sequence length. The log-ratios logp - old_logp and logp - ref_logp arrive
// precomputed (in f64 on the host): the f32 difference of two nearby log-probabilities
// would lose its digits.

struct Params {
    rows: u32,
    tokens: u32,
    // 0 ppo, 1 cispo, 2 sapo.
    objective: u32,
    // 0 token, 1 sequence.
    ratio_level: u32,
    // 0 k1, 1 k2, 2 k3, 3 abs.
    kl_estimator: u32,
    kl_clamp: u32,
    has_dual: u32,
    eps_low: f32,
    eps_high: f32,
    dual_clip: f32,
    tau_pos: f32,
    tau_neg: f32,
    beta: f32,
    chunks: u32,
}

// Per row (and per chunk): mean log-ratio (a chunk: its sum), sum loss, sum KL, sum
// ratio, max ratio, low, high, dual.
const ROW: u32 = 8u;

@group(0) @binding(0) var<uniform> params: Params;
// rows + 1 token offsets; chunks + 1 chunk bounds (token indices); rows + 1 first
// chunks of each row.
@group(0) @binding(1) var<storage, read> offsets: array<u32>;
// Per token: log_ratio (logp - old_logp), ref_log_ratio (logp - ref_logp), logp,
// advantage; each a section of `tokens` values. Then one weight per row.
@group(0) @binding(2) var<storage, read> inputs: array<f32>;
// Per token: ratio, loss, KL, gradient; each a section of `tokens` values.
@group(0) @binding(3) var<storage, read_write> token_out: array<f32>;
// ROW values per row, then ROW totals.
@group(0) @binding(4) var<storage, read_write> row_out: array<f32>;
// ROW values per chunk (not read back).
@group(0) @binding(5) var<storage, read_write> chunk_out: array<f32>;

// Tokens [start, end) of chunk c.
fn chunk_tokens(c: u32) -> vec2<u32> {
    let at = params.rows + 1u + c;
    return vec2<u32>(offsets[at], offsets[at + 1u]);
}

// Chunks [first, last) of row r.
fn row_chunks(r: u32) -> vec2<u32> {
    let at = params.rows + params.chunks + 2u + r;
    return vec2<u32>(offsets[at], offsets[at + 1u]);
}

fn thread_index(wid: vec3<u32>, nwg: vec3<u32>, lid: u32) -> u32 {
    return workgroup_index(wid, nwg) * 64u + lid;
}

// e^y - 1 without cancellation near 0 (Taylor to y^7 below |y| = 0.5).
fn exp_m1(y: f32) -> f32 {
    if abs(y) < 0.5 {
        return y * (1.0 + y * (0.5 + y * (1.0 / 6.0 + y * (1.0 / 24.0 + y * (1.0 / 120.0 + y * (1.0 / 720.0 + y / 5040.0))))));
    }
    return exp(y) - 1.0;
}

// e^y - y - 1 without cancellation near 0 (Taylor to y^9 below |y| = 0.5).
fn exp_m1_minus_y(y: f32) -> f32 {
    if abs(y) < 0.5 {
        return y * y * (0.5 + y * (1.0 / 6.0 + y * (1.0 / 24.0 + y * (1.0 / 120.0 + y * (1.0 / 720.0 + y * (1.0 / 5040.0 + y * (1.0 / 40320.0 + y / 362880.0)))))));
    }
    return exp(y) - y - 1.0;
}

// KL estimate at one token and its slope in logp; x = logp - ref_logp.
fn kl_point(x: f32) -> vec2<f32> {
    if params.kl_estimator == 0u {
        return vec2<f32>(x, 1.0);
    }
    if params.kl_estimator == 1u {
        return vec2<f32>(0.5 * x * x, x);
    }
    if params.kl_estimator == 3u {
        // verl's `abs`: |x|, slope sign(x) (0 at 0, as PyTorch's).
        return vec2<f32>(abs(x), sign(x));
    }
    var y = -x;
    var slope_live = true;
    if params.kl_clamp != 0u && abs(y) > 20.0 {
        y = clamp(y, -20.0, 20.0);
        slope_live = false;
    }
    let value = exp_m1_minus_y(y);
    let slope = select(0.0, -exp_m1(y), slope_live);
    if params.kl_clamp != 0u && abs(value) > 10.0 {
        return vec2<f32>(clamp(value, -10.0, 10.0), 0.0);
    }
    return vec2<f32>(value, slope);
}

@compute @workgroup_size(64)
fn chunk_log_ratio(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let c = thread_index(wid, nwg, lid);
    if c >= params.chunks {
        return;
    }
    let span = chunk_tokens(c);
    var sum = 0.0;
    for (var i = span.x; i < span.y; i++) {
        sum += inputs[i];
    }
    chunk_out[c * ROW] = sum;
}

@compute @workgroup_size(64)
fn row_log_ratio(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = thread_index(wid, nwg, lid);
    if row >= params.rows {
        return;
    }
    let span = row_chunks(row);
    var sum = 0.0;
    for (var c = span.x; c < span.y; c++) {
        sum += chunk_out[c * ROW];
    }
    let len = offsets[row + 1u] - offsets[row];
    row_out[row * ROW] = select(sum / f32(len), 0.0, len == 0u);
}

@compute @workgroup_size(64)
fn token_terms(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = workgroup_index(wid, nwg) * 64u + lid;
    let t = params.tokens;
    if i >= t {
        return;
    }
    let row = segment_of(i, params.rows);
    let log_ratio = select(inputs[i], row_out[row * ROW], params.ratio_level == 1u);
    let ratio = exp(log_ratio);
    let logp = inputs[2u * t + i];
    let advantage = inputs[3u * t + i];
    let weight = inputs[4u * t + row];
    let ratio_low = 1.0 - params.eps_low;
    let ratio_high = 1.0 + params.eps_high;
    var loss = 0.0;
    var d_loss = 0.0;
    if params.objective == 0u {
        var objective = ratio * advantage;
        var slope = advantage;
        if advantage > 0.0 && ratio > ratio_high {
            objective = ratio_high * advantage;
            slope = 0.0;
        } else if advantage < 0.0 && ratio < ratio_low {
            objective = ratio_low * advantage;
            slope = 0.0;
        } else if advantage < 0.0 && params.has_dual != 0u && ratio > params.dual_clip {
            objective = params.dual_clip * advantage;
            slope = 0.0;
        }
        loss = -objective;
        d_loss = -slope * ratio;
    } else if params.objective == 1u {
        let clipped = clamp(ratio, ratio_low, ratio_high);
        loss = -clipped * advantage * logp;
        d_loss = -clipped * advantage;
    } else {
        let tau = select(params.tau_neg, params.tau_pos, advantage > 0.0);
        let sigma = 1.0 / (1.0 + exp(-tau * (ratio - 1.0)));
        loss = -(4.0 / tau) * sigma * advantage;
        d_loss = -4.0 * sigma * (1.0 - sigma) * ratio * advantage;
    }
    let kl = kl_point(inputs[t + i]);
    token_out[i] = ratio;
    token_out[t + i] = loss;
    token_out[2u * t + i] = kl.x;
    token_out[3u * t + i] = weight * (d_loss + params.beta * kl.y);
}

@compute @workgroup_size(64)
fn chunk_sums(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let c = thread_index(wid, nwg, lid);
    if c >= params.chunks {
        return;
    }
    let t = params.tokens;
    let span = chunk_tokens(c);
    let ratio_low = 1.0 - params.eps_low;
    let ratio_high = 1.0 + params.eps_high;
    var loss = 0.0;
    var kl = 0.0;
    var ratio_sum = 0.0;
    var ratio_max = 0.0;
    var low = 0u;
    var high = 0u;
    var dual = 0u;
    for (var i = span.x; i < span.y; i++) {
        let ratio = token_out[i];
        let advantage = inputs[3u * t + i];
        loss += token_out[t + i];
        kl += token_out[2u * t + i];
        ratio_sum += ratio;
        ratio_max = max(ratio_max, ratio);
        low += select(0u, 1u, advantage < 0.0 && ratio < ratio_low);
        high += select(0u, 1u, advantage > 0.0 && ratio > ratio_high);
        dual += select(0u, 1u, advantage < 0.0 && params.has_dual != 0u && ratio > params.dual_clip);
    }
    let at = c * ROW;
    chunk_out[at + 1u] = loss;
    chunk_out[at + 2u] = kl;
    chunk_out[at + 3u] = ratio_sum;
    chunk_out[at + 4u] = ratio_max;
    // Counts are exact in f32 below 2^24 tokens (the host checks the size).
    chunk_out[at + 5u] = f32(low);
    chunk_out[at + 6u] = f32(high);
    chunk_out[at + 7u] = f32(dual);
}

@compute @workgroup_size(64)
fn row_sums(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = thread_index(wid, nwg, lid);
    if row >= params.rows {
        return;
    }
    let span = row_chunks(row);
    var sums = vec3<f32>(0.0);
    var counts = vec3<f32>(0.0);
    var ratio_max = 0.0;
    for (var c = span.x; c < span.y; c++) {
        let at = c * ROW;
        sums += vec3<f32>(chunk_out[at + 1u], chunk_out[at + 2u], chunk_out[at + 3u]);
        ratio_max = max(ratio_max, chunk_out[at + 4u]);
        counts += vec3<f32>(chunk_out[at + 5u], chunk_out[at + 6u], chunk_out[at + 7u]);
    }
    let at = row * ROW;
    row_out[at + 1u] = sums.x;
    row_out[at + 2u] = sums.y;
    row_out[at + 3u] = sums.z;
    row_out[at + 4u] = ratio_max;
    row_out[at + 5u] = counts.x;
    row_out[at + 6u] = counts.y;
    row_out[at + 7u] = counts.z;
}

@compute @workgroup_size(64)
fn batch_sums(@builtin(local_invocation_index) lid: u32) {
    let t = params.tokens;
    var loss = 0.0;
    var kl = 0.0;
    var ratio_sum = 0.0;
    var ratio_max = 0.0;
    for (var row = lid; row < params.rows; row += LANES) {
        let weight = inputs[4u * t + row];
        loss += weight * row_out[row * ROW + 1u];
        kl += weight * row_out[row * ROW + 2u];
        ratio_sum += row_out[row * ROW + 3u];
        ratio_max = max(ratio_max, row_out[row * ROW + 4u]);
    }
    lane_a[lid] = loss;
    lane_b[lid] = kl;
    lane_c[lid] = ratio_sum;
    lane_d[lid] = ratio_max;
    reduce_lanes(lid, true);
    let totals = params.rows * ROW;
    if lid == 0u {
        row_out[totals + 1u] = lane_a[0];
        row_out[totals + 2u] = lane_b[0];
        row_out[totals + 3u] = lane_c[0];
        row_out[totals + 4u] = lane_d[0];
    }
    workgroupBarrier();
    var low = 0.0;
    var high = 0.0;
    var dual = 0.0;
    for (var row = lid; row < params.rows; row += LANES) {
        low += row_out[row * ROW + 5u];
        high += row_out[row * ROW + 6u];
        dual += row_out[row * ROW + 7u];
    }
    lane_a[lid] = low;
    lane_b[lid] = high;
    lane_c[lid] = dual;
    lane_d[lid] = 0.0;
    reduce_lanes(lid, false);
    if lid == 0u {
        row_out[totals + 5u] = lane_a[0];
        row_out[totals + 6u] = lane_b[0];
        row_out[totals + 7u] = lane_c[0];
    }
}
