// SPDX-License-Identifier: GPL-2.0
//! Memory regions: pinned user memory (and kernel DMA MRs) behind keys.
//!
//! C header: [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h)
//!
//! `reg_user_mr` pins the pages with `ib_umem_get` (which charges them to
//! `RLIMIT_MEMLOCK` unless the caller has `CAP_IPC_LOCK`) and gives the
//! region a key: `index << 8 | generation`, where `index` comes from the
//! device's key [`IdTable`](crate::idtable::IdTable) (an xarray, so the
//! receive path can look keys up under RCU) and `generation` changes on
//! every registration, so a stale key of a deregistered region does not
//! match a new one at the same index.

use core::ptr::NonNull;
use core::sync::atomic::Ordering;
use kernel::bindings;
use kernel::error::from_err_ptr;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::device::RroceDev;

/// Access flags a region may carry (the rest are refused or meaningless
/// for a software device).
const ACCESS_ALLOWED: u32 = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_READ
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC
    | bindings::ib_access_flags_IB_ACCESS_MW_BIND
    | bindings::ib_access_flags_IB_ACCESS_OPTIONAL;

/// An rroce memory region (allocated by us; `ib` first).
#[repr(C)]
pub(crate) struct RroceMr {
    ib: bindings::ib_mr,
    /// Pinned user pages; `None` for a kernel DMA MR.
    umem: Option<NonNull<bindings::ib_umem>>,
    /// `IB_ACCESS_*` flags.
    access: u32,
    /// Index in the device's key table.
    index: u32,
}

/// Registers `mr` (already filled but for its keys) and returns `ib_mr`.
fn publish(dev: &RroceDev, mut mr: KBox<RroceMr>) -> Result<*mut bindings::ib_mr> {
    let max = dev.p.attrs.max_mr as u32;
    let raw = &mut *mr as *mut RroceMr;
    let index = dev.p.keys.insert(raw.cast(), 1, max, max)?;
    let key = (index << 8) | (dev.p.key_gen.fetch_add(1, Ordering::Relaxed) & 0xff);
    mr.index = index;
    mr.ib.lkey = key;
    mr.ib.rkey = key;
    Ok(KBox::into_raw(mr).cast())
}

fn check_access(access: c_int) -> Result<u32> {
    let access = access as u32;
    if access & !ACCESS_ALLOWED != 0 {
        return Err(crate::verbs::eopnotsupp());
    }
    Ok(access)
}

fn reg_user(
    pd: *mut bindings::ib_pd,
    start: u64,
    length: u64,
    iova: u64,
    access: c_int,
) -> Result<*mut bindings::ib_mr> {
    // SAFETY: `pd` is a live PD of one of our devices.
    let ib = unsafe { (*pd).device };
    // SAFETY: as above.
    let dev = unsafe { RroceDev::from_ib(ib) };
    let acc = check_access(access)?;
    if length == 0 || length > dev.p.attrs.max_mr_size {
        return Err(EINVAL);
    }
    // SAFETY: valid device; ib_umem_get validates the user range, pins the
    // pages and enforces RLIMIT_MEMLOCK.
    let umem = from_err_ptr(unsafe { bindings::ib_umem_get(ib, start as _, length as _, access) })?;
    let umem = NonNull::new(umem).ok_or(ENOMEM)?;
    let release = || {
        // SAFETY: pinned above and not yet owned by an MR.
        unsafe { bindings::ib_umem_release(umem.as_ptr()) }
    };
    let mut ibmr = bindings::ib_mr::default();
    ibmr.iova = iova;
    ibmr.length = length;
    ibmr.page_size = bindings::PAGE_SIZE as u32;
    let mr = match KBox::new(RroceMr { ib: ibmr, umem: Some(umem), access: acc, index: 0 }, GFP_KERNEL) {
        Ok(mr) => mr,
        Err(e) => {
            release();
            return Err(e.into());
        }
    };
    // On failure the box is dropped, releasing the pages (`Drop`).
    publish(dev, mr)
}

impl Drop for RroceMr {
    fn drop(&mut self) {
        if let Some(u) = self.umem.take() {
            // SAFETY: the region owns its pinned pages.
            unsafe { bindings::ib_umem_release(u.as_ptr()) };
        }
    }
}

impl RroceMr {
    /// The access flags.
    #[expect(dead_code, reason = "checked by the responder of the data path")]
    pub(crate) fn access(&self) -> u32 {
        self.access
    }
}

/// # Safety
///
/// `ib_device_ops::reg_user_mr` contract.
pub(crate) unsafe extern "C" fn reg_user_mr(
    pd: *mut bindings::ib_pd,
    start: u64,
    length: u64,
    iova: u64,
    access: c_int,
    _udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_mr {
    reg_user(pd, start, length, iova, access).unwrap_or_else(|e| e.to_ptr())
}

/// # Safety
///
/// `ib_device_ops::get_dma_mr` contract.
pub(crate) unsafe extern "C" fn get_dma_mr(pd: *mut bindings::ib_pd, access: c_int) -> *mut bindings::ib_mr {
    let res = (|| {
        // SAFETY: `pd` is a live PD of one of our devices.
        let dev = unsafe { RroceDev::from_ib((*pd).device) };
        let acc = check_access(access)?;
        let mr = KBox::new(
            RroceMr { ib: bindings::ib_mr::default(), umem: None, access: acc, index: 0 },
            GFP_KERNEL,
        )?;
        publish(dev, mr)
    })();
    res.unwrap_or_else(|e| e.to_ptr())
}

/// # Safety
///
/// `ib_device_ops::dereg_mr` contract: `ibmr` came from this module.
pub(crate) unsafe extern "C" fn dereg_mr(ibmr: *mut bindings::ib_mr, _udata: *mut bindings::ib_udata) -> c_int {
    // SAFETY: every MR of ours is a `KBox<RroceMr>` with `ib` first.
    let mr = unsafe { KBox::from_raw(ibmr.cast::<RroceMr>()) };
    // SAFETY: its device is one of ours.
    let dev = unsafe { RroceDev::from_ib(mr.ib.device) };
    dev.p.keys.remove(mr.index);
    drop(mr);
    0
}
