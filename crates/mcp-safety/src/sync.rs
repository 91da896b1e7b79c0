//! A mutex whose holder panicked still guards data worth reading: every crate takes its locks
//! through [`lock`], which recovers the guard instead of spreading the panic.

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, taking the guard back from a poisoned lock: the state behind our locks is
/// kept consistent at every step (a panicking holder leaves a value, not half of one), so a
/// panic elsewhere must not take down every later caller.
pub fn lock<T: ?Sized>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_poisoned_lock_still_gives_its_value() {
        let mutex = std::sync::Arc::new(Mutex::new(1));
        let held = std::sync::Arc::clone(&mutex);
        let _ = std::panic::catch_unwind(move || {
            let mut guard = held.lock().unwrap();
            *guard = 2;
            panic!("the holder fails");
        });
        assert!(mutex.is_poisoned());
        assert_eq!(*lock(&mutex), 2);
    }
}
