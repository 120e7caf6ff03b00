// SPDX-License-Identifier: GPL-2.0
//! CRC-32 for the ICRC: the kernel's table loop and the crypto API's
//! `crc32`.
//!
//! C header: [`include/linux/crc32.h`](srctree/include/linux/crc32.h),
//! [`include/crypto/hash.h`](srctree/include/crypto/hash.h)
//!
//! Both advance a raw, reflected CRC-32/IEEE register with no inversion on
//! entry or exit (`crc32_le`'s convention, which `proto::icrc` builds on).
//! On x86, `crc32_le` is a slice-by-8 table loop, while the crypto API's
//! `crc32` resolves to the fastest registered driver: `crc32-pclmul`
//! (carry-less multiplication, several times faster than the table on a
//! real CPU or under KVM, but slower under QEMU's TCG, which emulates
//! PCLMULQDQ bit by bit) or `crc32-generic` (the table behind an indirect
//! call).  Which is faster depends on where the kernel runs, so the driver
//! times both.

use core::ptr::NonNull;
use kernel::bindings;
use kernel::str::CStr;

use crate::ffi;

/// The kernel's `crc32_le` (the table), in any context.
pub(crate) fn crc32_le(crc: u32, data: &[u8]) -> u32 {
    // SAFETY: reads `data.len()` bytes of a valid slice.
    unsafe { bindings::crc32_le(crc, data.as_ptr(), data.len()) }
}

/// A `crc32` transform of the crypto API.
///
/// # Invariants
///
/// `self.0` comes from `rroce_crc32_tfm_alloc` (so its descriptor state is
/// the bare CRC register), is owned by this object and freed on drop.
pub(crate) struct CryptoCrc32(NonNull<ffi::CryptoShash>);

// SAFETY: a transform holds no per-computation state (each call has its own
// descriptor on the stack) and may be freed from any thread.
unsafe impl Send for CryptoCrc32 {}
// SAFETY: as above: concurrent computations with one transform only read it.
unsafe impl Sync for CryptoCrc32 {}

impl CryptoCrc32 {
    /// Allocates a transform (may sleep).  `None` if the crypto API has no
    /// `crc32` whose state is the bare register.
    pub(crate) fn new() -> Option<Self> {
        // SAFETY: allocation in process context; null on failure.
        let tfm = unsafe { ffi::rroce_crc32_tfm_alloc() };
        // INVARIANT: a transform from the helper, now ours.
        NonNull::new(tfm).map(Self)
    }

    /// The name of the driver behind it (`crc32-pclmul`, `crc32-generic`).
    pub(crate) fn driver(&self) -> &CStr {
        // SAFETY: the transform is live (type invariant); its algorithm's
        // driver name is a NUL-terminated string that lives as long as the
        // transform holds the algorithm.
        unsafe { CStr::from_char_ptr(ffi::rroce_crc32_tfm_driver(self.0.as_ptr())) }
    }

    /// Advances `crc` over `data`.  Any context: where the FPU may not be
    /// used, the SIMD drivers fall back to the table themselves.
    pub(crate) fn update(&self, mut crc: u32, data: &[u8]) -> u32 {
        for piece in data.chunks(u32::MAX as usize) {
            // SAFETY: the transform is live (type invariant); the helper
            // reads `piece.len()` (< 2^32) bytes of a valid slice.
            crc = unsafe { ffi::rroce_crc32_shash(self.0.as_ptr(), crc, piece.as_ptr(), piece.len() as u32) };
        }
        crc
    }
}

impl Drop for CryptoCrc32 {
    fn drop(&mut self) {
        // SAFETY: ours by the type invariant, and no computation can still
        // use it: they borrow `self`.
        unsafe { ffi::rroce_crc32_tfm_free(self.0.as_ptr()) };
    }
}

/// The `icrc` module parameter (`auto`, `table` or `crypto`; anything else
/// is returned as is, for the caller to reject).
pub(crate) fn icrc_param() -> &'static CStr {
    // SAFETY: a `charp` module parameter of mode 0444 is a NUL-terminated
    // string set at load time and not changed while the module lives.
    unsafe { CStr::from_char_ptr(ffi::rroce_param_icrc()) }
}
