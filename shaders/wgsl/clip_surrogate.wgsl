// The PPO clipped surrogate, one thread per element (core::math::clip::surrogate_point):
// decoupled widths, optional dual clip, the active side and the slope in the ratio.

struct Params {
    elements: u32,
    eps_low: f32,
    eps_high: f32,
    // 0: no dual clip; else dual_clip holds c > 1.
    has_dual: u32,
    dual_clip: f32,
}

@group(0) @binding(0) var<uniform> params: Params;
// ratio[0..n], then advantage[0..n].
@group(0) @binding(1) var<storage, read> inputs: array<f32>;
// objective[0..n], then d objective / d ratio [0..n].
@group(0) @binding(2) var<storage, read_write> values: array<f32>;
// 0 unclipped, 1 clipped low, 2 clipped high, 3 dual clipped.
@group(0) @binding(3) var<storage, read_write> sides: array<u32>;

@compute @workgroup_size(64)
fn clip_surrogate(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = workgroup_index(wid, nwg) * 64u + lid;
    let n = params.elements;
    if i >= n {
        return;
    }
    let ratio = inputs[i];
    let advantage = inputs[n + i];
    let ratio_low = 1.0 - params.eps_low;
    let ratio_high = 1.0 + params.eps_high;
    var side = 0u;
    var objective = ratio * advantage;
    var slope = advantage;
    if advantage > 0.0 && ratio > ratio_high {
        side = 2u;
        objective = ratio_high * advantage;
        slope = 0.0;
    } else if advantage < 0.0 && ratio < ratio_low {
        side = 1u;
        objective = ratio_low * advantage;
        slope = 0.0;
    } else if advantage < 0.0 && params.has_dual != 0u && ratio > params.dual_clip {
        side = 3u;
        objective = params.dual_clip * advantage;
        slope = 0.0;
    }
    values[i] = objective;
    values[n + i] = slope;
    sides[i] = side;
}
