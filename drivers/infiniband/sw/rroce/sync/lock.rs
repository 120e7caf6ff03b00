// SPDX-License-Identifier: GPL-2.0
//! Spinlocks that also disable bottom halves (`spin_lock_bh`) or
//! interrupts (`spin_lock_irqsave`).
//!
//! C header: [`include/linux/spinlock.h`](srctree/include/linux/spinlock.h)
//!
//! The 6.12 `kernel::sync::SpinLock` takes a plain `spin_lock`, which is not
//! enough for state that the UDP receive path (softirq) and system calls
//! (process context) both touch: a softirq interrupting a lock holder on the
//! same CPU would spin forever.  State that kernel consumers reach through
//! `ib_post_send`/`ib_post_recv`/`ib_poll_cq`, which they may call with
//! interrupts disabled (ib_mad posts under `spin_lock_irqsave`), needs the
//! irqsave flavour: releasing a `_bh` lock there would run softirqs inside
//! the caller's critical section (and lockdep warns).

use kernel::bindings;
use kernel::sync::lock::{Backend, Lock};

use crate::ffi;

/// A [`Lock`] taken with `spin_lock_bh`.
pub(crate) type SpinLockBh<T> = Lock<T, SpinLockBhBackend>;

/// Creates a [`SpinLockBh`] initialiser with a static lockdep class.
macro_rules! new_spinlock_bh {
    ($inner:expr, $name:literal) => {
        kernel::sync::lock::Lock::<_, $crate::sync::lock::SpinLockBhBackend>::new(
            $inner,
            kernel::c_str!($name),
            kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_spinlock_bh;

/// `Backend::init` of both backends: the kernel's `spin_lock_init`.
///
/// # Safety
///
/// `ptr` is writable; `name` and `key` live forever.
unsafe fn spin_lock_init(
    ptr: *mut bindings::spinlock_t,
    name: *const kernel::ffi::c_char,
    key: *mut bindings::lock_class_key,
) {
    // SAFETY: per the requirements.
    unsafe { bindings::__spin_lock_init(ptr, name, key) }
}

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
        // SAFETY: forwarded from the caller.
        unsafe { spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: the caller guarantees `ptr` was initialised.
        unsafe { ffi::rroce_spin_lock_bh(ptr) }
    }

    unsafe fn unlock(ptr: *mut Self::State, _guard_state: &Self::GuardState) {
        // SAFETY: the caller owns the lock.
        unsafe { ffi::rroce_spin_unlock_bh(ptr) }
    }
}

/// A [`Lock`] taken with `spin_lock_irqsave`: usable in any context,
/// including with interrupts already disabled.  Nothing under it may
/// re-enable bottom halves (no transmission, no `_bh` lock).
pub(crate) type SpinLockIrq<T> = Lock<T, SpinLockIrqBackend>;

/// Creates a [`SpinLockIrq`] initialiser with a static lockdep class.
macro_rules! new_spinlock_irq {
    ($inner:expr, $name:literal) => {
        kernel::sync::lock::Lock::<_, $crate::sync::lock::SpinLockIrqBackend>::new(
            $inner,
            kernel::c_str!($name),
            kernel::static_lock_class!(),
        )
    };
}
pub(crate) use new_spinlock_irq;

/// The `spin_lock_irqsave` backend; the guard keeps the saved flags.
pub(crate) struct SpinLockIrqBackend;

// SAFETY: `lock`/`unlock` are the kernel's spinlock primitives, which give
// mutual exclusion once `init` ran; interrupts stay disabled while held and
// the flags saved by `lock` are restored by `unlock`.
unsafe impl Backend for SpinLockIrqBackend {
    type State = bindings::spinlock_t;
    type GuardState = kernel::ffi::c_ulong;

    unsafe fn init(
        ptr: *mut Self::State,
        name: *const kernel::ffi::c_char,
        key: *mut bindings::lock_class_key,
    ) {
        // SAFETY: forwarded from the caller.
        unsafe { spin_lock_init(ptr, name, key) }
    }

    unsafe fn lock(ptr: *mut Self::State) -> Self::GuardState {
        // SAFETY: the caller guarantees `ptr` was initialised.
        unsafe { ffi::rroce_spin_lock_irqsave(ptr) }
    }

    unsafe fn unlock(ptr: *mut Self::State, flags: &Self::GuardState) {
        // SAFETY: the caller owns the lock; `flags` came from its `lock`.
        unsafe { ffi::rroce_spin_unlock_irqrestore(ptr, *flags) }
    }
}

/// Whether the caller runs with interrupts disabled (then nothing may
/// enable bottom halves: transmission is deferred to a work item).
pub(crate) fn irqs_disabled() -> bool {
    // SAFETY: reads the CPU's interrupt flag.
    unsafe { ffi::rroce_irqs_disabled() }
}

/// Whether the caller runs in interrupt context, softirq context included,
/// or with bottom halves or interrupts disabled: no place for work that
/// user space paces (the same-device loopback drain goes to a work item).
pub(crate) fn in_atomic_bh() -> bool {
    // SAFETY: reads the preempt count and the interrupt flag.
    unsafe { ffi::rroce_in_interrupt() || ffi::rroce_irqs_disabled() }
}

/// Bottom halves disabled on this CPU for the guard's lifetime
/// (`local_bh_disable` / `local_bh_enable`).
///
/// # Invariants
///
/// Created by [`BhGuard::new`], which disabled bottom halves once; the
/// drop enables them once.  Not `Send`: it must be dropped on the CPU and
/// in the context it was created in.
pub(crate) struct BhGuard(core::marker::PhantomData<*mut ()>);

impl BhGuard {
    /// Disables bottom halves.  Do not create one with interrupts disabled
    /// (enabling bottom halves again would run softirqs there).
    pub(crate) fn new() -> Self {
        // SAFETY: always allowed; paired with the enable in `drop`.
        unsafe { ffi::rroce_local_bh_disable() };
        // INVARIANT: disabled once, just above.
        Self(core::marker::PhantomData)
    }
}

impl Drop for BhGuard {
    fn drop(&mut self) {
        // SAFETY: by the type invariant this undoes our one disable.
        unsafe { ffi::rroce_local_bh_enable() };
    }
}
