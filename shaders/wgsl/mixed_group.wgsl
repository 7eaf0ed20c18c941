// Dynamic sampling, one thread per replicate (core::math::sampling::
// simulate_dynamic_sampling, same draw order: G Bernoulli(p) draws per group, all of them
// even once the group is known to be mixed). Integer results: identical to the CPU.

struct Params {
    seed: vec2<u32>,
    replicates: u32,
    group_size: u32,
    mixed_groups: u32,
    max_groups: u32,
    p: f32,
}

@group(0) @binding(0) var<uniform> params: Params;
// Three words per replicate: groups drawn, mixed groups found, capped (0 or 1).
@group(0) @binding(1) var<storage, read_write> runs: array<u32>;

@compute @workgroup_size(64)
fn mixed_group(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let r = workgroup_index(wid, nwg) * 64u + lid;
    if r >= params.replicates {
        return;
    }
    var s = stream_new(params.seed, vec2<u32>(r, 0u));
    var drawn = 0u;
    var mixed = 0u;
    var capped = 0u;
    while mixed < params.mixed_groups {
        if drawn == params.max_groups {
            capped = 1u;
            break;
        }
        var successes = 0u;
        for (var i = 0u; i < params.group_size; i += 1u) {
            successes += select(0u, 1u, bernoulli_f32(&s, params.p));
        }
        drawn += 1u;
        if successes != 0u && successes != params.group_size {
            mixed += 1u;
        }
    }
    runs[3u * r] = drawn;
    runs[3u * r + 1u] = mixed;
    runs[3u * r + 2u] = capped;
}
