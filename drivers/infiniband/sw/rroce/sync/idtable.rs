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
use kernel::sync::{Arc, ArcBorrow};

use crate::sync::rcu::{synchronize, RcuBox, ReadGuard};

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
    /// ids are in use (`ENOMEM` otherwise, like hardware out of
    /// contexts); `gfp` for the xarray's allocation.
    fn insert_gfp(&self, obj: *mut c_void, min: u32, max: u32, limit: u32, gfp: bindings::gfp_t) -> Result<u32> {
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
    /// successor with [`Self::replace`]); whether it did.
    pub(crate) fn remove_if(&self, id: u32, obj: *mut c_void) -> bool {
        // SAFETY: the xarray is initialised (type invariant).
        let hit = unsafe { ffi::rroce_xa_erase_if(self.xa(), id, obj) };
        if hit {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
        hit
    }

    /// The lowest id with something published under it.
    fn first(&self) -> Option<u32> {
        let mut index: core::ffi::c_ulong = 0;
        // SAFETY: the xarray is initialised (type invariant).
        let p = unsafe { ffi::rroce_xa_find_present(self.xa(), &mut index) };
        (!p.is_null()).then_some(index as u32)
    }

    /// Frees `id`.
    pub(crate) fn remove(&self, id: u32) {
        self.take(id);
    }

    /// Frees `id` and returns what was stored there (null if nothing, or
    /// only a reservation).
    fn take(&self, id: u32) -> *mut c_void {
        // SAFETY: the xarray is initialised (type invariant).
        let old = unsafe { bindings::xa_erase(self.xa(), id as _) };
        if !old.is_null() {
            self.count.fetch_sub(1, Ordering::Relaxed);
        }
        old
    }
}

impl Drop for IdTable {
    fn drop(&mut self) {
        // SAFETY: the xarray is initialised and no longer used.
        unsafe { bindings::xa_destroy(self.xa()) };
    }
}

/// An id table that owns its values and lets readers use them under RCU
/// without a lock: a removed value is freed after a grace period.
///
/// # Invariants
///
/// Every non-null entry of `ids` came from [`RcuBox::into_raw`] for `T` and
/// is owned by the table until removed.
pub(crate) struct RcuTable<T: Send + Sync + 'static> {
    ids: IdTable,
    _values: core::marker::PhantomData<RcuBox<T>>,
}

impl<T: Send + Sync + 'static> RcuTable<T> {
    /// An empty table.
    pub(crate) fn new() -> Self {
        // INVARIANT: empty.
        Self { ids: IdTable::new(), _values: core::marker::PhantomData }
    }

    /// Takes a free id in `[min, max]` (if fewer than `limit` are in use)
    /// with nothing published under it yet.
    pub(crate) fn reserve(&self, min: u32, max: u32, limit: u32, gfp: bindings::gfp_t) -> Result<u32> {
        self.ids.reserve(min, max, limit, gfp)
    }

    /// Gives back a reserved id that was never published.
    pub(crate) fn unreserve(&self, id: u32) {
        self.ids.unreserve(id)
    }

    /// Publishes `value` under `id` (reserved by [`Self::reserve`]); the
    /// table owns it from now on.
    pub(crate) fn publish(&self, id: u32, value: RcuBox<T>) {
        // INVARIANT: the entry is an `RcuBox<T>` the table now owns.
        self.ids.publish(id, value.into_raw());
    }

    /// Runs `f` on the value under `id`, if one is published, inside an
    /// RCU read-side section.  Any context.
    pub(crate) fn read<R>(&self, id: u32, f: impl FnOnce(&T) -> R) -> Option<R> {
        let rcu = ReadGuard::new();
        let p = self.ids.load(id);
        // SAFETY: by the type invariant `p` is null or an `RcuBox<T>` of
        // ours, loaded inside `rcu`; `remove` frees entries only after a
        // grace period.
        unsafe { RcuBox::<T>::deref_raw(p, &rcu) }.map(f)
    }

    /// Unpublishes and frees `id`; its value is freed after a grace period
    /// (readers that found it may still use it).  Any context.
    pub(crate) fn remove(&self, id: u32) {
        let p = self.ids.take(id);
        // SAFETY: by the type invariant a non-null entry is an `RcuBox<T>`
        // owned by the table, and it is unpublished now.
        if let Some(b) = unsafe { RcuBox::<T>::from_raw(p) } {
            b.free_after_grace_period();
        }
    }
}

