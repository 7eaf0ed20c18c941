//! Matrix products on the CPU: the one place the fused path calls the `gemm` crate
//! (the same kernels burn's CPU backend uses), behind a safe interface.
//!
//! A [`View`] is a matrix inside a slice: `rows x cols` with a row stride and a column
//! stride, so a transposed operand is the same slice with its strides swapped and a
//! head's columns inside a wider row are a view with an offset. [`matmul`] checks that
//! every element either view or the output can reach lies inside its slice before it
//! hands the pointers to `gemm`; a shape mismatch panics with the shapes, as an index
//! out of bounds would (the callers build every shape from one microbatch's sizes).

/// A `rows x cols` matrix inside `data`: element `(i, j)` is
/// `data[offset + i * row_stride + j * col_stride]`.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    data: &'a [f32],
    offset: usize,
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

impl<'a> View<'a> {
    /// A row-major `rows x cols` matrix filling the start of `data`.
    pub fn rows(data: &'a [f32], rows: usize, cols: usize) -> Self {
        Self::strided(data, 0, rows, cols, cols, 1)
    }

    /// A general view (see the type's docs).
    pub fn strided(
        data: &'a [f32],
        offset: usize,
        rows: usize,
        cols: usize,
        row_stride: usize,
        col_stride: usize,
    ) -> Self {
        Self {
            data,
            offset,
            rows,
            cols,
            row_stride,
            col_stride,
        }
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    /// Row `i` as a slice.
    ///
    /// # Panics
    /// When the view's columns are not contiguous or `i` is past its rows.
    pub fn row(&self, i: usize) -> &'a [f32] {
        assert!(
            self.col_stride == 1 && i < self.rows,
            "row {i} of a {}-row view",
            self.rows
        );
        let start = self.offset + i * self.row_stride;
        &self.data[start..start + self.cols]
    }

    /// The transpose: the same elements, `cols x rows`.
    #[must_use]
    pub fn t(self) -> Self {
        Self {
            rows: self.cols,
            cols: self.rows,
            row_stride: self.col_stride,
            col_stride: self.row_stride,
            ..self
        }
    }

    /// Rows `start..end` of this view.
    ///
    /// # Panics
    /// When the range is not within the view's rows.
    #[must_use]
    pub fn row_range(self, start: usize, end: usize) -> Self {
        assert!(
            start <= end && end <= self.rows,
            "rows {start}..{end} of {}",
            self.rows
        );
        Self {
            offset: self.offset + start * self.row_stride,
            rows: end - start,
            ..self
        }
    }

    /// Columns `start..end` of this view.
    ///
    /// # Panics
    /// When the range is not within the view's columns.
    #[must_use]
    pub fn col_range(self, start: usize, end: usize) -> Self {
        assert!(
            start <= end && end <= self.cols,
            "columns {start}..{end} of {}",
            self.cols
        );
        Self {
            offset: self.offset + start * self.col_stride,
            cols: end - start,
            ..self
        }
    }

    /// Whether every element lies inside the slice.
    fn fits(&self, len: usize) -> bool {
        if self.rows == 0 || self.cols == 0 {
            return self.offset <= len;
        }
        let last =
            self.offset + (self.rows - 1) * self.row_stride + (self.cols - 1) * self.col_stride;
        last < len
    }
}

/// The output of a product: a `rows x cols` matrix inside `data` with a row stride
/// (columns are contiguous).
#[derive(Debug)]
pub struct ViewMut<'a> {
    data: &'a mut [f32],
    offset: usize,
    rows: usize,
    cols: usize,
    row_stride: usize,
}

impl<'a> ViewMut<'a> {
    /// A row-major `rows x cols` matrix filling the start of `data`.
    pub fn rows(data: &'a mut [f32], rows: usize, cols: usize) -> Self {
        Self::strided(data, 0, rows, cols, cols)
    }

    /// Rows of `cols` contiguous elements, `row_stride` apart, from `offset`.
    pub fn strided(
        data: &'a mut [f32],
        offset: usize,
        rows: usize,
        cols: usize,
        row_stride: usize,
    ) -> Self {
        Self {
            data,
            offset,
            rows,
            cols,
            row_stride,
        }
    }

    fn fits(&self) -> bool {
        if self.rows == 0 || self.cols == 0 {
            return self.offset <= self.data.len();
        }
        self.offset + (self.rows - 1) * self.row_stride + self.cols - 1 < self.data.len()
    }
}

/// Whether a product overwrites its output or adds to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Into {
    /// `out = scale * a b`.
    Overwrite,
    /// `out += scale * a b`.
    Add,
}

