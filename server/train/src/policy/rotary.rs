//! Rotary position embedding (Su et al. 2021), the `model.positions = "rotary"`
//! alternative to a learned position table. A head's query and key vectors (width
//! `dh = 2 m`) are split into halves, and pair `i` (entries `i` and `i + m`) is turned
//! by the angle `p θ_i` of the token's position `p`:
//!
//! ```text
//! θ_i = BASE^(-i / m)              i = 0 .. m
//! y_i     = x_i cos(p θ_i) - x_{i+m} sin(p θ_i)
//! y_{i+m} = x_i sin(p θ_i) + x_{i+m} cos(p θ_i)
//! ```
//!
//! A turn is a rotation, so `R(p)ᵀ = R(-p)` and `R(p)ᵀ R(p') = R(p' - p)`: the score
//! `(R(p) q) · (R(p') k) = q · R(p' - p) k` depends on the offset between query and key,
//! not on where they sit. The backward pass of a turn is the turn by `-p`. Keys are
//! cached turned, at the positions they were fed at.
//!
//! The halves layout (not interleaved pairs) is the one of GPT-NeoX and Hugging Face's
//! `rotate_half`; [`crate::policy::model`] computes it with burn's tensors as
//! `x cos + rotate_half(x) sin`, [`crate::policy::fused`] with [`Table`], both from
//! [`angle`].

/// The base of the frequencies (10,000, the paper's and most models' since).
pub const BASE: f64 = 10_000.0;

/// The angle in radians of pair `pair` of `pairs` at position `position`.
pub fn angle(position: usize, pair: usize, pairs: usize) -> f64 {
    position as f64 * BASE.powf(-(pair as f64) / pairs as f64)
}

/// `cos` and `sin` of every pair's angle at every position `0..positions`, for heads of
/// width `2 pairs`.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    pairs: usize,
    cos: Vec<f32>,
    sin: Vec<f32>,
}

impl Table {
    /// The table for heads of width `head_dim` (even) and `positions` positions.
    ///
    /// # Panics
    /// When `head_dim` is odd (the config refuses it: `model.positions`).
    pub fn new(head_dim: usize, positions: usize) -> Self {
        assert!(
            head_dim.is_multiple_of(2),
            "rotary positions need an even head width"
        );
        let pairs = head_dim / 2;
        let (mut cos, mut sin) = (
            Vec::with_capacity(positions * pairs),
            Vec::with_capacity(positions * pairs),
        );
        for p in 0..positions {
            for i in 0..pairs {
                let (s, c) = angle(p, i, pairs).sin_cos();
                cos.push(c as f32);
                sin.push(s as f32);
            }
        }
        Self { pairs, cos, sin }
    }

    /// Positions the table covers.
    pub fn positions(&self) -> usize {
        self.cos.len() / self.pairs.max(1)
    }

    /// Turns one head's vector `x` (`2 pairs` wide) by the angles of `position`, or
    /// back by them when `inverse` (the transpose: a gradient's way back).
    pub fn turn(&self, x: &mut [f32], position: usize, inverse: bool) {
        let m = self.pairs;
        let at = position * m;
        let (cos, sin) = (&self.cos[at..at + m], &self.sin[at..at + m]);
        let sign = if inverse { -1.0 } else { 1.0 };
        let (low, high) = x.split_at_mut(m);
        for (((a, b), &c), &s) in low.iter_mut().zip(high.iter_mut()).zip(cos).zip(sin) {
            let s = sign * s;
            let (x0, x1) = (*a, *b);
            *a = x0 * c - x1 * s;
            *b = x0 * s + x1 * c;
        }
    }

    /// Turns the query and the key of every head in one `[q | k | v]` row (`3 d` wide,
    /// head `h` in columns `h dh .. (h + 1) dh` of each part) by `position`'s angles;
    /// the values stay as they are.
    pub fn turn_queries_and_keys(&self, qkv_row: &mut [f32], position: usize, inverse: bool) {
        let dh = 2 * self.pairs;
        let d = qkv_row.len() / 3;
        for head in qkv_row[..2 * d].chunks_exact_mut(dh) {
            self.turn(head, position, inverse);
        }
    }

    /// [`Table::turn_queries_and_keys`] for every `[q | k | v]` row of `qkv` (rows of
    /// `row_width = 3 d`), row `i` by the `i`-th of `positions`.
    pub fn turn_rows(
        &self,
        qkv: &mut [f32],
        row_width: usize,
        positions: impl IntoIterator<Item = usize>,
        inverse: bool,
    ) {
        for (row, position) in qkv.chunks_exact_mut(row_width).zip(positions) {
            self.turn_queries_and_keys(row, position, inverse);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dot(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn the_first_angles_are_the_closed_form() {
        // Pair 0 turns by the position itself; pair i of m by p 10000^(-i/m).
        assert!((angle(3, 0, 4) - 3.0).abs() < 1e-12);
        assert!((angle(5, 2, 4) - 5.0 / 100.0).abs() < 1e-12);
        let table = Table::new(8, 16);
        assert_eq!(table.positions(), 16);
        let mut x = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        table.turn(&mut x, 2, false);
        // Pair 0 of (1, 0) by 2 radians: (cos 2, sin 2) in entries 0 and 4.
        assert!((x[0] - 2.0f32.cos()).abs() < 1e-6 && (x[4] - 2.0f32.sin()).abs() < 1e-6);
        assert_eq!((x[1], x[2], x[3]), (0.0, 0.0, 0.0));
    }

    #[test]
    fn a_turn_keeps_the_length_and_its_inverse_undoes_it() {
        let table = Table::new(6, 40);
        let x = [0.3, -1.2, 2.0, 0.7, -0.4, 1.1];
        let mut y = x;
        table.turn(&mut y, 37, false);
        assert!((dot(&x, &x) - dot(&y, &y)).abs() < 1e-5);
        table.turn(&mut y, 37, true);
        for (a, b) in x.iter().zip(&y) {
            assert!((a - b).abs() < 1e-5, "{x:?} vs {y:?}");
        }
    }

    #[test]
    fn scores_depend_on_the_offset_only() {
        let table = Table::new(8, 64);
        let q = [0.5, -0.1, 0.9, 0.2, -0.7, 0.3, 0.05, -1.0];
        let k = [-0.2, 0.8, 0.1, -0.6, 0.4, 0.9, -0.3, 0.2];
        let score = |pq: usize, pk: usize| {
            let (mut a, mut b) = (q, k);
            table.turn(&mut a, pq, false);
            table.turn(&mut b, pk, false);
            dot(&a, &b)
        };
        for shift in [1, 9, 40] {
            assert!((score(12, 5) - score(12 + shift, 5 + shift)).abs() < 1e-5);
        }
        // A different offset gives a different score.
        assert!((score(12, 5) - score(12, 6)).abs() > 1e-3);
    }

    #[test]
    fn a_qkv_row_turns_queries_and_keys_and_leaves_values() {
        let table = Table::new(4, 8);
        let mut row: Vec<f32> = (0..24).map(|i| i as f32 * 0.1).collect();
        let before = row.clone();
        table.turn_queries_and_keys(&mut row, 3, false);
        assert_eq!(row[16..], before[16..]);
        let mut head = before[4..8].to_vec();
        table.turn(&mut head, 3, false);
        assert_eq!(row[4..8], head[..]);
    }
}
