// SPDX-License-Identifier: GPL-2.0
//! Memory the driver reads and writes for the data path: pinned user
//! memory (`ib_umem`) and pages of the kernel's direct map.
//!
//! C header: [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h)
//!
//! A [`PageRef`] is a page that stays allocated for as long as the
//! reference: one of an [`Umem`]'s pinned pages, borrowed from it, or a
//! direct-map page of kernel memory that a kernel consumer registered,
//! borrowed from the region's [`KernelMem`] (verbs consumers keep
//! registered memory valid until they deregister it, and the driver stops
//! using a region before deregistration returns).  Bytes are copied in and
//! out by the kernel's `memcpy` under `kmap_local_page`: user space may
//! change them at any time, so no Rust reference to page contents is ever
//! formed but the `AtomicU64` of a responder's atomic (whose type allows
//! writers beside it).  Only pages pinned or mapped for writing are
//! written.

use core::marker::PhantomData;
use core::sync::atomic::{AtomicU64, Ordering};
use kernel::sync::Arc;
use core::ptr::NonNull;
use kernel::bindings;
use kernel::error::from_err_ptr;
use kernel::prelude::*;

use crate::ffi;
use crate::net::skb::TxFill;
use crate::proto::rc::AtomicOp;
use crate::ib::device::Device;
use crate::sync::lock::{new_spinlock_bh, SpinLockBh};

const PAGE_SIZE: usize = bindings::PAGE_SIZE;

/// A page that stays allocated for `'a`, and that the driver may write
/// if it was pinned or mapped for writing.
///
/// # Invariants
///
/// `page` is a valid `struct page` that is not freed while `'a` lasts.
/// If `writable`, it may be written: a user page pinned or mapped with
/// write access (`FOLL_WRITE`: the process's own copy, never a page it
/// shares read-only, such as the zero page or a file's page cache), or
/// kernel memory a kernel consumer registered.
#[derive(Clone, Copy)]
pub(crate) struct PageRef<'a> {
    page: NonNull<bindings::page>,
    writable: bool,
    _p: PhantomData<&'a bindings::page>,
}

impl PageRef<'_> {
    /// Appends the `len` bytes at offset `off` of the page to `dst`;
    /// `false` (nothing copied) if that range is not inside the page or
    /// does not fit.
    pub(crate) fn read_into(&self, off: u32, len: u32, dst: &mut TxFill<'_>) -> bool {
        if (off as usize).saturating_add(len as usize) > PAGE_SIZE {
            return false;
        }
        // SAFETY: `put_with` hands over `len` writable bytes, which the copy
        // initialises and nothing else; the page is valid (type invariant)
        // and the range inside it.
        unsafe {
            dst.put_with(len as usize, |p| ffi::rroce_page_copy(self.page.as_ptr(), off, p.cast(), len, false))
        }
    }

    /// Copies `src` to offset `off` of the page; `false` if that range is
    /// not inside the page, or the page was not pinned for writing.
    pub(crate) fn write(&self, off: u32, src: &[u8]) -> bool {
        let Ok(len) = u32::try_from(src.len()) else { return false };
        if !self.writable || (off as usize).saturating_add(src.len()) > PAGE_SIZE {
            return false;
        }
        // SAFETY: the page is valid and may be written (type invariant),
        // the range inside it; the helper only reads `src`'s `len` bytes
        // when copying to the page.
        unsafe { ffi::rroce_page_copy(self.page.as_ptr(), off, src.as_ptr().cast_mut().cast(), len, true) };
        true
    }

    /// An 8-byte atomic `op` on the aligned word at offset `off` of the
    /// page: compare-and-swap, fetch-and-add or ATOMIC WRITE (one 8-byte
    /// store of the value), done by the CPU's own atomic instructions, so
    /// it is atomic with respect to every other atomic access to the word:
    /// the responder's on any QP or device, and the CPUs' (a process's own
    /// `__atomic` operations on its memory included).  Sequentially
    /// consistent: the data the responder placed before it is visible
    /// before its result.  Returns the original value; `None` if `off` is
    /// not a multiple of 8, the word not inside the page, or the page was
    /// not pinned for writing.
    pub(crate) fn atomic(&self, off: u32, op: AtomicOp) -> Option<u64> {
        let off = off as usize;
        if !self.writable || off % 8 != 0 || off + 8 > PAGE_SIZE {
            return None;
        }
        // SAFETY: the page is valid and may be written (type invariant);
        // it stays mapped until the `rroce_kunmap_local` below.
        let va = unsafe { ffi::rroce_kmap_local_page(self.page.as_ptr()) };
        let orig = {
            // SAFETY: `va + off` is inside the mapped page and 8-byte
            // aligned (a mapping is page aligned, `off` a multiple of 8),
            // and `word` is not used after this block, before the unmap.
            // Every access this function makes is atomic.  Others may
            // access the word at the same time without atomics -- user
            // space, and this driver's payload copies (`rroce_page_copy`) --
            // which Rust's model does not cover: as for the C code that
            // shares memory with user space, the kernel memory model
            // applies, where an aligned 8-byte locked instruction or store
            // is never torn, and a racing plain access only changes which
            // value the operation sees or leaves.
            let word = unsafe { AtomicU64::from_ptr(va.cast::<u8>().add(off).cast::<u64>()) };
            match op {
                AtomicOp::FetchAdd { add } => word.fetch_add(add, Ordering::SeqCst),
                AtomicOp::CompareSwap { compare, swap } => {
                    match word.compare_exchange(compare, swap, Ordering::SeqCst, Ordering::SeqCst) {
                        Ok(v) | Err(v) => v,
                    }
                }
                AtomicOp::Write { value } => word.swap(value, Ordering::SeqCst),
            }
        };
        // SAFETY: `va` is the mapping made above, unmapped once.
        unsafe { ffi::rroce_kunmap_local(va) };
        Some(orig)
    }
}