/// `out (=|+=) scale * a b` for `a: m x k`, `b: k x n`, `out: m x n`, on the calling
/// thread.
///
/// # Panics
/// When the shapes disagree or a view reaches outside its slice.
#[allow(unsafe_code)]
// The output view holds the mutable borrow of its slice; taking it by value ends that
// borrow with the product.
#[allow(clippy::needless_pass_by_value)]
pub fn matmul(out: ViewMut<'_>, a: View<'_>, b: View<'_>, scale: f32, into: Into) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert!(
        b.rows == k && out.rows == m && out.cols == n,
        "matmul shapes: a {}x{}, b {}x{}, out {}x{}",
        a.rows,
        a.cols,
        b.rows,
        b.cols,
        out.rows,
        out.cols
    );
    assert!(
        a.fits(a.data.len()),
        "matmul: the left operand reaches outside its slice"
    );
    assert!(
        b.fits(b.data.len()),
        "matmul: the right operand reaches outside its slice"
    );
    assert!(out.fits(), "matmul: the output reaches outside its slice");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if into == Into::Overwrite {
            for i in 0..m {
                let start = out.offset + i * out.row_stride;
                out.data[start..start + n].fill(0.0);
            }
        }
        return;
    }
    // SAFETY: every element the three views address lies inside its slice (checked
    // above); `out` is borrowed mutably, so it overlaps neither operand.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.data.as_mut_ptr().add(out.offset),
            1,
            out.row_stride as isize,
            into == Into::Add,
            a.data.as_ptr().add(a.offset),
            a.col_stride as isize,
            a.row_stride as isize,
            b.data.as_ptr().add(b.offset),
            b.col_stride as isize,
            b.row_stride as isize,
            1.0,
            scale,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &View<'_>, b: &View<'_>) -> Vec<f32> {
        let at = |v: &View<'_>, i: usize, j: usize| {
            v.data[v.offset + i * v.row_stride + j * v.col_stride]
        };
        let mut out = vec![0.0; a.rows * b.cols];
        for i in 0..a.rows {
            for j in 0..b.cols {
                out[i * b.cols + j] = (0..a.cols).map(|p| at(a, i, p) * at(b, p, j)).sum();
            }
        }
        out
    }

    fn numbers(len: usize, salt: u32) -> Vec<f32> {
        (0..len)
            .map(|i| (((i as u32).wrapping_mul(2_654_435_761) ^ salt) % 1000) as f32 / 500.0 - 1.0)
            .collect()
    }

    #[test]
    fn products_of_plain_transposed_and_strided_views_match_the_definition() {
        let a_data = numbers(7 * 5, 1);
        let b_data = numbers(5 * 9, 2);
        let a = View::rows(&a_data, 7, 5);
        let b = View::rows(&b_data, 5, 9);
        // A 3-wide column band of a 9-wide matrix, as a head is inside a row of qkv.
        let band = View::strided(&b_data, 3, 5, 3, 9, 1);
        // The same 7 x 5 numbers stored transposed.
        let stored_t: Vec<f32> = (0..5 * 7).map(|i| a_data[(i % 7) * 5 + i / 7]).collect();
        let at = View::rows(&stored_t, 5, 7).t();
        for (a, b) in [
            (a, b),
            (a, band),
            (at, b),
            (at.row_range(2, 6), band.col_range(1, 3)),
        ] {
            let expected = naive(&a, &b);
            let mut out = vec![f32::NAN; a.rows * b.cols];
            matmul(
                ViewMut::rows(&mut out, a.rows, b.cols),
                a,
                b,
                1.0,
                Into::Overwrite,
            );
            for (x, y) in out.iter().zip(&expected) {
                assert!((x - y).abs() <= 1e-5, "{x} vs {y}");
            }
            matmul(
                ViewMut::rows(&mut out, a.rows, b.cols),
                a,
                b,
                0.5,
                Into::Add,
            );
            for (x, y) in out.iter().zip(&expected) {
                assert!((x - 1.5 * y).abs() <= 1e-5, "{x} vs 1.5 x {y}");
            }
        }
    }

    #[test]
    #[should_panic(expected = "outside its slice")]
    fn a_view_past_its_slice_is_refused() {
        let a = vec![0.0; 6];
        let b = vec![0.0; 6];
        let mut out = vec![0.0; 4];
        matmul(
            ViewMut::rows(&mut out, 2, 2),
            View::strided(&a, 1, 2, 3, 3, 1),
            View::rows(&b, 3, 2),
            1.0,
            Into::Overwrite,
        );
    }
}
