//! The PPO clipped surrogate, element by element, and which side of the clip is active.
//!
//! For a probability ratio `rho = pi_theta / pi_old` and an advantage `\hat A`, the
//! per-element objective (to maximise) is
//!
//! ```text
//! u(rho, A) = min(rho * A, clip(rho, 1 - eps_low, 1 + eps_high) * A)
//! ```
//!
//! (Schulman et al. 2017, PPO, section 3, equation 7), with the lower and upper widths
//! decoupled as in DAPO's Clip-Higher (Yu et al. 2025, section 3.1). The optional dual
//! clip (Ye et al. 2020, "Mastering Complex Control in MOBA Games", arXiv 1912.09729)
//! bounds the objective from below for negative advantages:
//! `u = max(u, c * A)` when `A < 0`, with a constant `c > 1`. This is verl's
//! `compute_policy_loss_vanilla` with `clip_ratio_c` (verl applies it always, default 3);
//! TRL's `delta` (two-sided GRPO, INTELLECT-2) caps the unclipped ratio at `delta`, which
//! is the same function as a dual clip with `c = delta` whenever `delta > 1 + eps_high`.
//!
//! ## Which side is active
//! - `A > 0` and `rho > 1 + eps_high`: clipped high; the objective is flat at
//!   `(1 + eps_high) * A`, so `d u / d rho = 0`.
//! - `A < 0` and `rho < 1 - eps_low`: clipped low; flat at `(1 - eps_low) * A`.
//! - `A < 0`, a dual clip `c` and `rho > c`: dual-clipped; flat at `c * A`.
//! - otherwise unclipped, `d u / d rho = A` (zero only when `A = 0`).
//!
//! The boundaries themselves count as unclipped: at `rho = 1 + eps_high` the two
//! branches of the `min` are equal and the left derivative `A` is reported. A ratio on
//! the far side of the band for the other sign (`A > 0`, `rho < 1 - eps_low`) is not
//! clipped at all: the `min` then picks the unclipped term, so a gradient remains.

use serde::{Deserialize, Serialize};

use crate::error::{FieldError, Result, check};

/// The clip widths of the surrogate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClipWidths {
    /// Lower width `eps_low`: ratios below `1 - eps_low` saturate for `A < 0`. In `[0, 1]`.
    pub eps_low: f64,
    /// Upper width `eps_high`: ratios above `1 + eps_high` saturate for `A > 0`. `>= 0`.
    pub eps_high: f64,
    /// Dual-clip constant `c > 1` for `A < 0`, or `None` for plain PPO.
    pub dual_clip: Option<f64>,
}

impl ClipWidths {
    /// Symmetric PPO widths without a dual clip.
    pub fn symmetric(eps: f64) -> Self {
        Self {
            eps_low: eps,
            eps_high: eps,
            dual_clip: None,
        }
    }

    /// Checks the widths, naming the fields `eps_low`, `eps_high` and `dual_clip`.
    pub fn validate(&self) -> Result<()> {
        check::non_negative("eps_high", self.eps_high)?;
        self.validate_without_eps_high()
    }

    /// [`Self::validate`] without the `eps_high >= 0` check (for a weight clamp, which
    /// may bound the ratio below 1).
    pub fn validate_without_eps_high(&self) -> Result<()> {
        check::in_range("eps_low", self.eps_low, 0.0, 1.0)?;
        check::finite("eps_high", self.eps_high)?;
        if let Some(c) = self.dual_clip
            && !(c.is_finite() && c > 1.0)
        {
            return Err(FieldError::new(
                "dual_clip",
                format!("must be a finite number > 1, got {c}"),
            ));
        }
        Ok(())
    }

    /// Lower ratio bound `1 - eps_low`.
    pub fn ratio_low(&self) -> f64 {
        1.0 - self.eps_low
    }

    /// Upper ratio bound `1 + eps_high`.
    pub fn ratio_high(&self) -> f64 {
        1.0 + self.eps_high
    }
}

/// Which branch of the clipped surrogate an element sits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClipSide {
    /// The unclipped term `rho * A` is selected.
    Unclipped,
    /// `A < 0` and `rho < 1 - eps_low`: flat at `(1 - eps_low) * A`.
    ClippedLow,
    /// `A > 0` and `rho > 1 + eps_high`: flat at `(1 + eps_high) * A`.
    ClippedHigh,
    /// `A < 0` and `rho > c`: flat at `c * A` (dual clip).
    DualClipped,
}

/// One element of the surrogate: its value, its slope in `rho` and the active side.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SurrogatePoint {
    /// The objective `u(rho, A)` (to maximise).
    pub objective: f64,
    /// `d u / d rho`: `A` when unclipped, 0 on a clipped side.
    pub d_objective_d_ratio: f64,
    /// The active side.
    pub side: ClipSide,
}

