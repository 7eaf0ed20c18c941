//! Headless Chromium, driven from the command line: load a URL, let the page's wasm
//! run for a budget of virtual time, then dump the DOM or take a screenshot.
//!
//! This is the cheapest reliable driver: no `WebDriver` server and no Node, only the browser.
//! The page's numbers are read from the readout elements (`id="bandit-exact"`), whose
//! `data-value` attribute holds the full-precision value.
//!
//! Every run passes `--enable-automation`, which sets `navigator.webdriver`: the page
//! then keeps its event loop busy while GPU work is in flight, so the virtual-time
//! budget does not run out while it awaits a readback. WebGPU itself is only exposed
//! with [`Gpu::Webgpu`] (`--enable-unsafe-webgpu`; `SwiftShader` in this headless
//! Chromium, even with `--disable-gpu`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one browser run may take before it is killed.
const TIMEOUT: Duration = Duration::from_secs(90);

/// The Chromium binary: `$ARLBOOK_CHROMIUM`, else `/usr/bin/chromium`.
pub fn chromium() -> PathBuf {
    std::env::var_os("ARLBOOK_CHROMIUM")
        .map_or_else(|| PathBuf::from("/usr/bin/chromium"), PathBuf::from)
}

fn run(args: &[String], url: &str) -> String {
    let profile = std::env::temp_dir().join(format!(
        "arlbook-chromium-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = std::fs::create_dir_all(&profile);
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-automation",
            "--virtual-time-budget=15000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        // Chromium's own temporary files go into the profile, removed below.
        .env("TMPDIR", &profile)
        .args(args)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", chromium().display()));
    let mut stdout = child.stdout.take().expect("chromium stdout");
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut text);
        text
    });
    let started = Instant::now();
    loop {
        if child.try_wait().expect("waiting for chromium").is_some() {
            break;
        }
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish {url} within {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(&profile);
    reader.join().expect("reading chromium's output")
}

static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Whether the browser exposes WebGPU to the page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gpu {
    /// No WebGPU adapter (Chromium's default here).
    Disabled,
    /// `--enable-unsafe-webgpu`: an adapter (`SwiftShader`).
    Webgpu,
}

impl Gpu {
    fn flags(self) -> Vec<String> {
        match self {
            Gpu::Disabled => Vec::new(),
            Gpu::Webgpu => vec!["--enable-unsafe-webgpu".to_owned()],
        }
    }
}

/// The DOM of `url` after its scripts ran.
pub fn dump_dom(url: &str) -> String {
    dump_dom_with(url, Gpu::Disabled)
}

/// The DOM of `url` after its scripts ran, with or without WebGPU.
pub fn dump_dom_with(url: &str, gpu: Gpu) -> String {
    let mut args = gpu.flags();
    args.push("--dump-dom".to_owned());
    run(&args, url)
}

/// Saves a PNG screenshot of `url` at `width` × `height` CSS pixels.
pub fn screenshot(url: &str, out: &Path, width: u32, height: u32) {
    run(
        &[
            format!("--screenshot={}", out.display()),
            format!("--window-size={width},{height}"),
        ],
        url,
    );
}

/// The value of attribute `attribute` on the element with id `id`.
pub fn attribute(dom: &str, id: &str, attribute: &str) -> Option<String> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let start = dom[..at].rfind('<')?;
    let end = at + dom[at..].find('>')?;
    let tag = &dom[start..end];
    let key = format!("{attribute}=\"");
    let value_start = tag.find(&key)? + key.len();
    let value_len = tag[value_start..].find('"')?;
    Some(tag[value_start..value_start + value_len].to_owned())
}

/// The full-precision number of readout `id`.
pub fn readout(dom: &str, id: &str) -> Option<f64> {
    attribute(dom, id, "data-value")?.parse().ok()
}

/// The text inside the element with id `id` (up to its first child tag).
pub fn text(dom: &str, id: &str) -> Option<String> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let open_end = at + dom[at..].find('>')? + 1;
    let close = open_end + dom[open_end..].find('<')?;
    Some(dom[open_end..close].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_and_text_are_read_from_the_right_element() {
        let dom = r#"<div><dd id="a-x" data-value="0.25">0.25</dd><dd id="a" data-value="0.1">0.1</dd><output for="a" id="o">3</output></div>"#;
        assert_eq!(readout(dom, "a"), Some(0.1));
        assert_eq!(readout(dom, "a-x"), Some(0.25));
        assert_eq!(text(dom, "o").as_deref(), Some("3"));
        assert_eq!(readout(dom, "missing"), None);
    }
}
