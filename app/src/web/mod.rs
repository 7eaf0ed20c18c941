//! The page (wasm32 only): routing on the path, the table of contents, chapter pages,
//! `/embed/<figure>` and the compute explorer.
//!
//! Routes: `/` the contents, `/chapter/<id>` a chapter, `/embed/<figure>?<state>` one
//! figure alone, `/explorer` the appendix. The server answers every unknown path with
//! `index.html`, so each route is a full page load and links are plain anchors.

use leptos::prelude::*;

mod browser;
pub(crate) mod canvas;
mod explorer;
mod frame;
mod gpu;
mod live;
mod width;

use crate::chapters::{self, Block, CHAPTERS, Chapter};
use crate::mathml;
use crate::thumbnail::{self, Picture};
use explorer::ComputeExplorer;
use frame::FigureFrame;
use gpu::Backend;

/// The whole notebook page, chosen by the URL's path.
#[component]
pub fn App() -> impl IntoView {
    provide_context(Backend::start());
    let path = browser::pathname();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    match parts.as_slice() {
        [""] => view! { <Contents/> }.into_any(),
        ["chapter", id] => match chapters::chapter(id) {
            Some(chapter) => view! { <ChapterPage chapter=chapter/> }.into_any(),
            None => view! { <NotFound path=path.clone()/> }.into_any(),
        },
        ["embed", id] => match chapters::figure(id) {
            Some(figure) => view! {
                <main class="embed">
                    <FigureFrame figure=figure embed=true/>
                </main>
            }
            .into_any(),
            None => view! { <NotFound path=path.clone()/> }.into_any(),
        },
        ["explorer"] => view! {
            <Masthead/>
            <main>
                <ComputeExplorer/>
            </main>
        }
        .into_any(),
        _ => view! { <NotFound path=path.clone()/> }.into_any(),
    }
}

#[component]
fn Masthead() -> impl IntoView {
    view! {
        <header class="masthead">
            <a class="home" href="/">"arlbook"</a>
            <span class="tagline">" · reinforcement learning for LLM agents, computed live"</span>
            <BackendBadge/>
        </header>
    }
}

/// Where the page computes: WebGPU with its adapter, or the CPU and why.
#[component]
fn BackendBadge() -> impl IntoView {
    let backend = use_context::<Backend>().unwrap_or_else(Backend::cpu_only);
    view! {
        <span class="badge page-backend" id="backend-badge" title=move || backend.badge().1>
            {move || backend.badge().0}
        </span>
    }
}

/// The figure the contents page opens on, and the controls it shows there (the rest
/// keep their defaults; the chapter has them all).
const HERO_FIGURE: &str = "grpo-run";
const HERO_CONTROLS: &[&str] = &["reduction", "eps_high", "beta", "shown"];

/// The table of contents: the GRPO-over-a-run figure, live and small, then every
/// chapter with a thumbnail of its picture ([`crate::thumbnail`]).
#[component]
fn Contents() -> impl IntoView {
    let hero = chapters::figure(HERO_FIGURE).map(|figure| {
        let chapter = chapters::chapter_of(HERO_FIGURE).map_or("grpo", |c| c.id);
        view! {
            <section class="hero" aria-label="A live figure">
                <FigureFrame figure=figure embed=false controls_shown=HERO_CONTROLS/>
                <p class="hero-note">
                    "A tiny policy trained by GRPO, in this page, for 200 steps and eight seeds. "
                    <a href=format!("/chapter/{chapter}#{HERO_FIGURE}")>"Its chapter"</a>
                    " has every control and says what to try."
                </p>
            </section>
        }
    });
    view! {
        <header class="masthead title">
            <h1>"arlbook"</h1>
            <BackendBadge/>
            <p class="tagline">
                "A live notebook on reinforcement learning for LLM agents. Every number and "
                "every figure is computed while you read, in this page, by the same Rust core "
                "that the " <code>"arlbook"</code> " command line and server use."
            </p>
        </header>
        <main>
            {hero}
            <nav aria-label="Contents" id="contents">
                <h2>"Contents"</h2>
                <ol class="toc">
                    {CHAPTERS
                        .iter()
                        .enumerate()
                        .map(|(order, c)| {
                            view! {
                                <li>
                                    <a class="thumb-link" href=format!("/chapter/{}", c.id) tabindex="-1" aria-hidden="true">
                                        <Thumbnail chapter=c order=order/>
                                    </a>
                                    <div>
                                        <a href=format!("/chapter/{}", c.id)>{c.title}</a>
                                        <p>{c.summary}</p>
                                    </div>
                                </li>
                            }
                        })
                        .collect_view()}
                </ol>
                <p>
                    "Appendix: the " <a href="/explorer">"compute explorer"</a>
                    " runs any computation of the core on a request you edit."
                </p>
            </nav>
        </main>
    }
}

