// SPDX-License-Identifier: GPL-2.0
//! Memory regions: pinned user memory (and kernel DMA MRs) behind keys.
//!
//! C header: [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h)
//!
//! `reg_user_mr` pins the pages with `ib_umem_get` (which charges them to
//! `RLIMIT_MEMLOCK` unless the caller has `CAP_IPC_LOCK`) and gives the
//! region a key: `index << 8 | generation`, where `index` comes from the
//! device's key table ([`Keys`](crate::keys::Keys): an xarray, so the
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
//! for `Region::walk_dma`).  The registration itself (iova, length,
//! page size, page count, access, key, state) is kept in atomics, as the
//! data path of other QPs reads it concurrently under RCU.
//!
//! A region's object (`ib::mr`) holds an [`Arc`] of its [`Region`]; the
//! key table holds another while it is published, and a bound window a
//! third.  The data path borrows regions from the table for an RCU
//! read-side section.

#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use kernel::bindings;
use kernel::ffi::c_int;
use kernel::prelude::*;
use kernel::sync::Arc;

use crate::device::{DevPriv, RroceDev};
use crate::ib::mr::{MrInit, MrOps, MrRef, Prefetch, Rereg, UserRange};
use crate::ib::umem::{ImplicitOdp, KernelMem, OdpMem, OdpMiss, OdpUmem, PageRef, Umem};
use crate::proto::rc::AtomicOp;
use crate::ib::PdId;
use crate::net::skb::TxFill;
use crate::keys::{Fr, Region};
use crate::proto::mr::{self as rules, FrState, MrKind, RegRequest, RegionInfo};
use crate::proto::wqe::WcStatus;
use crate::sync::idtable::Either;
use crate::sync::rcu::ReadGuard;

use crate::limits::MAX_FAST_REG_PAGES;

/// Access flags a region may carry (the rest are refused or meaningless
/// for a software device).
const ACCESS_ALLOWED: u32 = bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_READ
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC
    | bindings::ib_access_flags_IB_ACCESS_MW_BIND
    | bindings::ib_access_flags_IB_ACCESS_FLUSH_GLOBAL
    | bindings::ib_access_flags_IB_ACCESS_OPTIONAL;

/// Largest explicit on-demand paging region: 64 GiB (page tables of
/// 128 MiB each).
const ODP_MAX_LEN: u64 = 1 << 36;

/// On-demand paging (user regions only), and its huge-page hint.
const ACCESS_ODP: u32 = bindings::ib_access_flags_IB_ACCESS_ON_DEMAND | bindings::ib_access_flags_IB_ACCESS_HUGETLB;

/// Our part of a memory region: its shared state.
pub(crate) struct MrPart {
    r: Arc<Region>,
}

/// [`Region::binds`] flag: the region is going away, nothing may bind.
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
    /// A page of an on-demand paging region is not mapped: the access
    /// waits for [`Region::fault`] (see `dp`'s ODP stalls).
    NotPresent,
    /// An atomic's word is not 8-byte aligned in memory though its I/O
    /// address is.  No region allows it today (ib_core registers user
    /// regions only at an I/O address with the same offset in its page as
    /// the memory; fast-registered and DMA regions keep offsets too); kept
    /// because the CPU's atomics need an aligned word.  Refused as a
    /// misaligned request, as rdma_rxe does.
    Misaligned,
}

impl MrError {
    /// The completion status of a local operation (LOCAL_INV) that failed
    /// with this error.
    pub(crate) fn local_status(self) -> WcStatus {
        match self {
            MrError::BadKey => rules::InvError::BadKey.local_status(),
            MrError::NotInvalidatable => rules::InvError::NotInvalidatable.local_status(),
            MrError::Range | MrError::Access | MrError::NotPresent | MrError::Misaligned => WcStatus::LocProtErr,
        }
    }
}

/// A fresh key for key-table slot `index`: the index above a random key
/// byte, so that a peer cannot guess the keys of other regions and windows
/// from its own (the index alone is predictable).
pub(crate) fn new_key(index: u32) -> u32 {
    (index << 8) | u32::from(crate::sync::random_u8())
}

