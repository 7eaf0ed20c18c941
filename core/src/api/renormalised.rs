//! Which probability fields of a request were renormalised. A distribution whose sum is
//! off 1 by more than the rounding of the sum itself, but within
//! `error::check::SUM_TOLERANCE` (`1e-4` relative; entries rounded to six decimals
//! land there), is divided by its sum before anything is computed
//! (`error::check::distribution`), and the response says so: each such field, with
//! the sum it had.

use serde::{Deserialize, Serialize};

use crate::error::check;

/// One renormalised field of a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Renormalised {
    /// The request field, as named in the request (`mu`, `teacher_probs`).
    pub field: String,
    /// The sum of its entries as given; every entry was divided by it.
    pub sum: f64,
}

/// The fields among `fields` (name and the values, when the request has them) that a
/// valid request had renormalised, in the order given.
pub fn renormalised(fields: &[(&str, Option<&[f64]>)]) -> Vec<Renormalised> {
    fields
        .iter()
        .filter_map(|&(field, values)| {
            let sum: f64 = values?.iter().sum();
            check::needs_renormalising(sum).then(|| Renormalised {
                field: field.to_string(),
                sum,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_sums_off_one_beyond_rounding_are_listed() {
        let rounded = [0.333_333, 0.333_333, 0.333_333];
        let exact = [0.25, 0.75];
        let listed = renormalised(&[
            ("mu", Some(&rounded[..])),
            ("pi", Some(&exact[..])),
            ("absent", None),
        ]);
        assert_eq!(
            listed,
            vec![Renormalised {
                field: "mu".into(),
                sum: 0.999_999
            }]
        );
    }
}
