//! Entry point of the wasm bundle: mounts the notebook.

fn main() {
    console_error_panic_hook::set_once();
    leptos::mount::mount_to_body(arlbook_app::App);
}
