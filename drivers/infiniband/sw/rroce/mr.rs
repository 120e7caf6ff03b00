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
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::bindings;
use kernel::error::from_err_ptr;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::device::RroceDev;
use crate::glue;

/// Access flags a region may carry (the rest are refused or meaningless
/// for a software device).
const ACCESS_ALLOWED: u32 = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_READ
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC
    | bindings::ib_access_flags_IB_ACCESS_MW_BIND
    | bindings::ib_access_flags_IB_ACCESS_OPTIONAL;

/// An rroce memory region (allocated by us; `ib` first).
///
/// # Invariants
///
/// `pages` holds the pinned pages of `umem` in order; the region's first
/// byte (`ib.iova`) is at offset `page_off` of `pages[0]`.
#[repr(C)]
pub(crate) struct RroceMr {
    ib: bindings::ib_mr,
    /// Pinned user pages; `None` for a kernel DMA MR (addresses are kernel
    /// virtual addresses, see [`Self::walk_dma`]).
    umem: Option<NonNull<bindings::ib_umem>>,
    /// The PD it was registered in.
    pd: *mut bindings::ib_pd,
    /// The pages of `umem`.
    pages: KVVec<*mut bindings::page>,
    /// Offset of the first byte in the first page.
    page_off: u64,
    /// `IB_ACCESS_*` flags.
    access: u32,
    /// Index in the device's key table.
    index: u32,
    /// Memory windows bound to the region, and [`MR_DEAD`] once
    /// `dereg_mr` has committed to freeing it (see [`Self::bind_get`]).
    binds: AtomicU32,
}

/// [`RroceMr::binds`] flag: the region is going away, nothing may bind.
const MR_DEAD: u32 = 1 << 31;

/// What an access to a region needs.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// Local read (gather for a send).
    LocalRead,
    /// Local write (receive, READ response, atomic result).
    LocalWrite,
    /// One of the `IB_ACCESS_REMOTE_*` flags.
    Remote(u32),
}

