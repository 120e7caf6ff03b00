// SPDX-License-Identifier: GPL-2.0
//! Memory regions: pinned user memory (and kernel DMA MRs) behind keys.
//!
//! C header: [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h)
//!
//! `reg_user_mr` pins the pages with `ib_umem_get` (which charges them to
//! `RLIMIT_MEMLOCK` unless the caller has `CAP_IPC_LOCK`) and gives the
//! region a key: `index << 8 | generation`, where `index` comes from the
//! device's key [`IdTable`](crate::sync::idtable::IdTable) (an xarray, so the
//! receive path can look keys up under RCU) and `generation` changes on
//! every registration, so a stale key of a deregistered region does not
//! match a new one at the same index.
//!
//! Fast-registration MRs (`ib_alloc_mr`, `ib_map_mr_sg`, `IB_WR_REG_MR`,
//! `IB_WR_LOCAL_INV`, SEND with invalidate) follow the rules of
//! [`proto::mr`](crate::proto::mr): free or valid, accessible only while
//! valid and with the key of their last registration.  Their page list
//! holds kernel virtual addresses (rroce is a virtual-DMA device: the DMA
//! addresses `ib_dma_map_sg` gives consumers are direct-map addresses, as
//! for [`RroceMr::walk_dma`]).  The registration itself (iova, length,
//! page size, page count, access, key, state) is kept in atomics, as the
//! data path of other QPs reads it concurrently under RCU.

use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use kernel::bindings;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::device::RroceDev;
use crate::ib::umem::{direct_map_page, PageRef, Umem};
use crate::proto::mr::{self as rules, FrState, MrKind, RegRequest, RegionInfo};
use crate::proto::wqe::WcStatus;

use crate::limits::MAX_FAST_REG_PAGES;

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
/// The region's first byte (`ib.iova`) is at offset `page_off` of the
/// first page of `umem`.
#[repr(C)]
pub(crate) struct RroceMr {
    ib: bindings::ib_mr,
    /// Pinned user pages; `None` for a kernel DMA MR (addresses are kernel
    /// virtual addresses, see [`Self::walk_dma`]).
    umem: Option<Umem>,
    /// The PD it was registered in.
    pd: *mut bindings::ib_pd,
    /// Offset of the first byte in the first page.
    page_off: u64,
    /// User virtual address of the first byte (user MRs; `rereg` pins the
    /// same range again when the translation is kept).
    user_start: u64,
    /// `IB_ACCESS_*` flags.
    access: u32,
    /// Index in the device's key table.
    index: u32,
    /// Memory windows bound to the region, and [`MR_DEAD`] once
    /// `dereg_mr` has committed to freeing it (see [`Self::bind_get`]).
    binds: AtomicU32,
    /// The key accesses must carry (lkey == rkey).  Not `ib.lkey`: a
    /// consumer changes that with `ib_update_fast_reg_key` before posting
    /// the registration that makes the new key valid.
    key: AtomicU32,
    /// Fast-registration state (`ib_alloc_mr` MRs only).
    fr: Option<KBox<Fr>>,
}

/// The page list and registration of a fast-registration MR.
struct Fr {
    /// Page-size aligned kernel virtual addresses, written by `map_mr_sg`.
    list: KVVec<AtomicU64>,
    /// Entries of `list` written by the last `map_mr_sg`.
    nmapped: AtomicU32,
    /// Registered (valid) or not (free).
    valid: AtomicBool,
    iova: AtomicU64,
    length: AtomicU64,
    page_size: AtomicU64,
    /// Pages of `list` in use (≤ `list.len()`).
    npages: AtomicU32,
    access: AtomicU32,
}

/// Bit 0 of a key-table entry: the entry is a memory window's (see `mw`;
/// regions are at least 8-byte aligned).
pub(crate) const MW_TAG: usize = 1;

/// Whether a key-table entry is a window's.
pub(crate) fn is_mw_entry(entry: *mut core::ffi::c_void) -> bool {
    entry as usize & MW_TAG != 0
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
    /// The key names a region that cannot be invalidated.
    NotInvalidatable,
}

impl MrError {
    /// The completion status of a local operation (LOCAL_INV) that failed
    /// with this error.
    pub(crate) fn local_status(self) -> WcStatus {
        match self {
            MrError::BadKey => rules::InvError::BadKey.local_status(),
            MrError::NotInvalidatable => rules::InvError::NotInvalidatable.local_status(),
            MrError::Range | MrError::Access => WcStatus::LocProtErr,
        }
    }
}

