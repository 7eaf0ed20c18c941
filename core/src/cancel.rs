//! Cooperative cancellation: work that is no longer wanted stops at its next check.
//!
//! The compute API bounds each request's work before it starts ([`crate::api`]), so a
//! request ends in about a second of CPU. When its caller gives up earlier (the HTTP
//! server's request deadline passes, or the client goes away), the work should stop
//! too, not hold a thread to the end. A [`CancelToken`] is the flag for that:
//!
//! - the caller runs the work inside [`with`], which makes the token the current one on
//!   this thread; [`crate::parallel`] hands it on to the threads it starts;
//! - the long loops (random draws, simulated events, grid rows) call [`requested`]
//!   every so often ([`CHECK_EVERY`] iterations or once per chunk) and stop early;
//! - [`crate::api::run`] then refuses the partial result with the error
//!   [`cancelled_error`], so a stopped computation never reads as an answer.
//!
//! Without a current token (the CLI, the notebook, tests) [`requested`] is `false` and
//! nothing changes. On `wasm32` the same code runs on the one thread.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::FieldError;

/// How many iterations of a tight loop (a random draw each) run between two checks.
pub const CHECK_EVERY: usize = 1 << 14;

/// A shared flag: once [`cancel`](CancelToken::cancel) is called, every computation
/// running under it stops at its next check.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token not yet cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks every computation under this token to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

thread_local! {
    static CURRENT: RefCell<Option<CancelToken>> = const { RefCell::new(None) };
}

/// Restores the previous current token when dropped (also when `work` panics).
struct Restore(Option<CancelToken>);

impl Drop for Restore {
    fn drop(&mut self) {
        let previous = self.0.take();
        CURRENT.with(|current| *current.borrow_mut() = previous);
    }
}

/// Runs `work` with `token` as this thread's current token (`None`: no token).
pub fn with<R>(token: Option<&CancelToken>, work: impl FnOnce() -> R) -> R {
    let previous = CURRENT.with(|current| current.replace(token.cloned()));
    let _restore = Restore(previous);
    work()
}

/// This thread's current token, to hand on to a thread that does part of the work.
pub fn current() -> Option<CancelToken> {
    CURRENT.with(|current| current.borrow().clone())
}

/// Whether the work running on this thread has been cancelled.
pub fn requested() -> bool {
    CURRENT.with(|current| {
        current
            .borrow()
            .as_ref()
            .is_some_and(CancelToken::is_cancelled)
    })
}

/// `true` on every [`CHECK_EVERY`]-th iteration `i` of a loop whose work was cancelled:
/// `if cancel::due(i) { break }` costs a modulo per iteration and a flag read per check.
pub fn due(i: usize) -> bool {
    i.is_multiple_of(CHECK_EVERY) && requested()
}

/// The error a cancelled computation ends with.
pub fn cancelled_error() -> FieldError {
    FieldError::new(
        "(request)",
        "the computation was stopped before it finished: its caller gave up \
         (the request's deadline passed or the connection closed)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_requested_without_a_token() {
        assert!(!requested());
        assert!(!due(0));
        assert!(current().is_none());
    }

    #[test]
    fn the_token_is_current_inside_with_and_restored_after() {
        let token = CancelToken::new();
        with(Some(&token), || {
            assert!(!requested());
            token.cancel();
            assert!(requested());
            assert!(due(0) && due(CHECK_EVERY) && !due(1));
            // A nested scope without a token hides it, and gives it back.
            with(None, || assert!(!requested()));
            assert!(requested());
        });
        assert!(!requested());
    }

    #[test]
    fn the_token_is_restored_after_a_panic() {
        let token = CancelToken::new();
        token.cancel();
        let result = std::panic::catch_unwind(|| with(Some(&token), || panic!("inside")));
        assert!(result.is_err());
        assert!(!requested());
    }
}
