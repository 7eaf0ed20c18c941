//! Ragged 2-D data: rows of different lengths stored flat with row offsets.
//!
//! Per-sequence token arrays (log-probabilities, masks) and groups of rewards are
//! ragged. Storing them as one flat buffer plus `offsets` (row `i` is
//! `values[offsets[i]..offsets[i + 1]]`) keeps the hot loops over contiguous memory and
//! maps one-to-one onto the segmented reductions of the GPU kernels.

use serde::{Deserialize, Serialize};

use crate::error::{FieldError, Result};

/// Rows of different lengths, stored contiguously.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "Vec<Vec<T>>", into = "Vec<Vec<T>>")]
pub struct Ragged<T: Clone> {
    values: Vec<T>,
    offsets: Vec<usize>,
}

impl<T: Clone> Default for Ragged<T> {
    fn default() -> Self {
        Self {
            values: Vec::new(),
            offsets: vec![0],
        }
    }
}

impl<T: Clone> Ragged<T> {
    /// Builds from nested rows.
    pub fn from_rows<R: AsRef<[T]>>(rows: &[R]) -> Self {
        let mut out = Self::default();
        for row in rows {
            out.push_row(row.as_ref());
        }
        out
    }

    /// Builds from a flat buffer and row lengths; fails if the lengths do not add up.
    pub fn from_flat(values: Vec<T>, lengths: &[usize]) -> Result<Self> {
        let mut offsets = Vec::with_capacity(lengths.len() + 1);
        offsets.push(0);
        let mut total = 0usize;
        for &len in lengths {
            total += len;
            offsets.push(total);
        }
        if total != values.len() {
            return Err(FieldError::new(
                "lengths",
                format!("add up to {total} but there are {} values", values.len()),
            ));
        }
        Ok(Self { values, offsets })
    }

    /// A ragged array with this one's shape holding `values` (one per entry, row after
    /// row). Fails if the count differs.
    pub fn with_values<U: Clone>(&self, values: Vec<U>) -> Result<Ragged<U>> {
        if values.len() != self.values.len() {
            return Err(FieldError::new(
                "values",
                format!(
                    "has {} entries but the shape holds {}",
                    values.len(),
                    self.values.len()
                ),
            ));
        }
        Ok(Ragged {
            values,
            offsets: self.offsets.clone(),
        })
    }

    /// Appends one row.
    pub fn push_row(&mut self, row: &[T]) {
        self.values.extend_from_slice(row);
        self.offsets.push(self.values.len());
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Total number of values over all rows.
    pub fn total_len(&self) -> usize {
        self.values.len()
    }

    /// Row `i`.
    ///
    /// # Panics
    /// If `i >= self.rows()` (a caller bug, not user input).
    pub fn row(&self, i: usize) -> &[T] {
        &self.values[self.offsets[i]..self.offsets[i + 1]]
    }

    /// Length of row `i`.
    pub fn row_len(&self, i: usize) -> usize {
        self.offsets[i + 1] - self.offsets[i]
    }

    /// Iterator over rows.
    pub fn iter_rows(&self) -> impl ExactSizeIterator<Item = &[T]> + '_ {
        self.offsets.windows(2).map(|w| &self.values[w[0]..w[1]])
    }

    /// Row lengths.
    pub fn lengths(&self) -> Vec<usize> {
        self.offsets.windows(2).map(|w| w[1] - w[0]).collect()
    }

    /// The flat values, row after row.
    pub fn flat(&self) -> &[T] {
        &self.values
    }

    /// Row start offsets, with the total length appended (`rows() + 1` entries).
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// A ragged array of the same shape with `f` applied to every value.
    pub fn map<U: Clone>(&self, f: impl FnMut(&T) -> U) -> Ragged<U> {
        Ragged {
            values: self.values.iter().map(f).collect(),
            offsets: self.offsets.clone(),
        }
    }

    /// Nested rows.
    pub fn to_rows(&self) -> Vec<Vec<T>> {
        self.iter_rows().map(<[T]>::to_vec).collect()
    }

    /// Checks that `other` (called `other_field`) has exactly this shape; the error
    /// names the first row that differs.
    pub fn check_same_shape<U: Clone>(
        &self,
        field: &str,
        other_field: &str,
        other: &Ragged<U>,
    ) -> Result<()> {
        if other.rows() != self.rows() {
            return Err(FieldError::new(
                other_field,
                format!(
                    "has {} rows but {field} has {}; they must line up",
                    other.rows(),
                    self.rows()
                ),
            ));
        }
        for i in 0..self.rows() {
            if other.row_len(i) != self.row_len(i) {
                return Err(FieldError::new(
                    format!("{other_field}[{i}]"),
                    format!(
                        "has {} entries but {field}[{i}] has {}; they must line up",
                        other.row_len(i),
                        self.row_len(i)
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl Ragged<f64> {
    /// Fails on the first non-finite value, naming it as `field[row][col]`.
    pub fn check_finite(&self, field: &str) -> Result<()> {
        for (i, row) in self.iter_rows().enumerate() {
            if let Some(j) = row.iter().position(|v| !v.is_finite()) {
                return Err(FieldError::new(
                    format!("{field}[{i}][{j}]"),
                    format!("must be a finite number, got {}", row[j]),
                ));
            }
        }
        Ok(())
    }
}

impl<T: Clone> From<Vec<Vec<T>>> for Ragged<T> {
    fn from(rows: Vec<Vec<T>>) -> Self {
        Self::from_rows(&rows)
    }
}

impl<T: Clone> From<Ragged<T>> for Vec<Vec<T>> {
    fn from(r: Ragged<T>) -> Self {
        r.to_rows()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip_through_flat_storage() {
        let rows = vec![vec![1.0, 2.0], vec![], vec![3.0, 4.0, 5.0]];
        let r = Ragged::from_rows(&rows);
        assert_eq!(r.rows(), 3);
        assert_eq!(r.lengths(), vec![2, 0, 3]);
        assert_eq!(r.row(2), &[3.0, 4.0, 5.0]);
        assert_eq!(r.to_rows(), rows);
    }

    #[test]
    fn shape_mismatch_names_the_row() {
        let a = Ragged::from_rows(&[vec![1.0], vec![1.0, 2.0]]);
        let b = Ragged::from_rows(&[vec![1.0], vec![1.0]]);
        let err = a.check_same_shape("logp", "old_logp", &b).unwrap_err();
        assert_eq!(err.field, "old_logp[1]");
    }

    #[test]
    fn flat_lengths_must_add_up() {
        assert!(Ragged::from_flat(vec![1, 2, 3], &[1, 1]).is_err());
        assert_eq!(
            Ragged::from_flat(vec![1, 2, 3], &[1, 2]).unwrap().row(1),
            &[2, 3]
        );
    }
}
