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

use core::marker::PhantomData;
use core::ptr::NonNull;

use crate::ib::cq::CqHandle;
use crate::ib::device::Device;
use crate::ib::object::{self, CoreObject, Handle, NewObj, Obj};
use crate::ib::udata::UData;
use crate::ib::wr::RecvWrChain;
use crate::ib::{PdId, XrcdId};
use crate::sync::idtable::IdTable;
use crate::sync::rcu::ReadGuard;

/// What an XRC SRQ adds: its domain and the CQ its receives complete on
/// (an XRC SRQ's completions do not go to a QP's receive CQ).
pub(crate) struct XrcSrqInit<C> {
    /// The XRC domain.
    pub(crate) xrcd: XrcdId,
    /// The CQ (ib_core holds a use count on it for the SRQ).
    pub(crate) cq: CqHandle<C>,
}

/// What an SRQ is created from.
pub(crate) struct SrqInit<'a, C> {
    /// `IB_SRQT_BASIC`, `IB_SRQT_XRC` (then `xrc` is set), …
    pub(crate) srq_type: bindings::ib_srq_type,
    /// The protection domain.
    pub(crate) pd: PdId,
    /// The domain and CQ of an XRC SRQ.
    pub(crate) xrc: Option<XrcSrqInit<C>>,
    /// The requested sizes; the driver writes back what it allocated.
    pub(crate) attr: &'a mut bindings::ib_srq_attr,
    /// User space's buffers (`None` for a kernel consumer).
    pub(crate) udata: Option<UData<'a>>,
}

/// A driver's shared receive queues.
pub(crate) trait SrqOps: Sized + Send + Sync + 'static {
    /// The driver's device data.
    type Dev;
    /// The driver's part of a CQ (an XRC SRQ's).
    type Cq: Send + Sync + 'static;

    /// The device's SRQ number table.
    fn table(dev: &Device<Self::Dev>) -> &SrqTable<Self>;

    /// Creates the driver's part of a new SRQ; returns it and the SRQ
    /// number it reserved in [`Self::table`] (the layer publishes an XRC
    /// SRQ under it).
    fn create(dev: &Device<Self::Dev>, init: SrqInit<'_, Self::Cq>) -> Result<(Self, u32)>;

    /// The SRQ number [`Self::create`] returned.
    fn srqn(&self) -> u32;

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

    /// Destroys it: no QP uses it any more, its number is given back and
    /// no receiver finds it.
    fn destroy(self, dev: &Device<Self::Dev>);

    /// Posts a kernel consumer's receive requests (the walk stops at the
    /// first it does not post).
    fn post_recv(&self, chain: &mut RecvWrChain<'_>) -> Result;
}

/// A driver's device data that names its SRQ type (implemented where the
/// driver's object types meet; [`Driver`](crate::ib::driver::Driver)
/// requires the table's SRQ type), so that the device can hold the
/// [`SrqTable`] without depending on the SRQ code.
pub(crate) trait HasSrqs {
    /// The driver's part of an SRQ.
    type Srq: SrqOps;
}

/// The SRQ numbers of a device, and its XRC SRQs by number for the receive
/// path (the XRCETH of an XRC request names one): looked up under RCU.
///
/// # Invariants
///
/// Every published entry of `ids` is the `ib_srq` of a created XRC SRQ of
/// this driver whose part is `T`; `destroy_srq` unpublishes it and waits
/// for a grace period before the SRQ goes.
pub(crate) struct SrqTable<T> {
    ids: IdTable,
    _srqs: PhantomData<T>,
}

impl<T: SrqOps> SrqTable<T> {
    /// An empty table.
    pub(crate) fn new() -> Self {
        // INVARIANT: empty.
        Self { ids: IdTable::new(), _srqs: PhantomData }
    }

    /// Reserves an SRQ number in `[min, max]` (if fewer than `limit` are
    /// in use) for an SRQ being created.
    pub(crate) fn reserve(&self, min: u32, max: u32, limit: u32) -> Result<u32> {
        self.ids.reserve(min, max, limit, bindings::GFP_KERNEL_ACCOUNT)
    }

    /// Gives back a number reserved by a creation that failed, or by an
    /// SRQ that was never published.
    pub(crate) fn unreserve(&self, srqn: u32) {
        self.ids.unreserve(srqn)
    }

    /// The XRC SRQ `srqn`, for the read-side section `_rcu`.
    pub(crate) fn get<'g>(&'g self, srqn: u32, _rcu: &'g ReadGuard) -> Option<SrqRef<'g, T>> {
        let ib = NonNull::new(self.ids.load(srqn).cast::<bindings::ib_srq>())?;
        // INVARIANT: a published entry is a created SRQ with part `T`
        // (type invariant), loaded inside `_rcu`; `destroy_srq` waits for
        // a grace period after unpublishing it.
        Some(SrqRef(ib, PhantomData))
    }
}

/// A created SRQ, usable for `'a`: borrowed from a QP's [`SrqHandle`] or
/// found in the [`SrqTable`] inside a read-side section.
///
/// # Invariants
///
/// `self.0` is a created SRQ whose part is `T`, alive for `'a`.
pub(crate) struct SrqRef<'a, T>(NonNull<bindings::ib_srq>, PhantomData<&'a T>);

