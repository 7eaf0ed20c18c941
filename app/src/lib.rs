//! The arlbook notebook in the browser: chapters, live figures and their controls.
