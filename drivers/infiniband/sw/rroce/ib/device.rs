// SPDX-License-Identifier: GPL-2.0
//! The device: ib_core's `ib_device` followed by the driver's data, and
//! the device and port query entry points.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)

use kernel::bindings;
use kernel::error::{from_result, to_result};
use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::types::Opaque;

use crate::ib::udata::UData;

/// An RDMA device of this driver: the `ib_device` ib_core allocated
/// (`_ib_alloc_device`, sized for this type) with the driver's `T` after it.
///
/// # Invariants
///
/// Only ever reached through a pointer from `_ib_alloc_device` sized for
/// `Device<T>`; `ib` is at offset 0; `p` is initialised right after the
/// allocation and dropped in `dealloc_driver`, after which no reference
/// to the device is formed.  ib_core owns `ib` (it changes it under its
/// own locks), so it is only reached through raw pointers.
#[repr(C)]
pub(crate) struct Device<T> {
    /// ib_core's part.
    pub(crate) ib: Opaque<bindings::ib_device>,
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

    /// ib_core's pointer to the device.
    pub(crate) fn as_raw(&self) -> *mut bindings::ib_device {
        self.ib.get()
    }

    /// `num_comp_vectors` (set before registration, then constant).
    pub(crate) fn num_comp_vectors(&self) -> u32 {
        // SAFETY: the device is live (type invariant); the field is written
        // only before registration.
        unsafe { (*self.as_raw()).num_comp_vectors as u32 }
    }

    /// The speed and width of port `port` from its netdev's link speed
    /// (`ib_get_eth_speed`).
    pub(crate) fn eth_speed(&self, port: u32) -> Result<(u16, u8)> {
        let (mut speed, mut width) = (0u16, 0u8);
        // SAFETY: a live, registered device of ours with its netdev set.
        to_result(unsafe { bindings::ib_get_eth_speed(self.as_raw(), port, &mut speed, &mut width) })?;
        Ok((speed, width))
    }

    /// ib_core's view of port `port` (`ib_query_port`, which calls back
    /// into the driver's `query_port`).
    pub(crate) fn query_port_core(&self, port: u32) -> Result<bindings::ib_port_attr> {
        let mut attr = bindings::ib_port_attr::default();
        // SAFETY: a live device of ours; `attr` is writable.
        to_result(unsafe { bindings::ib_query_port(self.as_raw(), port, &mut attr) })?;
        Ok(attr)
    }
}

/// The `max_objects` module parameter: when not 0, devices created
/// afterwards advertise and enforce at most that many objects of each kind.
pub(crate) fn max_objects_param() -> u32 {
    // SAFETY: reads a module parameter.
    unsafe { crate::ffi::rroce_param_max_objects() }
}

/// A driver's device-wide verbs.
pub(crate) trait DeviceOps: Sized + 'static {
    /// What `query_device` reports.
    fn attrs(dev: &Device<Self>) -> bindings::ib_device_attr;

    /// Fills `attr` (zeroed by ib_core) for port `port`.
    fn query_port(dev: &Device<Self>, port: u32, attr: &mut bindings::ib_port_attr) -> Result;

    /// Fills `imm` for port `port`.
    fn port_immutable(dev: &Device<Self>, port: u32, imm: &mut bindings::ib_port_immutable) -> Result;

    /// The P_Key at `index` of port `port`.
    fn query_pkey(dev: &Device<Self>, port: u32, index: u16) -> Result<u16>;

    /// A PD is allocated (the driver keeps nothing in it).
    fn alloc_pd(dev: &Device<Self>) -> Result;

    /// A PD is freed.
    fn dealloc_pd(dev: &Device<Self>);
}

/// `ib_device_ops::size_ib_pd`: a PD holds nothing of the driver's.
pub(crate) const PD_SIZE: usize = core::mem::size_of::<bindings::ib_pd>();

/// `ib_device_ops::query_device`.
///
/// # Safety
///
/// ib_core's contract: `ib` is a live device of ours, `attr` writable,
/// `udata` null or the call's.
pub(crate) unsafe extern "C" fn query_device<T: DeviceOps>(
    ib: *mut bindings::ib_device,
    attr: *mut bindings::ib_device_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: null or valid for the call.
        if let Some(u) = unsafe { UData::from_raw(udata) } {
            // No driver command or response is defined.
            if !u.is_empty() {
                return Err(EINVAL);
            }
        }
        // SAFETY: per the contract.
        let (dev, attr) = unsafe { (Device::<T>::from_ib(ib), &mut *attr) };
        *attr = T::attrs(dev);
        Ok(0)
    })
}

