// Philox4x32-10, bit-identical to core/src/rng.rs (see its module docs for the layout).
// Shared code: the Rust side prepends this file to every kernel that samples.
// Key = the 64-bit seed as (lo, hi); counter = (block_lo, block_hi, stream_lo, stream_hi).
// The 32x32 -> 64 multiply is split into 16-bit halves: WGSL has no 64-bit integers.

const PHILOX_M0: u32 = 0xD2511F53u;
const PHILOX_M1: u32 = 0xCD9E8D57u;
const PHILOX_W0: u32 = 0x9E3779B9u;
const PHILOX_W1: u32 = 0xBB67AE85u;
// 2^-24: uniforms keep the top 24 bits, exact in f32.
const UNIFORM_STEP: f32 = 1.0 / 16777216.0;

// The high word of the 64-bit product a * b.
fn mul_hi(a: u32, b: u32) -> u32 {
    let a_lo = a & 0xFFFFu;
    let a_hi = a >> 16u;
    let b_lo = b & 0xFFFFu;
    let b_hi = b >> 16u;
    let p0 = a_lo * b_lo;
    let p1 = a_lo * b_hi;
    let p2 = a_hi * b_lo;
    let p3 = a_hi * b_hi;
    // At most 3 * (2^16 - 1): no overflow.
    let middle = (p0 >> 16u) + (p1 & 0xFFFFu) + (p2 & 0xFFFFu);
    return p3 + (p1 >> 16u) + (p2 >> 16u) + (middle >> 16u);
}

fn philox_block(key_in: vec2<u32>, counter: vec4<u32>) -> vec4<u32> {
    var c = counter;
    var k = key_in;
    for (var round = 0u; round < 10u; round += 1u) {
        if round > 0u {
            k += vec2<u32>(PHILOX_W0, PHILOX_W1);
        }
        let hi0 = mul_hi(PHILOX_M0, c.x);
        let lo0 = PHILOX_M0 * c.x;
        let hi1 = mul_hi(PHILOX_M1, c.z);
        let lo1 = PHILOX_M1 * c.z;
        c = vec4<u32>(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
    }
    return c;
}

// The state of RandomStream::new(seed, stream): four words per block, consumed in order.
struct RandomStream {
    key: vec2<u32>,
    stream: vec2<u32>,
    block: vec2<u32>,
    words: vec4<u32>,
    used: u32,
}

fn stream_new(seed: vec2<u32>, stream: vec2<u32>) -> RandomStream {
    return RandomStream(seed, stream, vec2<u32>(0u, 0u), vec4<u32>(0u), 4u);
}

fn next_u32(s: ptr<function, RandomStream>) -> u32 {
    if (*s).used == 4u {
        (*s).words = philox_block((*s).key, vec4<u32>((*s).block.x, (*s).block.y, (*s).stream.x, (*s).stream.y));
        (*s).block.x += 1u;
        if (*s).block.x == 0u {
            (*s).block.y += 1u;
        }
        (*s).used = 0u;
    }
    let word = (*s).words[(*s).used];
    (*s).used += 1u;
    return word;
}

fn uniform_f32(s: ptr<function, RandomStream>) -> f32 {
    return f32(next_u32(s) >> 8u) * UNIFORM_STEP;
}

fn bernoulli_f32(s: ptr<function, RandomStream>, p: f32) -> bool {
    return uniform_f32(s) < p;
}

fn below(s: ptr<function, RandomStream>, n: u32) -> u32 {
    return mul_hi(next_u32(s), n);
}

// The linear index of this workgroup in a 2D grid (x wraps at the 65535 limit).
fn workgroup_index(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.y * nwg.x;
}
