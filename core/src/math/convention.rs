//! Whose rules compute a number: arlbook's own, TRL's or verl's.
//!
//! The three agree on every batch without edge cases. They part where a batch has an
//! empty completion, a group of one, a ratio far from 1 or a clip metric to count, and
//! where one library sets a default the other leaves out. A request that names a TRL
//! option (`loss_type`, `epsilon`, `scale_rewards`, ...) is computed by TRL's rules, one
//! that names a verl option (`loss_agg_mode`, `loss_mode`, `clip_ratio_*`,
//! `adv_estimator`, ...) by verl's, and a request with only arlbook's own names by
//! arlbook's; an explicit `convention` field sets it outright. Mixing the two libraries'
//! names in one request is refused, naming the field.
//!
//! | rule | `arlbook` | `trl` (`GRPOTrainer`) | `verl` (`core_algos`) |
//! |---|---|---|---|
//! | empty row in a per-sequence mean | not counted | counts, adds 0 (`mean` over all `B`) | not counted |
//! | row length in `seq-mean-token-mean` | `L_i` | `max(L_i, 1)` | `L_i + 1e-8` |
//! | log-ratio before `exp` | exact | exact | clamped to `[-20, 20]`; GSPO's sequence log-ratio to `<= 10`; no slope where clamped |
//! | pg reduction of GSPO and SAPO | as requested | as requested | always `seq-mean-token-mean` (the KL term keeps `loss_agg_mode`) |
//! | dual clip `c` for PPO | off | off (`delta` when set) | on, `clip_ratio_c = 3` |
//! | `k3` KL | exact | exact | clamped (`low_var_kl`) |
//! | clip fractions | sign-gated, over tokens | sign-gated; over sequences at sequence level; none for SAPO | `pg_clipfrac` sign-gated; CISPO counts both sides whatever the sign; none for SAPO |
//! | group of one (GRPO) | advantage 0 | advantage 0 | `score / (1 + eps)` (`score` without std) |
//! | group of one (RLOO) | advantage 0 | advantage 0 | raw score |
//! | std of a group | population (`n`) | sample (`n - 1`) | sample (`n - 1`) |
//! | eps added to the std | `1e-6` | `1e-4` | `1e-6` |
//!
//! Sources: TRL `trl/trainer/grpo_trainer.py` (`_compute_loss`,
//! `_generate_and_score_completions`), verl `verl/trainer/ppo/core_algos.py`
//! (`agg_loss`, `compute_policy_loss_{vanilla,gspo,sapo,cispo}`, `kl_penalty`,
//! `compute_grpo_outcome_advantage`, `compute_rloo_outcome_advantage`).

use serde::{Deserialize, Serialize};

use crate::error::{FieldError, Result};

/// Whose rules compute a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Convention {
    /// arlbook's documented rules.
    #[default]
    Arlbook,
    /// TRL's code paths.
    Trl,
    /// verl's code paths.
    Verl,
}

impl Convention {
    /// The library's own name, as a request spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Arlbook => "arlbook",
            Self::Trl => "trl",
            Self::Verl => "verl",
        }
    }
}

/// Works out the convention of a request from its explicit `convention` field and the
/// library-specific fields it uses: `trl_fields` and `verl_fields` list the names of
/// those present. Refuses a request that mixes the two libraries' names, or whose
/// explicit convention contradicts a name it uses, naming the field.
pub fn infer(
    explicit: Option<Convention>,
    trl_fields: &[&str],
    verl_fields: &[&str],
) -> Result<Convention> {
    let by_name = match (trl_fields.first(), verl_fields.first()) {
        (Some(trl), Some(verl)) => {
            return Err(FieldError::new(
                *verl,
                format!(
                    "is verl's name, but `{trl}` is TRL's; one request follows one library \
                     (use arlbook's names with `convention` to mix settings)"
                ),
            ));
        }
        (Some(_), None) => Some(Convention::Trl),
        (None, Some(_)) => Some(Convention::Verl),
        (None, None) => None,
    };
    match (explicit, by_name) {
        (Some(explicit), Some(named)) if explicit != named => {
            let field = match named {
                Convention::Trl => trl_fields[0],
                _ => verl_fields[0],
            };
            Err(FieldError::new(
                field,
                format!(
                    "is {}'s name, but `convention` is `{}`",
                    named.name(),
                    explicit.name()
                ),
            ))
        }
        (Some(explicit), _) => Ok(explicit),
        (None, Some(named)) => Ok(named),
        (None, None) => Ok(Convention::Arlbook),
    }
}

/// The single value given under any of `names` (each a field name and its value), or
/// `None`; two given at once is an error naming the second.
pub fn one_of<T: Copy>(names: &[(&str, Option<T>)]) -> Result<Option<T>> {
    let mut found: Option<(&str, T)> = None;
    for &(name, value) in names {
        if let Some(value) = value {
            if let Some((first, _)) = found {
                return Err(FieldError::new(
                    name,
                    format!("sets the same thing as `{first}`; give one of them"),
                ));
            }
            found = Some((name, value));
        }
    }
    Ok(found.map(|(_, v)| v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_decide_the_convention_and_mixing_is_refused() {
        assert_eq!(infer(None, &[], &[]).unwrap(), Convention::Arlbook);
        assert_eq!(infer(None, &["loss_type"], &[]).unwrap(), Convention::Trl);
        assert_eq!(infer(None, &[], &["clip_ratio"]).unwrap(), Convention::Verl);
        assert_eq!(
            infer(Some(Convention::Verl), &[], &[]).unwrap(),
            Convention::Verl
        );
        let mixed = infer(None, &["loss_type"], &["loss_agg_mode"]).unwrap_err();
        assert_eq!(mixed.field, "loss_agg_mode");
        let contradicted = infer(Some(Convention::Trl), &[], &["clip_ratio_c"]).unwrap_err();
        assert_eq!(contradicted.field, "clip_ratio_c");
    }

    #[test]
    fn one_setting_under_two_names_is_refused_naming_the_second() {
        assert_eq!(one_of(&[("a", None), ("b", Some(2))]).unwrap(), Some(2));
        assert_eq!(one_of::<i32>(&[("a", None)]).unwrap(), None);
        let err = one_of(&[("eps_low", Some(0.1)), ("epsilon", Some(0.2))]).unwrap_err();
        assert_eq!(err.field, "epsilon");
    }
}
