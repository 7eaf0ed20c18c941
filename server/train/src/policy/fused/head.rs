//! From a scored position's logits `z` to the token's log-probability and the
//! distribution's entropy, and their gradients back to `z` (the trainer's
//! `loss::token_logprobs` and `loss::entropy_with_graph` for one position):
//!
//! ```text
//! s_j = z_j / T, or -1e9 where the nucleus did not keep token j
//! logp = s_y - logsumexp_j s_j                          dlogp/dz_j = (1[j = y] - p_j) / T   (kept j; 0 otherwise)
//! H = -sum_j q_j log q_j,  q = softmax(z / T)          dH/dz_j = -q_j (log q_j + H) / T
//! ```
//!
//! The entropy is of the whole distribution at temperature `T`, without the nucleus
//! mask, as the trainer logs and regularises it; `p` is the masked softmax. `exp` is
//! [`super::vecmath::exp`].

use super::vecmath::exp;

/// A masked logit, as `loss::token_logprobs` fills it.
const MASKED: f32 = -1.0e9;

/// What the backward pass needs of one scored position.
#[derive(Debug)]
pub struct Saved {
    /// `log q_j`, the unmasked log-softmax at temperature `T`.
    pub log_q: Vec<f32>,
    /// `p_j`, the masked softmax, when a nucleus mask applies (otherwise `p = q`).
    pub p: Option<Vec<f32>>,
    /// Whether the nucleus kept each token (when a mask applies).
    pub kept: Option<Vec<bool>>,
    /// The scored token.
    pub target: usize,
    /// `H`.
    pub entropy: f32,
}

fn log_softmax(s: &[f32], out: &mut [f32]) {
    let max = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f32 = s.iter().map(|&v| exp(v - max)).sum();
    let lse = max + sum.ln();
    for (o, &v) in out.iter_mut().zip(s) {
        *o = v - lse;
    }
}

/// The log-probability of `target` and the entropy at one position with logits `z`,
/// temperature `temperature` and the nucleus's kept tokens (`None`: all).
pub fn forward(z: &[f32], target: usize, temperature: f32, kept: Option<&[bool]>) -> (f32, Saved) {
    let scaled: Vec<f32> = z.iter().map(|&v| v / temperature).collect();
    let mut log_q = vec![0.0; z.len()];
    log_softmax(&scaled, &mut log_q);
    let entropy = -log_q.iter().map(|&l| exp(l) * l).sum::<f32>();
    let (logp, p) = match kept {
        None => (log_q[target], None),
        Some(kept) => {
            let masked: Vec<f32> = scaled
                .iter()
                .zip(kept)
                .map(|(&v, &k)| if k { v } else { MASKED })
                .collect();
            let mut log_p = vec![0.0; z.len()];
            log_softmax(&masked, &mut log_p);
            (log_p[target], Some(log_p.iter().map(|&l| exp(l)).collect()))
        }
    };
    (
        logp,
        Saved {
            log_q,
            p,
            kept: kept.map(<[bool]>::to_vec),
            target,
            entropy,
        },
    )
}

/// `dz` (overwritten) from the gradients of the log-probability and of the entropy.
pub fn backward(saved: &Saved, temperature: f32, d_logp: f32, d_entropy: f32, dz: &mut [f32]) {
    let inv_t = 1.0 / temperature;
    for (j, (out, &lq)) in dz.iter_mut().zip(&saved.log_q).enumerate() {
        let q = exp(lq);
        let p = saved.p.as_ref().map_or(q, |p| p[j]);
        let one = if j == saved.target { 1.0 } else { 0.0 };
        let kept = saved.kept.as_ref().is_none_or(|k| k[j]);
        let from_logp = if kept { d_logp * (one - p) } else { 0.0 };
        let from_entropy = -d_entropy * q * (lq + saved.entropy);
        *out = (from_logp + from_entropy) * inv_t;
    }
}
