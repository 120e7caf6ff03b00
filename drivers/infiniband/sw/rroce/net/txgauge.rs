// SPDX-License-Identifier: GPL-2.0
//! Transmit back-pressure: how many of one sender's skbs are still in the
//! network stack, counted down by an skb destructor, and a work item
//! queued once the count falls back under a low mark.
//!
//! C header: [`include/linux/skbuff.h`](srctree/include/linux/skbuff.h)
//!
//! A sender (a QP) keeps at most [`TX_HIGH`] packets between their
//! transmission and their freeing: by the NIC driver once the device took
//! them, by a qdisc that dropped them, or, over veth, by the peer once it
//! received them.  At the mark it stops ([`TxGauge::may_send`] is false)
//! and the destructor of the packet that brings the count down to
//! [`TX_LOW`] queues the sender's work item, which sends on.  This is the
//! kernel's write-space scheme (`sock_wfree` and `sk_write_space`) counted
//! in packets; rdma_rxe keeps the same count per QP (`skb_out`).  Without
//! it a burst of responses (128 outstanding 64 KiB READs are 8,192
//! packets) overruns the device's queue and every dropped packet costs
//! the peer a retransmission timeout.
//!
//! The count lives in a small reference-counted object that every charged
//! skb holds (in `skb_shinfo(skb)->destructor_arg`), so a sender may go
//! away with packets still queued.  The destructor is this module's code:
//! [`drain`] runs at module unload and waits until every charged skb has
//! been freed.

use core::ptr::null_mut;
use core::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use kernel::bindings;
use kernel::prelude::*;
use kernel::sync::Arc;

use crate::ffi;
use crate::net::skb::SkBuff;
use crate::sync::rcu::ReadGuard;

/// Packets a sender may have in the stack before it stops.  Above a
/// virtio-net device's ring (256 entries) so a single sender keeps the
/// device busy; well under a qdisc's default 1,000.
pub(crate) const TX_HIGH: u32 = 256;
/// The count at which a stopped sender is woken.
pub(crate) const TX_LOW: u32 = TX_HIGH / 2;

/// Charged skbs not yet freed, over all senders ([`drain`]).
static CHARGED: AtomicUsize = AtomicUsize::new(0);

struct Gauge {
    /// Charged skbs not yet freed.
    inflight: AtomicU32,
    /// The sender stopped at [`TX_HIGH`] and waits to be woken.
    blocked: AtomicBool,
    /// The work item that wakes it; null once detached.
    wake: AtomicPtr<bindings::work_struct>,
}

/// One sender's count of packets in flight.
///
/// # Invariants
///
/// While `self.0.wake` is not null it points to a work item initialised
/// with `rroce_work_init` that is cancelled and freed only after it was
/// cleared and an RCU grace period passed (see [`TxGauge::attach`]).
pub(crate) struct TxGauge(Arc<Gauge>);

impl TxGauge {
    /// A gauge with nothing in flight and no work item yet.
    pub(crate) fn new() -> Result<Self> {
        let g = Gauge { inflight: AtomicU32::new(0), blocked: AtomicBool::new(false), wake: AtomicPtr::new(null_mut()) };
        // INVARIANT: `wake` is null.
        Ok(Self(Arc::new(g, GFP_KERNEL_ACCOUNT)?))
    }

    /// Sets the work item queued when the sender may send again.
    ///
    /// # Safety
    ///
    /// `w` is initialised with `rroce_work_init` and stays so until
    /// [`Self::detach`] was called and an RCU grace period passed after
    /// it; only then may it be cancelled and freed.
    pub(crate) unsafe fn attach(&self, w: *mut bindings::work_struct) {
        // INVARIANT: per the requirements.
        self.0.wake.store(w, Ordering::Release);
    }

    /// Forgets the work item: after the next grace period no destructor
    /// queues it any more.
    pub(crate) fn detach(&self) {
        self.0.wake.store(null_mut(), Ordering::Release);
    }

    /// Whether the sender may transmit another packet.  `false` at
    /// [`TX_HIGH`]: the sender stops, and its work item is queued once the
    /// count is down to [`TX_LOW`].  Callers serialise (the QP lock).
    pub(crate) fn may_send(&self) -> bool {
        let g = &*self.0;
        if g.inflight.load(Ordering::Relaxed) < TX_HIGH {
            return true;
        }
        g.blocked.store(true, Ordering::SeqCst);
        // A destructor that went under the low mark before it could see
        // `blocked` woke no one: then go on now.  (Both sides store, then
        // load, sequentially consistent: one of them sees the other.)
        if g.inflight.load(Ordering::SeqCst) <= TX_LOW {
            g.blocked.store(false, Ordering::Relaxed);
            return true;
        }
        false
    }
}

impl SkBuff {
    /// Counts this transmit skb against `g` until it is freed.
    pub(crate) fn charge(&mut self, g: &TxGauge) {
        let skb = self.as_raw();
        g.0.inflight.fetch_add(1, Ordering::Relaxed);
        CHARGED.fetch_add(1, Ordering::Relaxed);
        let arg = Arc::into_raw(g.0.clone());
        // SAFETY: a transmit skb we own and nobody else has seen (so no
        // destructor and no zero-copy state, which would use
        // `destructor_arg`); the reference taken above is given back by
        // `tx_done`, which the skb's freeing (or orphaning) calls once.
        unsafe {
            (*ffi::rroce_skb_shinfo(skb)).destructor_arg = arg.cast_mut().cast();
            (*skb).__bindgen_anon_3.__bindgen_anon_1.destructor = Some(tx_done);
        }
    }
}

/// The destructor of a charged skb.
///
/// # Safety
///
/// Called once by the network stack for an skb [`SkBuff::charge`]d.
unsafe extern "C" fn tx_done(skb: *mut bindings::sk_buff) {
    let rcu = ReadGuard::new();
    // SAFETY: `charge` stored a reference to the gauge from
    // `Arc::into_raw` there; this is its one release.
    let g = unsafe { Arc::from_raw((*ffi::rroce_skb_shinfo(skb)).destructor_arg.cast_const().cast::<Gauge>()) };
    let left = g.inflight.fetch_sub(1, Ordering::SeqCst).saturating_sub(1);
    if left <= TX_LOW && g.blocked.load(Ordering::SeqCst) && g.blocked.swap(false, Ordering::AcqRel) {
        let w = g.wake.load(Ordering::Acquire);
        if !w.is_null() {
            // SAFETY: not detached when loaded, inside a read-side
            // section: initialised until a grace period after detaching
            // (type invariant of `TxGauge`).
            unsafe { crate::sync::timer::queue_work(w) };
        }
    }
    drop(g);
    CHARGED.fetch_sub(1, Ordering::Release);
    drop(rcu);
}

/// Waits until every charged skb has been freed, then for a grace period
/// (the destructors that just counted down return from inside a read-side
/// section).  Module unload, after every device is gone.
pub(crate) fn drain() {
    let mut waited = 0u32;
    while CHARGED.load(Ordering::Acquire) != 0 {
        crate::sync::msleep(10);
        waited += 1;
        if waited % 1000 == 0 {
            pr_warn!("waiting for {} transmitted packets to be freed\n", CHARGED.load(Ordering::Relaxed));
        }
    }
    crate::sync::rcu::synchronize();
}

/// Runs [`drain`] when dropped: the module holds one after its devices.
pub(crate) struct DrainOnDrop;

impl Drop for DrainOnDrop {
    fn drop(&mut self) {
        drain();
    }
}