/// Why an access to a region was refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum MrError {
    /// No region with this key (or of another PD).
    BadKey,
    /// The range is outside the region.
    Range,
    /// The region does not allow the access.
    Access,
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
    let page_off = start & (bindings::PAGE_SIZE as u64 - 1);
    let npages = usize::try_from((page_off + length).div_ceil(bindings::PAGE_SIZE as u64)).map_err(|_| EINVAL);
    let pages = npages.and_then(|n| {
        let mut v = KVVec::with_capacity(n, GFP_KERNEL)?;
        // SAFETY: `v` has room for `n` pointers; `umem` is pinned.
        let got = unsafe { glue::rroce_umem_pages(umem.as_ptr(), v.as_mut_ptr(), n as _) };
        if got as usize != n {
            return Err(EINVAL);
        }
        // SAFETY: the first `n` elements were just written.
        unsafe { v.set_len(n) };
        Ok(v)
    });
    let pages = match pages {
        Ok(p) => p,
        Err(e) => {
            release();
            return Err(e);
        }
    };
    let mr = match KBox::new(
        RroceMr { ib: ibmr, umem: Some(umem), pd, pages, page_off, access: acc, index: 0, binds: AtomicU32::new(0) },
        GFP_KERNEL,
    ) {
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
    /// The region with `key` in `dev`, if it belongs to `pd`.
    ///
    /// Must be called with bottom halves disabled (or in softirq): the
    /// reference is valid until they are enabled again, because `dereg_mr`
    /// waits for an RCU grace period before freeing the region.
    pub(crate) fn lookup<'a>(dev: &'a RroceDev, pd: *mut bindings::ib_pd, key: u32) -> Result<&'a RroceMr, MrError> {
        let raw = dev.p.keys.load(key >> 8);
        if crate::mw::is_mw_entry(raw) {
            // A memory window's key is no region key.
            return Err(MrError::BadKey);
        }
        let p = raw.cast::<RroceMr>();
        // SAFETY: the key table only holds live regions (and tagged
        // windows, refused above) of this device; see above for the
        // lifetime.
        let mr = unsafe { p.as_ref() }.ok_or(MrError::BadKey)?;
        if mr.ib.lkey != key || mr.pd != pd {
            return Err(MrError::BadKey);
        }
        Ok(mr)
    }

    /// Checks an access of `len` bytes at `va`.
    pub(crate) fn check(&self, va: u64, len: u32, need: Need) -> Result<(), MrError> {
        let ok = match need {
            Need::LocalRead => true,
            Need::LocalWrite => self.access & bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE != 0,
            Need::Remote(f) => self.access & f == f,
        };
        if !ok {
            return Err(MrError::Access);
        }
        let end = va.checked_add(u64::from(len)).ok_or(MrError::Range)?;
        if self.umem.is_none() {
            // A DMA MR spans the kernel's direct map; `walk` checks each
            // page of it.
            return Ok(());
        }
        let mr_end = self.ib.iova.checked_add(self.ib.length).ok_or(MrError::Range)?;
        if len != 0 && (va < self.ib.iova || end > mr_end) {
            return Err(MrError::Range);
        }
        Ok(())
    }

    /// Visits the pages backing `len` bytes at `va` (already checked):
    /// `f(page, offset in page, offset in the range, length)`.
    fn walk(&self, va: u64, len: u32, mut f: impl FnMut(*mut bindings::page, u32, usize, u32)) -> Result<(), MrError> {
        let ps = bindings::PAGE_SIZE as u64;
        if self.umem.is_none() {
            return Self::walk_dma(va, len, f);
        }
        let mut off = va.wrapping_sub(self.ib.iova).checked_add(self.page_off).ok_or(MrError::Range)?;
        let mut done = 0u32;
        while done < len {
            let idx = usize::try_from(off / ps).map_err(|_| MrError::Range)?;
            let page = *self.pages.get(idx).ok_or(MrError::Range)?;
            let in_page = (off % ps) as u32;
            let n = (len - done).min(ps as u32 - in_page);
            f(page, in_page, done as usize, n);
            done += n;
            off += u64::from(n);
        }
        Ok(())
    }

    /// [`Self::walk`] for a DMA MR: under virtual DMA (`ib_uses_virt_dma`)
    /// the addresses kernel consumers get from `ib_dma_map_*` are kernel
    /// virtual addresses of the direct map.  Each page is checked with
    /// `virt_addr_valid`, so a wild address (say, a remote peer's guess
    /// through an unsafe global rkey) is refused instead of dereferenced.
    fn walk_dma(va: u64, len: u32, mut f: impl FnMut(*mut bindings::page, u32, usize, u32)) -> Result<(), MrError> {
        let ps = bindings::PAGE_SIZE as u64;
        let mut done = 0u32;
        while done < len {
            let a = va.checked_add(u64::from(done)).ok_or(MrError::Range)?;
            // SAFETY: only computes the page of a direct-map address after
            // checking that it is one; no memory is accessed.
            let page = unsafe { glue::rroce_virt_to_page(a) };
            if page.is_null() {
                return Err(MrError::Range);
            }
            let in_page = (a % ps) as u32;
            let n = (len - done).min(ps as u32 - in_page);
            f(page, in_page, done as usize, n);
            done += n;
        }
        Ok(())
    }

    /// Copies `dst.len()` bytes at `va` out of the region.
    pub(crate) fn read(&self, va: u64, dst: &mut [u8]) -> Result<(), MrError> {
        let len = u32::try_from(dst.len()).map_err(|_| MrError::Range)?;
        self.walk(va, len, |page, poff, at, n| {
            // SAFETY: `page` is pinned by this region (or, for a DMA MR, a
            // direct-map page of the kernel consumer); `poff + n` is within
            // the page; `dst[at..at + n]` is in bounds (walk never exceeds
            // `len`).
            unsafe { glue::rroce_page_copy(page, poff, dst.as_mut_ptr().add(at).cast(), n, false) }
        })
    }

    /// Copies `src` into the region at `va`.
    pub(crate) fn write(&self, va: u64, src: &[u8]) -> Result<(), MrError> {
        let len = u32::try_from(src.len()).map_err(|_| MrError::Range)?;
        self.walk(va, len, |page, poff, at, n| {
            // SAFETY: as in `read`; the page is only read by the copy
            // function through `buf` when copying out, written here.
            unsafe { glue::rroce_page_copy(page, poff, src.as_ptr().add(at).cast_mut().cast(), n, true) }
        })
    }

    /// Executes an 8-byte atomic at `va` (checked, 8-byte aligned) and
    /// returns the original value.
    pub(crate) fn atomic(&self, va: u64, cas: bool, a: u64, b: u64) -> Result<u64, MrError> {
        let mut orig = None;
        self.walk(va, 8, |page, poff, _, n| {
            if n == 8 {
                // SAFETY: pinned (or direct-map) page, aligned word inside it.
                orig = Some(unsafe { glue::rroce_page_atomic(page, poff, cas, a, b) });
            }
        })?;
        orig.ok_or(MrError::Range)
    }

    /// Its `IB_ACCESS_*` flags.
    pub(crate) fn access(&self) -> u32 {
        self.access
    }

    /// Its first address and length, for a region of pinned user memory
    /// (`None` for a DMA MR, which has no bounds to bind a window in).
    pub(crate) fn user_range(&self) -> Option<(u64, u64)> {
        self.umem.map(|_| (self.ib.iova, self.ib.length))
    }

    /// Counts a memory window bound to the region; `false` if the region
    /// is being deregistered.  The window keeps the region alive until
    /// [`Self::bind_put`]: `dereg_mr` refuses a region with windows.
    pub(crate) fn bind_get(&self) -> bool {
        self.binds
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n & MR_DEAD == 0).then_some(n + 1))
            .is_ok()
    }

    /// A window bound by [`Self::bind_get`] was unbound.
    pub(crate) fn bind_put(&self) {
        self.binds.fetch_sub(1, Ordering::AcqRel);
    }

    /// The QP-side check of a remote access: the QP's access flags.
    pub(crate) fn qp_allows(qp_access: u32, flag: u32) -> bool {
        qp_access & flag == flag
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
            RroceMr {
                ib: bindings::ib_mr::default(),
                umem: None,
                pd,
                pages: KVVec::new(),
                page_off: 0,
                access: acc,
                index: 0,
                binds: AtomicU32::new(0),
            },
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
    // A region with memory windows bound to it stays (IBA 11.2.8: the
    // windows must be invalidated or deallocated first); from here on no
    // window can bind to it.
    // SAFETY: every MR of ours is a live `RroceMr` with `ib` first.
    let binds = unsafe { &(*ibmr.cast::<RroceMr>()).binds };
    if binds.compare_exchange(0, MR_DEAD, Ordering::AcqRel, Ordering::Acquire).is_err() {
        return EBUSY.to_errno();
    }
    // SAFETY: every MR of ours is a `KBox<RroceMr>` with `ib` first.
    let mr = unsafe { KBox::from_raw(ibmr.cast::<RroceMr>()) };
    // SAFETY: its device is one of ours.
    let dev = unsafe { RroceDev::from_ib(mr.ib.device) };
    dev.p.keys.remove(mr.index);
    // The data path looks regions up with bottom halves disabled: wait for
    // every such section that may have found it before the pages go.
    // SAFETY: process context.
    unsafe { bindings::synchronize_rcu() };
    drop(mr);
    0
}
