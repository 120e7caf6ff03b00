// SPDX-License-Identifier: GPL-2.0
//! Address handles: the `ib_device_ops` entry points and the object ib_core
//! allocates, around the driver's part.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! ib_core allocates `size_ib_ah` bytes (zeroed) with its `ib_ah` first and
//! calls `create_ah`; the driver's [`AhOps::create`] returns its part,
//! which is stored after the `ib_ah` and moved out again by `destroy_ah`.
//! ib_core may free the allocation right after `destroy_ah` without an RCU
//! grace period, so anything a lock-free reader uses must live elsewhere
//! (the driver keeps it in a [`crate::sync::idtable::RcuTable`]).

use kernel::bindings;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::ib::device::Device;
use crate::ib::object::{self, CoreObject, NewObj, Obj};
use crate::ib::udata::UData;
use crate::ib::PdId;

/// The RoCE part of an `rdma_ah_attr` (of `create_ah` or `modify_qp`).
pub(crate) struct RoceAttr {
    /// `RDMA_AH_ATTR_TYPE_ROCE`.
    pub(crate) roce: bool,
    /// `IB_AH_GRH` set.
    pub(crate) grh: bool,
    pub(crate) port_num: u32,
    pub(crate) dgid: [u8; 16],
    pub(crate) dmac: [u8; 6],
    /// The source GID (from its GID table attribute).
    pub(crate) sgid: [u8; 16],
    /// The source GID's type is RoCEv2 (`IB_GID_TYPE_ROCE_UDP_ENCAP`).
    pub(crate) sgid_roce_v2: bool,
    pub(crate) sgid_index: u8,
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
    pub(crate) flow_label: u32,
}

impl RoceAttr {
    /// Reads `ah`; `EINVAL` without a source GID attribute.
    ///
    /// # Safety
    ///
    /// `ah.grh.sgid_attr` is null or a GID attribute ib_core keeps
    /// referenced for the call (it resolves it before calling the driver).
    pub(crate) unsafe fn from_raw(ah: &bindings::rdma_ah_attr) -> Result<Self> {
        let grh = &ah.grh;
        // SAFETY: per the requirements.
        let sgid = unsafe { grh.sgid_attr.as_ref() }.ok_or(EINVAL)?;
        // SAFETY: plain-data unions (the GIDs' raw bytes, the RoCE part of
        // the address).
        let (dgid, dmac, sgid_raw) = unsafe { (grh.dgid.raw, ah.__bindgen_anon_1.roce.dmac, sgid.gid.raw) };
        Ok(Self {
            roce: ah.type_ == bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE,
            grh: ah.ah_flags as u32 & bindings::ib_ah_flags_IB_AH_GRH != 0,
            port_num: ah.port_num,
            dgid,
            dmac,
            sgid: sgid_raw,
            sgid_roce_v2: sgid.gid_type == bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP,
            sgid_index: grh.sgid_index,
            hop_limit: grh.hop_limit,
            traffic_class: grh.traffic_class,
            flow_label: grh.flow_label,
        })
    }
}

/// What an address handle is created from.
pub(crate) struct AhInit<'a> {
    /// The protection domain it belongs to.
    pub(crate) pd: PdId,
    /// The address vector.
    pub(crate) attr: RoceAttr,
    /// Whether the caller may sleep (`RDMA_CREATE_AH_SLEEPABLE`); if not,
    /// allocate with `GFP_ATOMIC`.
    pub(crate) sleepable: bool,
    /// User space's buffers (`None` for a kernel consumer).
    pub(crate) udata: Option<UData<'a>>,
}

/// A driver's address handles.
pub(crate) trait AhOps: Sized + Send + Sync + 'static {
    /// The driver's device data.
    type Dev;

    /// Creates the driver's part of a new AH.
    fn create(dev: &Device<Self::Dev>, init: AhInit<'_>) -> Result<Self>;

    /// Destroys it.  May be called in atomic context (kernel consumers
    /// destroy AHs under spinlocks): must not sleep.
    fn destroy(self, dev: &Device<Self::Dev>);
}

/// `ib_device_ops::size_ib_ah` for a driver whose AHs are `T`.
pub(crate) const fn size<T>() -> usize {
    object::size::<bindings::ib_ah, T>()
}

/// The driver's part of a created AH (a kernel consumer's work request
/// names one).
///
/// # Safety
///
/// `ah` must be null or an AH of a device whose AHs are `T`, created and
/// not destroyed while `'a` lasts.
pub(crate) unsafe fn get<'a, T>(ah: *mut bindings::ib_ah) -> Option<&'a T> {
    // SAFETY: per the requirements.
    unsafe { Obj::<bindings::ib_ah, T>::part(ah) }
}

/// `ib_device_ops::create_ah` and `create_user_ah`.
///
/// # Safety
///
/// ib_core's contract: `ah` is a zeroed allocation of `size_ib_ah` bytes
/// whose `device` and `pd` are set, `init` and its `ah_attr` are valid,
/// `udata` is null or the call's user data.
pub(in crate::ib) unsafe extern "C" fn create_ah<T: AhOps>(
    ah: *mut bindings::ib_ah,
    init: *mut bindings::rdma_ah_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: per the function's contract.
        let (a, init) = unsafe { (NewObj::<_, T>::from_raw(ah), &*init) };
        // SAFETY: ib_core set `device` to one of ours, live for the call.
        let dev = unsafe { Device::<T::Dev>::from_ib(a.ib().device()) };
        // SAFETY: `ah_attr` is valid for the call, with its source GID
        // attribute resolved and referenced (ib_core's contract).
        let attr = unsafe { RoceAttr::from_raw(init.ah_attr.as_ref().ok_or(EINVAL)?) }?;
        let sleepable = init.flags & bindings::rdma_create_ah_flags_RDMA_CREATE_AH_SLEEPABLE != 0;
        // SAFETY: null or valid for the call.
        let udata = unsafe { UData::from_raw(udata) };
        let p = T::create(dev, AhInit { pd: PdId::of(a.ib().pd), attr, sleepable, udata })?;
        a.init(p);
        Ok(0)
    })
}

/// `ib_device_ops::destroy_ah`.
///
/// # Safety
///
/// ib_core's contract: `ah` was created by [`create_ah::<T>`] and is
/// destroyed once.
pub(in crate::ib) unsafe extern "C" fn destroy_ah<T: AhOps>(ah: *mut bindings::ib_ah, _flags: u32) -> c_int {
    // SAFETY: per the contract the AH is created and this is its destroy
    // verb; the device outlives its AHs.
    let (p, dev) = unsafe { (Obj::<_, T>::take(ah), Device::<T::Dev>::from_ib((*ah).device)) };
    p.destroy(dev);
    0
}
