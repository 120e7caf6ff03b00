// SPDX-License-Identifier: GPL-2.0
//! Completion queues: the `ib_device_ops` entry points, the object ib_core
//! allocates around the driver's part, and the handle a QP keeps on the
//! CQs it completes into.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use kernel::bindings;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::ffi;
use crate::ib::device::Device;
use crate::ib::object::{self, CoreObject, Handle, NewObj, Obj};
use crate::ib::udata::UData;

/// A driver's completion queues.
pub(crate) trait CqOps: Sized + Send + Sync + 'static {
    /// The driver's device data.
    type Dev;

    /// Creates the driver's part of a new CQ; returns it and the depth
    /// allocated (at least `attr.cqe`).
    fn create(dev: &Device<Self::Dev>, attr: &bindings::ib_cq_init_attr, udata: Option<UData<'_>>) -> Result<(Self, u32)>;

    /// `resize_cq` to at least `cqe` entries; `set_depth` records the new
    /// depth (call it under the lock that orders resizes).
    fn resize(&self, dev: &Device<Self::Dev>, cqe: u32, udata: Option<UData<'_>>, set_depth: &dyn Fn(u32)) -> Result;

    /// Destroys it: no QP completes into it any more.
    fn destroy(self, dev: &Device<Self::Dev>);

    /// `req_notify_cq`: arms the CQ; `Ok(true)` if `IB_CQ_REPORT_MISSED_EVENTS`
    /// was asked and completions are waiting.
    fn req_notify(&self, flags: bindings::ib_cq_notify_flags) -> Result<bool>;

    /// `poll_cq` of a kernel consumer: fills `wc` from the front, returns
    /// how many.
    fn poll(&self, dev: &Device<Self::Dev>, wc: &mut [bindings::ib_wc]) -> Result<usize>;
}

/// `ib_device_ops::size_ib_cq` for a driver whose CQs are `T`.
pub(crate) const fn size<T>() -> usize {
    object::size::<bindings::ib_cq, T>()
}

/// A QP's reference to a CQ it completes into (see [`Handle`]; `resize_cq`
/// writes `cqe` concurrently, which is never read through it).
pub(crate) type CqHandle<T> = Handle<bindings::ib_cq, T>;

impl<T> Handle<bindings::ib_cq, T> {
    /// Calls the consumer's completion handler.  No spinlock of the driver
    /// may be held: a kernel consumer's handler may post or poll.
    pub(crate) fn notify(&self) {
        let cq = self.as_raw();
        // SAFETY: alive (type invariant); the fields are read one by one,
        // never `cqe`.
        let (handler, context) = unsafe { ((*cq).comp_handler, (*cq).cq_context) };
        if let Some(h) = handler {
            // SAFETY: the consumer's handler and context, as registered.
            unsafe { h(cq, context) };
        }
    }

    /// Raises `IB_EVENT_CQ_ERR` on the CQ.
    pub(crate) fn error_event(&self) {
        let cq = self.as_raw();
        // SAFETY: alive (type invariant); ib_core set these at creation.
        let (handler, device, context) = unsafe { ((*cq).event_handler, (*cq).device, (*cq).cq_context) };
        if let Some(h) = handler {
            let mut ev = bindings::ib_event {
                device,
                event: bindings::ib_event_type_IB_EVENT_CQ_ERR,
                ..Default::default()
            };
            ev.element.cq = cq;
            // SAFETY: the consumer's handler and context, as registered.
            unsafe { h(&mut ev, context) };
        }
    }
}

/// `ib_device_ops::create_cq`.
///
/// # Safety
///
/// ib_core's contract: `cq` is a zeroed allocation of `size_ib_cq` bytes
/// with `device` set, `attr` is valid, `attrs` null (kernel callers) or the
/// call's attribute bundle.
pub(in crate::ib) unsafe extern "C" fn create_cq<T: CqOps>(
    cq: *mut bindings::ib_cq,
    attr: *const bindings::ib_cq_init_attr,
    attrs: *mut bindings::uverbs_attr_bundle,
) -> c_int {
    from_result(|| {
        // SAFETY: per the function's contract.
        let (c, attr) = unsafe { (NewObj::<_, T>::from_raw(cq), &*attr) };
        // SAFETY: null or the call's bundle, whose udata is valid for it.
        let udata = unsafe { UData::from_raw(ffi::rroce_attrs_udata(attrs)) };
        // SAFETY: ib_core set `device` to one of ours, live for the call.
        let dev = unsafe { Device::<T::Dev>::from_ib(c.ib().device()) };
        let (p, depth) = T::create(dev, attr, udata)?;
        let mut c = c;
        match c_int::try_from(depth) {
            Ok(d) => c.ib_mut().cqe = d,
            Err(_) => {
                T::destroy(p, dev);
                return Err(EINVAL);
            }
        }
        c.init(p);
        Ok(0)
    })
}

/// `ib_device_ops::resize_cq`.
///
/// # Safety
///
/// ib_core's contract: `cq` is created, `udata` null (kernel callers) or
/// the call's.
pub(in crate::ib) unsafe extern "C" fn resize_cq<T: CqOps>(cq: *mut bindings::ib_cq, cqe: c_int, udata: *mut bindings::ib_udata) -> c_int {
    from_result(|| {
        // SAFETY: per the contract; only the driver part and `device` are
        // read (producers read other fields concurrently).
        let (c, dev) = unsafe { (Obj::<_, T>::part(cq).ok_or(EINVAL)?, Device::<T::Dev>::from_ib((*cq).device)) };
        // SAFETY: null or valid for the call.
        let udata = unsafe { UData::from_raw(udata) };
        let want = u32::try_from(cqe).map_err(|_| EINVAL)?;
        let set_depth = |n: u32| {
            // SAFETY: `cq` is live; `cqe` is a plain int only create and
            // resize write (volatile: ib_core may read it meanwhile).
            unsafe { core::ptr::write_volatile(&raw mut (*cq).cqe, n as c_int) };
        };
        c.resize(dev, want, udata, &set_depth)?;
        Ok(0)
    })
}

/// `ib_device_ops::destroy_cq`.
///
/// # Safety
///
/// ib_core's contract: `cq` is created and no QP uses it any more.
pub(in crate::ib) unsafe extern "C" fn destroy_cq<T: CqOps>(cq: *mut bindings::ib_cq, _udata: *mut bindings::ib_udata) -> c_int {
    // SAFETY: the destroy verb of a created CQ; the device outlives it.
    let (p, dev) = unsafe { (Obj::<_, T>::take(cq), Device::<T::Dev>::from_ib((*cq).device)) };
    p.destroy(dev);
    0
}

/// `ib_device_ops::req_notify_cq`.
///
/// # Safety
///
/// ib_core's contract: `cq` is created.
pub(in crate::ib) unsafe extern "C" fn req_notify_cq<T: CqOps>(cq: *mut bindings::ib_cq, flags: bindings::ib_cq_notify_flags) -> c_int {
    // SAFETY: per the contract.
    match unsafe { Obj::<_, T>::part(cq) }.map(|c| c.req_notify(flags)) {
        Some(Ok(missed)) => c_int::from(missed),
        Some(Err(e)) => e.to_errno(),
        None => -(bindings::EINVAL as c_int),
    }
}

/// `ib_device_ops::poll_cq`.
///
/// # Safety
///
/// ib_core's contract: `cq` is created, `wc` has room for `num` entries.
pub(in crate::ib) unsafe extern "C" fn poll_cq<T: CqOps>(cq: *mut bindings::ib_cq, num: c_int, wc: *mut bindings::ib_wc) -> c_int {
    let Ok(num) = usize::try_from(num) else { return -(bindings::EINVAL as c_int) };
    // SAFETY: per the contract.
    let Some(c) = (unsafe { Obj::<_, T>::part(cq) }) else { return -(bindings::EINVAL as c_int) };
    // SAFETY: `device` is one of ours, live for the call.
    let dev = unsafe { Device::<T::Dev>::from_ib((*cq).device) };
    let wc = if num == 0 || wc.is_null() {
        &mut [][..]
    } else {
        // SAFETY: the caller's array of `num` entries, ours for the call.
        unsafe { core::slice::from_raw_parts_mut(wc, num) }
    };
    match c.poll(dev, wc) {
        Ok(n) => n as c_int,
        Err(e) => e.to_errno(),
    }
}
