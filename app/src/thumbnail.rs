//! Each chapter's picture on the contents page: its first figure at its defaults, or,
//! for the live-training chapter, the chart of the recorded run; drawn by the same
//! code as the chapter, laid out at [`LAYOUT_WIDTH`] CSS pixels and shown smaller, its
//! lines and shapes without the text (at that size, specks).

use crate::chapters::live::{RECORDED_RUN, chart, metrics::Run};
use crate::chapters::{self, Block, Chapter};
use crate::figure::{AnyFigure, Evaluated, State};

/// The width a thumbnail's drawing is laid out at (the wide layout), CSS pixels; the
/// page scales it down to the thumbnail's size, labels and all.
pub const LAYOUT_WIDTH: f64 = 640.0;

/// What a chapter's thumbnail shows.
#[derive(Clone, Copy)]
pub enum Picture {
    /// A figure at its defaults.
    Figure(&'static dyn AnyFigure),
    /// The live chapter's chart of the recorded `cpu-small` run.
    RecordedRun,
}

impl Picture {
    /// The picture of `chapter`: its first figure, else the recorded run for the live
    /// chapter; `None` for a chapter with neither.
    pub fn of(chapter: &Chapter) -> Option<Self> {
        let first_figure = chapter.blocks.iter().find_map(|block| match block {
            Block::Figure(id) => chapters::figure(id),
            _ => None,
        });
        match first_figure {
            Some(figure) => Some(Self::Figure(figure)),
            None if chapter.blocks.contains(&Block::Live) => Some(Self::RecordedRun),
            None => None,
        }
    }

    /// Height over width of the drawing (the wide layout).
    pub fn aspect(&self) -> f64 {
        match self {
            Self::Figure(figure) => figure.meta().aspect,
            Self::RecordedRun => chart::aspect(false),
        }
    }

    fn evaluate(figure: &dyn AnyFigure) -> Result<Box<dyn Evaluated>, String> {
        let meta = figure.meta();
        figure
            .evaluate(&State::defaults(meta.controls))
            .map_err(|e| format!("{}: {}", e.field, e.message))
    }

    /// The picture as an SVG document `width` pixels wide (wide layout from
    /// [`crate::figure::NARROW_WIDTH`] up).
    ///
    /// # Errors
    /// A figure that fails at its defaults, a recorded run that does not parse, or the
    /// backend, as text.
    pub fn svg(&self, width: u32) -> Result<String, String> {
        let height = (f64::from(width) * self.aspect()).round() as u32;
        match self {
            Self::Figure(figure) => Self::evaluate(*figure)?.svg(width, height),
            Self::RecordedRun => chart::svg(&Run::from_jsonl(RECORDED_RUN)?, width, false),
        }
    }

    /// Draws its lines and shapes (not its text, unreadable at a thumbnail's size) on
    /// `canvas`, whose pixel size is set, at `scale` device pixels per layout pixel
    /// (wide layout).
    ///
    /// # Errors
    /// As [`Picture::svg`].
    #[cfg(target_arch = "wasm32")]
    pub fn draw_canvas(
        &self,
        canvas: &web_sys::HtmlCanvasElement,
        scale: f64,
    ) -> Result<(), String> {
        match self {
            Self::Figure(figure) => Self::evaluate(*figure)?.draw_shapes(canvas, scale),
            Self::RecordedRun => {
                let run = Run::from_jsonl(RECORDED_RUN)?;
                crate::web::canvas::draw_shapes_on(canvas, |root| {
                    chart::draw(&run, root, &crate::plot::Style::new(scale))
                        .map_err(|e| e.to_string())
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chapters::CHAPTERS;

    #[test]
    fn every_chapter_has_a_picture_that_draws() {
        for chapter in CHAPTERS {
            let picture = Picture::of(chapter)
                .unwrap_or_else(|| panic!("chapter {} has no picture", chapter.id));
            let svg = picture
                .svg(LAYOUT_WIDTH as u32)
                .unwrap_or_else(|e| panic!("{}: {e}", chapter.id));
            // Lines, shapes and labels: a real chart, not an empty frame.
            let marks: usize = ["<polyline", "<path", "<line", "<rect", "<polygon", "<text"]
                .iter()
                .map(|tag| svg.matches(tag).count())
                .sum();
            assert!(marks > 20, "chapter {}: {marks} marks", chapter.id);
        }
    }

    #[test]
    fn a_chapter_shows_its_first_figure_and_the_live_one_the_recorded_run() {
        let grpo = chapters::chapter("grpo").unwrap();
        assert!(
            matches!(Picture::of(grpo), Some(Picture::Figure(f)) if f.meta().id == "group-advantages")
        );
        let live = chapters::chapter("live-training").unwrap();
        assert!(matches!(Picture::of(live), Some(Picture::RecordedRun)));
    }
}
