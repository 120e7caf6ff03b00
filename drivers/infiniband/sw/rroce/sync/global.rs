// SPDX-License-Identifier: GPL-2.0
//! A driver-wide value for C callbacks that carry no context pointer
//! (`rdma_link_ops::newlink`, netdev notifiers, pernet hooks,
//! `dealloc_driver`).
//!
//! The owner publishes a pinned value; callbacks borrow it with
//! [`Global::get`] for as long as they run — and may sleep meanwhile.
//! Dropping the owner unpublishes the value and waits until every borrow
//! has ended before the value is dropped.

use core::pin::Pin;
use core::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use kernel::prelude::*;

/// What the owner runs while the value is still published, before
/// unpublishing it: stop whatever can still reach it (unregister
/// callbacks, remove devices), since their teardown may need it.
pub(crate) trait Teardown {
    /// Tears down; the value is unpublished afterwards.
    fn teardown(&self);
}

/// A published driver-wide value (a `static`).
///
/// # Invariants
///
/// `ptr` is null or the value inside the live [`GlobalOwner`] of this
/// global; `users` counts [`GlobalRef`]s (and borrows being attempted).
/// The owner's drop clears `ptr`, then waits for `users` to reach zero
/// before dropping the value.
pub(crate) struct Global<T> {
    ptr: AtomicPtr<T>,
    users: AtomicUsize,
}

impl<T: Sync + Teardown> Global<T> {
    /// An empty global.
    pub(crate) const fn new() -> Self {
        Self { ptr: AtomicPtr::new(core::ptr::null_mut()), users: AtomicUsize::new(0) }
    }

    /// Publishes `value`; `EBUSY` if something is published already.
    pub(crate) fn publish(&'static self, value: Pin<KBox<T>>) -> Result<GlobalOwner<T>> {
        let p = core::ptr::from_ref::<T>(&value).cast_mut();
        self.ptr.compare_exchange(core::ptr::null_mut(), p, Ordering::SeqCst, Ordering::SeqCst).map_err(|_| EBUSY)?;
        // INVARIANT: `ptr` is the value the owner keeps.
        Ok(GlobalOwner { g: self, value: Some(value) })
    }

    /// The published value, if any, borrowed until the guard is dropped.
    pub(crate) fn get(&self) -> Option<GlobalRef<'_, T>> {
        // Counted before looking: the owner clears `ptr` first and then
        // waits for the count, so a non-null `ptr` seen after counting
        // stays valid until the count is given back.
        self.users.fetch_add(1, Ordering::SeqCst);
        let p = self.ptr.load(Ordering::SeqCst);
        // SAFETY: non-null means published, and the owner does not drop the
        // value while `users` counts us (type invariant).
        match unsafe { p.as_ref() } {
            Some(v) => Some(GlobalRef { g: self, v }),
            None => {
                self.users.fetch_sub(1, Ordering::SeqCst);
                None
            }
        }
    }
}

/// A borrow of a [`Global`]'s value.
pub(crate) struct GlobalRef<'a, T> {
    g: &'a Global<T>,
    v: &'a T,
}

impl<T> core::ops::Deref for GlobalRef<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.v
    }
}

impl<T> Drop for GlobalRef<'_, T> {
    fn drop(&mut self) {
        self.g.users.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The owner of a published value.
pub(crate) struct GlobalOwner<T: Sync + Teardown + 'static> {
    g: &'static Global<T>,
    value: Option<Pin<KBox<T>>>,
}

impl<T: Sync + Teardown + 'static> GlobalOwner<T> {
    /// The value.
    pub(crate) fn get(&self) -> Option<&T> {
        self.value.as_deref()
    }
}

impl<T: Sync + Teardown + 'static> Drop for GlobalOwner<T> {
    fn drop(&mut self) {
        if let Some(v) = self.value.as_deref() {
            v.teardown();
        }
        self.g.ptr.store(core::ptr::null_mut(), Ordering::SeqCst);
        while self.g.users.load(Ordering::SeqCst) != 0 {
            // SAFETY: process context (module unload or a failed load).
            unsafe { kernel::bindings::msleep(1) };
        }
        // INVARIANT: unpublished and unborrowed: the value may go.
        drop(self.value.take());
    }
}
