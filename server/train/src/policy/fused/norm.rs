//! Layer normalisation over the last axis and its backward pass (burn's `LayerNorm`:
//! the population variance, `epsilon` inside the square root):
//!
//! ```text
//! mu = mean_j x_j     r = 1 / sqrt(mean_j (x_j - mu)^2 + eps)     x^_j = (x_j - mu) r
//! h_j = gamma_j x^_j + beta_j
//! dgamma_j += dh_j x^_j     dbeta_j += dh_j     g_j = dh_j gamma_j
//! dx_j = r (g_j - mean_k g_k - x^_j mean_k g_k x^_k)
//! ```

/// burn's default `LayerNormConfig::epsilon`, which the policy's norms use.
pub const EPSILON: f32 = 1e-5;

/// What the backward pass needs of a normalisation: `x^` per element and `r` per row.
#[derive(Debug, Default)]
pub struct Saved {
    /// `x^`, `rows x d`.
    pub normalised: Vec<f32>,
    /// `r` per row.
    pub inverse_std: Vec<f32>,
}

/// Normalises the `rows x d` matrix `x` into `out` and keeps what the backward pass needs.
pub fn forward(x: &[f32], d: usize, gamma: &[f32], beta: &[f32], out: &mut [f32]) -> Saved {
    let rows = x.len() / d;
    let mut saved = Saved {
        normalised: vec![0.0; x.len()],
        inverse_std: vec![0.0; rows],
    };
    for (((row, out), normalised), r) in x
        .chunks_exact(d)
        .zip(out.chunks_exact_mut(d))
        .zip(saved.normalised.chunks_exact_mut(d))
        .zip(&mut saved.inverse_std)
    {
        let mean = row.iter().sum::<f32>() / d as f32;
        let var = row.iter().map(|&v| (v - mean) * (v - mean)).sum::<f32>() / d as f32;
        *r = 1.0 / (var + EPSILON).sqrt();
        for ((((o, n), &v), &g), &b) in out
            .iter_mut()
            .zip(normalised.iter_mut())
            .zip(row)
            .zip(gamma)
            .zip(beta)
        {
            *n = (v - mean) * *r;
            *o = *n * g + b;
        }
    }
    saved
}

/// Adds the gradient of the normalisation's input to `dx` and of its parameters to
/// `dgamma`, `dbeta`, given the output's gradient `dh`.
pub fn backward(
    saved: &Saved,
    gamma: &[f32],
    dh: &[f32],
    dx: &mut [f32],
    dgamma: &mut [f32],
    dbeta: &mut [f32],
) {
    let d = gamma.len();
    let mut g = vec![0.0f32; d];
    for (((dh, normalised), dx), &r) in dh
        .chunks_exact(d)
        .zip(saved.normalised.chunks_exact(d))
        .zip(dx.chunks_exact_mut(d))
        .zip(&saved.inverse_std)
    {
        let (mut mean_g, mut mean_gx) = (0.0f32, 0.0f32);
        for j in 0..d {
            dgamma[j] += dh[j] * normalised[j];
            dbeta[j] += dh[j];
            g[j] = dh[j] * gamma[j];
            mean_g += g[j];
            mean_gx += g[j] * normalised[j];
        }
        mean_g /= d as f32;
        mean_gx /= d as f32;
        for j in 0..d {
            dx[j] += r * (g[j] - mean_g - normalised[j] * mean_gx);
        }
    }
}
