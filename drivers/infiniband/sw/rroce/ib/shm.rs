// SPDX-License-Identifier: GPL-2.0
//! Kernel memory shared with user space: the mapped queue rings.
//!
//! C header: [`include/linux/vmalloc.h`](srctree/include/linux/vmalloc.h)
//!
//! A [`SharedBuf`] is a zeroed `vmalloc_user` area that user space maps
//! through `rdma_user_mmap_entry`.  User space may write any byte of it at
//! any time, so the driver never forms references into it: it copies bytes
//! out and in, and reads or publishes ring indices with acquire/release
//! atomics, through the [`SharedRegion`] interface the safe ring logic uses.
//! Pages inserted into a user mapping hold their own reference, so freeing
//! the area while a process still maps it leaves that process with private
//! stale pages, never kernel memory it could corrupt.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use kernel::bindings;
use kernel::error::to_result;
use kernel::prelude::*;

use crate::ffi;

use crate::proto::ring::SharedRegion;

/// A `vmalloc_user` buffer.
///
/// # Invariants
///
/// `ptr` points to a zero-initialised, page-aligned `vmalloc_user` area of
/// `len` bytes owned by this object and freed on drop.
pub(crate) struct SharedBuf {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the area is plain kernel memory; all access goes through atomics
// or byte copies whose races are tolerated by design (see module docs).
unsafe impl Send for SharedBuf {}
// SAFETY: as above.
unsafe impl Sync for SharedBuf {}

impl SharedBuf {
    /// Allocates `len` bytes (rounded up to whole pages by vmalloc).
    pub(crate) fn new(len: usize) -> Result<Self> {
        let ptr = alloc_charged(len)?;
        // INVARIANT: freshly allocated above.
        Ok(Self { ptr, len })
    }

    /// Maps the whole area into `vma` (whose length ib_core checked
    /// against the area's, page-rounded), page by page: what
    /// `remap_vmalloc_range` does, which only takes `vmalloc_user` areas
    /// (those cannot be charged to a memory cgroup).
    ///
    /// # Safety
    ///
    /// `vma` is a VMA being set up by `mmap` (mmap lock held for writing).
    pub(crate) unsafe fn map_into(&self, vma: *mut bindings::vm_area_struct) -> Result {
        // SAFETY: per the requirements.
        let (start, end) = unsafe { ((*vma).__bindgen_anon_1.__bindgen_anon_1.vm_start, (*vma).__bindgen_anon_1.__bindgen_anon_1.vm_end) };
        let page = bindings::PAGE_SIZE;
        let pages = self.len.div_ceil(page);
        if (end - start).div_ceil(page) > pages {
            return Err(EINVAL);
        }
        // SAFETY: as above.
        unsafe { ffi::rroce_vma_set_io_flags(vma) };
        let mut off = 0;
        while off < end - start {
            // SAFETY: `off` is inside the area (checked above).
            let pg = unsafe { bindings::vmalloc_to_page(self.ptr.as_ptr().add(off).cast()) };
            // SAFETY: a page of our vmalloc area (refcounted: the mapping
            // takes its own reference) inserted into a VMA being set up.
            to_result(unsafe { bindings::vm_insert_page(vma, start + off, pg) })?;
            off += page;
        }
        Ok(())
    }

    /// The byte range `[off, off + n)` if it lies inside the buffer.
    fn span(&self, off: usize, n: usize) -> Option<*mut u8> {
        let end = off.checked_add(n)?;
        if end > self.len {
            return None;
        }
        // SAFETY: `off + n <= len`, so the result stays inside the area.
        Some(unsafe { self.ptr.as_ptr().add(off) })
    }

    fn atomic_at(&self, off: usize) -> Option<&AtomicU32> {
        if off % 4 != 0 {
            return None;
        }
        let p = self.span(off, 4)?;
        // SAFETY: in bounds and 4-byte aligned (the area is page aligned);
        // the memory lives as long as `self`, and every access to these
        // words, ours and user space's, is atomic or tolerates tearing.
        Some(unsafe { AtomicU32::from_ptr(p.cast::<u32>()) })
    }
}

impl SharedRegion for SharedBuf {
    fn len(&self) -> usize {
        self.len
    }

    fn load_u32_acquire(&self, off: usize) -> Option<u32> {
        Some(self.atomic_at(off)?.load(Ordering::Acquire))
    }

    fn store_u32_release(&self, off: usize, v: u32) -> bool {
        self.atomic_at(off).map(|a| a.store(v, Ordering::Release)).is_some()
    }

