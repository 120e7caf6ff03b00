// SPDX-License-Identifier: GPL-2.0
//! Same-device loopback: packets a device sends to an address of its own
//! netdev skip the IP stack.
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

#![forbid(unsafe_code)]

use core::pin::Pin;
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::prelude::*;

use crate::net::skb::{SkBuff, SkbList};
use crate::sync::lock::{new_spinlock_bh, BhGuard, SpinLockBh};
use crate::sync::rcu::ReadGuard;

/// Packets waiting in one queue at most; beyond it a packet is dropped
/// like on a full link (the requester retransmits).
const MAX_QUEUED: u32 = 4096;
/// Packets one drain delivers with bottom halves off (each may queue an
/// answer: the drain never ends by itself while two QPs of the device talk).
const DRAIN_BUDGET: u32 = 256;

/// The queue proper, under its lock.
struct State {
    skbs: SkbList,
    /// One context at a time takes packets out.
    draining: bool,
}

/// A device's loopback queue.
pub(crate) struct LoopQueue {
    st: Pin<KBox<SpinLockBh<State>>>,
    /// Lockless mirrors of `skbs.len()` and `draining` (written under the
    /// lock) for [`LoopQueue::has_packets`] and the empty fast path.
    queued: AtomicU32,
    draining: AtomicBool,
}

impl LoopQueue {
    pub(crate) fn new() -> Result<Self> {
        let st = State { skbs: SkbList::new(), draining: false };
        Ok(Self {
            st: KBox::pin_init(new_spinlock_bh!(st, "rroce_loopq"), GFP_KERNEL)?,
            queued: AtomicU32::new(0),
            draining: AtomicBool::new(false),
        })
    }

    /// Queues `skb` (a complete IP datagram).  Returns `false` if the
    /// queue was full and the packet dropped.
    pub(crate) fn put(&self, skb: SkBuff) -> bool {
        let mut st = self.st.lock();
        if st.skbs.len() >= MAX_QUEUED {
            drop(st);
            drop(skb);
            return false;
        }
        st.skbs.push_back(skb);
        self.queued.store(st.skbs.len(), Ordering::Release);
        true
    }

    /// Whether packets are queued that no drain in progress will take (a
    /// lockless hint: a drain started after it sees them).
    pub(crate) fn has_packets(&self) -> bool {
        self.queued.load(Ordering::Acquire) != 0 && !self.draining.load(Ordering::Acquire)
    }

    /// Makes the caller the drainer: `false` if the queue is empty or
    /// another context drains.
    fn begin(&self) -> bool {
        if self.queued.load(Ordering::Acquire) == 0 {
            return false;
        }
        let mut st = self.st.lock();
        if st.draining {
            return false;
        }
        st.draining = true;
        self.draining.store(true, Ordering::Release);
        true
    }

    /// The drainer's next packet; `None` (and no drainer any more) when
    /// the queue is empty, or (`stop`) at the budget: then also whether
    /// packets are left.
    fn next(&self, stop: bool) -> (Option<SkBuff>, bool) {
        let mut st = self.st.lock();
        let skb = if stop { None } else { st.skbs.pop_front() };
        if skb.is_none() {
            st.draining = false;
            self.draining.store(false, Ordering::Release);
        }
        self.queued.store(st.skbs.len(), Ordering::Release);
        (skb, !st.skbs.is_empty())
    }

    /// Hands the queued packets to `f`, including the ones `f` queues,
    /// unless another context is draining already (it then takes them);
    /// at most [`DRAIN_BUDGET`] of them.  Returns `true` if it stopped at
    /// the budget with packets left: the caller must have them drained
    /// later (from a work item).  Call with no spinlock of ours held and
    /// interrupts enabled.
    pub(crate) fn drain(&self, mut f: impl FnMut(&[u8], &ReadGuard)) -> bool {
        if !self.begin() {
            return false;
        }
        // The receive path expects bottom halves off, and runs in one RCU
        // read-side section for the whole drain (bounded by the budget).
        let _bh = BhGuard::new();
        let rcu = ReadGuard::new();
        let mut n = 0;
        loop {
            let (skb, left) = self.next(n == DRAIN_BUDGET);
            let Some(skb) = skb else { return left && n == DRAIN_BUDGET };
            f(skb.datagram(), &rcu);
            n += 1;
        }
    }
}
