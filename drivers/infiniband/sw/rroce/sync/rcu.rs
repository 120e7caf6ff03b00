// SPDX-License-Identifier: GPL-2.0
//! Read-copy-update: read-side sections, grace periods, and heap objects
//! freed only after one.
//!
//! C header: [`include/linux/rcupdate.h`](srctree/include/linux/rcupdate.h)
//!
//! The 6.12 `kernel` crate has no RCU module; this is the part rroce needs.
//! An [`RcuBox`] is what the receive and send paths look up in an id table
//! without a lock: its owner unpublishes it, then hands it to
//! [`RcuBox::free_after_grace_period`], which frees it once every reader
//! that could have found it is done — from any context, without sleeping.

use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::alloc::{AllocError, Flags};
use kernel::bindings;
use kernel::ffi::c_void;
use kernel::prelude::*;

use crate::ffi;

/// An RCU read-side critical section, held for the guard's lifetime.
///
/// # Invariants
///
/// Created by [`ReadGuard::new`], which entered one read-side section; the
/// drop leaves it.  Not `Send`: it ends where it began.
pub(crate) struct ReadGuard(PhantomData<*mut ()>);

impl ReadGuard {
    /// Enters a read-side section (`rcu_read_lock`).
    pub(crate) fn new() -> Self {
        // SAFETY: always allowed; paired with the unlock in `drop`.
        unsafe { ffi::rroce_rcu_read_lock() };
        // INVARIANT: entered just above.
        Self(PhantomData)
    }
}

impl Drop for ReadGuard {
    fn drop(&mut self) {
        // SAFETY: by the type invariant this leaves our one section.
        unsafe { ffi::rroce_rcu_read_unlock() };
    }
}

/// Waits until every read-side section that began before the call has
/// ended (`synchronize_rcu`).  Process context only: it sleeps.
pub(crate) fn synchronize() {
    // SAFETY: callers are in process context (the function's contract,
    // checked by `might_sleep` in the kernel).
    unsafe { bindings::synchronize_rcu() };
}

/// Waits until every callback queued by
/// [`RcuBox::free_after_grace_period`] has run (module unload: the
/// callbacks are module code).  Process context only.
pub(crate) fn barrier() {
    // SAFETY: as for `synchronize`.
    unsafe { bindings::rcu_barrier() };
}

/// The allocation behind an [`RcuBox`]: the callback head first.
#[repr(C)]
struct Cell<T> {
    head: bindings::callback_head,
    value: T,
}

/// An owned heap value that lock-free readers may still hold after its
/// owner let go of it; it is freed after an RCU grace period.
///
/// # Invariants
///
/// `self.0` comes from [`KBox::into_raw`] of a `Cell<T>` whose `head` is
/// unused; the box owns it until [`RcuBox::into_raw`] or
/// [`RcuBox::free_after_grace_period`].
pub(crate) struct RcuBox<T: Send + Sync + 'static>(NonNull<Cell<T>>);

// SAFETY: `T` is `Send + Sync`; the box is a plain owner of it.
unsafe impl<T: Send + Sync + 'static> Send for RcuBox<T> {}
// SAFETY: shared references only give `&T`.
unsafe impl<T: Send + Sync + 'static> Sync for RcuBox<T> {}

impl<T: Send + Sync + 'static> RcuBox<T> {
    /// Allocates `value`.
    pub(crate) fn new(value: T, flags: Flags) -> Result<Self, AllocError> {
        let b = KBox::new(Cell { head: bindings::callback_head::default(), value }, flags)?;
        // INVARIANT: a fresh `KBox` allocation with an unused head.
        Ok(Self(NonNull::from(KBox::leak(b))))
    }

    /// Gives up ownership, as an opaque pointer to store in a lookup
    /// table; [`RcuBox::from_raw`] takes it back.
    pub(crate) fn into_raw(self) -> *mut c_void {
        let p = self.0.as_ptr().cast();
        core::mem::forget(self);
        p
    }

    /// Takes back what [`RcuBox::into_raw`] gave.
    ///
    /// # Safety
    ///
    /// `p` came from [`RcuBox::into_raw`] for the same `T`, and ownership
    /// was not taken back since.
    pub(crate) unsafe fn from_raw(p: *mut c_void) -> Option<Self> {
        // INVARIANT: per the requirements.
        NonNull::new(p.cast::<Cell<T>>()).map(Self)
    }

    /// A reader's view of a value published as `p` (from `into_raw`).
    ///
    /// # Safety
    ///
    /// `p` is null or came from [`RcuBox::into_raw`] for the same `T`, its
    /// owner frees it only with [`RcuBox::free_after_grace_period`] after
    /// unpublishing it, and `p` was loaded from where it is published
    /// inside the read-side section `_rcu` holds.
    pub(crate) unsafe fn deref_raw<'g>(p: *mut c_void, _rcu: &'g ReadGuard) -> Option<&'g T> {
        // SAFETY: per the requirements the value lives until the section
        // ends, which outlives `'g`.
        unsafe { p.cast::<Cell<T>>().as_ref() }.map(|c| &c.value)
    }

    /// Frees the value once every current reader is done (`call_rcu`).
    /// Any context; never sleeps.  Unpublish it first.
    pub(crate) fn free_after_grace_period(self) {
        let p = self.0.as_ptr();
        core::mem::forget(self);
        // SAFETY: we own the cell and its head is unused (type invariant);
        // `free_cell::<T>` frees exactly this allocation after the grace
        // period, and `barrier` runs before the module (its code) goes.
        unsafe { bindings::call_rcu(core::ptr::addr_of_mut!((*p).head), Some(free_cell::<T>)) };
    }
}

impl<T: Send + Sync + 'static> Drop for RcuBox<T> {
    /// Dropping frees at once: only for a value never published.
    fn drop(&mut self) {
        // SAFETY: owned by the type invariant; never published, so no
        // reader can hold it.
        drop(unsafe { KBox::from_raw(self.0.as_ptr()) });
    }
}

/// The `call_rcu` callback of [`RcuBox::free_after_grace_period`].
///
/// # Safety
///
/// Called by RCU with the `head` of a `Cell<T>` handed over there.
unsafe extern "C" fn free_cell<T: Send + Sync + 'static>(head: *mut bindings::callback_head) {
    // SAFETY: `head` is the first field of a `repr(C)` `Cell<T>` from
    // `KBox::into_raw`; the grace period is over, so no reader is left.
    drop(unsafe { KBox::from_raw(head.cast::<Cell<T>>()) });
}