    fn read(&self, off: usize, dst: &mut [u8]) -> bool {
        let Some(src) = self.span(off, dst.len()) else {
            return false;
        };
        // User space may store to these bytes while we read them: the copy
        // goes through relaxed atomic loads (aligned words, bytes at the
        // edges), so the race is defined; a torn copy is what callers
        // validate anyway.
        let mut i = 0;
        while let Some(rest) = dst.get_mut(i..) {
            let p = src.wrapping_add(i);
            if let (true, Some(word)) = (p as usize % 8 == 0, rest.first_chunk_mut::<8>()) {
                // SAFETY: `p` is 8-byte aligned and inside the span (which
                // holds `rest.len() >= 8` more bytes); the area is only
                // ever accessed atomically or by user space.
                *word = unsafe { AtomicU64::from_ptr(p.cast::<u64>()) }.load(Ordering::Relaxed).to_ne_bytes();
                i += 8;
            } else if let Some(b) = rest.first_mut() {
                // SAFETY: `p` is inside the span; see above.
                *b = unsafe { AtomicU8::from_ptr(p) }.load(Ordering::Relaxed);
                i += 1;
            } else {
                break;
            }
        }
        true
    }

    fn write(&self, off: usize, src: &[u8]) -> bool {
        let Some(dst) = self.span(off, src.len()) else {
            return false;
        };
        // As in `read`: relaxed atomic stores, because user space may
        // access the same bytes concurrently.
        let mut i = 0;
        while let Some(rest) = src.get(i..) {
            let p = dst.wrapping_add(i);
            if let (true, Some(word)) = (p as usize % 8 == 0, rest.first_chunk::<8>()) {
                // SAFETY: `p` is 8-byte aligned and inside the span; the
                // area is only ever accessed atomically or by user space.
                unsafe { AtomicU64::from_ptr(p.cast::<u64>()) }.store(u64::from_ne_bytes(*word), Ordering::Relaxed);
                i += 8;
            } else if let Some(&b) = rest.first() {
                // SAFETY: `p` is inside the span; see above.
                unsafe { AtomicU8::from_ptr(p) }.store(b, Ordering::Relaxed);
                i += 1;
            } else {
                break;
            }
        }
        true
    }
}

/// A zeroed vmalloc area of `len` bytes (`len > 0`), charged to the
/// caller's memory cgroup: a charge over its limit fails with `ENOMEM`
/// instead of invoking the OOM killer, so a process at its limit gets an
/// errno from the verb.
fn alloc_charged(len: usize) -> Result<NonNull<u8>> {
    if len == 0 {
        return Err(EINVAL);
    }
    // (`__GFP_RETRY_MAYFAIL` is a macro over an enum bindgen names only by
    // its bit.)
    let retry_mayfail: bindings::gfp_t = 1 << bindings::___GFP_RETRY_MAYFAIL_BIT;
    let gfp = bindings::GFP_KERNEL_ACCOUNT | bindings::__GFP_ZERO | retry_mayfail | bindings::__GFP_NOWARN;
    // SAFETY: plain allocation; the result is zeroed and page aligned.
    let p = unsafe { bindings::__vmalloc_noprof(len as _, gfp) };
    NonNull::new(p.cast::<u8>()).ok_or(ENOMEM)
}

/// A private array of `len` `T`s in an [`alloc_charged`] area: the large
/// per-queue kernel state that grows with the queue depth (the SQ shadow,
/// the requester's slots), charged like the rings themselves.
///
/// # Invariants
///
/// `ptr` is a vmalloc area of at least `len * size_of::<T>()` bytes owned
/// by this value, with every element initialised.
pub(crate) struct PrivVec<T: Copy> {
    ptr: NonNull<T>,
    len: usize,
}

// SAFETY: owns plain memory holding `T`s.
unsafe impl<T: Copy + Send> Send for PrivVec<T> {}
// SAFETY: as above; shared access is read-only.
unsafe impl<T: Copy + Sync> Sync for PrivVec<T> {}

impl<T: Copy> PrivVec<T> {
    /// `len` copies of `value` (`len > 0`, `T` not zero-sized).
    pub(crate) fn new(len: usize, value: T) -> Result<Self> {
        let bytes = len.checked_mul(core::mem::size_of::<T>()).ok_or(EINVAL)?;
        let ptr = alloc_charged(bytes)?.cast::<T>();
        for i in 0..len {
            // SAFETY: in bounds of the fresh area, which is page aligned
            // (so aligned for `T`); `T: Copy` has no drop.
            unsafe { ptr.as_ptr().add(i).write(value) };
        }
        // INVARIANT: allocated and initialised above.
        Ok(Self { ptr, len })
    }
}

impl<T: Copy> core::ops::Deref for PrivVec<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: by the type invariant, `len` initialised elements we own.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> core::ops::DerefMut for PrivVec<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as above, borrowed uniquely through `self`.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> Drop for PrivVec<T> {
    fn drop(&mut self) {
        // SAFETY: by the type invariant we own the area.
        unsafe { bindings::vfree(self.ptr.as_ptr().cast()) };
    }
}

impl Drop for SharedBuf {
    fn drop(&mut self) {
        // SAFETY: by the type invariant we own the area.
        unsafe { bindings::vfree(self.ptr.as_ptr().cast()) };
    }
}