impl<T> Clone for SrqRef<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for SrqRef<'_, T> {}

impl<'a, T> SrqRef<'a, T> {
    /// The driver's part.
    pub(crate) fn p(&self) -> &'a T {
        // SAFETY: created and alive for `'a` (type invariant).
        unsafe { Obj::<bindings::ib_srq, T>::part_of(self.0) }
    }

    /// Raises `IB_EVENT_SRQ_LIMIT_REACHED`.  Call without driver locks.
    pub(crate) fn limit_reached(&self) {
        let srq = self.0.as_ptr();
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

/// `ib_device_ops::size_ib_srq` for a driver whose SRQs are `T`.
pub(crate) const fn size<T>() -> usize {
    object::size::<bindings::ib_srq, T>()
}

/// A QP's reference to the SRQ it receives from (see [`Handle`]).
pub(crate) type SrqHandle<T> = Handle<bindings::ib_srq, T>;

impl<T> Handle<bindings::ib_srq, T> {
    /// The SRQ for as long as the handle is borrowed.
    pub(crate) fn borrow(&self) -> SrqRef<'_, T> {
        // INVARIANT: the handle keeps a created SRQ alive (its invariant).
        SrqRef(self.as_non_null(), PhantomData)
    }
}

/// `ib_device_ops::create_srq`.
///
/// # Safety
///
/// ib_core's contract: `srq` is a zeroed allocation of `size_ib_srq` bytes
/// with `device` set, `init` is valid, `udata` null or the call's.
pub(in crate::ib) unsafe extern "C" fn create_srq<T: SrqOps>(
    srq: *mut bindings::ib_srq,
    init: *mut bindings::ib_srq_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: per the function's contract.
        let (mut s, init) = unsafe { (NewObj::<_, T>::from_raw(srq), &mut *init) };
        // SAFETY: ib_core set `device` to one of ours, live for the call.
        let dev = unsafe { Device::<T::Dev>::from_ib(s.ib().device()) };
        // SAFETY: null or valid for the call.
        let udata = unsafe { UData::from_raw(udata) };
        let xrc = match init.srq_type {
            bindings::ib_srq_type_IB_SRQT_XRC => {
                let ext = &s.ib().ext;
                // SAFETY: ib_core set `ext.cq` (counted for the SRQ) and the
                // `xrc` member of the union for an XRC SRQ before this
                // verb; the CQ is a created one of this device, whose part
                // is the driver's `Cq` (its ops table).
                let (cq, xrcd) = unsafe { (CqHandle::from_raw(ext.cq), ext.__bindgen_anon_1.xrc.xrcd) };
                let cq = cq.ok_or(EINVAL)?;
                (!xrcd.is_null()).then_some(()).ok_or(EINVAL)?;
                Some(XrcSrqInit { xrcd: XrcdId::of(xrcd), cq })
            }
            // The driver refuses the types it does not know.
            _ => None,
        };
        let is_xrc = xrc.is_some();
        let pd = PdId::of(s.ib().pd);
        let (p, srqn) = T::create(dev, SrqInit { srq_type: init.srq_type, pd, xrc, attr: &mut init.attr, udata })?;
        if is_xrc {
            // What ib_uverbs reports as the SRQ number (`srqn`).
            s.ib_mut().ext.__bindgen_anon_1.xrc.srq_num = srqn;
        }
        s.init(p);
        if is_xrc {
            // INVARIANT: created; `destroy_srq` unpublishes it.
            T::table(dev).ids.publish(srqn, srq.cast());
        }
        Ok(0)
    })
}

/// `ib_device_ops::modify_srq`.
///
/// # Safety
///
/// ib_core's contract: `srq` is created, `attr` valid.
pub(in crate::ib) unsafe extern "C" fn modify_srq<T: SrqOps>(
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
pub(in crate::ib) unsafe extern "C" fn query_srq<T: SrqOps>(srq: *mut bindings::ib_srq, attr: *mut bindings::ib_srq_attr) -> c_int {
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
pub(in crate::ib) unsafe extern "C" fn destroy_srq<T: SrqOps>(srq: *mut bindings::ib_srq, _udata: *mut bindings::ib_udata) -> c_int {
    // SAFETY: per the contract `srq` is a created SRQ of one of our
    // devices, which outlives it.
    let (dev, ty, part) = unsafe { (Device::<T::Dev>::from_ib((*srq).device), (*srq).srq_type, Obj::<_, T>::part(srq)) };
    let Some(srqn) = part.map(T::srqn) else { return EINVAL.to_errno() };
    if ty == bindings::ib_srq_type_IB_SRQT_XRC {
        T::table(dev).ids.remove(srqn);
        // Receivers that found it before it was unpublished are done
        // after a grace period.
        crate::sync::rcu::synchronize();
    } else {
        T::table(dev).unreserve(srqn);
    }
    // SAFETY: per the contract this is the destroy verb of a created SRQ,
    // and no receiver can reach it any more.
    let p = unsafe { Obj::<_, T>::take(srq) };
    p.destroy(dev);
    0
}

/// `ib_device_ops::post_srq_recv`.
///
/// # Safety
///
/// ib_core's contract: `srq` is created, `wr` a valid chain, `bad_wr`
/// writable.
pub(in crate::ib) unsafe extern "C" fn post_srq_recv<T: SrqOps>(
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
