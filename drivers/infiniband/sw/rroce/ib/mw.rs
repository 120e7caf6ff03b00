// SPDX-License-Identifier: GPL-2.0
//! Memory windows: the `ib_device_ops` entry points and the object ib_core
//! allocates around the driver's part.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! ib_core frees the object right after `dealloc_mw`, so what the data
//! path finds by key must live elsewhere (the driver's part holds a counted
//! reference to it, as the key table does).

use kernel::bindings;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::ib::device::Device;
use crate::ib::object::{self, CoreObject, NewObj, Obj};
use crate::ib::PdId;

/// What a window is allocated with.
pub(crate) struct MwInit {
    /// The protection domain it belongs to.
    pub(crate) pd: PdId,
    /// Type 2 (bound by a QP, invalidated by key) rather than type 1.
    pub(crate) type2: bool,
}

/// A driver's memory windows.
pub(crate) trait MwOps: Sized + Send + Sync + 'static {
    /// The driver's device data.
    type Dev;

    /// Allocates the driver's part of a new window; returns it and the
    /// window's first R_Key.
    fn alloc(dev: &Device<Self::Dev>, init: MwInit) -> Result<(Self, u32)>;

    /// Deallocates it (process context).
    fn dealloc(self, dev: &Device<Self::Dev>);
}

/// `ib_device_ops::size_ib_mw` for a driver whose windows are `T`.
pub(crate) const fn size<T>() -> usize {
    object::size::<bindings::ib_mw, T>()
}

/// `ib_device_ops::alloc_mw`.
///
/// # Safety
///
/// ib_core's contract: `mw` is a zeroed allocation of `size_ib_mw` bytes
/// with `device`, `pd` and `type` set.
pub(in crate::ib) unsafe extern "C" fn alloc_mw<T: MwOps>(mw: *mut bindings::ib_mw, _udata: *mut bindings::ib_udata) -> c_int {
    from_result(|| {
        // SAFETY: per the function's contract.
        let mut w = unsafe { NewObj::<_, T>::from_raw(mw) };
        // SAFETY: ib_core set `device` to one of ours, live for the call.
        let dev = unsafe { Device::<T::Dev>::from_ib(w.ib().device()) };
        let type2 = match w.ib().type_ {
            bindings::ib_mw_type_IB_MW_TYPE_1 => false,
            bindings::ib_mw_type_IB_MW_TYPE_2 => true,
            _ => return Err(EINVAL),
        };
        let (p, rkey) = T::alloc(dev, MwInit { pd: PdId::of(w.ib().pd), type2 })?;
        w.ib_mut().rkey = rkey;
        w.init(p);
        Ok(0)
    })
}

/// `ib_device_ops::dealloc_mw`.
///
/// # Safety
///
/// ib_core's contract: `mw` was allocated by [`alloc_mw::<T>`] and is
/// deallocated once; ib_core frees it when this returns.
pub(in crate::ib) unsafe extern "C" fn dealloc_mw<T: MwOps>(mw: *mut bindings::ib_mw) -> c_int {
    // SAFETY: per the contract the window is allocated and this is its
    // one destroy verb; the device outlives its windows.
    let (p, dev) = unsafe { (Obj::<_, T>::take(mw), Device::<T::Dev>::from_ib((*mw).device)) };
    p.dealloc(dev);
    0
}
