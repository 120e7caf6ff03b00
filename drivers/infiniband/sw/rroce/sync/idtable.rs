// SPDX-License-Identifier: GPL-2.0
//! Small-integer ids for driver objects (MR keys, QP numbers).
//!
//! C header: [`include/linux/xarray.h`](srctree/include/linux/xarray.h)
//!
//! An allocating xarray maps each id to its object, so the receive path can
//! find objects by id under RCU without taking a lock.

use core::ffi::c_void;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::bindings;
use kernel::prelude::*;

use crate::ffi;

/// An id allocator with lookup.
///
/// # Invariants
///
/// `xa` is an initialised allocating xarray; `count` is the number of ids
/// in use; `next` is only accessed by `xa_alloc_cyclic` under the xarray's
/// lock.  Stored pointers are owned by their objects, which remove their
/// id before they go away.
///
/// Ids are handed out cyclically (the next free one after the last one
/// given, wrapping): a freed id is reused as late as possible, so a late
/// completion or packet naming a destroyed QP (or a key of a deregistered
/// region) does not reach a new, unrelated object.
pub(crate) struct IdTable {
    xa: bindings::xarray,
    count: AtomicU32,
    next: core::cell::UnsafeCell<u32>,
}

// SAFETY: the xarray does its own locking; the stored pointers are only
// handed back to the objects' owners.
unsafe impl Send for IdTable {}
// SAFETY: as above.
unsafe impl Sync for IdTable {}

impl IdTable {
    /// An empty table.  (An xarray holds no pointers to itself until
    /// something is stored, so the value may move until then.)
    pub(crate) fn new() -> Self {
        let mut t = IdTable { xa: bindings::xarray::default(), count: AtomicU32::new(0), next: core::cell::UnsafeCell::new(0) };
        // SAFETY: initialises the empty xarray in `t`.
        unsafe { ffi::rroce_xa_init_alloc1(&mut t.xa) };
        // INVARIANT: initialised above.
        t
    }

    fn xa(&self) -> *mut bindings::xarray {
        core::ptr::addr_of!(self.xa).cast_mut()
    }

    /// Stores `obj` under a free id in `[min, max]`, if fewer than `limit`
    /// ids are in use (`ENOMEM` otherwise, like hardware out of contexts).
    pub(crate) fn insert(&self, obj: *mut c_void, min: u32, max: u32, limit: u32) -> Result<u32> {
        self.insert_gfp(obj, min, max, limit, bindings::GFP_KERNEL)
    }

    /// [`Self::insert`] with the allocation flags `gfp` (`GFP_ATOMIC` in
    /// atomic context).
    pub(crate) fn insert_gfp(&self, obj: *mut c_void, min: u32, max: u32, limit: u32, gfp: bindings::gfp_t) -> Result<u32> {
        self.count
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < limit).then_some(n + 1))
            .map_err(|_| ENOMEM)?;
        let mut id = 0u32;
        // SAFETY: the xarray is initialised (type invariant); `obj` stays
        // valid until its owner calls `remove`; `next` is only touched by
        // `xa_alloc_cyclic` under the xarray's lock.
        let err = unsafe { ffi::rroce_xa_alloc_cyclic(self.xa(), &mut id, obj, min, max, self.next.get(), gfp) };
        // 1: allocated after wrapping around.
        if err < 0 {
            self.count.fetch_sub(1, Ordering::Relaxed);
            return Err(Error::from_errno(err));
        }
        Ok(id)
    }

    /// Takes a free id in `[min, max]` (if fewer than `limit` are in use)
    /// without publishing anything under it: lookups find nothing there
    /// until [`Self::publish`].  An object is published only once it is
    /// committed, so no reader can reach one whose creation still fails.
    pub(crate) fn reserve(&self, min: u32, max: u32, limit: u32, gfp: bindings::gfp_t) -> Result<u32> {
        self.insert_gfp(core::ptr::null_mut(), min, max, limit, gfp)
    }

    /// Publishes `obj` under `id`, reserved by [`Self::reserve`].  Cannot
    /// fail: the slot exists, so nothing is allocated.
    pub(crate) fn publish(&self, id: u32, obj: *mut c_void) {
        // SAFETY: the xarray is initialised (type invariant); `obj` stays
        // valid until its owner calls `remove`.
        unsafe { bindings::xa_store(self.xa(), id as _, obj, bindings::GFP_ATOMIC) };
    }

    /// Gives back an id reserved by [`Self::reserve`] and never published.
    pub(crate) fn unreserve(&self, id: u32) {
        // SAFETY: the xarray is initialised (type invariant).
        unsafe { bindings::xa_erase(self.xa(), id as _) };
        self.count.fetch_sub(1, Ordering::Relaxed);
    }

    /// The object stored under `id`, or null.  The pointer is only
    /// meaningful inside an RCU read-side section (or BH-disabled region)
    /// if the object's owner waits for a grace period after `remove`.
    pub(crate) fn load(&self, id: u32) -> *mut c_void {
        // SAFETY: the xarray is initialised (type invariant); xa_load takes
        // the RCU read lock itself.
        unsafe { bindings::xa_load(self.xa(), id as _) }
    }

    /// Puts `new` in place of `old` under `id` (the id stays in use);
    /// false if `id` did not hold `old`.
    pub(crate) fn replace(&self, id: u32, old: *mut c_void, new: *mut c_void) -> bool {
        // SAFETY: the xarray is initialised (type invariant); replacing a
        // present entry allocates nothing.
        unsafe { ffi::rroce_xa_replace(self.xa(), id, old, new) }
    }

    /// Frees `id` if it still holds `obj` (it may have been handed to a
    /// successor with [`Self::replace`]).
    pub(crate) fn remove_if(&self, id: u32, obj: *mut c_void) {
        // SAFETY: the xarray is initialised (type invariant).
        if unsafe { ffi::rroce_xa_erase_if(self.xa(), id, obj) } {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Frees `id`.
    pub(crate) fn remove(&self, id: u32) {
        // SAFETY: the xarray is initialised (type invariant).
        if !unsafe { bindings::xa_erase(self.xa(), id as _) }.is_null() {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for IdTable {
    fn drop(&mut self) {
        // SAFETY: the xarray is initialised and no longer used.
        unsafe { bindings::xa_destroy(self.xa()) };
    }
}