/// The kernel memory of a region a kernel consumer registered: a DMA MR
/// (`get_dma_mr`) or a fast-registration MR (`alloc_mr`), whose addresses
/// are the consumer's DMA addresses, which under virtual DMA
/// (`ib_uses_virt_dma`) are kernel virtual addresses of the direct map.
/// Only such a region's holder can turn an address into a [`PageRef`]:
/// user regions reach pages through their pinned [`Umem`] (or on-demand
/// mapping) only.
///
/// # Invariants
///
/// Made only by the `get_dma_mr` and `alloc_mr` entry points of
/// [`crate::ib::mr`], which only kernel consumers reach (uverbs has
/// neither command): verbs consumers keep the memory they hand such a
/// region allocated while it is registered, and the driver stops using a
/// region before its deregistration returns.
pub(crate) struct KernelMem(());

impl KernelMem {
    /// The token of a region being made by a kernel-only entry point.
    pub(in crate::ib) fn new() -> Self {
        // INVARIANT: callers are the kernel-only entry points.
        Self(())
    }

    /// The page of `kva` if it is an address of the kernel's direct map
    /// (`virt_addr_valid`), else `None`: a wild address (say, a remote
    /// peer's guess through an unsafe global rkey) is refused instead of
    /// dereferenced.
    pub(crate) fn page(&self, kva: u64) -> Option<PageRef<'_>> {
        // SAFETY: only computes the page of a direct-map address after
        // checking that it is one; no memory is accessed.
        let page = unsafe { ffi::rroce_virt_to_page(kva) };
        // INVARIANT: a page of the direct map, in memory a kernel consumer
        // registered, which stays allocated while the region (holding
        // `self`) is registered (type invariant).
        NonNull::new(page).map(|page| PageRef { page, writable: true, _p: PhantomData })
    }
}

/// Pinned user memory, released on drop.
///
/// # Invariants
///
/// `umem` came from `ib_umem_get` and is released only by `Drop`; `pages`
/// are its pages in order, pinned until then, and for writing if
/// `writable` (`ib_umem::writable`).
pub(crate) struct Umem {
    umem: NonNull<bindings::ib_umem>,
    pages: KVVec<NonNull<bindings::page>>,
    writable: bool,
}

// SAFETY: pinned pages and their umem may be used and released from any
// process context.
unsafe impl Send for Umem {}
// SAFETY: shared references only hand out page references.
unsafe impl Sync for Umem {}

