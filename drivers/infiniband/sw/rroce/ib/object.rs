// SPDX-License-Identifier: GPL-2.0
//! The objects ib_core allocates for a driver (PD, AH, CQ, SRQ, QP, MW,
//! user context): ib_core's structure first, the driver's part after it.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! ib_core allocates `size_ib_<obj>` zeroed bytes, fills in its own part
//! and calls the driver's create verb, which initialises the driver's part
//! in place ([`NewObj::init`]); the destroy verb moves it out again
//! ([`Obj::take`]) before ib_core frees the memory.  Between the two the
//! driver's part is reachable through [`Obj::from_raw`].

use core::marker::PhantomData;
use core::mem::{size_of, MaybeUninit};
use kernel::bindings;

/// An ib_core object structure that starts with (or holds) a `device`
/// pointer to the `ib_device` it belongs to.
///
/// # Safety
///
/// `device` must return the object's `device` field, which ib_core sets
/// before the driver's create verb runs and never changes.
pub(crate) unsafe trait CoreObject {
    /// The device the object belongs to.
    fn device(&self) -> *mut bindings::ib_device;
}

macro_rules! core_object {
    ($($t:ident),*) => {$(
        // SAFETY: returns the `device` field, set by ib_core before the
        // create verb and constant afterwards.
        unsafe impl CoreObject for bindings::$t {
            fn device(&self) -> *mut bindings::ib_device {
                self.device
            }
        }
    )*};
}
core_object!(ib_ah, ib_cq, ib_srq, ib_mw, ib_pd, ib_qp, ib_ucontext);

/// An object as ib_core allocates it: `ib` (ib_core's part), then `p`.
///
/// # Invariants
///
/// Only reached through pointers ib_core passes for a device whose
/// `size_ib_<obj>` is [`size::<I, T>`]; `p` is initialised exactly while
/// the object exists, from its successful create verb to its destroy verb.
/// Only [`NewObj`] reaches an `Obj` before that.
#[repr(C)]
pub(crate) struct Obj<I, T> {
    ib: I,
    p: MaybeUninit<T>,
}

/// `size_ib_<obj>` for objects whose driver part is `T`.
pub(crate) const fn size<I, T>() -> usize {
    size_of::<Obj<I, T>>()
}

impl<I: CoreObject, T> Obj<I, T> {
    /// A created object's `Obj`.
    ///
    /// # Safety
    ///
    /// `raw` is null or an object of a device whose objects of this kind
    /// are `T`, created (its create verb succeeded) and not destroyed for
    /// `'a`.
    pub(crate) unsafe fn from_raw<'a>(raw: *mut I) -> Option<&'a Self> {
        // CAST: `ib` is the first field of a `repr(C)` `Obj<I, T>`.
        // SAFETY: per the requirements.
        unsafe { raw.cast::<Self>().as_ref() }
    }

    /// The driver's part.
    pub(crate) fn get(&self) -> &T {
        // SAFETY: an `Obj` reached through `from_raw` is created, so `p` is
        // initialised (type invariant).
        unsafe { self.p.assume_init_ref() }
    }

    /// Moves the driver's part out: the destroy verb.
    ///
    /// # Safety
    ///
    /// `raw` is a created object as for [`Obj::from_raw`], and this is its
    /// destroy verb: nothing uses the driver's part afterwards.
    pub(crate) unsafe fn take(raw: *mut I) -> T {
        // SAFETY: per the requirements `p` is initialised and this is its
        // one move out; ib_core frees the memory without dropping it.
        unsafe { (*raw.cast::<Self>()).p.assume_init_read() }
    }
}

/// An object being created: ib_core's part is filled in, the driver's is
/// not yet.
///
/// # Invariants
///
/// `raw` is the zeroed, not yet created allocation of a create verb in
/// progress, exclusively the verb's for `'a`.
pub(crate) struct NewObj<'a, I, T> {
    raw: *mut Obj<I, T>,
    _call: PhantomData<&'a mut Obj<I, T>>,
}

impl<'a, I: CoreObject, T> NewObj<'a, I, T> {
    /// The object of a create verb.
    ///
    /// # Safety
    ///
    /// `raw` is the allocation ib_core passes to the create verb (sized by
    /// [`size::<I, T>`]), with ib_core's part initialised; the verb runs
    /// for `'a`.
    pub(crate) unsafe fn from_raw(raw: *mut I) -> Self {
        // INVARIANT: per the requirements.
        Self { raw: raw.cast(), _call: PhantomData }
    }

    /// ib_core's part.
    pub(crate) fn ib(&self) -> &'a I {
        // SAFETY: ib_core's part is initialised and valid for the call; the
        // driver's part is not read.
        unsafe { &(*self.raw).ib }
    }

    /// Stores the driver's part: the create verb succeeds.
    pub(crate) fn init(self, p: T) -> &'a Obj<I, T> {
        // SAFETY: the allocation is ours for the call (type invariant).
        let obj = unsafe { &mut *self.raw };
        // INVARIANT: `p` is initialised now; the verb returns success.
        obj.p.write(p);
        obj
    }
}
