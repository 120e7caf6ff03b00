// SPDX-License-Identifier: GPL-2.0
//! InfiniBand core objects (part of the abstraction layer): the device,
//! the objects ib_core allocates around the driver's parts (address
//! handles, CQs and SRQs so far), kernel work requests, a verb's user data, and memory shared with user space
//! through `rdma_user_mmap_entry` (the mapped rings).
//!
//! See [`crate::sync`] for the layer's rule.

use kernel::bindings;

pub(crate) mod ah;
pub(crate) mod cq;
pub(crate) mod device;
pub(crate) mod driver;
pub(crate) mod link;
pub(crate) mod mr;
pub(crate) mod mw;
pub(crate) mod object;
pub(crate) mod qp;
pub(crate) mod shm;
pub(crate) mod srq;
pub(crate) mod stats;
pub(crate) mod ucontext;
pub(crate) mod udata;
pub(crate) mod umem;
pub(crate) mod wr;

/// The identity of a protection domain (its address), for comparisons:
/// an object belongs to the PD it was created in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct PdId(usize);

impl PdId {
    /// The identity of `pd` (never dereferenced).
    pub(crate) fn of(pd: *mut bindings::ib_pd) -> Self {
        Self(pd as usize)
    }
}

/// The identity of an XRC domain (its address), for comparisons: an XRC
/// target QP receives into the XRC SRQs of its own domain only.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct XrcdId(usize);

impl XrcdId {
    /// The identity of `xrcd` (never dereferenced).
    pub(crate) fn of(xrcd: *mut bindings::ib_xrcd) -> Self {
        Self(xrcd as usize)
    }
}