impl Umem {
    /// Pins `len` bytes of the calling process's memory at `start` for
    /// `dev` with `IB_ACCESS_*` flags `access` (`ib_umem_get`, which
    /// validates the range and charges `RLIMIT_MEMLOCK`).
    pub(crate) fn get<T>(dev: &Device<T>, start: u64, len: u64, access: i32) -> Result<Self> {
        // SAFETY: a live device; `ib_umem_get` checks the user range.
        let umem = from_err_ptr(unsafe { bindings::ib_umem_get(dev.as_raw(), start as _, len as _, access) })?;
        let umem = NonNull::new(umem).ok_or(ENOMEM)?;
        // From here dropping `u` releases the pages.
        // SAFETY: a umem `ib_umem_get` just returned; `writable` is set
        // there and never changes.
        let writable = unsafe { (*umem.as_ptr()).writable() } != 0;
        let mut u = Umem { umem, pages: KVVec::new(), writable };
        let off = start & (PAGE_SIZE as u64 - 1);
        let n = usize::try_from((off + len).div_ceil(PAGE_SIZE as u64)).map_err(|_| EINVAL)?;
        let mut v: KVVec<*mut bindings::page> = KVVec::with_capacity(n, GFP_KERNEL_ACCOUNT)?;
        v.extend_with(n, core::ptr::null_mut(), GFP_KERNEL_ACCOUNT)?;
        // SAFETY: `v` has room for `n` pointers; the umem is pinned.
        let got = unsafe { ffi::rroce_umem_pages(u.umem.as_ptr(), v.as_mut_ptr(), n as _) };
        if got as usize != n {
            return Err(EINVAL);
        }
        let mut pages = KVVec::with_capacity(n, GFP_KERNEL_ACCOUNT)?;
        for p in v.iter() {
            pages.push(NonNull::new(*p).ok_or(EINVAL)?, GFP_KERNEL_ACCOUNT)?;
        }
        // INVARIANT: the umem's pages, in order.
        u.pages = pages;
        Ok(u)
    }

    /// Page `i` of the pinned range.
    pub(crate) fn page(&self, i: usize) -> Option<PageRef<'_>> {
        // INVARIANT: pinned while `self` lives, for writing if `writable`
        // (type invariant).
        self.pages.get(i).map(|p| PageRef { page: *p, writable: self.writable, _p: PhantomData })
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: by the type invariant we own the pinned umem.
        unsafe { bindings::ib_umem_release(self.umem.as_ptr()) };
    }
}

/// The pages of an [`OdpUmem`] the data path may use: one entry per
/// `PAGE_SIZE` page of the umem's interval, a `struct page` pointer with
/// [`ODP_WRITABLE`] in bit 0, or 0 for a page that is not mapped.
struct OdpTable {
    /// `ib_umem_start`: the first address of the interval.
    start: u64,
    pages: KVVec<usize>,
    /// Entries that are not 0.
    present: usize,
}

/// [`OdpTable`] entry bit: the page may be written.
const ODP_WRITABLE: usize = 1;

impl OdpTable {
    /// The index of the page of user address `a`.
    fn index(&self, a: u64) -> Option<usize> {
        let i = usize::try_from(a.checked_sub(self.start)? / PAGE_SIZE as u64).ok()?;
        (i < self.pages.len()).then_some(i)
    }

    /// Forgets the pages of `[start, end)` (an invalidation).
    fn clear(&mut self, start: u64, end: u64) {
        let Some(first) = self.index(start) else { return };
        let last = self.index(end - 1).unwrap_or(self.pages.len() - 1);
        for e in self.pages.iter_mut().take(last + 1).skip(first) {
            if *e != 0 {
                self.present = self.present.saturating_sub(1);
            }
            *e = 0;
        }
    }
}

/// Why an [`OdpUmem`] access did not happen.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum OdpMiss {
    /// A page is not mapped (or not writable for a write): fault it in
    /// with [`OdpUmem::fault`] and retry.
    NotPresent,
    /// The range is outside the umem, or the visitor refused.
    Range,
}

/// User memory registered for on-demand paging (`ib_umem_odp`): nothing is
/// pinned.  [`OdpUmem::fault`] (process context) maps pages in with
/// `hmm_range_fault`; the data path then finds them in the table; the
/// umem's MMU interval notifier takes them out again before the kernel
/// unmaps, migrates or frees them, and waits for any data-path copy in
/// progress (the table's lock), so a page is never used after the process
/// lost it.
///
/// # Invariants
///
/// `odp` came from `ib_umem_odp_get` with [`ODP_OPS`] and is released only
/// by `Drop`, before `table`; `odp.private` is null or points to `table`
/// (set under `umem_mutex`).  A non-zero table entry is a page that
/// `hmm_range_fault` returned for that address under the notifier's
/// current sequence, entered under `umem_mutex`; the invalidation callback
/// clears entries (under the table's lock) before the pages can go.
pub(crate) struct OdpUmem {
    odp: NonNull<bindings::ib_umem_odp>,
    table: Pin<KBox<SpinLockBh<OdpTable>>>,
}