impl SurrogatePoint {
    /// Whether the gradient with respect to the ratio is exactly zero (a clipped side,
    /// or `A = 0`).
    pub fn gradient_zero(&self) -> bool {
        self.d_objective_d_ratio == 0.0
    }
}

/// Evaluates the clipped surrogate at one `(rho, A)`; inputs are assumed valid
/// (finite, `rho >= 0`, widths checked by [`ClipWidths::validate`]).
#[inline]
pub fn surrogate_point(ratio: f64, advantage: f64, widths: &ClipWidths) -> SurrogatePoint {
    let side = if advantage > 0.0 && ratio > widths.ratio_high() {
        ClipSide::ClippedHigh
    } else if advantage < 0.0 && ratio < widths.ratio_low() {
        ClipSide::ClippedLow
    } else if advantage < 0.0 && widths.dual_clip.is_some_and(|c| ratio > c) {
        ClipSide::DualClipped
    } else {
        ClipSide::Unclipped
    };
    let (objective, slope) = match side {
        ClipSide::Unclipped => (ratio * advantage, advantage),
        ClipSide::ClippedLow => (widths.ratio_low() * advantage, 0.0),
        ClipSide::ClippedHigh => (widths.ratio_high() * advantage, 0.0),
        ClipSide::DualClipped => (widths.dual_clip.unwrap_or(1.0) * advantage, 0.0),
    };
    SurrogatePoint {
        objective,
        d_objective_d_ratio: slope,
        side,
    }
}

/// Checks the widths and the paired arrays: what [`clipped_surrogate`] checks first.
pub fn check_inputs(ratio: &[f64], advantage: &[f64], widths: &ClipWidths) -> Result<()> {
    widths.validate()?;
    check::same_len("advantage", advantage.len(), "ratio", ratio.len())?;
    for (i, &r) in ratio.iter().enumerate() {
        check::non_negative(&format!("ratio[{i}]"), r)?;
    }
    check::all_finite("advantage", advantage)?;
    for (i, (&r, &a)) in ratio.iter().zip(advantage).enumerate() {
        let objective = surrogate_point(r, a, widths).objective;
        if !objective.is_finite() {
            return Err(FieldError::new(
                format!("advantage[{i}]"),
                format!("the objective {r:e} x {a:e} (or its clipped value) overflows f64"),
            ));
        }
    }
    Ok(())
}

/// The surrogate over paired arrays of ratios and advantages (fields `ratio`,
/// `advantage`). Ratios must be finite and `>= 0`.
pub fn clipped_surrogate(
    ratio: &[f64],
    advantage: &[f64],
    widths: &ClipWidths,
) -> Result<Vec<SurrogatePoint>> {
    check_inputs(ratio, advantage, widths)?;
    Ok(ratio
        .iter()
        .zip(advantage)
        .map(|(&r, &a)| surrogate_point(r, a, widths))
        .collect())
}

/// Where the upper clip bites in absolute probability for a token with old probability
/// `p_old`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Saturation {
    /// The absolute probability increase `eps_high * p_old` after which a
    /// positive-advantage term stops growing.
    pub increment: f64,
    /// The probability `(1 + eps_high) * p_old` at which that happens.
    pub probability: f64,
    /// Whether that probability is at most 1, i.e. the clip can be reached at all.
    pub reachable: bool,
}