fn check_access(access: c_int) -> Result<u32> {
    let access = access as u32;
    if access & !ACCESS_ALLOWED != 0 {
        return Err(crate::limits::eopnotsupp());
    }
    Ok(access)
}

/// Whether ib_core pins pages for `access` writable (`ib_access_writable`).
fn pins_writable(access: u32) -> bool {
    access
        & (bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE
            | bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE
            | bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC
            | bindings::ib_access_flags_IB_ACCESS_MW_BIND)
        != 0
}

/// [`check_access`] for a user region, which may also be on demand.
fn check_user_access(access: c_int) -> Result<u32> {
    let a = access as u32;
    if a & bindings::ib_access_flags_IB_ACCESS_HUGETLB != 0 && a & bindings::ib_access_flags_IB_ACCESS_ON_DEMAND == 0 {
        return Err(crate::limits::eopnotsupp());
    }
    check_access((a & !ACCESS_ODP) as c_int).map(|_| a)
}

/// A region of `pd` with nothing pinned yet (a DMA MR as it is).
fn region(pd: PdId, access: u32, umem: Option<Arc<Umem>>, fr: Option<Fr>) -> Region {
    Region {
        umem,
        odp: None,
        pd,
        page_off: 0,
        user_start: 0,
        iova: 0,
        length: 0,
        access,
        index: AtomicU32::new(0),
        binds: AtomicU32::new(0),
        key: AtomicU32::new(0),
        fr,
        kmem: None,
    }
}

/// Pins `range` of user memory for a region of `pd`; not yet published.
fn pin_user(dev: &RroceDev, pd: PdId, range: UserRange, access: c_int) -> Result<MrPart> {
    let acc = check_user_access(access)?;
    if range.length == 0 || range.length > dev.p.attrs.max_mr_size {
        return Err(EINVAL);
    }
    let (umem, odp) = if acc & bindings::ib_access_flags_IB_ACCESS_ON_DEMAND != 0 {
        if range.start == 0 && range.length == u64::MAX {
            // Implicit: the whole address space, I/O address = address.
            if range.iova != 0 {
                return Err(EINVAL);
            }
            (None, Some(OdpMem::Implicit(ImplicitOdp::get(dev, access)?)))
        } else {
            // The page tables (ib_core's and ours) take 24 bytes per page:
            // a bound keeps each under the 2 GiB kvmalloc refuses (with a
            // warning) -- the implicit region covers larger needs.
            if range.length > ODP_MAX_LEN {
                return Err(EINVAL);
            }
            (None, Some(OdpMem::Explicit(OdpUmem::get(dev, range.start, range.length, access)?)))
        }
    } else {
        (Some(Arc::new(Umem::get(dev, range.start, range.length, access)?, GFP_KERNEL_ACCOUNT)?), None)
    };
    // INVARIANT: `umem` starts at the page of `start`, `page_off` into it.
    let r = Region {
        page_off: range.start & (bindings::PAGE_SIZE as u64 - 1),
        user_start: range.start,
        iova: range.iova,
        length: range.length,
        odp,
        ..region(pd, acc, umem, None)
    };
    // If the allocation fails, dropping the region releases the pages.
    Ok(MrPart { r: Arc::new(r, GFP_KERNEL_ACCOUNT)? })
}

impl MrOps for MrPart {
    type Dev = DevPriv;

    fn reg_user(dev: &RroceDev, pd: PdId, range: UserRange, access: c_int) -> Result<Self> {
        pin_user(dev, pd, range, access)
    }

