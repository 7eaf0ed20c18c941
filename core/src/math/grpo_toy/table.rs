//! The tabular policy of the toy: one row of logits per state `(position, previous
//! token)`, a softmax over the vocabulary in each row, and the exact chain rule from a
//! sampled token's log-probability back to its row.

use crate::error::{FieldError, Result};
use crate::rng::RandomStream;

/// The end token: sampling it ends the response (and it counts as one of its tokens).
pub const END: usize = 0;

/// The largest logit magnitude a run may reach. A row whose logits differ by more than
/// about 750 is already deterministic in `f64`; past `1e6` the table has certainly
/// diverged (and sums of logits start to lose the differences that matter), so
/// training stops with an error instead.
pub const MAX_LOGIT: f64 = 1e6;

/// The previous-token index of the start state (position 0). It shares the index of
/// [`END`], which never precedes another token, so the table needs no extra row.
pub const START: usize = 0;

/// Logits `z[t][prev][v]` for positions `t < max_length`, previous tokens `prev < vocab`
/// (with [`START`] at position 0) and next tokens `v < vocab`, stored flat, row after row.
///
/// Rows `(0, prev != START)` and `(t >= 1, END)` are never visited by a response; they
/// keep their initial values, since no sampled token ever sends them a gradient (an
/// optimiser with momentum leaves them alone too, their gradient being always zero).
#[derive(Debug, Clone, PartialEq)]
pub struct LogitTable {
    vocab: usize,
    max_length: usize,
    logits: Vec<f64>,
}

impl LogitTable {
    /// A table of `max_length * vocab` rows of `vocab` logits, all zero (the uniform
    /// policy). Sizes are checked by the caller.
    pub fn zeros(vocab: usize, max_length: usize) -> Self {
        Self {
            vocab,
            max_length,
            logits: vec![0.0; max_length * vocab * vocab],
        }
    }

    /// A table from its flat logits (field `logits`, `max_length * vocab * vocab`
    /// finite values).
    pub fn from_logits(vocab: usize, max_length: usize, logits: Vec<f64>) -> Result<Self> {
        let expected = max_length * vocab * vocab;
        if logits.len() != expected {
            return Err(FieldError::new(
                "logits",
                format!(
                    "has {} values; a table of {max_length} positions over {vocab} tokens \
                     holds {expected}",
                    logits.len()
                ),
            ));
        }
        crate::error::check::all_finite("logits", &logits)?;
        Ok(Self {
            vocab,
            max_length,
            logits,
        })
    }

    /// Vocabulary size `V`, the end token included.
    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// Length cap `L`: the most tokens a response holds.
    pub fn max_length(&self) -> usize {
        self.max_length
    }

    /// Number of rows, `L * V`.
    pub fn rows(&self) -> usize {
        self.max_length * self.vocab
    }

    /// The flat logits, row `(t, prev)` at `(t * V + prev) * V`.
    pub fn logits(&self) -> &[f64] {
        &self.logits
    }

    /// The flat logits, to update in place.
    pub fn logits_mut(&mut self) -> &mut [f64] {
        &mut self.logits
    }

    /// The row index of state `(position, prev)`.
    #[inline]
    pub fn row_index(&self, position: usize, prev: usize) -> usize {
        position * self.vocab + prev
    }

    /// The logits of row `row`.
    pub fn row(&self, row: usize) -> &[f64] {
        &self.logits[row * self.vocab..(row + 1) * self.vocab]
    }

    /// `log softmax` of every row, in the table's layout.
    pub fn log_probs(&self) -> Vec<f64> {
        let mut out = vec![0.0; self.logits.len()];
        for (row, out_row) in self
            .logits
            .chunks_exact(self.vocab)
            .zip(out.chunks_exact_mut(self.vocab))
        {
            log_softmax_into(row, out_row);
        }
        out
    }

    /// Whether every logit is finite and at most [`MAX_LOGIT`] in magnitude.
    pub fn is_bounded(&self) -> bool {
        self.logits.iter().all(|z| z.abs() <= MAX_LOGIT)
    }
}

/// What a table's policy does, computed exactly by a forward pass over the states.
#[derive(Debug, Clone, PartialEq)]
pub struct Marginals {
    /// `position_probs[t][v]`: the probability that a response has a token at position
    /// `t` and that it is `v` (row `t` sums to the probability of reaching `t`).
    pub position_probs: Vec<Vec<f64>>,
    /// `length_probs[l - 1]`: the probability that a response has `l` tokens (ended by
    /// the end token, or cut at the cap `L`).
    pub length_probs: Vec<f64>,
}