/// The absolute-probability view of the upper clip: since the ratio is relative, a token
/// that was unlikely under `pi_old` saturates after a tiny absolute increase (0.002 at
/// `p_old = 0.01`, 0.1 at `p_old = 0.5`, with `eps_high = 0.2`). This is DAPO's
/// motivation for a wider upper width (section 3.1).
pub fn saturation(p_old: f64, eps_high: f64) -> Result<Saturation> {
    check::probability("p_old", p_old)?;
    check::non_negative("eps_high", eps_high)?;
    let probability = (1.0 + eps_high) * p_old;
    Ok(Saturation {
        increment: eps_high * p_old,
        probability,
        reachable: probability <= 1.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SQRT3: f64 = 1.732_050_807_568_877_2;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn article_success_token_at_ratio_1_3_contributes_2_078() {
        let p = surrogate_point(1.3, SQRT3, &ClipWidths::symmetric(0.2));
        assert!(close(p.objective, 1.2 * SQRT3, 1e-12));
        assert!(close(p.objective, 2.078, 5e-4));
        assert_eq!(p.side, ClipSide::ClippedHigh);
        assert!(p.gradient_zero());
    }

    #[test]
    fn article_failure_token_at_ratio_1_3_contributes_minus_0_750_and_keeps_a_gradient() {
        let a = -1.0 / SQRT3;
        let p = surrogate_point(1.3, a, &ClipWidths::symmetric(0.2));
        assert!(close(p.objective, 1.3 * a, 1e-12));
        // The article multiplies the rounded -0.577 (1.3 x -0.577 = -0.7501); the exact
        // value is -1.3/sqrt3 = -0.75056.
        assert!(close(p.objective, -1.3 / SQRT3, 1e-12));
        assert!(close(p.objective, -0.750, 1e-3));
        assert_eq!(p.side, ClipSide::Unclipped);
        assert!(!p.gradient_zero());
    }

    #[test]
    fn article_positive_advantage_objective_stays_1_2_past_ratio_1_2() {
        let w = ClipWidths::symmetric(0.2);
        for r in [1.200_000_1, 1.25, 1.5, 3.0, 100.0] {
            let p = surrogate_point(r, 1.0, &w);
            assert!(close(p.objective, 1.2, 1e-12), "rho={r}");
            assert!(p.gradient_zero());
        }
        assert!(!surrogate_point(1.1, 1.0, &w).gradient_zero());
    }

    #[test]
    fn article_negative_advantage_objective_stays_minus_0_8_below_ratio_0_8() {
        let w = ClipWidths::symmetric(0.2);
        for r in [0.799_999_9, 0.5, 0.1, 0.0] {
            let p = surrogate_point(r, -1.0, &w);
            assert!(close(p.objective, -0.8, 1e-12), "rho={r}");
            assert_eq!(p.side, ClipSide::ClippedLow);
        }
    }

    #[test]
    fn article_saturation_increments_are_0_002_and_0_1() {
        assert!(close(
            saturation(0.01, 0.2).unwrap().increment,
            0.002,
            1e-15
        ));
        assert!(close(saturation(0.5, 0.2).unwrap().increment, 0.1, 1e-15));
        assert!(!saturation(0.9, 0.2).unwrap().reachable);
    }

    #[test]
    fn dual_clip_flattens_large_ratios_for_negative_advantages_only() {
        let w = ClipWidths {
            eps_low: 0.2,
            eps_high: 0.28,
            dual_clip: Some(3.0),
        };
        let p = surrogate_point(5.0, -2.0, &w);
        assert_eq!(p.side, ClipSide::DualClipped);
        assert_eq!(p.objective, -6.0);
        let q = surrogate_point(2.0, -2.0, &w);
        assert_eq!(q.side, ClipSide::Unclipped);
        assert_eq!(q.objective, -4.0);
        assert_eq!(surrogate_point(5.0, 2.0, &w).objective, 1.28 * 2.0);
    }

    #[test]
    fn bad_widths_name_their_field() {
        let w = ClipWidths {
            eps_low: 0.2,
            eps_high: 0.2,
            dual_clip: Some(0.5),
        };
        assert_eq!(
            clipped_surrogate(&[1.0], &[1.0], &w).unwrap_err().field,
            "dual_clip"
        );
        let err = clipped_surrogate(&[1.0, -1.0], &[1.0, 1.0], &ClipWidths::symmetric(0.2));
        assert_eq!(err.unwrap_err().field, "ratio[1]");
    }

    /// The brute-force definition: min of the two terms, then the dual-clip max.
    fn reference(r: f64, a: f64, w: &ClipWidths) -> f64 {
        let clipped = r.clamp(w.ratio_low(), w.ratio_high());
        let u = (r * a).min(clipped * a);
        match w.dual_clip {
            Some(c) if a < 0.0 => u.max(c * a),
            _ => u,
        }
    }

    proptest! {
        #[test]
        fn objective_matches_min_max_definition(
            r in 0.0f64..6.0, a in -3.0f64..3.0, lo in 0.0f64..0.9, hi in 0.0f64..2.0,
            dual in proptest::option::of(1.01f64..5.0),
        ) {
            let w = ClipWidths { eps_low: lo, eps_high: hi, dual_clip: dual };
            let p = surrogate_point(r, a, &w);
            prop_assert!((p.objective - reference(r, a, &w)).abs() < 1e-12);
        }

        #[test]
        fn slope_matches_finite_difference_away_from_kinks(
            r in 0.05f64..6.0, a in -3.0f64..3.0, lo in 0.0f64..0.9, hi in 0.0f64..2.0,
            dual in proptest::option::of(1.01f64..5.0),
        ) {
            let w = ClipWidths { eps_low: lo, eps_high: hi, dual_clip: dual };
            let h = 1e-6;
            let kinks = [w.ratio_low(), w.ratio_high(), dual.unwrap_or(-1.0)];
            prop_assume!(kinks.iter().all(|k| (r - k).abs() > 10.0 * h));
            let fd = (reference(r + h, a, &w) - reference(r - h, a, &w)) / (2.0 * h);
            let p = surrogate_point(r, a, &w);
            prop_assert!((p.d_objective_d_ratio - fd).abs() < 1e-6);
        }
    }
}
