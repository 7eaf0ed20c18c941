//! Entry point of the wasm bundle: mounts the notebook. Natively there is no page, so
//! the binary only says where the notebook is.

#[cfg(target_arch = "wasm32")]
fn main() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(arlbook_app::App);
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!("arlbook_app runs in the browser: `cargo xtask serve` builds and serves it.");
}