    /// Re-registration: always a new region that takes over the old one's
    /// keys; ib_core swaps it in for the old region, which it then
    /// deregisters.  What `flags` does not change is taken from the old
    /// region.  Building a new region rather than editing the live one
    /// means the receive path, which reads regions locklessly, never sees
    /// a half-changed one.  Without IB_MR_REREG_TRANS the new region
    /// shares the old one's pinned pages (the IBA keeps the translation;
    /// as mlx5 keeps its umem), unless it is on demand or needs them
    /// writable and they were pinned read-only: until 2026-12-07 a PD- or
    /// access-only change pinned the range afresh, charging
    /// RLIMIT_MEMLOCK twice (ENOMEM near the limit) and taking whatever
    /// pages were mapped there by then (found by review).
    fn rereg_user(&self, dev: &RroceDev, req: &Rereg) -> Result<Self> {
        let old = &*self.r;
        if req.flags == 0 || req.flags & !bindings::ib_mr_rereg_flags_IB_MR_REREG_SUPPORTED != 0 {
            return Err(EINVAL);
        }
        // Only user regions come through uverbs.
        let Some(pd) = req.pd else { return Err(EINVAL) };
        if (old.umem.is_none() && old.odp.is_none()) || old.fr.is_some() {
            return Err(EINVAL);
        }
        let access = if req.flags & bindings::ib_mr_rereg_flags_IB_MR_REREG_ACCESS != 0 {
            req.access
        } else {
            old.access as c_int
        };
        let range = if req.flags & bindings::ib_mr_rereg_flags_IB_MR_REREG_TRANS != 0 {
            req.range
        } else {
            let acc = check_user_access(access)?;
            let keeps = |old_acc: u32| acc & ACCESS_ODP == 0 && (!pins_writable(acc) || pins_writable(old_acc));
            if let Some(umem) = old.umem.as_ref().filter(|_| keeps(old.access)) {
                let r = Region {
                    page_off: old.page_off,
                    user_start: old.user_start,
                    iova: old.iova,
                    length: old.length,
                    ..region(pd, acc, Some(umem.clone()), None)
                };
                return Ok(MrPart { r: Arc::new(r, GFP_KERNEL_ACCOUNT)? });
            }
            UserRange { start: old.user_start, length: old.length, iova: old.iova }
        };
        pin_user(dev, pd, range, access)
    }

    fn dma(_dev: &RroceDev, pd: PdId, access: c_int, mem: KernelMem) -> Result<Self> {
        let r = Region { kmem: Some(mem), ..region(pd, check_access(access)?, None, None) };
        Ok(MrPart { r: Arc::new(r, GFP_KERNEL_ACCOUNT)? })
    }

    fn fast_reg(
        _dev: &RroceDev,
        pd: PdId,
        mr_type: bindings::ib_mr_type,
        max_num_sg: u32,
        mem: KernelMem,
    ) -> Result<Self> {
        if mr_type != bindings::ib_mr_type_IB_MR_TYPE_MEM_REG {
            return Err(EINVAL);
        }
        if max_num_sg == 0 || max_num_sg > MAX_FAST_REG_PAGES {
            return Err(EINVAL);
        }
        let mut list = KVVec::with_capacity(max_num_sg as usize, GFP_KERNEL_ACCOUNT)?;
        for _ in 0..max_num_sg {
            list.push(AtomicU64::new(0), GFP_KERNEL_ACCOUNT)?;
        }
        let fr = Fr {
            list,
            nmapped: AtomicU32::new(0),
            valid: AtomicBool::new(false),
            iova: AtomicU64::new(0),
            length: AtomicU64::new(0),
            page_size: AtomicU64::new(bindings::PAGE_SIZE as u64),
            npages: AtomicU32::new(0),
            access: AtomicU32::new(0),
        };
        let r = Region { kmem: Some(mem), ..region(pd, 0, None, Some(fr)) };
        Ok(MrPart { r: Arc::new(r, GFP_KERNEL_ACCOUNT)? })
    }

