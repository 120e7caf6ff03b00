// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! [`Opaque`]: the C part of a provider object, which libibverbs owns.

use core::cell::UnsafeCell;

use super::abi::{IbvAh, IbvCqEx, IbvMw, IbvPd, IbvTd, VerbsMr, VerbsQp, VerbsSrq, VerbsXrcd};

/// Types whose all-zero bit pattern is a valid value.
///
/// # Safety
///
/// Implementors must consist only of integers, raw pointers, optional
/// function pointers and arrays or aggregates of those (for all of which
/// zero is valid).
pub(crate) unsafe trait Zeroable: Sized {}

// SAFETY: each is a `#[repr(C)]` aggregate of integers, raw pointers,
// `Option<fn>`s and byte arrays (pthread objects are byte arrays here).
unsafe impl Zeroable for IbvCqEx {}
// SAFETY: as above.
unsafe impl Zeroable for VerbsQp {}
// SAFETY: as above.
unsafe impl Zeroable for VerbsSrq {}
// SAFETY: as above.
unsafe impl Zeroable for VerbsXrcd {}
// SAFETY: as above.
unsafe impl Zeroable for IbvAh {}
// SAFETY: as above.
unsafe impl Zeroable for IbvMw {}
// SAFETY: as above.
unsafe impl Zeroable for IbvPd {}
// SAFETY: as above.
unsafe impl Zeroable for VerbsMr {}
// SAFETY: as above.
unsafe impl Zeroable for IbvTd {}
// SAFETY: integers only (the SGE of a WQE, as the provider stages it).
unsafe impl Zeroable for rroce_proto::wqe::Sge {}
// SAFETY: an integer.
unsafe impl Zeroable for u8 {}

/// A C struct embedded in a provider object that libibverbs and the
/// application read and write behind Rust's back (`ibv_cq`'s mutex and
/// event counters, `ibv_qp`'s state, `ibv_qp_ex`'s `wr_id`, ...).
///
/// Like the kernel's `Opaque<T>`: the value sits in an [`UnsafeCell`], so a
/// shared reference to the provider object that contains it asserts
/// nothing about the C part, and C may change it at any time.
///
/// # Invariants
///
/// Rust code never forms a reference to the inner value while the object
/// is shared with C; it is only reached through the raw pointer of
/// [`Opaque::get`], by the entry points in `ops`, under the C library's
/// rules for that field.
#[repr(transparent)]
pub(crate) struct Opaque<T>(UnsafeCell<T>);

// SAFETY: Rust code does not access the inner value except through raw
// pointers in `ops`, which follow libibverbs' own synchronisation for each
// field (the type invariant), so sharing or moving the wrapper between
// threads adds no data race of Rust's making.
unsafe impl<T: Zeroable> Sync for Opaque<T> {}
// SAFETY: as above; the value is plain C data without thread affinity.
unsafe impl<T: Zeroable> Send for Opaque<T> {}

impl<T: Zeroable> Opaque<T> {
    /// An all-zero value, what libibverbs expects of a fresh object.
    pub(crate) fn zeroed() -> Self {
        // SAFETY: `T: Zeroable`: all-zero is a valid `T`.
        Self(UnsafeCell::new(unsafe { core::mem::zeroed() }))
    }

    /// A value the provider fills in before it hands the object to C (a
    /// parent domain's `ibv_pd`).
    pub(crate) const fn new(value: T) -> Self {
        Self(UnsafeCell::new(value))
    }
}

impl<T> Opaque<T> {
    /// The C struct, for libibverbs.
    pub(crate) const fn get(&self) -> *mut T {
        self.0.get()
    }
}
