// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Locks held from one verbs call to another.
//!
//! Two parts of the extended verbs API are sessions that libibverbs
//! leaves to the provider to make critical sections: `ibv_wr_start` …
//! `ibv_wr_complete`/`ibv_wr_abort` on a QP ("no other threads can enter",
//! `ibv_wr_post(3)`) and `ibv_start_poll` … `ibv_end_poll` on a CQ (rxe and
//! mlx5 hold the CQ lock across it).  A `MutexGuard` cannot outlive the C
//! call that took it, so a [`SessionLock`] is taken by one call and given
//! back by another.  Plain calls on the same object (`ibv_post_send`,
//! `ibv_poll_cq`, ...) hold it for their duration ([`SessionLock::scope`]),
//! so they wait for a session of another thread to end.
//!
//! The lock knows its owner thread: a call made by the owner inside its
//! own session does not wait for itself (it would wait forever), and a
//! session ended by a thread that did not start it (an application's
//! mistake) gives back nothing.

use core::sync::atomic::{AtomicUsize, Ordering};

/// The calling thread's token: never 0, unique among live threads.
fn me() -> usize {
    crate::ffi::thread_token()
}

/// A lock that one call takes and another gives back (see the module
/// documentation).
#[derive(Debug, Default)]
pub(crate) struct SessionLock {
    /// The owner's token, 0 when free.
    owner: AtomicUsize,
}

impl SessionLock {
    pub(crate) const fn new() -> Self {
        Self {
            owner: AtomicUsize::new(0),
        }
    }

    /// Takes the lock for the calling thread, waiting while another thread
    /// holds it; `false` (and nothing taken) if this thread holds it.
    pub(crate) fn acquire(&self) -> bool {
        self.acquire_as(me())
    }

    fn acquire_as(&self, me: usize) -> bool {
        if self.owner.load(Ordering::Relaxed) == me {
            return false;
        }
        let mut spins = 0u32;
        while self
            .owner
            .compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins = spins.saturating_add(1);
            if spins < 64 {
                core::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        true
    }

    /// Gives the lock back if the calling thread holds it.
    pub(crate) fn release(&self) {
        self.release_as(me());
    }

    fn release_as(&self, me: usize) {
        let _ = self
            .owner
            .compare_exchange(me, 0, Ordering::Release, Ordering::Relaxed);
    }

    /// Holds the lock until the returned guard goes (a call outside a
    /// session); inside the calling thread's own session it takes nothing.
    pub(crate) fn scope(&self) -> Scope<'_> {
        let me = me();
        let took = self.acquire_as(me);
        Scope {
            lock: self,
            owner: if took { me } else { 0 },
        }
    }
}

/// See [`SessionLock::scope`].
pub(crate) struct Scope<'a> {
    lock: &'a SessionLock,
    /// The token it took the lock with, 0 if it took nothing.
    owner: usize,
}

impl Drop for Scope<'_> {
    fn drop(&mut self) {
        if self.owner != 0 {
            self.lock.release_as(self.owner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use std::time::Duration;

    #[test]
    fn held_across_calls_and_by_its_owner_only() {
        let l = Arc::new(SessionLock::new());
        assert!(l.acquire());
        // The owner's own calls do not wait, and do not release it.
        assert!(!l.acquire());
        drop(l.scope());
        let done = Arc::new(AtomicBool::new(false));
        let (l2, d2) = (l.clone(), done.clone());
        let t = std::thread::spawn(move || {
            // Another thread's release gives back nothing ...
            l2.release();
            // ... and its call waits for the session to end.
            let _s = l2.scope();
            d2.store(true, Ordering::SeqCst);
        });
        std::thread::sleep(Duration::from_millis(100));
        assert!(!done.load(Ordering::SeqCst));
        l.release();
        t.join().unwrap();
        assert!(done.load(Ordering::SeqCst));
        assert_eq!(l.owner.load(Ordering::SeqCst), 0);
    }
}