    fn publish(&self, dev: &RroceDev, replacing: Option<&Self>) -> Result<MrInit> {
        let r = &self.r;
        let init = |key| MrInit { key, iova: r.iova, length: r.length, page_size: bindings::PAGE_SIZE as u32 };
        let Some(old) = replacing.map(|o| &o.r) else {
            let max = dev.p.attrs.max_mr as u32;
            let index = dev.p.keys.reserve(1, max, max)?;
            let key = new_key(index);
            r.index.store(index, Ordering::Relaxed);
            r.key.store(key, Ordering::Relaxed);
            // Committed: the table's reference makes the key usable.
            dev.p.keys.publish(index, Either::A(r.clone()));
            return Ok(init(key));
        };
        // No window may bind to the old region from here on, and one with
        // windows bound is not replaced (they refer to it).
        if old.binds.compare_exchange(0, MR_DEAD, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Err(EBUSY);
        }
        // The new region takes over the old one's keys and key-table slot,
        // as applications expect (they keep using the keys they exchanged);
        // ib_core then deregisters the old region, which leaves the slot
        // alone.
        let index = old.index.load(Ordering::Relaxed);
        let key = old.key.load(Ordering::Acquire);
        r.index.store(index, Ordering::Relaxed);
        r.key.store(key, Ordering::Relaxed);
        if dev.p.keys.replace_a(index, old, r.clone()).is_err() {
            old.binds.store(0, Ordering::Release);
            return Err(EINVAL);
        }
        Ok(init(key))
    }

    fn map_begin(&self) -> Result {
        let fr = self.r.fr.as_ref().ok_or(EINVAL)?;
        fr.nmapped.store(0, Ordering::Relaxed);
        Ok(())
    }

    fn set_page(&self, addr: u64) -> Result {
        let fr = self.r.fr.as_ref().ok_or(EINVAL)?;
        let n = fr.nmapped.load(Ordering::Relaxed);
        let slot = fr.list.get(n as usize).ok_or(ENOMEM)?;
        slot.store(addr, Ordering::Relaxed);
        fr.nmapped.store(n + 1, Ordering::Relaxed);
        Ok(())
    }

    fn advise(dev: &RroceDev, pd: PdId, advice: u32, flags: u32, sges: &[Prefetch]) -> Result {
        // Prefetching is done before the call returns, with or without
        // IB_UVERBS_ADVISE_MR_FLAG_FLUSH (which only asks for that).
        let _ = flags;
        let (write, fault) = match advice {
            bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH => (false, true),
            bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_WRITE => (true, true),
            bindings::ib_uverbs_advise_mr_advice_IB_UVERBS_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT => (false, false),
            _ => return Err(crate::limits::eopnotsupp()),
        };
        for sge in sges {
            let region = {
                let rcu = ReadGuard::new();
                let r = lookup(dev, &rcu, pd, sge.lkey).map_err(|_| EINVAL)?;
                let need = if write { Need::LocalWrite } else { Need::LocalRead };
                r.check(sge.addr, sge.length, need).map_err(|_| EINVAL)?;
                if !r.is_odp() {
                    return Err(EINVAL);
                }
                counted(dev, &rcu, r).ok_or(EINVAL)?
            };
            // Outside the read-side section: faulting sleeps.
            region.fault(sge.addr, sge.length.into(), write, fault)?;
        }
        Ok(())
    }

    fn dereg(&self, dev: &RroceDev) -> Result {
        // A region with memory windows bound to it stays (IBA 11.2.8: the
        // windows must be invalidated or deallocated first); from here on
        // no window can bind to it.  (`MR_DEAD` already: a re-registered
        // region, replaced by its successor.)
        match self.r.binds.compare_exchange(0, MR_DEAD, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) | Err(MR_DEAD) => {}
            Err(_) => return Err(EBUSY),
        }
        // A re-registered region's successor may hold the slot by now.  The
        // table drops its reference after a grace period: no data-path
        // section still uses the region when its pages go with `self`.
        dev.p.keys.remove_if(self.r.index.load(Ordering::Relaxed), Either::A(&*self.r));
        Ok(())
    }
}

