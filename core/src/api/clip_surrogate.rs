//! `clip-surrogate`: the PPO clipped objective element by element, with the active side
//! and whether the ratio gradient vanishes (see [`crate::math::clip`]).

use serde::{Deserialize, Serialize};

use crate::api::{Entry, OneOrMany};
use crate::error::{FieldError, Result};
use crate::math::clip::{
    ClipSide, ClipWidths, Saturation, SurrogatePoint, check_inputs, clipped_surrogate, saturation,
};

/// Request of `clip-surrogate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// Probability ratios `rho = pi_theta / pi_old`, each finite and `>= 0`.
    pub ratio: Vec<f64>,
    /// Advantages `\hat A`: one number for every ratio, or a list as long as `ratio`.
    pub advantage: OneOrMany<f64>,
    /// Lower clip width, in `[0, 1]`. Default 0.2.
    #[serde(default = "default_eps")]
    pub eps_low: f64,
    /// Upper clip width, `>= 0`. Default: `eps_low` (DAPO's Clip-Higher uses 0.28).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eps_high: Option<f64>,
    /// Dual-clip constant `c > 1` for negative advantages (verl `clip_ratio_c`, 3.0
    /// there). Default: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dual_clip: Option<f64>,
    /// Optional old probabilities `pi_old` of tokens, each in `[0, 1]`: the response then
    /// says after what absolute increase the upper clip bites for each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_old: Option<Vec<f64>>,
}

fn default_eps() -> f64 {
    0.2
}

/// Response of `clip-surrogate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// The objective `min(rho A, clip(rho) A)` (dual clip applied), per element.
    pub objective: Vec<f64>,
    /// Whether a clipped side is active (any side other than `unclipped`).
    pub clipped: Vec<bool>,
    /// The active side: `unclipped`, `clipped-low`, `clipped-high` or `dual-clipped`.
    pub side: Vec<ClipSide>,
    /// Whether `d objective / d rho` is exactly 0 (a clipped side, or `A = 0`).
    pub gradient_zero: Vec<bool>,
    /// `d objective / d rho` per element.
    pub gradient: Vec<f64>,
    /// `1 - eps_low`.
    pub ratio_low: f64,
    /// `1 + eps_high`.
    pub ratio_high: f64,
    /// For each `p_old`: the absolute increase `eps_high * p_old` at which the upper clip
    /// bites, the probability where that happens, and whether it is `<= 1`. Present only
    /// when `p_old` was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub saturation: Option<Vec<Saturation>>,
}

/// The `clip-surrogate` entry.
pub struct ClipSurrogate;

/// A validated request: the widths, the advantages broadcast to the ratios, and the
/// saturation table (computed on the host; it is one multiply per entry).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The clip widths.
    pub widths: ClipWidths,
    /// One advantage per ratio.
    pub advantage: Vec<f64>,
    /// The saturation table, when `p_old` was given.
    pub saturation: Option<Vec<Saturation>>,
}

/// Validates `request`.
pub fn plan(request: &Request) -> Result<Plan> {
    let widths = ClipWidths {
        eps_low: request.eps_low,
        eps_high: request.eps_high.unwrap_or(request.eps_low),
        dual_clip: request.dual_clip,
    };
    let advantage = match &request.advantage {
        OneOrMany::One(a) => vec![*a; request.ratio.len()],
        OneOrMany::Many(a) => a.clone(),
    };
    check_inputs(&request.ratio, &advantage, &widths)?;
    let saturation = match &request.p_old {
        None => None,
        Some(p_old) => Some(
            p_old
                .iter()
                .enumerate()
                .map(|(i, &p)| {
                    saturation(p, widths.eps_high).map_err(|e| {
                        if e.field == "p_old" {
                            FieldError::new(format!("p_old[{i}]"), e.message)
                        } else {
                            e
                        }
                    })
                })
                .collect::<Result<Vec<_>>>()?,
        ),
    };
    Ok(Plan {
        widths,
        advantage,
        saturation,
    })
}

/// The response from the evaluated points.
pub fn respond(plan: Plan, points: &[SurrogatePoint]) -> Response {
    Response {
        objective: points.iter().map(|p| p.objective).collect(),
        clipped: points
            .iter()
            .map(|p| p.side != ClipSide::Unclipped)
            .collect(),
        side: points.iter().map(|p| p.side).collect(),
        gradient_zero: points.iter().map(SurrogatePoint::gradient_zero).collect(),
        gradient: points.iter().map(|p| p.d_objective_d_ratio).collect(),
        ratio_low: plan.widths.ratio_low(),
        ratio_high: plan.widths.ratio_high(),
        saturation: plan.saturation,
    }
}

impl Entry for ClipSurrogate {
    const NAME: &'static str = "clip-surrogate";
    const SUMMARY: &'static str =
        "PPO clipped surrogate per element: objective, active clip side, zero-gradient flags";
    type Request = Request;
    type Response = Response;

    fn compute(request: &Request) -> Result<Response> {
        let plan = plan(request)?;
        let points = clipped_surrogate(&request.ratio, &plan.advantage, &plan.widths)?;
        Ok(respond(plan, &points))
    }
}

#[cfg(test)]
mod tests {
    use crate::api::compute;
    use serde_json::json;

    #[test]
    fn one_advantage_broadcasts_over_the_ratios() {
        let out = compute(
            "clip-surrogate",
            json!({"ratio": [0.5, 1.0, 1.5], "advantage": 1.0, "eps_high": 0.28}),
        )
        .unwrap();
        assert_eq!(out["objective"], json!([0.5, 1.0, 1.28]));
        assert_eq!(out["side"][2], "clipped-high");
        assert_eq!(out["gradient_zero"], json!([false, false, true]));
    }

    #[test]
    fn saturation_and_bad_probability_are_reported() {
        let out = compute(
            "clip-surrogate",
            json!({"ratio": [1.0], "advantage": [1.0], "p_old": [0.01, 0.5]}),
        )
        .unwrap();
        let inc = out["saturation"][0]["increment"].as_f64().unwrap();
        assert!((inc - 0.002).abs() < 1e-15);
        let err = compute(
            "clip-surrogate",
            json!({"ratio": [1.0], "advantage": [1.0], "p_old": [0.5, 1.5]}),
        )
        .unwrap_err();
        assert_eq!(err.field, "p_old[1]");
    }

    #[test]
    fn mismatched_lengths_name_advantage() {
        let err = compute(
            "clip-surrogate",
            json!({"ratio": [1.0, 2.0], "advantage": [1.0]}),
        )
        .unwrap_err();
        assert_eq!(err.field, "advantage");
    }
}
