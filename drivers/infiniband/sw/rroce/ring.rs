// SPDX-License-Identifier: GPL-2.0
//! The work-queue rings of QPs and SRQs: a shared ring (`proto::ring`)
//! in memory mapped into the user process, or the kernel's own.

#![forbid(unsafe_code)]

use kernel::prelude::*;

use crate::ib::shm::SharedBuf;
use crate::ib::ucontext::{RingMem, UctxRef};
use crate::limits;
use crate::proto::ring::RingLayout;

/// First index of every ring (near the 2^32 wrap, as for CQs).
pub(crate) const RING_START: u32 = u32::MAX - 1023;

/// A ring of a QP: mapped into the user process, or the kernel's own.
pub(crate) struct Ring {
    pub(crate) mem: RingMem,
    pub(crate) layout: RingLayout,
}

impl Ring {
    /// A ring of `entries` entries of `entry_size` bytes, mapped into the
    /// process of `uctx` (then with its mmap offset) or kernel-private.
    pub(crate) fn new(uctx: Option<UctxRef>, entries: u32, entry_size: u32) -> Result<(Ring, u64)> {
        let layout = RingLayout::new(entries, entry_size, limits::max_qp_wr().next_power_of_two())
            .map_err(|_| EINVAL)?;
        let buf = SharedBuf::new(layout.bytes_total())?;
        layout.init_header(&buf, RING_START).map_err(|_| EINVAL)?;
        let (mem, off) = RingMem::new(uctx, buf)?;
        Ok((Ring { mem, layout }, off))
    }

    pub(crate) fn buf(&self) -> &SharedBuf {
        self.mem.buf()
    }
}

