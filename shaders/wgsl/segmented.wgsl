// Shared helpers of the segmented kernels (group advantages, policy loss): a 64-lane
// workgroup reduces one segment with strided partial sums and a shared-memory tree, so
// rounding grows with log2(64) plus length / 64 rather than with the length.

const LANES: u32 = 64u;
var<workgroup> lane_a: array<f32, 64>;
var<workgroup> lane_b: array<f32, 64>;
var<workgroup> lane_c: array<f32, 64>;
var<workgroup> lane_d: array<f32, 64>;

// Tree sum of lane_a..lane_d (max for lane_d when max_d is true); lane 0 holds the result.
fn reduce_lanes(lid: u32, max_d: bool) {
    for (var stride = LANES / 2u; stride > 0u; stride = stride / 2u) {
        workgroupBarrier();
        if lid < stride {
            lane_a[lid] += lane_a[lid + stride];
            lane_b[lid] += lane_b[lid + stride];
            lane_c[lid] += lane_c[lid + stride];
            if max_d {
                lane_d[lid] = max(lane_d[lid], lane_d[lid + stride]);
            } else {
                lane_d[lid] += lane_d[lid + stride];
            }
        }
    }
    workgroupBarrier();
}

// The segment holding flat index i: the largest g < segments with offsets[g] <= i
// (empty segments repeat an offset and are skipped).
fn segment_of(i: u32, segments: u32) -> u32 {
    var lo = 0u;
    var hi = segments - 1u;
    while lo < hi {
        let mid = (lo + hi + 1u) / 2u;
        if offsets[mid] <= i {
            lo = mid;
        } else {
            hi = mid - 1u;
        }
    }
    return lo;
}