/// A chapter's picture, drawn once its canvas exists, one chapter after another
/// (`order` times [`THUMBNAIL_STAGGER_MS`]) so the page stays responsive while they
/// compute. The canvas carries `data-drawn` (`1` drawn, `0` not yet, or the error).
#[component]
fn Thumbnail(chapter: &'static Chapter, order: usize) -> impl IntoView {
    let canvas_ref = NodeRef::<leptos::html::Canvas>::new();
    let drawn = RwSignal::new("0".to_owned());
    let picture = Picture::of(chapter);
    let aspect = picture.map_or(0.5, |p| p.aspect());
    Effect::new(move |_| {
        let (Some(canvas), Some(picture)) = (canvas_ref.get(), picture) else {
            return;
        };
        set_timeout(
            move || drawn.set(draw_thumbnail(&canvas, picture)),
            std::time::Duration::from_millis(THUMBNAIL_STAGGER_MS * order as u64),
        );
    });
    view! {
        <canvas
            class="thumb"
            id=format!("thumb-{}", chapter.id)
            node_ref=canvas_ref
            style=format!("aspect-ratio: 1 / {aspect}")
            role="img"
            aria-label=format!("{}: its main figure", chapter.title)
            data-drawn=move || drawn.get()
        ></canvas>
    }
}

/// Delay between two thumbnails' drawings, milliseconds.
const THUMBNAIL_STAGGER_MS: u64 = 30;

/// Sizes `canvas` to its CSS width at the device pixel ratio and draws `picture` on
/// it, laid out at [`thumbnail::LAYOUT_WIDTH`] and scaled down; `1`, or the error.
fn draw_thumbnail(canvas: &web_sys::HtmlCanvasElement, picture: Picture) -> String {
    let css_width = f64::from(canvas.client_width().max(1));
    let dpr = web_sys::window().map_or(1.0, |w| w.device_pixel_ratio());
    let width = (css_width * dpr).round().max(1.0);
    canvas.set_width(width as u32);
    canvas.set_height((width * picture.aspect()).round().max(1.0) as u32);
    match picture.draw_canvas(canvas, width / thumbnail::LAYOUT_WIDTH) {
        Ok(()) => "1".to_owned(),
        Err(error) => error,
    }
}

/// One chapter with its figures, and links to its neighbours.
#[component]
fn ChapterPage(chapter: &'static Chapter) -> impl IntoView {
    let index = CHAPTERS
        .iter()
        .position(|c| c.id == chapter.id)
        .unwrap_or(0);
    let previous = index.checked_sub(1).and_then(|i| CHAPTERS.get(i));
    let next = CHAPTERS.get(index + 1);
    view! {
        <Masthead/>
        <main class="chapter" id=format!("chapter-{}", chapter.id)>
            <p class="chapter-number">{format!("Chapter {}", index + 1)}</p>
            <h1>{chapter.title}</h1>
            {chapter.blocks.iter().map(block_view).collect_view()}
            <nav class="pager" aria-label="Chapters">
                {previous.map(|c| view! { <a rel="prev" href=format!("/chapter/{}", c.id)>"← " {c.title}</a> })}
                <a href="/">"Contents"</a>
                {next.map(|c| view! { <a rel="next" href=format!("/chapter/{}", c.id)>{c.title} " →"</a> })}
            </nav>
        </main>
    }
}

fn block_view(block: &'static Block) -> AnyView {
    match *block {
        Block::Text(text) => match mathml::paragraph_html(text) {
            Ok(html) => view! { <p inner_html=html></p> }.into_any(),
            Err(err) => view! { <p class="error">{err}</p> }.into_any(),
        },
        Block::Display(tex) => match mathml::to_mathml(tex, true) {
            Ok(html) => view! { <div class="display-math" inner_html=html></div> }.into_any(),
            Err(err) => view! { <p class="error">{err}</p> }.into_any(),
        },
        Block::Heading(text) => view! { <h2>{text}</h2> }.into_any(),
        Block::Figure(id) => match chapters::figure(id) {
            Some(figure) => view! { <FigureFrame figure=figure embed=false/> }.into_any(),
            None => view! { <p class="error">{format!("no figure `{id}`")}</p> }.into_any(),
        },
        Block::Live => view! { <live::LiveTraining/> }.into_any(),
    }
}

#[component]
fn NotFound(path: String) -> impl IntoView {
    view! {
        <Masthead/>
        <main>
            <h1>"Not found"</h1>
            <p>{format!("Nothing lives at {path}. ")} <a href="/">"Back to the contents."</a></p>
        </main>
    }
}
