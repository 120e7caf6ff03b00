// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Rings mapped from the kernel: `mmap(NULL, len, PROT_READ | PROT_WRITE,
//! MAP_SHARED, cmd_fd, offset)` as `rroce_proto::abi` describes it.
//!
//! The mapping is only ever touched through [`AtomicRegion`], i.e. as a
//! slice of `AtomicU32`: the kernel changes it at any time, so no `&[u8]`
//! into it is ever formed, and every access is bounds-checked by the ring
//! code.  The region handed out covers exactly `RingLayout::bytes_total()`
//! bytes, which the caller has checked to be no more than the mapped length.

use core::ffi::{c_int, c_void};
use core::ptr::{self, NonNull};
use core::sync::atomic::AtomicU32;

use rroce_proto::ring::{AtomicRegion, RingLayout};

use crate::ffi::{mmap, munmap, EPROTO, MAP_FAILED, MAP_SHARED, PROT_READ, PROT_WRITE};

/// One ring mapped from the uverbs command fd; unmapped on drop.
#[derive(Debug)]
pub(crate) struct RingMap {
    base: NonNull<AtomicU32>,
    map_len: usize,
    layout: RingLayout,
}

// SAFETY: the mapping is process-wide memory that stays valid until `drop`
// (which needs ownership) and is only accessed through atomics, so moving
// the owner to another thread is fine.
unsafe impl Send for RingMap {}

impl RingMap {
    /// Maps `map_len` bytes at `offset` of `cmd_fd` for a ring of `layout`.
    ///
    /// Fails with `EPROTO` if the kernel's numbers cannot describe a valid
    /// mapping (`map_len` smaller than the layout, offset beyond `off_t`),
    /// or with mmap's errno.
    pub(crate) fn map(
        cmd_fd: c_int,
        offset: u64,
        map_len: u32,
        layout: RingLayout,
    ) -> Result<Self, c_int> {
        let off = i64::try_from(offset).map_err(|_| EPROTO)?;
        let map_len = usize::try_from(map_len).map_err(|_| EPROTO)?;
        if map_len < layout.bytes_total() || layout.bytes_total() == 0 {
            return Err(EPROTO);
        }
        // SAFETY: a fresh shared mapping chosen by the kernel (addr NULL);
        // it does not alias any Rust object.
        let p = unsafe {
            mmap(
                ptr::null_mut(),
                map_len,
                PROT_READ | PROT_WRITE,
                MAP_SHARED,
                cmd_fd,
                off,
            )
        };
        if p == MAP_FAILED || p.is_null() {
            return Err(crate::last_errno());
        }
        let Some(base) = NonNull::new(p.cast::<AtomicU32>()) else {
            return Err(EPROTO);
        };
        let map = Self {
            base,
            map_len,
            layout,
        };
        // mmap returns page-aligned addresses; anything else (an
        // interposed mmap, say) cannot be viewed as AtomicU32s.
        if !base
            .as_ptr()
            .addr()
            .is_multiple_of(core::mem::align_of::<AtomicU32>())
        {
            return Err(EPROTO);
        }
        Ok(map)
    }

    /// An anonymous shared mapping with zeroed indices, for unit tests that
    /// play the kernel's side of a ring.
    #[cfg(test)]
    pub(crate) fn anonymous(layout: RingLayout) -> Self {
        const MAP_ANONYMOUS: c_int = 0x20;
        let len = layout.bytes_total();
        // SAFETY: a fresh anonymous mapping aliases nothing.
        let p = unsafe {
            mmap(
                ptr::null_mut(),
                len,
                PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert!(p != MAP_FAILED);
        Self {
            base: NonNull::new(p.cast()).unwrap(),
            map_len: len,
            layout,
        }
    }

    /// The ring geometry this mapping was made for.
    pub(crate) const fn layout(&self) -> &RingLayout {
        &self.layout
    }

    /// The ring as a bounds-checked shared region of `bytes_total()` bytes.
    pub(crate) fn region(&self) -> AtomicRegion<'_> {
        let words = self.layout.bytes_total() / 4;
        // SAFETY: `base` is 4-byte aligned (checked in `map`) and points to
        // `map_len >= bytes_total()` bytes of readable and writable memory
        // that stay mapped while `self` lives (the slice borrows `self`).
        // `AtomicU32` has the size and alignment of `u32`, every bit pattern
        // is valid, and it permits concurrent modification by the kernel,
        // which only writes whole aligned words or bytes of the ring.
        let slice = unsafe { core::slice::from_raw_parts(self.base.as_ptr().cast_const(), words) };
        AtomicRegion::new(slice)
    }
}

impl Drop for RingMap {
    fn drop(&mut self) {
        // SAFETY: `base`/`map_len` describe the mapping made in `map`; no
        // region borrowed from `self` outlives this call.
        let _ = unsafe { munmap(self.base.as_ptr().cast::<c_void>(), self.map_len) };
    }
}
