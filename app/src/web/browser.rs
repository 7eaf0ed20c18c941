//! Small wrappers over the browser: the URL, downloads, the clipboard, the clock.

use leptos::prelude::{document, window};
use wasm_bindgen::{JsCast, JsValue};

use crate::query;

/// The page's path (`/chapter/grpo`).
pub fn pathname() -> String {
    window().location().pathname().unwrap_or_default()
}

/// The page's query as decoded pairs.
pub fn query_pairs() -> Vec<(String, String)> {
    query::parse(&window().location().search().unwrap_or_default())
}

/// `scheme://host:port`.
pub fn origin() -> String {
    window().location().origin().unwrap_or_default()
}

/// Tells the page that embeds this one how tall this page's content is
/// (`arlbook-height:<px>` by `postMessage`), so the embed code's listener can size the
/// frame. Nothing happens on a page that is not in a frame.
pub fn post_height_to_parent() {
    let win = window();
    let Ok(Some(parent)) = win.parent() else {
        return;
    };
    if parent == win {
        return;
    }
    let Some(main) = document().query_selector("main").ok().flatten() else {
        return;
    };
    let bottom = main.get_bounding_client_rect().bottom() + win.scroll_y().unwrap_or(0.0);
    let height = bottom.ceil().max(0.0) as u32 + 16;
    let _ = parent.post_message(&JsValue::from_str(&format!("arlbook-height:{height}")), "*");
}

/// Replaces the keys starting with `prefix` in the URL's query by `pairs`, without
/// reloading or adding a history entry.
pub fn write_query(prefix: &str, pairs: Vec<(String, String)>) {
    // A chapter page owns the keys under the figure's prefix; an embed page's keys are
    // bare, so only the figure's own are replaced and the rest (`backend`) stay.
    let own: Vec<String> = pairs.iter().map(|(key, _)| key.clone()).collect();
    let mut all: Vec<(String, String)> = query_pairs()
        .into_iter()
        .filter(|(key, _)| {
            if prefix.is_empty() {
                !own.contains(key)
            } else {
                !key.starts_with(prefix)
            }
        })
        .collect();
    all.extend(pairs);
    let search = query::format(&all);
    let hash = window().location().hash().unwrap_or_default();
    let url = if search.is_empty() {
        format!("{}{hash}", pathname())
    } else {
        format!("{}?{search}{hash}", pathname())
    };
    if let Ok(history) = window().history() {
        let _ = history.replace_state_with_url(&JsValue::NULL, "", Some(&url));
    }
}

/// Milliseconds since the page started (for redraw timings).
pub fn now_ms() -> f64 {
    window().performance().map_or(0.0, |p| p.now())
}

/// Saves `url` (a data or object URL) as `filename` through a temporary link.
pub fn download_url(url: &str, filename: &str) {
    let Ok(element) = document().create_element("a") else {
        return;
    };
    let Ok(link) = element.dyn_into::<web_sys::HtmlAnchorElement>() else {
        return;
    };
    link.set_href(url);
    link.set_download(filename);
    link.click();
}

/// Saves `text` as a file of type `mime`.
pub fn download_text(text: &str, mime: &str, filename: &str) -> Result<(), JsValue> {
    let parts = js_sys::Array::of1(&JsValue::from_str(text));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(mime);
    let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options)?;
    let url = web_sys::Url::create_object_url_with_blob(&blob)?;
    download_url(&url, filename);
    web_sys::Url::revoke_object_url(&url)
}

/// Copies `text` to the clipboard (best effort: the browser may refuse).
pub fn copy_text(text: &str) {
    let _ = window().navigator().clipboard().write_text(text);
}
