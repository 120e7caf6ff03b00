// SPDX-License-Identifier: GPL-2.0
//! Memory the driver reads and writes for the data path: pinned user
//! memory (`ib_umem`) and pages of the kernel's direct map.
//!
//! C header: [`include/rdma/ib_umem.h`](srctree/include/rdma/ib_umem.h)
//!
//! A [`PageRef`] is a page that stays allocated for as long as the
//! reference: one of an [`Umem`]'s pinned pages, borrowed from it, or a
//! direct-map page of kernel memory that a kernel consumer registered
//! (verbs consumers keep registered memory valid until they deregister
//! it, and the driver stops using a region before deregistration
//! returns).  Bytes are copied in and out by the kernel's `memcpy` under
//! `kmap_local_page`: user space may change them at any time, so no Rust
//! reference to page contents is ever formed.

use core::marker::PhantomData;
use core::ptr::NonNull;
use kernel::bindings;
use kernel::error::from_err_ptr;
use kernel::prelude::*;

use crate::ffi;
use crate::proto::rc::AtomicOp;
use crate::ib::device::Device;

const PAGE_SIZE: usize = bindings::PAGE_SIZE;

/// A page that stays allocated for `'a`.
///
/// # Invariants
///
/// `self.0` is a valid `struct page` that is not freed while `'a` lasts.
#[derive(Clone, Copy)]
pub(crate) struct PageRef<'a>(NonNull<bindings::page>, PhantomData<&'a bindings::page>);

impl PageRef<'_> {
    /// Copies `dst.len()` bytes at offset `off` of the page into `dst`;
    /// `false` if that range is not inside the page.
    pub(crate) fn read(&self, off: u32, dst: &mut [u8]) -> bool {
        let Ok(len) = u32::try_from(dst.len()) else { return false };
        if (off as usize).saturating_add(dst.len()) > PAGE_SIZE {
            return false;
        }
        // SAFETY: the page is valid (type invariant) and the range inside
        // it; `dst` is writable for `len` bytes.
        unsafe { ffi::rroce_page_copy(self.0.as_ptr(), off, dst.as_mut_ptr().cast(), len, false) };
        true
    }

    /// Copies `src` to offset `off` of the page; `false` if that range is
    /// not inside the page.
    pub(crate) fn write(&self, off: u32, src: &[u8]) -> bool {
        let Ok(len) = u32::try_from(src.len()) else { return false };
        if (off as usize).saturating_add(src.len()) > PAGE_SIZE {
            return false;
        }
        // SAFETY: as in `read`; the helper only reads `src` when copying to
        // the page.
        unsafe { ffi::rroce_page_copy(self.0.as_ptr(), off, src.as_ptr().cast_mut().cast(), len, true) };
        true
    }

    /// An 8-byte atomic `op` at offset `off` of the page: compare-and-swap,
    /// fetch-and-add or ATOMIC WRITE (one 8-byte store of the value),
    /// atomic with respect to every other one of the module (one lock).
    /// The original value; `None` if the word is not inside the page.  The
    /// target address is 8-byte aligned in the region's I/O address space
    /// (the caller checks); its offset in the page need not be (a region
    /// may start anywhere in a page).
    pub(crate) fn atomic(&self, off: u32, op: AtomicOp) -> Option<u64> {
        if off as usize + 8 > PAGE_SIZE {
            return None;
        }
        let (code, a, b) = match op {
            AtomicOp::FetchAdd { add } => (ffi::RROCE_ATOMIC_ADD, add, 0),
            AtomicOp::CompareSwap { compare, swap } => (ffi::RROCE_ATOMIC_CAS, compare, swap),
            AtomicOp::Write { value } => (ffi::RROCE_ATOMIC_WRITE, value, 0),
        };
        // SAFETY: the page is valid and the word inside it.
        Some(unsafe { ffi::rroce_page_atomic(self.0.as_ptr(), off, code, a, b) })
    }
}

/// The page of `kva` if it is an address of the kernel's direct map
/// (`virt_addr_valid`), else `None`: the memory of DMA MRs and of
/// fast-registered page lists, which kernel consumers keep valid while it
/// is registered.
pub(crate) fn direct_map_page(kva: u64) -> Option<PageRef<'static>> {
    // SAFETY: only computes the page of a direct-map address after
    // checking that it is one; no memory is accessed.
    let page = unsafe { ffi::rroce_virt_to_page(kva) };
    // INVARIANT: a page of the direct map; the consumer keeps it allocated
    // while registered (see the module documentation).
    NonNull::new(page).map(|p| PageRef(p, PhantomData))
}

/// Pinned user memory, released on drop.
///
/// # Invariants
///
/// `umem` came from `ib_umem_get` and is released only by `Drop`; `pages`
/// are its pages in order, pinned until then.
pub(crate) struct Umem {
    umem: NonNull<bindings::ib_umem>,
    pages: KVVec<NonNull<bindings::page>>,
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
        let mut u = Umem { umem, pages: KVVec::new() };
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
        // INVARIANT: pinned while `self` lives (type invariant).
        self.pages.get(i).map(|p| PageRef(*p, PhantomData))
    }
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: by the type invariant we own the pinned umem.
        unsafe { bindings::ib_umem_release(self.umem.as_ptr()) };
    }
}
