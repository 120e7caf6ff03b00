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
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::bindings;
use kernel::prelude::*;

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
        if len == 0 {
            return Err(EINVAL);
        }
        // SAFETY: plain allocation; the result is zeroed and page aligned.
        let p = unsafe { bindings::vmalloc_user_noprof(len as _) };
        let ptr = NonNull::new(p.cast::<u8>()).ok_or(ENOMEM)?;
        // INVARIANT: freshly allocated above.
        Ok(Self { ptr, len })
    }

    /// The kernel address, for `remap_vmalloc_range`.
    pub(crate) fn kaddr(&self) -> *mut kernel::ffi::c_void {
        self.ptr.as_ptr().cast()
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
        // SAFETY: `src` is valid for `dst.len()` bytes; `dst` is our own
        // buffer and cannot overlap the vmalloc area.  Concurrent user
        // writes may tear the copy, which callers validate.
        unsafe { core::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len()) };
        true
    }

    fn write(&self, off: usize, src: &[u8]) -> bool {
        let Some(dst) = self.span(off, src.len()) else {
            return false;
        };
        // SAFETY: `dst` is valid for `src.len()` bytes and does not overlap
        // `src`.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) };
        true
    }
}

impl Drop for SharedBuf {
    fn drop(&mut self) {
        // SAFETY: by the type invariant we own the area.
        unsafe { bindings::vfree(self.ptr.as_ptr().cast()) };
    }
}
