//! `fetch` for the job API: one request, its status and its body as text.

use leptos::prelude::window;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{Headers, Request, RequestInit, Response};

/// A finished HTTP exchange.
pub struct Answer {
    /// The status code.
    pub status: u16,
    /// The body, as text.
    pub body: String,
}

impl Answer {
    /// Whether the status is 2xx.
    pub fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// Words for a failed `fetch` (the network, not an HTTP status).
fn describe(err: &JsValue) -> String {
    err.as_string()
        .or_else(|| {
            err.dyn_ref::<js_sys::Error>()
                .map(|e| String::from(e.message()))
        })
        .unwrap_or_else(|| "the request failed".to_owned())
}

/// Sends `method url` with an optional JSON `body` and, when `token` is not empty,
/// `Authorization: Bearer <token>`.
pub async fn send(
    method: &str,
    url: &str,
    body: Option<&str>,
    token: &str,
) -> Result<Answer, String> {
    let headers = Headers::new().map_err(|e| describe(&e))?;
    if body.is_some() {
        headers
            .set("Content-Type", "application/json")
            .map_err(|e| describe(&e))?;
    }
    let token = token.trim();
    if !token.is_empty() {
        headers
            .set("Authorization", &format!("Bearer {token}"))
            .map_err(|e| describe(&e))?;
    }
    let init = RequestInit::new();
    init.set_method(method);
    init.set_headers(&headers);
    if let Some(body) = body {
        init.set_body(&JsValue::from_str(body));
    }
    let request = Request::new_with_str_and_init(url, &init).map_err(|e| describe(&e))?;
    let response: Response = JsFuture::from(window().fetch_with_request(&request))
        .await
        .map_err(|e| describe(&e))?
        .dyn_into()
        .map_err(|_| "fetch did not return a Response".to_owned())?;
    let text = JsFuture::from(response.text().map_err(|e| describe(&e))?)
        .await
        .map_err(|e| describe(&e))?;
    Ok(Answer {
        status: response.status(),
        body: text.as_string().unwrap_or_default(),
    })
}

/// `GET url`.
pub async fn get(url: &str) -> Result<Answer, String> {
    send("GET", url, None, "").await
}

/// Whether an `arlbook serve` answers `GET /api/health` with its JSON.
pub async fn server_is_up() -> bool {
    match get("/api/health").await {
        Ok(answer) if answer.ok() => serde_json::from_str::<serde_json::Value>(&answer.body)
            .is_ok_and(|v| v.get("status").is_some()),
        _ => false,
    }
}