/// The marginals of `table`'s policy: with `m_0(START) = 1` and
/// `m_{t+1}(v) = sum_prev m_t(prev) pi(v | t, prev)` for `v != END`,
/// `P(token t = v) = sum_prev m_t(prev) pi(v | t, prev)`,
/// `P(length = t + 1) = P(token t = END)` for `t < L - 1`, and all the mass still
/// going at `L - 1` for `L`.
pub fn marginals(table: &LogitTable) -> Marginals {
    let (vocab, max_length) = (table.vocab(), table.max_length());
    let log_probs = table.log_probs();
    let mut mass = vec![0.0; vocab];
    mass[START] = 1.0;
    let mut position_probs = Vec::with_capacity(max_length);
    let mut length_probs = vec![0.0; max_length];
    for (t, length_prob) in length_probs.iter_mut().enumerate() {
        let mut tokens = vec![0.0; vocab];
        for (prev, &m) in mass.iter().enumerate() {
            if m == 0.0 {
                continue;
            }
            let row = table.row_index(t, prev) * vocab;
            for (v, out) in tokens.iter_mut().enumerate() {
                *out += m * log_probs[row + v].exp();
            }
        }
        *length_prob = if t + 1 == max_length {
            tokens.iter().sum()
        } else {
            tokens[END]
        };
        mass.clone_from(&tokens);
        mass[END] = 0.0;
        position_probs.push(tokens);
    }
    Marginals {
        position_probs,
        length_probs,
    }
}

/// `out = log softmax(logits)`, shifted by the maximum so that large logits do not
/// overflow.
pub fn log_softmax_into(logits: &[f64], out: &mut [f64]) {
    let max = logits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let sum: f64 = logits.iter().map(|&z| (z - max).exp()).sum();
    let log_sum = sum.ln();
    for (o, &z) in out.iter_mut().zip(logits) {
        *o = (z - max) - log_sum;
    }
}

/// The row of each token of `response`: token `k` is drawn in state `(k, tokens[k-1])`,
/// the first one in `(0, START)`.
pub fn token_rows<'a>(
    table: &'a LogitTable,
    response: &'a [usize],
) -> impl Iterator<Item = usize> + 'a {
    let vocab = table.vocab();
    (0..response.len()).map(move |k| {
        let prev = if k == 0 { START } else { response[k - 1] };
        k * vocab + prev
    })
}

/// Draws one response from `probs` (the table's probabilities, same layout): one
/// categorical draw per token ([`RandomStream::categorical`]) until [`END`] or
/// `max_length` tokens.
pub fn sample_response(
    probs: &[f64],
    vocab: usize,
    max_length: usize,
    stream: &mut RandomStream,
) -> Vec<usize> {
    let mut tokens = Vec::with_capacity(max_length);
    let mut prev = START;
    for position in 0..max_length {
        let row = (position * vocab + prev) * vocab;
        let token = stream.categorical(&probs[row..row + vocab]);
        tokens.push(token);
        if token == END {
            break;
        }
        prev = token;
    }
    tokens
}

/// Adds `d loss / d z` for one sampled token to `gradient` (the table's layout): with
/// `g = d loss / d log pi(v | s)` and `d log pi(v | s) / d z_s,j = 1{j = v} - pi(j | s)`,
/// row `s` receives `g (e_v - pi(. | s))`. Only the token's own row depends on it.
#[inline]
pub fn add_token_gradient(
    gradient: &mut [f64],
    probs: &[f64],
    vocab: usize,
    row: usize,
    token: usize,
    d_loss_d_logp: f64,
) {
    let start = row * vocab;
    for (g, &p) in gradient[start..start + vocab]
        .iter_mut()
        .zip(&probs[start..start + vocab])
    {
        *g -= d_loss_d_logp * p;
    }
    gradient[start + token] += d_loss_d_logp;
}

/// Entropy `-sum_v p_v log p_v` (nats) of one row from its log-probabilities.
pub fn row_entropy(log_probs: &[f64]) -> f64 {
    -log_probs
        .iter()
        .map(|&l| {
            if l == f64::NEG_INFINITY {
                0.0
            } else {
                l.exp() * l
            }
        })
        .sum::<f64>()
}

