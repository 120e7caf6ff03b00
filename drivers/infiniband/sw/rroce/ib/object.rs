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
use core::ptr::NonNull;
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
/// No reference to a whole `Obj` is formed once it is created (ib_core
/// keeps writing its part): only to `p`.
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
    /// The driver's part of a created object.  Only that part is borrowed:
    /// ib_core (and `resize_cq`) may write fields of its own part
    /// meanwhile.
    ///
    /// # Safety
    ///
    /// `raw` is null or an object of a device whose objects of this kind
    /// are `T`, created (its create verb succeeded) and not destroyed for
    /// `'a`.
    pub(crate) unsafe fn part<'a>(raw: *mut I) -> Option<&'a T> {
        // SAFETY: per the requirements.
        NonNull::new(raw).map(|raw| unsafe { Self::part_of(raw) })
    }

    /// [`Obj::part`] of a pointer known not to be null.
    ///
    /// # Safety
    ///
    /// As for [`Obj::part`].
    pub(crate) unsafe fn part_of<'a>(raw: NonNull<I>) -> &'a T {
        // CAST: `ib` is the first field of a `repr(C)` `Obj<I, T>`.
        let obj = raw.as_ptr().cast::<Self>();
        // SAFETY: per the requirements the object is created, so `p` is
        // initialised (type invariant) and valid for `'a`; only `p` is
        // borrowed.
        unsafe { (*core::ptr::addr_of!((*obj).p)).assume_init_ref() }
    }

    /// Moves the driver's part out: the destroy verb.
    ///
    /// # Safety
    ///
    /// `raw` is a created object as for [`Obj::part`], and this is its
    /// destroy verb: nothing uses the driver's part afterwards.
    pub(crate) unsafe fn take(raw: *mut I) -> T {
        // SAFETY: per the requirements `p` is initialised and this is its
        // one move out; ib_core frees the memory without dropping it.
        unsafe { core::ptr::addr_of!((*raw.cast::<Self>()).p).read().assume_init() }
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
    pub(crate) fn ib(&self) -> &I {
        // SAFETY: ib_core's part is initialised and exclusively the verb's
        // for the call (type invariant).
        unsafe { &(*self.raw).ib }
    }

    /// ib_core's part, to fill in what the driver reports (a CQ's depth).
    pub(crate) fn ib_mut(&mut self) -> &mut I {
        // SAFETY: as for `ib`; `&mut self` makes the borrow unique.
        unsafe { &mut (*self.raw).ib }
    }

    /// Stores the driver's part: the create verb succeeds.
    pub(crate) fn init(self, p: T) {
        // SAFETY: the allocation is the verb's for the call (type
        // invariant); only `p` is written.
        // INVARIANT: `p` is initialised now; the verb returns success.
        unsafe { core::ptr::addr_of_mut!((*self.raw).p).write(MaybeUninit::new(p)) };
    }
}

/// A counted reference to a created object that ib_core keeps alive for
/// its holder: a QP's CQs and SRQ (ib_core holds a use count on each for
/// the QP, and destroys the QP first).
///
/// # Invariants
///
/// `self.0` is a created object whose driver part is `T`, alive for as
/// long as the handle.  Only the driver part and fields ib_core sets at
/// creation are read through it.
pub(crate) struct Handle<I, T>(NonNull<I>, PhantomData<T>);

// SAFETY: ib objects are usable from any context; `T` is shared between
// them anyway.
unsafe impl<I, T: Send + Sync> Send for Handle<I, T> {}
// SAFETY: as above.
unsafe impl<I, T: Send + Sync> Sync for Handle<I, T> {}

impl<I: CoreObject, T> Handle<I, T> {
    /// The handle of `raw`, `None` for null.
    ///
    /// # Safety
    ///
    /// `raw` is null or a created object of a device whose objects of this
    /// kind are `T`, kept alive by ib_core for as long as the handle lives.
    pub(crate) unsafe fn from_raw(raw: *mut I) -> Option<Self> {
        // INVARIANT: per the requirements.
        NonNull::new(raw).map(|p| Self(p, PhantomData))
    }

    /// The driver's part.
    pub(crate) fn get(&self) -> &T {
        // SAFETY: created and alive (type invariant).
        unsafe { Obj::<I, T>::part_of(self.0) }
    }

    /// ib_core's pointer.
    pub(crate) fn as_raw(&self) -> *mut I {
        self.0.as_ptr()
    }

    /// ib_core's pointer, never null.
    pub(crate) fn as_non_null(&self) -> NonNull<I> {
        self.0
    }

    /// Whether both handles name the same object.
    pub(crate) fn same(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}