/// A fresh key for key-table slot `index`: the index above a random key
/// byte, so that a peer cannot guess the keys of other regions and windows
/// from its own (the index alone is predictable).
pub(crate) fn new_key(index: u32) -> u32 {
    (index << 8) | u32::from(crate::sync::random_u8())
}

/// Registers `mr` (already filled but for its keys) and returns `ib_mr`.
fn publish(dev: &RroceDev, mut mr: KBox<RroceMr>) -> Result<*mut bindings::ib_mr> {
    let max = dev.p.attrs.max_mr as u32;
    let raw = &mut *mr as *mut RroceMr;
    let index = dev.p.keys.insert(raw.cast(), 1, max, max)?;
    let key = new_key(index);
    mr.index = index;
    mr.ib.lkey = key;
    mr.ib.rkey = key;
    mr.key.store(key, Ordering::Release);
    Ok(KBox::into_raw(mr).cast())
}

fn check_access(access: c_int) -> Result<u32> {
    let access = access as u32;
    if access & !ACCESS_ALLOWED != 0 {
        return Err(crate::limits::eopnotsupp());
    }
    Ok(access)
}

/// Pins `length` bytes of user memory at `start` for a region of `pd`
/// whose first byte has I/O virtual address `iova`; the region is not yet
/// published (no keys).
fn pin_user(
    dev: &RroceDev,
    pd: *mut bindings::ib_pd,
    start: u64,
    length: u64,
    iova: u64,
    access: c_int,
) -> Result<KBox<RroceMr>> {
    let acc = check_access(access)?;
    if length == 0 || length > dev.p.attrs.max_mr_size {
        return Err(EINVAL);
    }
    let umem = Umem::get(dev, start, length, access)?;
    let ibmr = bindings::ib_mr { iova, length, page_size: bindings::PAGE_SIZE as u32, ..Default::default() };
    let page_off = start & (bindings::PAGE_SIZE as u64 - 1);
    // If the allocation fails, dropping `umem` releases the pages.
    let mr = KBox::new(
        RroceMr {
            ib: ibmr,
            umem: Some(umem),
            pd,
            page_off,
            user_start: start,
            access: acc,
            index: 0,
            binds: AtomicU32::new(0),
            key: AtomicU32::new(0),
            fr: None,
        },
        GFP_KERNEL_ACCOUNT,
    )?;
    Ok(mr)
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
    let mr = pin_user(dev, pd, start, length, iova, access)?;
    // On failure the box is dropped, releasing the pages.
    publish(dev, mr)
}

/// Re-registration: always a new region (pages pinned afresh) that takes
/// over the old one's keys; ib_core swaps it in for the old region, which
/// it then deregisters.  What `flags` does not change is taken from the old
/// region.  Building a new region rather than editing the live one means
/// the receive path, which reads regions locklessly, never sees a
/// half-changed one; the price is that a PD- or access-only change pins the
/// range a second time until the old region is gone.
fn rereg_user(
    old: &RroceMr,
    flags: c_int,
    start: u64,
    length: u64,
    iova: u64,
    access: c_int,
    pd: *mut bindings::ib_pd,
) -> Result<*mut bindings::ib_mr> {
    let flags = flags as u32;
    if flags == 0 || flags & !bindings::ib_mr_rereg_flags_IB_MR_REREG_SUPPORTED != 0 {
        return Err(EINVAL);
    }
    // Only user regions come through uverbs.
    if old.umem.is_none() || old.fr.is_some() || pd.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: `pd` is a live PD of the region's device (ib_core checked).
    let ib = unsafe { (*pd).device };
    // SAFETY: as above.
    let dev = unsafe { RroceDev::from_ib(ib) };
    let access = if flags & bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS != 0 { access } else { old.access as c_int };
    let (start, length, iova) = if flags & bindings::ib_mr_rereg_flags_IB_MR_REREG_TRANS != 0 {
        (start, length, iova)
    } else {
        (old.user_start, old.ib.length, old.ib.iova)
    };
    // No window may bind to the old region from here on, and one with
    // windows bound is not replaced (they refer to it).
    if old.binds.compare_exchange(0, MR_DEAD, Ordering::AcqRel, Ordering::Acquire).is_err() {
        return Err(EBUSY);
    }
    let mut mr = match pin_user(dev, pd, start, length, iova, access) {
        Ok(mr) => mr,
        Err(e) => {
            old.binds.store(0, Ordering::Release);
            return Err(e);
        }
    };
    // The new region takes over the old one's keys and key-table slot, as
    // applications expect (they keep using the keys they exchanged); ib_core
    // then deregisters the old region, which leaves the slot alone.
    mr.index = old.index;
    mr.ib.lkey = old.ib.lkey;
    mr.ib.rkey = old.ib.rkey;
    mr.key.store(old.key.load(Ordering::Acquire), Ordering::Release);
    let raw = KBox::into_raw(mr);
    if !dev.p.keys.replace(old.index, ptr::from_ref(old).cast_mut().cast(), raw.cast()) {
        // SAFETY: `raw` was never published; take it back to free it.
        drop(unsafe { KBox::from_raw(raw) });
        old.binds.store(0, Ordering::Release);
        return Err(EINVAL);
    }
    Ok(raw.cast())
}