/// The region with `key` in `dev`, if it belongs to `pd`, for the
/// read-side section `rcu`.
pub(crate) fn lookup<'g>(dev: &'g RroceDev, rcu: &'g ReadGuard, pd: PdId, key: u32) -> Result<&'g Region, MrError> {
    let mr = at_index(dev, rcu, rules::key_index(key)).ok_or(MrError::BadKey)?;
    if mr.pd != pd || !rules::key_usable(&mr.info(pd), key) {
        return Err(MrError::BadKey);
    }
    Ok(mr)
}

/// `r` (a region of `dev`'s key table, borrowed for `rcu`) as a counted
/// reference that outlives the read-side section: to fault its pages in
/// from process context.  `None` if it has left the table.  (The table
/// holds a reference meanwhile, so the one dropped here is never the
/// last.)
pub(crate) fn counted(dev: &RroceDev, rcu: &ReadGuard, r: &Region) -> Option<Arc<Region>> {
    counted_at(dev, rcu, r.index.load(Ordering::Relaxed)).filter(|a| core::ptr::eq(&**a, r))
}

/// The region at key-table `index` of `dev` as a counted reference (see
/// [`counted`]), whatever its key.
pub(crate) fn counted_at(dev: &RroceDev, rcu: &ReadGuard, index: u32) -> Option<Arc<Region>> {
    match dev.p.keys.get_arc(index, rcu)? {
        Either::A(a) => Some(a),
        Either::B(_) => None,
    }
}

/// Bytes faulted in at once, at least, when the data path misses a page of
/// an on-demand paging region: a message usually goes on where it missed,
/// and each miss stalls its QP (a work-item round trip, and on the
/// responder side the requester's retransmission).
const ODP_FAULT_AHEAD: u64 = 1 << 20;

/// The range to fault in for a miss of `len` bytes at `va` of `r`: at
/// least [`ODP_FAULT_AHEAD`] bytes from `va`, within the region.
pub(crate) fn fault_window(r: &Region, va: u64, len: u32) -> (u64, u64) {
    let end = r.io_end().unwrap_or(u64::MAX);
    let want = u64::from(len).max(ODP_FAULT_AHEAD);
    (va, want.min(end.saturating_sub(va)).max(u64::from(len)))
}

/// The region at `index` of `dev`'s key table, whatever its key.
fn at_index<'g>(dev: &'g RroceDev, rcu: &'g ReadGuard, index: u32) -> Option<&'g Region> {
    match dev.p.keys.get(index, rcu)? {
        Either::A(r) => Some(r),
        // A memory window's entry (see `mw`): no region.
        Either::B(_) => None,
    }
}