// SAFETY: the umem is used from any context through ib_core's API and the
// table's lock.
unsafe impl Send for OdpUmem {}
// SAFETY: as above; shared references only read under the lock.
unsafe impl Sync for OdpUmem {}

/// The notifier operations of every [`OdpUmem`].
static ODP_OPS: bindings::mmu_interval_notifier_ops =
    bindings::mmu_interval_notifier_ops { invalidate: Some(odp_invalidate) };

/// `mmu_interval_notifier_ops::invalidate`: the pages of `range` are going
/// away; forget them (waiting for the data path's copies) and unmap them.
///
/// # Safety
///
/// Called by the MMU notifier core with the `notifier` of a live
/// `ib_umem_odp` of an [`OdpUmem`].
unsafe extern "C" fn odp_invalidate(
    mni: *mut bindings::mmu_interval_notifier,
    range: *const bindings::mmu_notifier_range,
    cur_seq: kernel::ffi::c_ulong,
) -> bool {
    // SAFETY: `range` is the notifier core's, valid for the call.
    if !unsafe { ffi::rroce_mmu_notifier_range_blockable(range) } {
        return false;
    }
    // SAFETY: `mni` is the `notifier` field of an `ib_umem_odp`
    // (contract), live until the notifier is removed, which waits for this
    // callback.
    let odp = unsafe { ffi::rroce_umem_odp_of(mni) };
    // SAFETY: the umem is live (above); its mutex protects the DMA list,
    // the sequence and `private`.
    unsafe {
        let mutex = ffi::rroce_umem_odp_mutex(odp);
        ffi::rroce_mutex_lock(mutex);
        ffi::rroce_mmu_interval_set_seq(mni, cur_seq);
        let start = ffi::rroce_ib_umem_start(odp) as u64;
        let end = ffi::rroce_ib_umem_end(odp) as u64;
        let lo = start.max((*range).start as u64);
        let hi = end.min((*range).end as u64);
        if lo < hi {
            let table = (*ffi::rroce_umem_odp_private(odp)).cast::<SpinLockBh<OdpTable>>().cast_const();
            if !table.is_null() {
                // The table lives until the umem is released (type
                // invariant of `OdpUmem`), which is after this callback.
                (*table).lock().clear(lo, hi);
            }
            ffi::ib_umem_odp_unmap_dma_pages(odp, lo, hi);
        }
        bindings::mutex_unlock(mutex);
    }
    true
}

impl OdpUmem {
    /// Registers `len` bytes of the calling process's memory at `start` for
    /// on-demand paging on `dev` (`ib_umem_odp_get`: nothing is pinned or
    /// faulted in; with `IB_ACCESS_HUGETLB` the umem's pages are huge
    /// pages).
    pub(crate) fn get<T>(dev: &Device<T>, start: u64, len: u64, access: i32) -> Result<Self> {
        let size = usize::try_from(len).map_err(|_| EINVAL)?;
        // SAFETY: a live device; `ib_umem_odp_get` checks nothing of the
        // range but registers a notifier for it in the caller's mm.
        let raw = from_err_ptr(unsafe { ffi::ib_umem_odp_get(dev.as_raw(), start as _, size, access, &ODP_OPS) })?;
        Self::with_table(NonNull::new(raw).ok_or(ENOMEM)?)
    }

