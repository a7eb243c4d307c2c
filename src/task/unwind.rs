//! The boundary between the pool and user code: every closure, destructor,
//! hook and waker of the user runs through one of these functions, so that
//! a panic in it never unwinds into a worker, the timer thread, or a caller
//! of the pool's API.
//!
//! Catching a panic is not enough: `catch_unwind` hands back the panic's
//! payload, and dropping that payload runs user code too (a payload is any
//! `Box<dyn Any + Send>`, and its `Drop` may panic in turn). So a caught
//! payload is never dropped bare: [`drop_payload`] drops it inside
//! `catch_unwind`, then the payload of that panic, and so on, and after
//! [`MAX_NESTED_PANICS`] of them leaks the last one rather than loop for
//! ever on a payload whose every drop panics anew. A [`PanicPayload`] does
//! that in its own `Drop`, so one can be dropped anywhere.

use std::any::Any;
use std::panic::{catch_unwind, AssertUnwindSafe};

use super::error::PanicPayload;

/// The most panicking payload drops [`drop_payload`] follows before it
/// leaks the last payload.
const MAX_NESTED_PANICS: usize = 8;

/// Runs `f`, catching a panic: its payload is dropped safely
/// ([`drop_payload`]) and `None` returned.
pub(crate) fn ignore_panic<R>(f: impl FnOnce() -> R) -> Option<R> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(value) => Some(value),
        Err(payload) => {
            drop_payload(payload);
            None
        }
    }
}

/// Runs `f`, catching a panic and handing its payload to `report` (which
/// owns it from then on).
pub(crate) fn report_panic<R>(
    f: impl FnOnce() -> R,
    report: impl FnOnce(PanicPayload),
) -> Option<R> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(value) => Some(value),
        Err(payload) => {
            report(PanicPayload::new(payload));
            None
        }
    }
}

/// Drops a caught panic's payload; a panic of its destructor is caught, and
/// the new payload dropped the same way (at most [`MAX_NESTED_PANICS`]
/// times: the last is leaked).
pub(crate) fn drop_payload(payload: Box<dyn Any + Send>) {
    let mut payload = payload;
    for _ in 0..MAX_NESTED_PANICS {
        match catch_unwind(AssertUnwindSafe(move || drop(payload))) {
            Ok(()) => return,
            Err(next) => payload = next,
        }
    }
    std::mem::forget(payload);
}

/// Keeps the default panic hook quiet about the panics the task layer's
/// unit tests provoke on purpose (messages that start with "expected"),
/// and passes any other panic on. Installed once for the test binary.
#[cfg(all(test, not(loom)))]
pub(crate) fn quiet_expected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let expected = payload
                .downcast_ref::<&str>()
                .copied()
                .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
                .is_some_and(|m| m.starts_with("expected"));
            if !expected {
                previous(info);
            }
        }));
    });
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static DROPS: AtomicUsize = AtomicUsize::new(0);

    /// A payload whose drop panics with another one like it, for ever.
    struct Hydra;

    impl Drop for Hydra {
        fn drop(&mut self) {
            DROPS.fetch_add(1, Ordering::SeqCst);
            std::panic::panic_any(Hydra);
        }
    }

    /// A payload whose drop panics once, with a plain message.
    struct PanicsOnce;

    impl Drop for PanicsOnce {
        fn drop(&mut self) {
            panic!("expected: a payload's drop panicked");
        }
    }

    /// Runs `f` with the panics it provokes on purpose kept quiet (the
    /// panic hook is replaced once, for the whole test binary, by one that
    /// passes every other panic on).
    fn quiet<R>(f: impl FnOnce() -> R) -> R {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                let payload = info.payload();
                let expected = payload.is::<Hydra>()
                    || payload
                        .downcast_ref::<&str>()
                        .is_some_and(|m| m.starts_with("expected"));
                if !expected {
                    previous(info);
                }
            }));
        });
        f()
    }

    #[test]
    fn a_payload_that_panics_when_dropped_is_dropped_without_unwinding() {
        quiet(|| {
            drop_payload(Box::new(PanicsOnce));
            assert_eq!(
                ignore_panic(|| std::panic::panic_any(PanicsOnce)),
                None::<()>
            );
            DROPS.store(0, Ordering::SeqCst);
            drop_payload(Box::new(Hydra));
            assert_eq!(DROPS.load(Ordering::SeqCst), MAX_NESTED_PANICS);
        });
    }

    #[test]
    fn a_report_receives_the_payload() {
        let mut seen = None;
        quiet(|| report_panic(|| panic!("expected: reported"), |p| seen = Some(p)));
        assert_eq!(seen.unwrap().message(), Some("expected: reported"));
        assert_eq!(report_panic(|| 3, |_| unreachable!()), Some(3));
    }
}
