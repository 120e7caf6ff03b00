// SPDX-License-Identifier: GPL-2.0
//! Same-device loopback: packets a device sends to an address of its own
//! netdev skip the IP stack.
//!
//! C header: [`include/linux/skbuff.h`](srctree/include/linux/skbuff.h)
//!
//! Routing such a packet would send it through `lo`, the receive backlog,
//! `ip_rcv` and the UDP socket lookup only to come back to the device that
//! sent it.  Instead the sender queues the finished packet on its device's
//! [`LoopQueue`] (under the QP lock) and the queue is drained right after
//! that lock is dropped ([`crate::dp::Ctx::fire`]).  Draining is iterative:
//! packets sent while a drain is running (the ACK of a loopback SEND, say)
//! are appended and picked up by the same loop, so one QP's traffic never
//! recurses into another's lock.  The packets never leave the machine, so
//! they carry no ICRC and none is checked.

use core::ptr::NonNull;
use kernel::bindings;
use kernel::ffi::c_void;
use kernel::prelude::*;

use crate::ffi;

/// Packets waiting in one queue at most; beyond it a packet is dropped
/// like on a full link (the requester retransmits).
const MAX_QUEUED: u32 = 4096;
/// Packets one drain delivers with bottom halves off (each may queue an
/// answer: the drain never ends by itself while two QPs of the device talk).
const DRAIN_BUDGET: u32 = 256;

/// A device's loopback queue.
///
/// # Invariants
///
/// `q` is a queue from `rroce_loopq_new`, freed (with any packets left) on
/// drop.
pub(crate) struct LoopQueue {
    q: NonNull<c_void>,
}

// SAFETY: the C queue is protected by its own spinlock.
unsafe impl Send for LoopQueue {}
// SAFETY: as above.
unsafe impl Sync for LoopQueue {}

impl LoopQueue {
    pub(crate) fn new() -> Result<Self> {
        // SAFETY: plain allocation.
        let q = NonNull::new(unsafe { ffi::rroce_loopq_new() }).ok_or(ENOMEM)?;
        // INVARIANT: allocated above.
        Ok(Self { q })
    }

    /// Queues `skb` (a complete IP datagram in its linear area) and takes
    /// ownership of it.  Returns `false` if the queue was full and the
    /// packet dropped.
    ///
    /// # Safety
    ///
    /// `skb` must be a linear skb owned by the caller.
    pub(crate) unsafe fn put(&self, skb: *mut bindings::sk_buff) -> bool {
        // SAFETY: the queue is live (type invariant); the skb is ours to give.
        unsafe { ffi::rroce_loopq_put(self.q.as_ptr(), skb, MAX_QUEUED) }
    }

    /// Whether packets are queued that no drain in progress will take (a
    /// lockless hint: a drain started after it sees them).
    pub(crate) fn has_packets(&self) -> bool {
        // SAFETY: the queue is live.
        unsafe { ffi::rroce_loopq_pending(self.q.as_ptr()) }
    }

    /// Hands the queued packets to `f`, including the ones `f` queues,
    /// unless another context is draining already (it then takes them);
    /// at most [`DRAIN_BUDGET`] of them.  Returns `true` if it stopped at
    /// the budget with packets left: the caller must have them drained
    /// later (from a work item).  Call with no spinlock of ours held.
    pub(crate) fn drain(&self, mut f: impl FnMut(&[u8])) -> bool {
        // SAFETY: the queue is live.
        if !unsafe { ffi::rroce_loopq_begin(self.q.as_ptr()) } {
            return false;
        }
        // The receive path expects bottom halves off (RCU read side).
        // SAFETY: paired with the enable below.
        unsafe { ffi::rroce_local_bh_disable() };
        let mut left = false;
        for n in 0.. {
            if n == DRAIN_BUDGET {
                // SAFETY: the queue is live; we are its drainer.
                left = unsafe { ffi::rroce_loopq_stop(self.q.as_ptr()) };
                break;
            }
            let mut data: *mut u8 = core::ptr::null_mut();
            let mut len: u32 = 0;
            // SAFETY: the queue is live; we are its drainer.
            let skb = unsafe { ffi::rroce_loopq_next(self.q.as_ptr(), &mut data, &mut len) };
            if skb.is_null() {
                break;
            }
            if !data.is_null() {
                // SAFETY: `len` bytes of the skb's linear area, which we own
                // until it is freed below.
                f(unsafe { core::slice::from_raw_parts(data, len as usize) });
            }
            // SAFETY: dequeued, so ours.
            unsafe { ffi::rroce_kfree_skb(skb) };
        }
        // SAFETY: paired with the disable above.
        unsafe { ffi::rroce_local_bh_enable() };
        left
    }
}

impl Drop for LoopQueue {
    fn drop(&mut self) {
        // SAFETY: by the type invariant; no one uses the queue any more.
        unsafe { ffi::rroce_loopq_free(self.q.as_ptr()) };
    }
}