/// One of the two kinds of object a [`KeyTable`] holds.
pub(crate) enum Either<A, B> {
    /// The first kind (memory regions, for the key table).
    A(A),
    /// The second kind (memory windows).
    B(B),
}

/// An id table whose entries are shared objects of two kinds — memory
/// regions and memory windows share one key space, so the responder
/// resolves an R_Key to either — looked up without a lock under RCU.
///
/// The table holds a counted reference ([`Arc`]) to each published object;
/// a reader borrows it for its read-side section.  Removal unpublishes the
/// entry and drops the table's reference only after a grace period, so
/// whatever else owns the object decides when it really goes.
///
/// # Invariants
///
/// Every non-null entry of `ids` came from [`Arc::into_raw`] of an
/// `Arc<A>` (bit 0 clear) or of an `Arc<B>` with bit 0 set, and is a
/// reference the table owns until it is removed or replaced.  Both `A` and
/// `B` are aligned to at least 2 bytes, so bit 0 of their address is free.
pub(crate) struct KeyTable<A: Send + Sync, B: Send + Sync> {
    ids: IdTable,
    _values: core::marker::PhantomData<(Arc<A>, Arc<B>)>,
}

/// Bit 0 of a [`KeyTable`] entry: the entry is of the second kind.
const TAG_B: usize = 1;

impl<A: Send + Sync, B: Send + Sync> KeyTable<A, B> {
    const ALIGNED: () = assert!(core::mem::align_of::<A>() >= 2 && core::mem::align_of::<B>() >= 2);

    /// An empty table.
    pub(crate) fn new() -> Self {
        let () = Self::ALIGNED;
        // INVARIANT: empty.
        Self { ids: IdTable::new(), _values: core::marker::PhantomData }
    }

    fn raw_a(a: &A) -> *mut c_void {
        core::ptr::from_ref(a).cast_mut().cast()
    }

    fn raw_b(b: &B) -> *mut c_void {
        (core::ptr::from_ref(b) as usize | TAG_B) as *mut c_void
    }

    /// Takes a free id in `[min, max]` (if fewer than `limit` are in use),
    /// with nothing published under it yet.  Process context; the memory
    /// is charged to the caller's memory cgroup.
    pub(crate) fn reserve(&self, min: u32, max: u32, limit: u32) -> Result<u32> {
        self.ids.reserve(min, max, limit, bindings::GFP_KERNEL_ACCOUNT)
    }

    /// Gives back a reserved id that was never published.
    pub(crate) fn unreserve(&self, id: u32) {
        self.ids.unreserve(id)
    }

    /// Publishes `value` under `id` (reserved by [`Self::reserve`]); the
    /// table holds this reference from now on.
    pub(crate) fn publish(&self, id: u32, value: Either<Arc<A>, Arc<B>>) {
        let raw = match value {
            Either::A(a) => Arc::into_raw(a).cast_mut().cast(),
            Either::B(b) => (Arc::into_raw(b) as usize | TAG_B) as *mut c_void,
        };
        // INVARIANT: a tagged `Arc` reference the table now owns.
        self.ids.publish(id, raw);
    }

