// SPDX-License-Identifier: GPL-2.0
//! The device: ib_core's `ib_device` followed by the driver's data.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use kernel::bindings;

/// An RDMA device of this driver: the `ib_device` ib_core allocated
/// (`_ib_alloc_device`, sized for this type) with the driver's `T` after it.
///
/// # Invariants
///
/// Only ever reached through a pointer from `_ib_alloc_device` sized for
/// `Device<T>`; `ib` is at offset 0; `p` is initialised right after the
/// allocation and dropped in `dealloc_driver`, after which no reference
/// to the device is formed.
#[repr(C)]
pub(crate) struct Device<T> {
    /// ib_core's part.
    pub(crate) ib: bindings::ib_device,
    /// The driver's part.
    pub(crate) p: T,
}

impl<T> Device<T> {
    /// The device an `ib_device` of ours belongs to.
    ///
    /// # Safety
    ///
    /// `ib` must be an `ib_device` allocated for a `Device<T>` whose `p` is
    /// initialised and not yet dropped, valid for `'a`.
    pub(crate) unsafe fn from_ib<'a>(ib: *mut bindings::ib_device) -> &'a Self {
        // CAST: `ib` is the first field of a `repr(C)` `Device<T>`.
        // SAFETY: the caller guarantees validity for `'a`.
        unsafe { &*ib.cast::<Self>() }
    }
}
