// The raw words of one random stream: thread t writes the four words of block
// `first_block + t`, i.e. words 4t..4t+3 of RandomStream::new(seed, stream) after the
// first 4 * first_block words.

struct Params {
    seed: vec2<u32>,
    stream: vec2<u32>,
    blocks: u32,
    first_block: u32,
}

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read_write> words: array<u32>;

@compute @workgroup_size(64)
fn rng_stream(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = workgroup_index(wid, nwg) * 64u + lid;
    if t >= params.blocks {
        return;
    }
    var s = stream_new(params.seed, params.stream);
    s.block = vec2<u32>(params.first_block + t, 0u);
    for (var i = 0u; i < 4u; i += 1u) {
        words[4u * t + i] = next_u32(&s);
    }
}