impl Region {
    /// What the rules of `proto::mr` need to know, seen from `pd`.
    fn info(&self, pd: PdId) -> RegionInfo {
        let (kind, state, max_pages) = match self.fr.as_ref() {
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
        let access = match self.fr.as_ref() {
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
        if let Some(fr) = self.fr.as_ref() {
            let (iova, length) = (fr.iova.load(Ordering::Relaxed), fr.length.load(Ordering::Relaxed));
            let mr_end = iova.checked_add(length).ok_or(MrError::Range)?;
            if len != 0 && (va < iova || end > mr_end) {
                return Err(MrError::Range);
            }
            return Ok(());
        }
        if self.umem.is_none() && self.odp.is_none() {
            // A DMA MR spans the kernel's direct map; `walk` checks each
            // page of it.
            return Ok(());
        }
        let mr_end = self.io_end().ok_or(MrError::Range)?;
        if len != 0 && (va < self.iova || end > mr_end) {
            return Err(MrError::Range);
        }
        Ok(())
    }

    /// One past its last I/O address (`None` if that overflows): an
    /// implicit region, registered over the whole address space, covers
    /// user space only.
    fn io_end(&self) -> Option<u64> {
        match self.odp {
            Some(OdpMem::Implicit(_)) => Some(ImplicitOdp::limit()),
            _ => self.iova.checked_add(self.length),
        }
    }

    /// Visits the pages backing `len` bytes at `va` (already checked):
    /// `f(page, offset in page, offset in the range, length)`.
    fn walk(&self, va: u64, len: u32, write: bool, mut f: impl FnMut(PageRef<'_>, u32, usize, u32) -> bool) -> Result<(), MrError> {
        let ps = bindings::PAGE_SIZE as u64;
        if let Some(fr) = self.fr.as_ref() {
            return Self::walk_fr(fr, self.kmem.as_ref().ok_or(MrError::Range)?, va, len, f);
        }
        if let Some(odp) = self.odp.as_ref() {
            let ua = self.user_addr(va).ok_or(MrError::Range)?;
            return odp.walk(ua, len, write, f).map_err(|e| match e {
                OdpMiss::NotPresent => MrError::NotPresent,
                OdpMiss::Range => MrError::Range,
            });
        }
        let Some(umem) = self.umem.as_ref() else {
            return Self::walk_dma(self.kmem.as_ref().ok_or(MrError::Range)?, va, len, f);
        };
        let mut off = va.wrapping_sub(self.iova).checked_add(self.page_off).ok_or(MrError::Range)?;
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
    fn walk_dma(
        mem: &KernelMem,
        va: u64,
        len: u32,
        mut f: impl FnMut(PageRef<'_>, u32, usize, u32) -> bool,
    ) -> Result<(), MrError> {
        let ps = bindings::PAGE_SIZE as u64;
        let mut done = 0u32;
        while done < len {
            let a = va.checked_add(u64::from(done)).ok_or(MrError::Range)?;
            let page = mem.page(a).ok_or(MrError::Range)?;
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
    fn walk_fr(
        fr: &Fr,
        mem: &KernelMem,
        va: u64,
        len: u32,
        mut f: impl FnMut(PageRef<'_>, u32, usize, u32) -> bool,
    ) -> Result<(), MrError> {
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
            let page = mem.page(kva).ok_or(MrError::Range)?;
            let in_page = kva % kps;
            let n = u64::from(len - done).min(ps - off).min(kps - in_page) as u32;
            if !f(page, in_page as u32, done as usize, n) {
                return Err(MrError::Range);
            }
            done += n;
        }
        Ok(())
    }

    /// Appends the `len` bytes at `va` of the region to `dst`.
    pub(crate) fn read_into(&self, va: u64, len: u32, dst: &mut TxFill<'_>) -> Result<(), MrError> {
        // The walk visits the pieces in order, so each one appends.
        self.walk(va, len, false, |page, poff, _, n| page.read_into(poff, n, dst))
    }

    /// Copies `src` into the region at `va`.
    pub(crate) fn write(&self, va: u64, src: &[u8]) -> Result<(), MrError> {
        let len = u32::try_from(src.len()).map_err(|_| MrError::Range)?;
        self.walk(va, len, true, |page, poff, at, n| {
            src.get(at..at + n as usize).is_some_and(|d| page.write(poff, d))
        })
    }

    /// Executes an 8-byte atomic at `va` (checked) and returns the
    /// original value.  `MrError::Misaligned` unless the word is 8-byte
    /// aligned in memory (which [`PageRef::atomic`] checks; a misaligned
    /// word may even span two pages, whose pieces leave the error).
    pub(crate) fn atomic(&self, va: u64, op: AtomicOp) -> Result<u64, MrError> {
        let mut orig = Err(MrError::Misaligned);
        self.walk(va, 8, true, |page, poff, _, n| {
            if n == 8 {
                orig = page.atomic(poff, op).ok_or(MrError::Misaligned);
            }
            true
        })?;
        orig
    }

    /// The user address of I/O address `va` of a user region.
    fn user_addr(&self, va: u64) -> Option<u64> {
        self.user_start.checked_add(va.checked_sub(self.iova)?)
    }

    /// Whether every page behind `len` bytes at `va` (checked) is there
    /// (for writing if `write`): `MrError::NotPresent` if a page of an
    /// on-demand paging region is missing.
    pub(crate) fn probe(&self, va: u64, len: u32, write: bool) -> Result<(), MrError> {
        self.walk(va, len, write, |_, _, _, _| true)
    }

    /// Whether it is an on-demand paging region.
    pub(crate) fn is_odp(&self) -> bool {
        self.odp.is_some()
    }

    /// Maps the pages behind `len` bytes at I/O address `va` of an
    /// on-demand paging region in (for writing if `write`; with `fault`
    /// false only those the process has mapped already); nothing to do for
    /// other regions.  Process context: it may sleep.
    pub(crate) fn fault(&self, va: u64, len: u64, write: bool, fault: bool) -> Result {
        let Some(odp) = self.odp.as_ref() else { return Ok(()) };
        let end = va.checked_add(len).ok_or(EINVAL)?;
        let mr_end = self.io_end().ok_or(EINVAL)?;
        if va < self.iova || end > mr_end {
            return Err(EINVAL);
        }
        let ua = self.user_addr(va).ok_or(EINVAL)?;
        odp.fault(ua, len, write, fault)
    }

    /// Its `IB_ACCESS_*` flags.
    pub(crate) fn access(&self) -> u32 {
        self.access
    }

    /// Its first address and length, for a region of pinned user memory
    /// (`None` for a DMA MR, which has no bounds to bind a window in).
    pub(crate) fn user_range(&self) -> Option<(u64, u64)> {
        let end = self.io_end()?;
        (self.umem.is_some() || self.odp.is_some()).then_some((self.iova, end - self.iova))
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

/// Invalidates `key` for a QP of `pd` (LOCAL_INV, or the R_Key of a SEND
/// with invalidate): the region must exist with exactly this key, belong to
/// `pd` and be invalidatable ([`rules::check_invalidate`]); it becomes
/// free.  Bottom halves disabled (as [`lookup`]).
pub(crate) fn invalidate_key(dev: &RroceDev, rcu: &ReadGuard, pd: PdId, key: u32) -> Result<(), MrError> {
    let mr = at_index(dev, rcu, rules::key_index(key));
    let info = mr.map(|m| m.info(pd));
    rules::check_invalidate(info.as_ref(), key).map_err(|e| match e {
        rules::InvError::NotInvalidatable => MrError::NotInvalidatable,
        rules::InvError::BadKey | rules::InvError::WrongPd => MrError::BadKey,
    })?;
    if let Some(fr) = mr.and_then(|m| m.fr.as_ref()) {
        fr.valid.store(false, Ordering::Release);
    }
    Ok(())
}

/// Executes an `IB_WR_REG_MR` of a QP of `pd` ([`rules::check_reg`]): the
/// region at the key's index becomes valid with `r`'s key, range, page
/// list prefix and access.  Returns the completion status.
pub(crate) fn fast_register(dev: &RroceDev, rcu: &ReadGuard, pd: PdId, r: &RegRequest) -> WcStatus {
    let mr = at_index(dev, rcu, rules::key_index(r.key));
    let info = mr.map(|m| m.info(pd));
    if let Err(e) = rules::check_reg(info.as_ref(), r) {
        return e.status();
    }
    let Some((mr, fr)) = mr.and_then(|m| m.fr.as_ref().map(|f| (m, f))) else {
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

/// The parameters of `IB_WR_REG_MR` for `mr` with `key` and `access`
/// (mapping from the last `ib_map_mr_sg`), or `EINVAL` if `mr` is not a
/// fast-registration MR of `key`'s index.
pub(crate) fn reg_request(mr: &MrRef<'_, MrPart>, key: u32, access: c_int) -> Result<RegRequest> {
    let r = &mr.get().r;
    let fr = r.fr.as_ref().ok_or(EINVAL)?;
    if rules::key_index(key) != r.index.load(Ordering::Relaxed) {
        return Err(EINVAL);
    }
    let m = mr.mapping();
    Ok(RegRequest {
        key,
        iova: m.iova,
        length: m.length,
        page_size: u64::from(m.page_size),
        npages: fr.nmapped.load(Ordering::Relaxed),
        access: access as u32,
    })
}