    /// The object under `id`, borrowed for the read-side section `_rcu`.
    pub(crate) fn get<'g>(&'g self, id: u32, _rcu: &'g ReadGuard) -> Option<Either<&'g A, &'g B>> {
        // SAFETY (both arms): by the type invariant a non-null entry is a
        // live `Arc` of the kind its tag says; it was loaded inside `_rcu`,
        // and the table drops its reference only a grace period after
        // unpublishing it, so the object lives until the section ends.
        Some(match Self::decode(self.ids.load(id))? {
            // SAFETY: see above.
            Either::A(a) => Either::A(unsafe { &*a }),
            // SAFETY: see above.
            Either::B(b) => Either::B(unsafe { &*b }),
        })
    }

    /// A counted reference to the object under `id` (for a holder that
    /// outlives the read-side section, such as a window bound to a
    /// region).
    pub(crate) fn get_arc(&self, id: u32, _rcu: &ReadGuard) -> Option<Either<Arc<A>, Arc<B>>> {
        // SAFETY (both arms): as in `get`; the table's reference keeps the
        // count above zero until a grace period after the entry is
        // unpublished, so past the section `_rcu` holds and this increment.
        Some(match Self::decode(self.ids.load(id))? {
            // SAFETY: see above.
            Either::A(a) => Either::A(unsafe { ArcBorrow::from_raw(a) }.into()),
            // SAFETY: see above.
            Either::B(b) => Either::B(unsafe { ArcBorrow::from_raw(b) }.into()),
        })
    }

    /// The object pointer an entry stands for (untagged), by kind.
    fn decode(raw: *mut c_void) -> Option<Either<*const A, *const B>> {
        match raw as usize {
            0 => None,
            r if r & TAG_B != 0 => Some(Either::B((r & !TAG_B) as *const B)),
            r => Some(Either::A(r as *const A)),
        }
    }

    /// Drops a reference the table held, after a grace period (sleeps).
    fn release(raw: *mut c_void) {
        let Some(obj) = Self::decode(raw) else { return };
        synchronize();
        // SAFETY (both arms): by the type invariant `raw` is a tagged `Arc`
        // reference the table owned; it is unpublished and every reader
        // that could have found it is done (grace period above).
        match obj {
            // SAFETY: see above.
            Either::A(a) => drop(unsafe { Arc::from_raw(a) }),
            // SAFETY: see above.
            Either::B(b) => drop(unsafe { Arc::from_raw(b) }),
        }
    }

    /// Puts `new` in place of `old` under `id` (the id stays in use); gives
    /// `new` back if `id` did not hold `old`.  Process context: it waits
    /// for a grace period before dropping the table's reference to `old`.
    pub(crate) fn replace_a(&self, id: u32, old: &A, new: Arc<A>) -> core::result::Result<(), Arc<A>> {
        crate::sync::might_sleep();
        let old_raw = Self::raw_a(old);
        let new_raw: *mut c_void = Arc::into_raw(new).cast_mut().cast();
        if !self.ids.replace(id, old_raw, new_raw) {
            // SAFETY: `new_raw` came from `Arc::into_raw` just above and was
            // not published.
            return Err(unsafe { Arc::from_raw(new_raw.cast::<A>()) });
        }
        // INVARIANT: the table owns `new` now and no longer owns `old`'s
        // entry, which it releases.
        Self::release(old_raw);
        Ok(())
    }

    /// Unpublishes `id` if it holds `value` (it may have been handed to a
    /// successor with [`Self::replace_a`]), then drops the table's
    /// reference after a grace period.  Process context (sleeps).
    pub(crate) fn remove_if(&self, id: u32, value: Either<&A, &B>) {
        crate::sync::might_sleep();
        let raw = match value {
            Either::A(a) => Self::raw_a(a),
            Either::B(b) => Self::raw_b(b),
        };
        if self.ids.remove_if(id, raw) {
            Self::release(raw);
        }
    }
}

impl<A: Send + Sync, B: Send + Sync> Drop for KeyTable<A, B> {
    fn drop(&mut self) {
        // ib_core destroys every MR and MW before the device goes, so this
        // finds nothing; a leftover is released rather than leaked.
        while let Some(id) = self.ids.first() {
            Self::release(self.ids.take(id));
        }
    }
}
