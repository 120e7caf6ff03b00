// SPDX-License-Identifier: GPL-2.0
//! A spinlock that also disables bottom halves: `spin_lock_bh`.
//!
//! C header: [`include/linux/spinlock.h`](srctree/include/linux/spinlock.h)
//!
//! The 6.12 `kernel::sync::SpinLock` takes a plain `spin_lock`, which is not
//! enough for state that the UDP receive path (softirq) and system calls
//! (process context) both touch: a softirq interrupting a lock holder on the
//! same CPU would spin forever.

use kernel::bindings;
use kernel::sync::lock::{Backend, Lock};

use crate::glue;

/// A [`Lock`] taken with `spin_lock_bh`.
pub(crate) type SpinLockBh<T> = Lock<T, SpinLockBhBackend>;

/// Creates a [`SpinLockBh`] initialiser with a static lockdep class.
macro_rules! new_spinlock_bh {
    ($inner:expr, $name:literal) => {
        kernel::sync::lock::Lock::<_, $crate::lock::SpinLockBhBackend>::new(
            $inner,
            kernel::c_str!($name),
            kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_spinlock_bh;

/// The `spin_lock_bh` backend.
pub(crate) struct SpinLockBhBackend;

// SAFETY: `lock`/`unlock` are the kernel's spinlock primitives, which give
// mutual exclusion once `init` ran; bottom halves stay disabled while held.
unsafe impl Backend for SpinLockBhBackend {
    type State = bindings::spinlock_t;
    type GuardState = ();

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut bindings::lock_class_key,
    ) {
        // SAFETY: the caller guarantees `ptr` is writable and `name`/`key`
        // live forever.
        unsafe { bindings::__spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: the caller guarantees `ptr` was initialised.
        unsafe { glue::rroce_spin_lock_bh(ptr) }
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: the caller owns the lock.
        unsafe { glue::rroce_spin_unlock_bh(ptr) }
    }
}