    /// Takes over `odp` (from `ib_umem_odp_get` or `ib_umem_odp_alloc_child`
    /// with [`ODP_OPS`]), giving it its page table; on failure `odp` is
    /// released.
    fn with_table(odp: NonNull<bindings::ib_umem_odp>) -> Result<Self> {
        let release = |e| {
            // SAFETY: ours, not shared with anything yet.
            unsafe { ffi::ib_umem_odp_release(odp.as_ptr()) };
            e
        };
        // SAFETY: the umem is live; the interval is set at creation.
        let (first, end) =
            unsafe { (ffi::rroce_ib_umem_start(odp.as_ptr()) as u64, ffi::rroce_ib_umem_end(odp.as_ptr()) as u64) };
        let n = usize::try_from(end.saturating_sub(first).div_ceil(PAGE_SIZE as u64)).map_err(|_| release(EINVAL))?;
        let mut pages = KVVec::with_capacity(n, GFP_KERNEL_ACCOUNT).map_err(|e| release(e.into()))?;
        pages.extend_with(n, 0, GFP_KERNEL_ACCOUNT).map_err(|e| release(e.into()))?;
        let table = KBox::pin_init(new_spinlock_bh!(OdpTable { start: first, pages, present: 0 }, "rroce_odp"), GFP_KERNEL_ACCOUNT)
            .map_err(release)?;
        let ptr: *const SpinLockBh<OdpTable> = &*table;
        // SAFETY: the umem is live; `private` is read under `umem_mutex`.
        unsafe {
            let mutex = ffi::rroce_umem_odp_mutex(odp.as_ptr());
            ffi::rroce_mutex_lock(mutex);
            *ffi::rroce_umem_odp_private(odp.as_ptr()) = ptr.cast_mut().cast();
            bindings::mutex_unlock(mutex);
        }
        // INVARIANT: `private` points to `table`, released in `Drop` first.
        Ok(OdpUmem { odp, table })
    }

    /// Maps the pages of `len` bytes at user address `va` in (`fault`:
    /// faulting them in as the process would, for writing if `write`;
    /// else only those already present) and enters them in the table.
    /// Process context: it may sleep.
    pub(crate) fn fault(&self, va: u64, len: u64, write: bool, fault: bool) -> Result {
        if len == 0 {
            return Ok(());
        }
        let mask = ffi::ODP_READ_ALLOWED_BIT | if write { ffi::ODP_WRITE_ALLOWED_BIT } else { 0 };
        let odp = self.odp.as_ptr();
        // SAFETY: the umem is live (type invariant); the call checks the
        // range, sleeps to fault, and returns with `umem_mutex` held on
        // success.
        let r = unsafe { ffi::ib_umem_odp_map_dma_and_lock(odp, va, len, mask, fault) };
        if r < 0 {
            return Err(Error::from_errno(r));
        }
        // SAFETY: `umem_mutex` is held: `pfn_list` is stable and valid for
        // the range just mapped (the notifier's sequence was checked under
        // the mutex), which is the range `hmm_range_fault` filled, aligned
        // to the umem's page size, one entry per PAGE_SIZE page.
        unsafe {
            let shift = ffi::rroce_umem_odp_page_shift(odp);
            let ps = 1u64 << shift;
            let lo = va & !(ps - 1);
            let hi = va.saturating_add(len).div_ceil(ps).saturating_mul(ps);
            let pfns = ffi::rroce_umem_odp_pfns(odp);
            let mut t = self.table.lock();
            let mut a = lo;
            while a < hi {
                if let Some(i) = t.index(a) {
                    let pfn = *pfns.add(i);
                    if pfn & ffi::HMM_PFN_VALID != 0 {
                        let page = ffi::rroce_hmm_pfn_to_page(pfn);
                        let w = if pfn & ffi::HMM_PFN_WRITE != 0 { ODP_WRITABLE } else { 0 };
                        if let Some(e) = t.pages.get_mut(i) {
                            let was = *e;
                            // INVARIANT: a page hmm returned for `a` under
                            // the current sequence, entered under the mutex.
                            *e = page as usize | w;
                            if was == 0 {
                                t.present = t.present.saturating_add(1);
                            }
                        }
                    }
                }
                a += PAGE_SIZE as u64;
            }
            drop(t);
            bindings::mutex_unlock(ffi::rroce_umem_odp_mutex(odp));
        }
        Ok(())
    }

    /// Whether no page is in the table (none mapped yet, or all taken
    /// out again by invalidations).
    fn is_unused(&self) -> bool {
        self.table.lock().present == 0
    }

