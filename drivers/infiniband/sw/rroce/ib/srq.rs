// SPDX-License-Identifier: GPL-2.0
//! Shared receive queues: the `ib_device_ops` entry points, the object
//! ib_core allocates around the driver's part, and the handle a QP keeps
//! on the SRQ it receives from.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use kernel::bindings;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::ib::device::Device;
use crate::ib::object::{self, CoreObject, Handle, NewObj, Obj};
use crate::ib::udata::UData;
use crate::ib::wr::RecvWrChain;

/// What an SRQ is created from.
pub(crate) struct SrqInit<'a> {
    /// `IB_SRQT_BASIC`, `IB_SRQT_XRC`, …
    pub(crate) srq_type: bindings::ib_srq_type,
    /// The requested sizes; the driver writes back what it allocated.
    pub(crate) attr: &'a mut bindings::ib_srq_attr,
    /// User space's buffers (`None` for a kernel consumer).
    pub(crate) udata: Option<UData<'a>>,
}

/// A driver's shared receive queues.
pub(crate) trait SrqOps: Sized + Send + Sync + 'static {
    /// The driver's device data.
    type Dev;

    /// Creates the driver's part of a new SRQ.
    fn create(dev: &Device<Self::Dev>, init: SrqInit<'_>) -> Result<Self>;

    /// `modify_srq` with the attribute mask `mask` (`udata`: a user call's
    /// command and response).
    fn modify(
        &self,
        dev: &Device<Self::Dev>,
        attr: &bindings::ib_srq_attr,
        mask: bindings::ib_srq_attr_mask,
        udata: Option<UData<'_>>,
    ) -> Result;

    /// `query_srq`: fills `attr`.
    fn query(&self, attr: &mut bindings::ib_srq_attr) -> Result;

    /// Destroys it: no QP uses it any more.
    fn destroy(self, dev: &Device<Self::Dev>);

    /// Posts a kernel consumer's receive requests (the walk stops at the
    /// first it does not post).
    fn post_recv(&self, chain: &mut RecvWrChain<'_>) -> Result;
}

/// `ib_device_ops::size_ib_srq` for a driver whose SRQs are `T`.
pub(crate) const fn size<T>() -> usize {
    object::size::<bindings::ib_srq, T>()
}

/// A QP's reference to the SRQ it receives from (see [`Handle`]).
pub(crate) type SrqHandle<T> = Handle<bindings::ib_srq, T>;

impl<T> Handle<bindings::ib_srq, T> {
    /// Raises `IB_EVENT_SRQ_LIMIT_REACHED`.  Call without driver locks.
    pub(crate) fn limit_reached(&self) {
        let srq = self.as_raw();
        // SAFETY: alive (type invariant); ib_core set these fields before
        // `create_srq` and does not change them.
        let (handler, device, context) = unsafe { ((*srq).event_handler, (*srq).device, (*srq).srq_context) };
        if let Some(h) = handler {
            let mut ev = bindings::ib_event {
                device,
                event: bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
                ..Default::default()
            };
            ev.element.srq = srq;
            // SAFETY: the consumer's handler and context, as registered.
            unsafe { h(&mut ev, context) };
        }
    }
}

/// `ib_device_ops::create_srq`.
///
/// # Safety
///
/// ib_core's contract: `srq` is a zeroed allocation of `size_ib_srq` bytes
/// with `device` set, `init` is valid, `udata` null or the call's.
pub(crate) unsafe extern "C" fn create_srq<T: SrqOps>(
    srq: *mut bindings::ib_srq,
    init: *mut bindings::ib_srq_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: per the function's contract.
        let (s, init) = unsafe { (NewObj::<_, T>::from_raw(srq), &mut *init) };
        // SAFETY: ib_core set `device` to one of ours, live for the call.
        let dev = unsafe { Device::<T::Dev>::from_ib(s.ib().device()) };
        // SAFETY: null or valid for the call.
        let udata = unsafe { UData::from_raw(udata) };
        let p = T::create(dev, SrqInit { srq_type: init.srq_type, attr: &mut init.attr, udata })?;
        s.init(p);
        Ok(0)
    })
}

/// `ib_device_ops::modify_srq`.
///
/// # Safety
///
/// ib_core's contract: `srq` is created, `attr` valid.
pub(crate) unsafe extern "C" fn modify_srq<T: SrqOps>(
    srq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
    mask: bindings::ib_srq_attr_mask,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: per the contract; `udata` is null or valid for the call;
        // a created SRQ's `device` is one of ours, live for the call.
        let (s, a, u, dev) = unsafe {
            (
                Obj::<_, T>::part(srq).ok_or(EINVAL)?,
                &*attr,
                UData::from_raw(udata),
                Device::<T::Dev>::from_ib((*srq).device),
            )
        };
        s.modify(dev, a, mask, u)?;
        Ok(0)
    })
}

/// `ib_device_ops::query_srq`.
///
/// # Safety
///
/// ib_core's contract: `srq` is created, `attr` writable.
pub(crate) unsafe extern "C" fn query_srq<T: SrqOps>(srq: *mut bindings::ib_srq, attr: *mut bindings::ib_srq_attr) -> c_int {
    from_result(|| {
        // SAFETY: per the contract.
        let (s, a) = unsafe { (Obj::<_, T>::part(srq).ok_or(EINVAL)?, &mut *attr) };
        s.query(a)?;
        Ok(0)
    })
}

/// `ib_device_ops::destroy_srq`.
///
/// # Safety
///
/// ib_core's contract: `srq` is created and no QP uses it any more.
pub(crate) unsafe extern "C" fn destroy_srq<T: SrqOps>(srq: *mut bindings::ib_srq, _udata: *mut bindings::ib_udata) -> c_int {
    // SAFETY: per the contract this is the destroy verb of a created SRQ;
    // the device outlives it.
    let (p, dev) = unsafe { (Obj::<_, T>::take(srq), Device::<T::Dev>::from_ib((*srq).device)) };
    p.destroy(dev);
    0
}

/// `ib_device_ops::post_srq_recv`.
///
/// # Safety
///
/// ib_core's contract: `srq` is created, `wr` a valid chain, `bad_wr`
/// writable.
pub(crate) unsafe extern "C" fn post_srq_recv<T: SrqOps>(
    srq: *mut bindings::ib_srq,
    wr: *const bindings::ib_recv_wr,
    bad_wr: *mut *const bindings::ib_recv_wr,
) -> c_int {
    // SAFETY: a valid chain for the call.
    let mut chain = unsafe { RecvWrChain::from_raw(wr) };
    // SAFETY: per the contract.
    let result = match unsafe { Obj::<_, T>::part(srq) } {
        Some(s) => s.post_recv(&mut chain),
        None => Err(EINVAL),
    };
    // SAFETY: writable per the contract.
    unsafe { chain.finish(result, bad_wr) }
}