impl RroceMr {
    /// The region with `key` in `dev`, if it belongs to `pd`.
    ///
    /// Must be called with bottom halves disabled (or in softirq): the
    /// reference is valid until they are enabled again, because `dereg_mr`
    /// waits for an RCU grace period before freeing the region.
    pub(crate) fn lookup<'a>(dev: &'a RroceDev, pd: *mut bindings::ib_pd, key: u32) -> Result<&'a RroceMr, MrError> {
        let mr = Self::at_index(dev, rules::key_index(key)).ok_or(MrError::BadKey)?;
        if mr.pd != pd || !rules::key_usable(&mr.info(pd), key) {
            return Err(MrError::BadKey);
        }
        Ok(mr)
    }

    /// The region at `index` of `dev`'s key table, whatever its key (same
    /// lifetime rules as [`Self::lookup`]).
    fn at_index(dev: &RroceDev, index: u32) -> Option<&RroceMr> {
        let raw = dev.p.keys.load(index);
        if is_mw_entry(raw) {
            // A memory window's entry (see `mw`): no region.
            return None;
        }
        // SAFETY: the key table only holds live regions (and tagged
        // windows, refused above) of this device; see `lookup` for the
        // lifetime.
        unsafe { raw.cast::<RroceMr>().as_ref() }
    }

    /// What the rules of `proto::mr` need to know, seen from `pd`.
    fn info(&self, pd: *mut bindings::ib_pd) -> RegionInfo {
        let (kind, state, max_pages) = match self.fr.as_deref() {
            Some(fr) => (
                MrKind::FastReg,
                if fr.valid.load(Ordering::Acquire) { FrState::Valid } else { FrState::Free },
                fr.list.len() as u32,
            ),
            None => (MrKind::Plain, FrState::Valid, 0),
        };
        RegionInfo { kind, state, key: self.key.load(Ordering::Acquire), same_pd: self.pd == pd, max_pages }
    }

    /// Checks an access of `len` bytes at `va`.
    pub(crate) fn check(&self, va: u64, len: u32, need: Need) -> Result<(), MrError> {
        let access = match self.fr.as_deref() {
            Some(fr) => fr.access.load(Ordering::Relaxed),
            None => self.access,
        };
        let ok = match need {
            Need::LocalRead => true,
            Need::LocalWrite => access & bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE != 0,
            Need::Remote(f) => access & f == f,
        };
        if !ok {
            return Err(MrError::Access);
        }
        let end = va.checked_add(u64::from(len)).ok_or(MrError::Range)?;
        if let Some(fr) = self.fr.as_deref() {
            let (iova, length) = (fr.iova.load(Ordering::Relaxed), fr.length.load(Ordering::Relaxed));
            let mr_end = iova.checked_add(length).ok_or(MrError::Range)?;
            if len != 0 && (va < iova || end > mr_end) {
                return Err(MrError::Range);
            }
            return Ok(());
        }
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
    fn walk(&self, va: u64, len: u32, mut f: impl FnMut(PageRef<'_>, u32, usize, u32) -> bool) -> Result<(), MrError> {
        let ps = bindings::PAGE_SIZE as u64;
        if let Some(fr) = self.fr.as_deref() {
            return Self::walk_fr(fr, va, len, f);
        }
        let Some(umem) = self.umem.as_ref() else {
            return Self::walk_dma(va, len, f);
        };
        let mut off = va.wrapping_sub(self.ib.iova).checked_add(self.page_off).ok_or(MrError::Range)?;
        let mut done = 0u32;
        while done < len {
            let idx = usize::try_from(off / ps).map_err(|_| MrError::Range)?;
            let page = umem.page(idx).ok_or(MrError::Range)?;
            let in_page = (off % ps) as u32;
            let n = (len - done).min(ps as u32 - in_page);
            if !f(page, in_page, done as usize, n) {
                return Err(MrError::Range);
            }
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
    fn walk_dma(va: u64, len: u32, mut f: impl FnMut(PageRef<'_>, u32, usize, u32) -> bool) -> Result<(), MrError> {
        let ps = bindings::PAGE_SIZE as u64;
        let mut done = 0u32;
        while done < len {
            let a = va.checked_add(u64::from(done)).ok_or(MrError::Range)?;
            let page = direct_map_page(a).ok_or(MrError::Range)?;
            let in_page = (a % ps) as u32;
            let n = (len - done).min(ps as u32 - in_page);
            if !f(page, in_page, done as usize, n) {
                return Err(MrError::Range);
            }
            done += n;
        }
        Ok(())
    }

    /// [`Self::walk`] for a fast-registered MR: the page list holds
    /// page-size aligned kernel virtual addresses (see the module
    /// documentation); each piece is bounded by the MR page and the kernel
    /// page, and checked with `virt_addr_valid`.
    fn walk_fr(fr: &Fr, va: u64, len: u32, mut f: impl FnMut(PageRef<'_>, u32, usize, u32) -> bool) -> Result<(), MrError> {
        let kps = bindings::PAGE_SIZE as u64;
        let iova = fr.iova.load(Ordering::Relaxed);
        let length = fr.length.load(Ordering::Relaxed);
        let ps = fr.page_size.load(Ordering::Relaxed);
        let npages = fr.npages.load(Ordering::Relaxed) as usize;
        let mut done = 0u32;
        while done < len {
            let a = va.checked_add(u64::from(done)).ok_or(MrError::Range)?;
            let (idx, off) = rules::locate(iova, length, ps, a).ok_or(MrError::Range)?;
            if idx >= npages {
                return Err(MrError::Range);
            }
            let base = fr.list.get(idx).ok_or(MrError::Range)?.load(Ordering::Relaxed);
            let kva = base.checked_add(off).ok_or(MrError::Range)?;
            let page = direct_map_page(kva).ok_or(MrError::Range)?;
            let in_page = kva % kps;
            let n = u64::from(len - done).min(ps - off).min(kps - in_page) as u32;
            if !f(page, in_page as u32, done as usize, n) {
                return Err(MrError::Range);
            }
            done += n;
        }
        Ok(())
    }

    /// Copies `dst.len()` bytes at `va` out of the region.
    pub(crate) fn read(&self, va: u64, dst: &mut [u8]) -> Result<(), MrError> {
        let len = u32::try_from(dst.len()).map_err(|_| MrError::Range)?;
        self.walk(va, len, |page, poff, at, n| {
            dst.get_mut(at..at + n as usize).is_some_and(|d| page.read(poff, d))
        })
    }

    /// Copies `src` into the region at `va`.
    pub(crate) fn write(&self, va: u64, src: &[u8]) -> Result<(), MrError> {
        let len = u32::try_from(src.len()).map_err(|_| MrError::Range)?;
        self.walk(va, len, |page, poff, at, n| {
            src.get(at..at + n as usize).is_some_and(|d| page.write(poff, d))
        })
    }

    /// Executes an 8-byte atomic at `va` (checked, 8-byte aligned) and
    /// returns the original value.
    pub(crate) fn atomic(&self, va: u64, cas: bool, a: u64, b: u64) -> Result<u64, MrError> {
        if va & 7 != 0 {
            return Err(MrError::Range);
        }
        let mut orig = None;
        self.walk(va, 8, |page, poff, _, n| {
            if n == 8 {
                orig = page.atomic(poff, cas, a, b);
            }
            true
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
        self.umem.as_ref().map(|_| (self.ib.iova, self.ib.length))
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
/// `ib_device_ops::rereg_user_mr` contract: `ibmr` came from this module.
pub(crate) unsafe extern "C" fn rereg_user_mr(
    ibmr: *mut bindings::ib_mr,
    flags: c_int,
    start: u64,
    length: u64,
    iova: u64,
    access: c_int,
    pd: *mut bindings::ib_pd,
    _udata: *mut bindings::ib_udata,
) -> *mut bindings::ib_mr {
    // SAFETY: every MR of ours is a `KBox<RroceMr>` with `ib` first; ib_core
    // holds the old region's uobject for writing, so it stays alive and
    // unchanged during the call.
    let old = unsafe { &*ibmr.cast::<RroceMr>() };
    rereg_user(old, flags, start, length, iova, access, pd).unwrap_or_else(|e| e.to_ptr())
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
                page_off: 0,
                user_start: 0,
                access: acc,
                index: 0,
                binds: AtomicU32::new(0),
                key: AtomicU32::new(0),
                fr: None,
            },
            GFP_KERNEL_ACCOUNT,
        )?;
        publish(dev, mr)
    })();
    res.unwrap_or_else(|e| e.to_ptr())
}

/// Invalidates `key` for a QP of `pd` (LOCAL_INV, or the R_Key of a SEND
/// with invalidate): the region must exist with exactly this key, belong to
/// `pd` and be invalidatable ([`rules::check_invalidate`]); it becomes
/// free.  Bottom halves disabled (as [`RroceMr::lookup`]).
pub(crate) fn invalidate_key(dev: &RroceDev, pd: *mut bindings::ib_pd, key: u32) -> Result<(), MrError> {
    let mr = RroceMr::at_index(dev, rules::key_index(key));
    let info = mr.map(|m| m.info(pd));
    rules::check_invalidate(info.as_ref(), key).map_err(|e| match e {
        rules::InvError::NotInvalidatable => MrError::NotInvalidatable,
        rules::InvError::BadKey | rules::InvError::WrongPd => MrError::BadKey,
    })?;
    if let Some(fr) = mr.and_then(|m| m.fr.as_deref()) {
        fr.valid.store(false, Ordering::Release);
    }
    Ok(())
}

/// Executes an `IB_WR_REG_MR` of a QP of `pd` ([`rules::check_reg`]): the
/// region at the key's index becomes valid with `r`'s key, range, page
/// list prefix and access.  Returns the completion status.
pub(crate) fn fast_register(dev: &RroceDev, pd: *mut bindings::ib_pd, r: &RegRequest) -> WcStatus {
    let mr = RroceMr::at_index(dev, rules::key_index(r.key));
    let info = mr.map(|m| m.info(pd));
    if let Err(e) = rules::check_reg(info.as_ref(), r) {
        return e.status();
    }
    let Some((mr, fr)) = mr.and_then(|m| m.fr.as_deref().map(|f| (m, f))) else {
        return WcStatus::LocProtErr;
    };
    fr.iova.store(r.iova, Ordering::Relaxed);
    fr.length.store(r.length, Ordering::Relaxed);
    fr.page_size.store(r.page_size, Ordering::Relaxed);
    fr.npages.store(r.npages, Ordering::Relaxed);
    fr.access.store(r.access, Ordering::Relaxed);
    mr.key.store(r.key, Ordering::Release);
    fr.valid.store(true, Ordering::Release);
    WcStatus::Success
}

/// The parameters of `IB_WR_REG_MR` for `ibmr` with `key` and `access`
/// (mapping from the last `ib_map_mr_sg`), or `EINVAL` if `ibmr` is not a
/// fast-registration MR of `key`'s index.
///
/// # Safety
///
/// `ibmr` must be a live MR of this driver, not concurrently changed by
/// `ib_map_mr_sg` (the consumer's duty).
pub(crate) unsafe fn reg_request(ibmr: *mut bindings::ib_mr, key: u32, access: c_int) -> Result<RegRequest> {
    // SAFETY: every MR of ours is an `RroceMr` with `ib` first.
    let mr = unsafe { &*ibmr.cast::<RroceMr>() };
    let fr = mr.fr.as_deref().ok_or(EINVAL)?;
    if rules::key_index(key) != mr.index {
        return Err(EINVAL);
    }
    Ok(RegRequest {
        key,
        iova: mr.ib.iova,
        length: mr.ib.length,
        page_size: u64::from(mr.ib.page_size),
        npages: fr.nmapped.load(Ordering::Relaxed),
        access: access as u32,
    })
}

/// # Safety
///
/// `ib_device_ops::alloc_mr` contract.
pub(crate) unsafe extern "C" fn alloc_mr(
    pd: *mut bindings::ib_pd,
    mr_type: bindings::ib_mr_type,
    max_num_sg: u32,
) -> *mut bindings::ib_mr {
    let res = (|| {
        if mr_type != bindings::ib_mr_type_IB_MR_TYPE_MEM_REG {
            return Err(EINVAL);
        }
        if max_num_sg == 0 || max_num_sg > MAX_FAST_REG_PAGES {
            return Err(EINVAL);
        }
        // SAFETY: `pd` is a live PD of one of our devices.
        let dev = unsafe { RroceDev::from_ib((*pd).device) };
        let mut list = KVVec::with_capacity(max_num_sg as usize, GFP_KERNEL_ACCOUNT)?;
        for _ in 0..max_num_sg {
            list.push(AtomicU64::new(0), GFP_KERNEL_ACCOUNT)?;
        }
        let fr = KBox::new(
            Fr {
                list,
                nmapped: AtomicU32::new(0),
                valid: AtomicBool::new(false),
                iova: AtomicU64::new(0),
                length: AtomicU64::new(0),
                page_size: AtomicU64::new(bindings::PAGE_SIZE as u64),
                npages: AtomicU32::new(0),
                access: AtomicU32::new(0),
            },
            GFP_KERNEL_ACCOUNT,
        )?;
        let ib = bindings::ib_mr { page_size: bindings::PAGE_SIZE as u32, ..Default::default() };
        let mr = KBox::new(
            RroceMr {
                ib,
                umem: None,
                pd,
                page_off: 0,
                user_start: 0,
                access: 0,
                index: 0,
                binds: AtomicU32::new(0),
                key: AtomicU32::new(0),
                fr: Some(fr),
            },
            GFP_KERNEL_ACCOUNT,
        )?;
        publish(dev, mr)
    })();
    res.unwrap_or_else(|e| e.to_ptr())
}

/// `set_page` callback of `ib_sg_to_pages`: appends `addr` to the page
/// list, `-ENOMEM` when it is full.
///
/// # Safety
///
/// `ibmr` is a fast-registration MR of ours being mapped by `map_mr_sg`.
unsafe extern "C" fn set_page(ibmr: *mut bindings::ib_mr, addr: u64) -> c_int {
    // SAFETY: every MR of ours is an `RroceMr` with `ib` first.
    let mr = unsafe { &*ibmr.cast::<RroceMr>() };
    let Some(fr) = mr.fr.as_deref() else { return -(bindings::EINVAL as c_int) };
    let n = fr.nmapped.load(Ordering::Relaxed);
    match fr.list.get(n as usize) {
        Some(slot) => {
            slot.store(addr, Ordering::Relaxed);
            fr.nmapped.store(n + 1, Ordering::Relaxed);
            0
        }
        None => -(bindings::ENOMEM as c_int),
    }
}

/// # Safety
///
/// `ib_device_ops::map_mr_sg` contract (`ib_map_mr_sg` set `page_size`).
pub(crate) unsafe extern "C" fn map_mr_sg(
    ibmr: *mut bindings::ib_mr,
    sg: *mut bindings::scatterlist,
    sg_nents: c_int,
    sg_offset: *mut core::ffi::c_uint,
) -> c_int {
    // SAFETY: every MR of ours is an `RroceMr` with `ib` first.
    let mr = unsafe { &*ibmr.cast::<RroceMr>() };
    let Some(fr) = mr.fr.as_deref() else { return -(bindings::EINVAL as c_int) };
    fr.nmapped.store(0, Ordering::Relaxed);
    // SAFETY: `ibmr` is ours, `sg` a DMA-mapped list of `sg_nents` entries
    // (the caller's contract); `set_page` only touches `fr`.
    unsafe { bindings::ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, Some(set_page)) }
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
    // (`MR_DEAD` already: a re-registered region, replaced by its successor.)
    match binds.compare_exchange(0, MR_DEAD, Ordering::AcqRel, Ordering::Acquire) {
        Ok(_) | Err(MR_DEAD) => {}
        Err(_) => return EBUSY.to_errno(),
    }
    // SAFETY: every MR of ours is a `KBox<RroceMr>` with `ib` first.
    let mr = unsafe { KBox::from_raw(ibmr.cast::<RroceMr>()) };
    // SAFETY: its device is one of ours.
    let dev = unsafe { RroceDev::from_ib(mr.ib.device) };
    // A re-registered region's successor may hold the slot by now.
    dev.p.keys.remove_if(mr.index, ptr::from_ref(&*mr).cast_mut().cast());
    // The data path looks regions up with bottom halves disabled: wait for
    // every such section that may have found it before the pages go.
    crate::sync::rcu::synchronize();
    drop(mr);
    0
}