/// `ib_device_ops::query_port`.
///
/// # Safety
///
/// ib_core's contract: `ib` is a live device of ours, `attr` valid.
pub(crate) unsafe extern "C" fn query_port<T: DeviceOps>(
    ib: *mut bindings::ib_device,
    port: u32,
    attr: *mut bindings::ib_port_attr,
) -> c_int {
    from_result(|| {
        // SAFETY: per the contract.
        let (dev, attr) = unsafe { (Device::<T>::from_ib(ib), &mut *attr) };
        T::query_port(dev, port, attr)?;
        Ok(0)
    })
}

/// `ib_device_ops::get_port_immutable`.
///
/// # Safety
///
/// ib_core's contract: `ib` is a device of ours being registered, `imm`
/// writable.
pub(crate) unsafe extern "C" fn get_port_immutable<T: DeviceOps>(
    ib: *mut bindings::ib_device,
    port: u32,
    imm: *mut bindings::ib_port_immutable,
) -> c_int {
    from_result(|| {
        // SAFETY: per the contract.
        let (dev, imm) = unsafe { (Device::<T>::from_ib(ib), &mut *imm) };
        T::port_immutable(dev, port, imm)?;
        Ok(0)
    })
}

/// `ib_device_ops::get_link_layer`: RoCE runs on Ethernet.
///
/// # Safety
///
/// ib_core's contract.
pub(crate) unsafe extern "C" fn get_link_layer(_ib: *mut bindings::ib_device, _port: u32) -> bindings::rdma_link_layer {
    bindings::rdma_link_layer_IB_LINK_LAYER_ETHERNET
}

/// `ib_device_ops::query_gid`: the RoCE GID table is ib_core's (filled
/// from the netdev's addresses).
///
/// # Safety
///
/// ib_core's contract.
pub(crate) unsafe extern "C" fn query_gid(
    ib: *mut bindings::ib_device,
    port: u32,
    index: c_int,
    gid: *mut bindings::ib_gid,
) -> c_int {
    // SAFETY: forwarded with the caller's valid arguments.
    unsafe { bindings::rdma_query_gid(ib, port, index, gid) }
}

/// `ib_device_ops::query_pkey`.
///
/// # Safety
///
/// ib_core's contract: `ib` is a live device of ours, `pkey` writable.
pub(crate) unsafe extern "C" fn query_pkey<T: DeviceOps>(
    ib: *mut bindings::ib_device,
    port: u32,
    index: u16,
    pkey: *mut u16,
) -> c_int {
    from_result(|| {
        // SAFETY: per the contract.
        let dev = unsafe { Device::<T>::from_ib(ib) };
        let k = T::query_pkey(dev, port, index)?;
        // SAFETY: writable per the contract.
        unsafe { *pkey = k };
        Ok(0)
    })
}

/// `ib_device_ops::alloc_pd`.
///
/// # Safety
///
/// ib_core's contract: `pd` is a core-allocated PD with `device` set.
pub(crate) unsafe extern "C" fn alloc_pd<T: DeviceOps>(pd: *mut bindings::ib_pd, _udata: *mut bindings::ib_udata) -> c_int {
    from_result(|| {
        // SAFETY: per the contract the PD's device is a live one of ours.
        let dev = unsafe { Device::<T>::from_ib((*pd).device) };
        T::alloc_pd(dev)?;
        Ok(0)
    })
}

/// `ib_device_ops::dealloc_pd`.
///
/// # Safety
///
/// ib_core's contract: `pd` was allocated by [`alloc_pd`].
pub(crate) unsafe extern "C" fn dealloc_pd<T: DeviceOps>(pd: *mut bindings::ib_pd, _udata: *mut bindings::ib_udata) -> c_int {
    // SAFETY: per the contract the PD's device is a live one of ours.
    let dev = unsafe { Device::<T>::from_ib((*pd).device) };
    T::dealloc_pd(dev);
    0
}