    /// Visits the pages backing `len` bytes at user address `va`:
    /// `f(page, offset in page, offset in the range, length)`, all under
    /// the table's lock (an invalidation waits).  [`OdpMiss::NotPresent`]
    /// if a page is not mapped (or not writable, for `write`): the visits
    /// before it happened.
    pub(crate) fn walk(
        &self,
        va: u64,
        len: u32,
        write: bool,
        mut f: impl FnMut(PageRef<'_>, u32, usize, u32) -> bool,
    ) -> Result<(), OdpMiss> {
        let t = self.table.lock();
        let ps = PAGE_SIZE as u64;
        let mut done = 0u32;
        while done < len {
            let a = va.checked_add(u64::from(done)).ok_or(OdpMiss::Range)?;
            let i = t.index(a).ok_or(OdpMiss::Range)?;
            let e = *t.pages.get(i).ok_or(OdpMiss::Range)?;
            if e == 0 || (write && e & ODP_WRITABLE == 0) {
                return Err(OdpMiss::NotPresent);
            }
            let page = NonNull::new((e & !ODP_WRITABLE) as *mut bindings::page).ok_or(OdpMiss::NotPresent)?;
            let in_page = (a % ps) as u32;
            let n = (len - done).min(ps as u32 - in_page);
            // INVARIANT: the page stays while the lock is held (the
            // invalidation clears the entry under it before the page goes),
            // and was mapped for writing if its entry says so.
            let page = PageRef { page, writable: e & ODP_WRITABLE != 0, _p: PhantomData };
            if !f(page, in_page, done as usize, n) {
                return Err(OdpMiss::Range);
            }
            done += n;
        }
        Ok(())
    }
}

/// Bytes of the address space behind one child of an [`ImplicitOdp`].
const CHUNK_SHIFT: u32 = 21;

/// The most children an [`ImplicitOdp`] keeps with pages mapped (16 GiB
/// of address space touched in 2 MiB chunks).  Each costs ib_core ~8.5 KiB
/// that it does not charge to a memory cgroup (the `ib_umem_odp` and its
/// two page lists), beside our 4 KiB table, which is charged.  Children
/// whose pages are all gone (the process unmapped them) are dropped when
/// the limit is reached; beyond it a fault fails with `ENOMEM`.
const MAX_CHILDREN: usize = 1 << 13;

/// One child of an [`ImplicitOdp`]: the chunk at `chunk << CHUNK_SHIFT`.
struct Child {
    chunk: u64,
    umem: Arc<OdpUmem>,
}

/// An implicit on-demand paging region: the whole address space of the
/// process that registered it (`ib_umem_odp_alloc_implicit`).  Its pages
/// are found in children, [`OdpUmem`]s of `1 << CHUNK_SHIFT` bytes each
/// (`ib_umem_odp_alloc_child`), made by [`ImplicitOdp::fault`] for the
/// chunks the device touches and kept until the region goes or, once
/// there are [`MAX_CHILDREN`], until their pages are all gone.
///
/// # Invariants
///
/// `root` came from `ib_umem_odp_alloc_implicit` and is released only by
/// `Drop`, after the children; `children` is sorted by chunk, one child
/// per chunk.
pub(crate) struct ImplicitOdp {
    root: NonNull<bindings::ib_umem_odp>,
    children: Pin<KBox<SpinLockBh<KVec<Child>>>>,
}

// SAFETY: the root umem is only passed to ib_core, from any context.
unsafe impl Send for ImplicitOdp {}
// SAFETY: as above; the children are behind their lock.
unsafe impl Sync for ImplicitOdp {}

impl ImplicitOdp {
    /// An implicit region over the calling process's address space with
    /// `IB_ACCESS_*` flags `access`.
    pub(crate) fn get<T>(dev: &Device<T>, access: i32) -> Result<Self> {
        let children = KBox::pin_init(new_spinlock_bh!(KVec::new(), "rroce_odp_children"), GFP_KERNEL_ACCOUNT)?;
        // SAFETY: a live device; the umem records the caller's mm.
        let raw = from_err_ptr(unsafe { ffi::ib_umem_odp_alloc_implicit(dev.as_raw(), access) })?;
        let root = NonNull::new(raw).ok_or(ENOMEM)?;
        // INVARIANT: no children yet.
        Ok(ImplicitOdp { root, children })
    }

    /// One past the highest address an implicit region covers: the end
    /// of user space (`TASK_SIZE_MAX`).  Addresses above it are the
    /// kernel's, which no process maps.
    pub(crate) fn limit() -> u64 {
        // SAFETY: reads a constant (or the paging mode fixed at boot).
        (unsafe { ffi::rroce_task_size_max() }) as u64
    }