/// `KL(pi || pi_ref) = sum_v p_v (log p_v - log p_ref_v)` of one row, exactly.
pub fn row_kl(log_probs: &[f64], ref_log_probs: &[f64]) -> f64 {
    log_probs
        .iter()
        .zip(ref_log_probs)
        .map(|(&l, &r)| {
            if l == f64::NEG_INFINITY {
                0.0
            } else {
                l.exp() * (l - r)
            }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_indexed_by_position_then_previous_token() {
        let table = LogitTable::zeros(4, 3);
        assert_eq!(table.rows(), 12);
        assert_eq!(table.row_index(2, 3), 11);
        let rows: Vec<usize> = token_rows(&table, &[2, 1, 0]).collect();
        assert_eq!(rows, vec![0, 4 + 2, 2 * 4 + 1]);
    }

    #[test]
    fn log_softmax_is_stable_and_normalised() {
        let mut out = [0.0; 3];
        log_softmax_into(&[1000.0, 1000.0, 0.0], &mut out);
        assert_eq!(out[0], -std::f64::consts::LN_2);
        let total: f64 = out.iter().map(|l| l.exp()).sum();
        assert!((total - 1.0).abs() < 1e-15);
    }

    #[test]
    fn the_token_gradient_is_the_softmax_score() {
        let logits = [0.3, -0.2, 0.9];
        let mut logp = [0.0; 3];
        log_softmax_into(&logits, &mut logp);
        let probs: Vec<f64> = logp.iter().map(|l| l.exp()).collect();
        let mut gradient = vec![0.0; 3];
        add_token_gradient(&mut gradient, &probs, 3, 0, 1, 2.0);
        for j in 0..3 {
            let h = 1e-6;
            let shifted = |delta: f64| {
                let mut z = logits;
                z[j] += delta;
                let mut out = [0.0; 3];
                log_softmax_into(&z, &mut out);
                2.0 * out[1]
            };
            let numeric = (shifted(h) - shifted(-h)) / (2.0 * h);
            assert!((numeric - gradient[j]).abs() < 1e-9, "{j}");
        }
    }

    #[test]
    fn a_response_stops_at_end_or_at_the_cap() {
        let vocab = 3;
        // Row (0, START) always draws token 2, rows (t, 2) always END, except at t = 1.
        let mut probs = vec![0.0; 3 * vocab * vocab];
        for row in 0..3 * vocab {
            probs[row * vocab + END] = 1.0;
        }
        probs[..vocab].copy_from_slice(&[0.0, 0.0, 1.0]);
        probs[(vocab + 2) * vocab..(vocab + 3) * vocab].copy_from_slice(&[0.0, 0.0, 1.0]);
        let mut stream = RandomStream::new(1, 0);
        assert_eq!(
            sample_response(&probs, vocab, 3, &mut stream),
            vec![2, 2, 0]
        );
        assert_eq!(sample_response(&probs, vocab, 2, &mut stream), vec![2, 2]);
    }

    #[test]
    fn the_marginals_of_the_uniform_policy_are_geometric() {
        let (vocab, max_length) = (4, 3);
        let m = marginals(&LogitTable::zeros(vocab, max_length));
        // Every step ends with probability 1/4; the cap takes what is left at L = 3.
        let expected = [0.25, 0.75 * 0.25, 0.75 * 0.75];
        for (got, want) in m.length_probs.iter().zip(expected) {
            assert!((got - want).abs() < 1e-15, "{got} vs {want}");
        }
        assert!((m.position_probs[1].iter().sum::<f64>() - 0.75).abs() < 1e-15);
        assert!((m.position_probs[2][3] - 0.75 * 0.75 / 4.0).abs() < 1e-15);
    }

    #[test]
    fn entropy_and_kl_of_known_rows() {
        let uniform = [(0.25f64).ln(); 4];
        assert!((row_entropy(&uniform) - 4f64.ln()).abs() < 1e-15);
        assert_eq!(row_kl(&uniform, &uniform), 0.0);
        let peaked = [0.0, f64::NEG_INFINITY];
        assert_eq!(row_entropy(&peaked), 0.0);
        assert!((row_kl(&peaked, &[0.5f64.ln(); 2]) - 2f64.ln()).abs() < 1e-15);
    }
}
