//! The chapters, in reading order, and the registry of every figure.
//!
//! A chapter is static data: a title and a list of blocks (paragraphs with inline
//! `$…$` math, display formulas, figures by id). The browser renders it; the tests
//! check natively that every formula converts to MathML and every figure id exists.

use crate::figure::{AnyFigure, Registered};

pub mod agents;
pub mod distillation;
pub mod evaluation;
pub mod grpo;
pub mod kl_objective;
pub mod lag;
pub mod ledger;
pub mod live;
pub mod off_policy;
pub mod policy_gradient;
pub mod ppo;
pub mod sparse_reward;

/// One block of a chapter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    /// A paragraph; `$…$` spans are inline math.
    Text(&'static str),
    /// A formula on its own line (TeX subset, see [`crate::mathml`]).
    Display(&'static str),
    /// A sub-heading.
    Heading(&'static str),
    /// The figure with this id.
    Figure(&'static str),
    /// The live-training panel: the job form and list, the metrics stream and its
    /// chart (see [`live`]).
    Live,
}

/// A chapter of the notebook.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chapter {
    /// Identifier in the URL (`/chapter/<id>`).
    pub id: &'static str,
    /// Title in the table of contents.
    pub title: &'static str,
    /// One sentence under the title in the table of contents.
    pub summary: &'static str,
    /// The content.
    pub blocks: &'static [Block],
}

/// Every chapter in reading order.
pub const CHAPTERS: &[Chapter] = &[
    agents::CHAPTER,
    ledger::CHAPTER,
    kl_objective::CHAPTER,
    policy_gradient::CHAPTER,
    off_policy::CHAPTER,
    ppo::CHAPTER,
    grpo::CHAPTER,
    sparse_reward::CHAPTER,
    distillation::CHAPTER,
    lag::CHAPTER,
    evaluation::CHAPTER,
    live::CHAPTER,
];

macro_rules! figures {
    ($($figure:path),* $(,)?) => {
        /// Every figure.
        pub static FIGURES: &[&dyn AnyFigure] = &[
            $(&Registered::<$figure>(std::marker::PhantomData)),*
        ];
    };
}

figures! {
    agents::episode::Episode,
    ledger::token_ledger::TokenLedger,
    kl_objective::optimum::Optimum,
    kl_objective::dpo::Dpo,
    kl_objective::estimators::Estimators,
    policy_gradient::bandit::Bandit,
    off_policy::importance::Importance,
    ppo::clip::Clip,
    ppo::gae::Gae,
    grpo::group_advantages::GroupAdvantages,
    grpo::reductions::Reductions,
    grpo::over_a_run::GrpoRun,
    sparse_reward::mixed_groups::MixedGroups,
    sparse_reward::shaping::Shaping,
    evaluation::pass_at_k::PassAtK,
    evaluation::budget::RolloutBudget,
    distillation::kl_fit::KlFit,
    lag::lag_filter::LagFilter,
}

/// The figure with id `id`.
pub fn figure(id: &str) -> Option<&'static dyn AnyFigure> {
    FIGURES.iter().copied().find(|f| f.meta().id == id)
}

/// The chapter with id `id`.
pub fn chapter(id: &str) -> Option<&'static Chapter> {
    CHAPTERS.iter().find(|c| c.id == id)
}

/// The chapter that shows figure `figure_id`.
pub fn chapter_of(figure_id: &str) -> Option<&'static Chapter> {
    CHAPTERS.iter().find(|c| {
        c.blocks
            .iter()
            .any(|b| matches!(b, Block::Figure(id) if *id == figure_id))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figure::State;
    use crate::mathml;

    #[test]
    fn every_formula_converts_to_mathml() {
        for chapter in CHAPTERS {
            for block in chapter.blocks {
                let result = match block {
                    Block::Text(text) => mathml::paragraph_html(text),
                    Block::Display(tex) => mathml::to_mathml(tex, true),
                    Block::Heading(_) | Block::Figure(_) | Block::Live => Ok(String::new()),
                };
                if let Err(err) = result {
                    panic!("chapter {}: {err} in {block:?}", chapter.id);
                }
            }
        }
    }

    #[test]
    fn every_figure_is_in_exactly_one_chapter_and_ids_are_unique() {
        for fig in FIGURES {
            let id = fig.meta().id;
            let count = CHAPTERS
                .iter()
                .flat_map(|c| c.blocks.iter())
                .filter(|b| **b == Block::Figure(id))
                .count();
            assert_eq!(count, 1, "figure {id}");
            assert_eq!(FIGURES.iter().filter(|f| f.meta().id == id).count(), 1);
        }
        for block in CHAPTERS.iter().flat_map(|c| c.blocks.iter()) {
            if let Block::Figure(id) = block {
                assert!(figure(id).is_some(), "unknown figure {id}");
            }
        }
    }

    #[test]
    fn every_figure_computes_and_draws_at_its_defaults() {
        for fig in FIGURES {
            let meta = fig.meta();
            let evaluated = fig
                .evaluate(&State::defaults(meta.controls))
                .unwrap_or_else(|e| panic!("{}: {e}", meta.id));
            let readouts = evaluated.readouts();
            assert!(!readouts.is_empty(), "{}", meta.id);
            for readout in &readouts {
                assert!(readout.id.starts_with(meta.id), "{}", readout.id);
                assert!(readout.value.is_finite(), "{}", readout.id);
            }
            for control in meta.controls {
                // Controls are `<id>-input-<key>` in the page; readouts must not collide.
                let input = format!("{}-input-{}", meta.id, control.key);
                assert!(readouts.iter().all(|r| r.id != input), "{input}");
            }
            let svg = evaluated.svg(800, 400).unwrap();
            assert!(svg.starts_with("<svg"), "{}", meta.id);
        }
    }
}