    /// The chunks of `len` bytes at `va`, each as (chunk, address, bytes);
    /// `None` if the range is not all below [`ImplicitOdp::limit`].
    fn chunks(va: u64, len: u64) -> Option<impl Iterator<Item = (u64, u64, u64)>> {
        let end = va.checked_add(len).filter(|&e| e <= Self::limit())?;
        let mut a = va;
        Some(core::iter::from_fn(move || {
            if a >= end {
                return None;
            }
            let chunk = a >> CHUNK_SHIFT;
            // (No overflow: `end` is far below 2^64.)
            let chunk_end = chunk.checked_add(1)?.checked_mul(1 << CHUNK_SHIFT)?.min(end);
            let item = (chunk, a, chunk_end - a);
            a = chunk_end;
            Some(item)
        }))
    }

    /// The child for `chunk`, if made.
    fn child(&self, chunk: u64) -> Option<Arc<OdpUmem>> {
        let v = self.children.lock();
        let i = v.binary_search_by_key(&chunk, |c| c.chunk).ok()?;
        v.get(i).map(|c| c.umem.clone())
    }

    /// [`OdpUmem::walk`] across the children.  In atomic context, call it
    /// inside an RCU read-side section (bottom halves off count as one):
    /// a child it holds is then never released by it
    /// ([`ImplicitOdp::drop_unused`] waits for a grace period).
    pub(crate) fn walk(
        &self,
        va: u64,
        len: u32,
        write: bool,
        mut f: impl FnMut(PageRef<'_>, u32, usize, u32) -> bool,
    ) -> Result<(), OdpMiss> {
        let mut done = 0usize;
        for (chunk, a, n) in Self::chunks(va, len.into()).ok_or(OdpMiss::Range)? {
            // (`n` is at most `len`.)
            let n = u32::try_from(n).map_err(|_| OdpMiss::Range)?;
            let c = self.child(chunk).ok_or(OdpMiss::NotPresent)?;
            let base = done;
            c.walk(a, n, write, |p, off, at, m| f(p, off, base + at, m))?;
            done += n as usize;
        }
        Ok(())
    }

    /// [`OdpUmem::fault`] across the children, making those missing.
    /// Process context: it may sleep.
    pub(crate) fn fault(&self, va: u64, len: u64, write: bool, fault: bool) -> Result {
        for (chunk, a, n) in Self::chunks(va, len).ok_or(EINVAL)? {
            match self.child(chunk) {
                Some(c) => c.fault(a, n, write, fault)?,
                None => self.add_child(chunk, a, n, write, fault)?,
            }
        }
        Ok(())
    }

    /// Makes the child for `chunk` and faults `len` bytes at `va` in
    /// through it; only a child whose fault succeeded joins the table (a
    /// peer probing addresses the process has not mapped leaves nothing
    /// behind).  If another fault made the chunk's child meanwhile, that
    /// one stays.
    fn add_child(&self, chunk: u64, va: u64, len: u64, write: bool, fault: bool) -> Result {
        if self.children.lock().len() >= MAX_CHILDREN && self.drop_unused()? >= MAX_CHILDREN {
            return Err(ENOMEM);
        }
        let start = chunk.checked_shl(CHUNK_SHIFT).ok_or(EINVAL)?;
        // SAFETY: the root is live (type invariant) and implicit; the child
        // is registered in the root's mm.
        let raw = from_err_ptr(unsafe {
            ffi::ib_umem_odp_alloc_child(self.root.as_ptr(), start as _, 1 << CHUNK_SHIFT, &ODP_OPS)
        })?;
        let odp = NonNull::new(raw).ok_or(ENOMEM)?;
        let new = Arc::new(OdpUmem::with_table(odp)?, GFP_KERNEL_ACCOUNT)?;
        new.fault(va, len, write, fault)?;
        if new.is_unused() {
            // A prefetch without faulting over pages the process has not
            // mapped: nothing to keep.
            return Ok(());
        }
        // The table grows outside its lock (an accounted allocation may
        // sleep); the old one, and a child that lost a race, go after it.
        let mut old = KVec::new();
        let lost = loop {
            let len = {
                let mut v = self.children.lock();
                let pos = match v.binary_search_by_key(&chunk, |c| c.chunk) {
                    Ok(i) => break v.get(i).map(|c| c.umem.clone()),
                    Err(pos) => pos,
                };
                if v.len() < v.capacity() {
                    // No allocation: there is room.
                    v.push(Child { chunk, umem: new.clone() }, GFP_ATOMIC)?;
                    // INVARIANT: moved to its place, the table is sorted
                    // again, one child per chunk.
                    let mut i = v.len() - 1;
                    while i > pos {
                        v.swap(i - 1, i);
                        i -= 1;
                    }
                    break None;
                }
                if old.capacity() > v.len() {
                    // Move everything to the bigger table made below.
                    core::mem::swap(&mut *v, &mut old);
                    for c in old.iter() {
                        v.push(Child { chunk: c.chunk, umem: c.umem.clone() }, GFP_ATOMIC)?;
                    }
                    continue;
                }
                v.len()
            };
            old = KVec::with_capacity(len * 2 + 8, GFP_KERNEL_ACCOUNT)?;
        };
        drop(old);
        // Releasing a child sleeps: outside the lock.  The chunk's other
        // child has its own pages: fault them in there.
        drop(new);
        match lost {
            Some(theirs) => theirs.fault(va, len, write, fault),
            None => Ok(()),
        }
    }
}

impl ImplicitOdp {
    /// Drops the children whose pages are all gone; returns how many are
    /// left.  Process context (releasing a child sleeps; it waits for a
    /// grace period first, so that no walker in atomic context holds the
    /// last reference).  A fault in progress in a dropped child goes on in
    /// it; the next walk misses the chunk and makes a new child.
    fn drop_unused(&self) -> Result<usize> {
        let n = self.children.lock().len();
        let mut old = KVec::with_capacity(n, GFP_KERNEL_ACCOUNT)?;
        let left = {
            let mut v = self.children.lock();
            if v.len() > old.capacity() {
                // It grew meanwhile: no room to swap; try again next time.
                return Ok(v.len());
            }
            // `old` takes the table, and the table (with room for all of
            // them) gets back the children in use, still sorted.
            core::mem::swap(&mut *v, &mut old);
            for c in old.iter() {
                if !c.umem.is_unused() {
                    v.push(Child { chunk: c.chunk, umem: c.umem.clone() }, GFP_ATOMIC)?;
                }
            }
            v.len()
        };
        // A walker (softirq, or under a `_bh` lock: an RCU read-side
        // section either way) may still hold a reference it took before
        // the swap; after a grace period ours are the last, and the
        // children dropped are released here, in process context.
        crate::sync::rcu::synchronize();
        drop(old);
        Ok(left)
    }
}

impl Drop for ImplicitOdp {
    fn drop(&mut self) {
        // The children first (each releases its own umem), then the root.
        let children = core::mem::take(&mut *self.children.lock());
        drop(children);
        // SAFETY: by the type invariant we own the root umem.
        unsafe { ffi::ib_umem_odp_release(self.root.as_ptr()) };
    }
}

/// The memory of an on-demand paging region.
pub(crate) enum OdpMem {
    /// A range of user memory.
    Explicit(OdpUmem),
    /// The whole address space.
    Implicit(ImplicitOdp),
}

impl OdpMem {
    /// See [`OdpUmem::walk`].
    pub(crate) fn walk(
        &self,
        va: u64,
        len: u32,
        write: bool,
        f: impl FnMut(PageRef<'_>, u32, usize, u32) -> bool,
    ) -> Result<(), OdpMiss> {
        match self {
            OdpMem::Explicit(u) => u.walk(va, len, write, f),
            OdpMem::Implicit(u) => u.walk(va, len, write, f),
        }
    }

    /// See [`OdpUmem::fault`].
    pub(crate) fn fault(&self, va: u64, len: u64, write: bool, fault: bool) -> Result {
        match self {
            OdpMem::Explicit(u) => u.fault(va, len, write, fault),
            OdpMem::Implicit(u) => u.fault(va, len, write, fault),
        }
    }
}

impl Drop for OdpUmem {
    fn drop(&mut self) {
        // SAFETY: by the type invariant we own the umem; releasing it
        // removes the notifier (waiting for a callback in progress) before
        // `table` goes.
        unsafe { ffi::ib_umem_odp_release(self.odp.as_ptr()) };
    }
}
