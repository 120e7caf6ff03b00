// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Safe wrappers of the few system interfaces the provider uses: `errno`,
//! the rings mapped from the kernel, and the doorbell.
//!
//! Rings: `mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, cmd_fd,
//! offset)` as `rroce_proto::abi` describes it.  A mapping is only ever
//! touched through [`AtomicRegion`], i.e. as a slice of `AtomicU32`: the
//! kernel changes it at any time, so no `&[u8]` into it is ever formed, and
//! every access is bounds-checked by the ring code.  The region handed out
//! covers exactly `RingLayout::bytes_total()` bytes, which [`RingMap::map`]
//! has checked to be no more than the mapped length.

use core::ffi::{c_int, c_void};
use core::mem::size_of;
use core::ptr::{self, NonNull};
use core::sync::atomic::AtomicU32;

use rroce_proto::ring::{AtomicRegion, RingLayout};

use super::abi::{
    __errno_location, clock_gettime, mmap, munmap, write, IbUverbsCmdHdr, IbUverbsPostSendResp,
    IbvPostSend, IbvSendWr, Timespec, CLOCK_MONOTONIC, CLOCK_REALTIME, EIO, EPROTO,
    IB_USER_VERBS_CMD_POST_SEND, MAP_FAILED, MAP_SHARED, PROT_READ, PROT_WRITE,
};

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
            return Err(last_errno());
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

/// `clock`'s time now (`clock_gettime`; the vDSO, no system call).
fn clock_now(clock: c_int) -> Timespec {
    let mut t = Timespec::default();
    // SAFETY: `t` is a valid, writable timespec; the clocks used exist.
    let _ = unsafe { clock_gettime(clock, &mut t) };
    t
}

/// Nanoseconds of a timespec (saturating; clock values are never negative).
pub(crate) fn timespec_ns(t: Timespec) -> u64 {
    let s = u64::try_from(t.tv_sec).unwrap_or(0);
    let n = u64::try_from(t.tv_nsec).unwrap_or(0);
    s.saturating_mul(1_000_000_000).saturating_add(n)
}

/// CLOCK_MONOTONIC now: rroce's device clock (the kernel stamps CQEs with
/// `ktime_get_ns`, the same clock).
pub(crate) fn monotonic_now() -> Timespec {
    clock_now(CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME minus CLOCK_MONOTONIC now, in ns: what turns a device
/// timestamp into wall-clock time.
pub(crate) fn realtime_offset_ns() -> i128 {
    let m = clock_now(CLOCK_MONOTONIC);
    let r = clock_now(CLOCK_REALTIME);
    i128::from(timespec_ns(r)) - i128::from(timespec_ns(m))
}

/// A token of the calling thread: the address of its `errno`, never 0 and
/// unique among the live threads (cheaper than a `thread_local!` in a
/// shared library, which costs a `__tls_get_addr` call).
pub(crate) fn thread_token() -> usize {
    // SAFETY: __errno_location() has no preconditions; only the address
    // is used.
    unsafe { __errno_location() as usize }
}

/// Sets the calling thread's `errno`.
pub(crate) fn set_errno(err: c_int) {
    // SAFETY: __errno_location() returns a valid pointer to this thread's
    // errno for the whole life of the thread.
    unsafe { *__errno_location() = err };
}

/// The calling thread's `errno`, or `EIO` if it is 0.
pub(crate) fn last_errno() -> c_int {
    // SAFETY: __errno_location() returns a valid pointer to this thread's
    // errno for the whole life of the thread.
    match unsafe { *__errno_location() } {
        0 => EIO,
        e => e,
    }
}

/// The doorbell command: a legacy POST_SEND with no work requests, which
/// tells the kernel that the SQ of `qp_handle` has new WQEs.
///
/// The 32 bytes are `ib_uverbs_cmd_hdr { command = 28, in_words = 8,
/// out_words = 1 }` followed by `ib_uverbs_post_send { response = &resp,
/// qp_handle, wr_count = 0, sge_count = 0, wqe_size = 128 }`.
fn doorbell_cmd(qp_handle: u32, resp: *mut IbUverbsPostSendResp) -> IbvPostSend {
    IbvPostSend {
        hdr: IbUverbsCmdHdr {
            command: IB_USER_VERBS_CMD_POST_SEND,
            in_words: (size_of::<IbvPostSend>() / 4) as u16,
            out_words: (size_of::<IbUverbsPostSendResp>() / 4) as u16,
        },
        response: resp.addr() as u64,
        qp_handle,
        wr_count: 0,
        sge_count: 0,
        wqe_size: size_of::<IbvSendWr>() as u32,
    }
}

/// Rings the doorbell of the QP with uverbs handle `qp_handle` on the
/// context's command fd `cmd_fd`: 0 or an errno value.
pub(crate) fn ring_doorbell(cmd_fd: c_int, qp_handle: u32) -> c_int {
    let mut resp = IbUverbsPostSendResp::default();
    let cmd = doorbell_cmd(qp_handle, &raw mut resp);
    // SAFETY: `cmd` is a live local of the size passed; the kernel writes
    // at most `out_words * 4` bytes to `resp`, which outlives the call.
    let n = unsafe {
        write(
            cmd_fd,
            (&raw const cmd).cast::<c_void>(),
            size_of::<IbvPostSend>(),
        )
    };
    match usize::try_from(n) {
        Ok(len) if len == size_of::<IbvPostSend>() => 0,
        Ok(_) => EIO,
        Err(_) => last_errno(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doorbell_bytes() {
        let resp = 0x1122_3344_5566_7788usize as *mut IbUverbsPostSendResp;
        let cmd = doorbell_cmd(0xabcd, resp);
        // SAFETY: IbvPostSend is 32 bytes of plain integers, no padding.
        let bytes: [u8; 32] = unsafe { core::mem::transmute(cmd) };
        let mut want = Vec::new();
        want.extend_from_slice(&28u32.to_ne_bytes());
        want.extend_from_slice(&8u16.to_ne_bytes());
        want.extend_from_slice(&1u16.to_ne_bytes());
        want.extend_from_slice(&0x1122_3344_5566_7788u64.to_ne_bytes());
        want.extend_from_slice(&0xabcdu32.to_ne_bytes());
        want.extend_from_slice(&0u32.to_ne_bytes());
        want.extend_from_slice(&0u32.to_ne_bytes());
        want.extend_from_slice(&128u32.to_ne_bytes());
        assert_eq!(bytes.to_vec(), want);
    }
}
