//! The exact GELU (burn's `gelu`, with `erf`) and its derivative:
//!
//! ```text
//! gelu(u) = u Phi(u) = u (1 + erf(u / sqrt 2)) / 2
//! gelu'(u) = Phi(u) + u phi(u),   phi(u) = exp(-u^2 / 2) / sqrt(2 pi)
//! ```
//!
//! `erf` and `exp` are [`super::vecmath`]'s, within about an `f32` ulp of the exact
//! functions, so that these loops run on vector instructions.

use std::f32::consts::PI;

use super::vecmath::{exp, normal_cdf};

/// `out_i = gelu(u_i)`.
pub fn forward(u: &[f32], out: &mut [f32]) {
    for (o, &x) in out.iter_mut().zip(u) {
        *o = x * normal_cdf(x);
    }
}

/// `du_i = dg_i gelu'(u_i)`.
pub fn backward(u: &[f32], dg: &[f32], du: &mut [f32]) {
    let inv_sqrt_2pi = 1.0 / (2.0 * PI).sqrt();
    for ((d, &x), &g) in du.iter_mut().zip(u).zip(dg) {
        let pdf = inv_sqrt_2pi * exp(-0.5 * x * x);
        *d = g * (normal_cdf(x) + x * pdf);
    }
}
