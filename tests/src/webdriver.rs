//! Headless Chromium driven through `chromedriver` (W3C `WebDriver` over HTTP), for the
//! browser tests that act like a reader: press keys on a slider, type into a field,
//! click a cell, and read the page after each step.
//!
//! The protocol is plain JSON over HTTP/1.1, spoken with [`crate::http::request`]; no
//! client library. One [`Browser`] is one `chromedriver` process and one session;
//! dropping it ends both.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::browser::{Gpu, chromium};
use crate::http;
use crate::scratch::Scratch;

/// The element key of the W3C protocol.
const ELEMENT_KEY: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Key codes of the protocol (Unicode private use area).
pub mod keys {
    /// Arrow right.
    pub const RIGHT: &str = "\u{E014}";
    /// Arrow left.
    pub const LEFT: &str = "\u{E012}";
    /// Control (held until the next `NULL`).
    pub const CONTROL: &str = "\u{E009}";
    /// Releases held modifier keys.
    pub const NULL: &str = "\u{E000}";
    /// Backspace.
    pub const BACKSPACE: &str = "\u{E003}";
}

/// The `chromedriver` binary: `$ARLBOOK_CHROMEDRIVER`, else `/usr/bin/chromedriver`.
pub fn chromedriver() -> PathBuf {
    std::env::var_os("ARLBOOK_CHROMEDRIVER")
        .map_or_else(|| PathBuf::from("/usr/bin/chromedriver"), PathBuf::from)
}

/// A browser session.
pub struct Browser {
    driver: Child,
    addr: String,
    session: String,
    /// chromedriver's and Chromium's temporary folder (their `TMPDIR`): the session's
    /// profile goes there, and goes away with it even when a process is killed.
    _temp: Scratch,
}

/// An element found on the page.
#[derive(Debug, Clone)]
pub struct Element(String);

impl Browser {
    /// Starts `chromedriver` on a free loopback port and opens a headless session with
    /// a `width` × `height` window.
    ///
    /// # Panics
    /// If `chromedriver` does not start or refuses the session.
    pub fn start(gpu: Gpu, width: u32, height: u32) -> Self {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("finding a free port");
        let temp = Scratch::new(&format!("webdriver-{port}"));
        let driver = Command::new(chromedriver())
            .arg(format!("--port={port}"))
            .env("TMPDIR", temp.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", chromedriver().display()));
        let addr = format!("127.0.0.1:{port}");
        let started = Instant::now();
        while std::net::TcpStream::connect(&addr).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "chromedriver did not listen on {addr}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let mut args = vec![
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            "--hide-scrollbars".to_owned(),
            format!("--window-size={width},{height}"),
        ];
        if gpu == Gpu::Webgpu {
            args.push("--enable-unsafe-webgpu".to_owned());
        }
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium(), "args": args},
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let mut browser = Self {
            driver,
            addr,
            session: String::new(),
            _temp: temp,
        };
        let answer = browser.call("POST", "/session", &capabilities);
        answer["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("chromedriver refused the session: {answer}"))
            .clone_into(&mut browser.session);
        browser
    }

    /// Sends a command; returns its `value`.
    fn call(&self, method: &str, path: &str, body: &Value) -> Value {
        let body = if method == "GET" || method == "DELETE" {
            Vec::new()
        } else {
            body.to_string().into_bytes()
        };
        let (status, text) = http::request(&self.addr, method, path, &[], &body);
        let answer: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("chromedriver {method} {path}: {e}: {text:.300}"));
        assert!(
            status == 200,
            "chromedriver {method} {path}: {status} {}",
            answer["value"]
        );
        answer["value"].clone()
    }

    fn session_call(&self, method: &str, path: &str, body: &Value) -> Value {
        self.call(method, &format!("/session/{}{path}", self.session), body)
    }

    /// The browser console's errors (level `SEVERE`: `console.error`, uncaught
    /// exceptions, failed loads) since the last call, each as its message.
    pub fn console_errors(&self) -> Vec<String> {
        let entries = self.session_call("POST", "/se/log", &json!({"type": "browser"}));
        entries
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    /// Lays pages out in a `width` x `height` CSS-pixel viewport from now on, whatever the
    /// window's size (Chromium keeps a headless window at least 500 px wide): the
    /// Chrome `DevTools` protocol's `Emulation.setDeviceMetricsOverride`, sent through
    /// chromedriver.
    pub fn emulate_viewport(&self, width: u32, height: u32) {
        self.session_call(
            "POST",
            "/goog/cdp/execute",
            &json!({
                "cmd": "Emulation.setDeviceMetricsOverride",
                "params": {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false},
            }),
        );
    }

    /// Opens `url` and waits for the document to load.
    pub fn goto(&self, url: &str) {
        self.session_call("POST", "/url", &json!({ "url": url }));
    }

    /// Runs `script` (a function body; `arguments` holds `args`) and returns its value.
    pub fn execute(&self, script: &str, args: &[Value]) -> Value {
        self.session_call(
            "POST",
            "/execute/sync",
            &json!({"script": script, "args": args}),
        )
    }

    /// Runs `script`, which calls its last argument with the result, and waits for it
    /// (up to `timeout`).
    pub fn execute_async(&self, script: &str, args: &[Value], timeout: Duration) -> Value {
        let millis = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        self.session_call("POST", "/timeouts", &json!({ "script": millis }));
        self.session_call(
            "POST",
            "/execute/async",
            &json!({"script": script, "args": args}),
        )
    }

    /// The element with id `id`, waiting up to `timeout` for it to appear.
    pub fn find(&self, id: &str, timeout: Duration) -> Option<Element> {
        let started = Instant::now();
        loop {
            let found = self.execute(
                "return document.getElementById(arguments[0]);",
                &[json!(id)],
            );
            if let Some(handle) = found[ELEMENT_KEY].as_str() {
                return Some(Element(handle.to_owned()));
            }
            if started.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Types `text` into `element` as key presses (focusing it first).
    pub fn send_keys(&self, element: &Element, text: &str) {
        self.session_call(
            "POST",
            &format!("/element/{}/value", element.0),
            &json!({ "text": text }),
        );
    }

    /// Clicks `element`.
    pub fn click(&self, element: &Element) {
        self.session_call("POST", &format!("/element/{}/click", element.0), &json!({}));
    }

    /// The `data-<key>` attribute (`key` in camelCase, as `dataset` names it) of the
    /// element with id `id`, if both exist.
    pub fn data_attribute(&self, id: &str, key: &str) -> Option<String> {
        self.execute(
            "const e = document.getElementById(arguments[0]); \
             return e === null ? null : (e.dataset[arguments[1]] ?? null);",
            &[json!(id), json!(key)],
        )
        .as_str()
        .map(str::to_owned)
    }

    /// The full-precision number of readout `id` (its `data-value`).
    pub fn readout(&self, id: &str) -> Option<f64> {
        self.data_attribute(id, "value")?.parse().ok()
    }

    /// Polls `condition` (a script returning a value) until it returns something other
    /// than `null`/`false`, up to `timeout`; returns that value.
    pub fn wait_for(&self, condition: &str, args: &[Value], timeout: Duration) -> Option<Value> {
        let started = Instant::now();
        loop {
            let value = self.execute(condition, args);
            if !(value.is_null() || value == Value::Bool(false)) {
                return Some(value);
            }
            if started.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let path = format!("/session/{}", self.session);
            let addr = self.addr.clone();
            let _ =
                std::panic::catch_unwind(move || http::request(&addr, "DELETE", &path, &[], b""));
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
