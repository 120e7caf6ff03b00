// SPDX-License-Identifier: GPL-2.0
//! Device counters, exported as the port's `hw_counters` (sysfs
//! `/sys/class/infiniband/DEV/ports/1/hw_counters/` and `rdma statistic`).
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! The data path adds to relaxed atomics; ib_core reads them through
//! `get_hw_stats`.  Protocol-engine counters are per QP inside `proto::rc`
//! and are folded in as deltas after each engine call (see `dp`).

use core::sync::atomic::{AtomicU64, Ordering};
use kernel::bindings;
use kernel::ffi::{c_char, c_int};

/// The counters, in `hw_counters` order.
#[derive(Clone, Copy)]
#[repr(usize)]
pub(crate) enum Counter {
    /// Packets received and accepted by a QP.
    RxPackets,
    /// Packets transmitted (requests and responses).
    TxPackets,
    /// Packets dropped on receive: bad layout, P_Key or no QP.
    RxDropped,
    /// Packets dropped on receive for a wrong ICRC.
    RxIcrcErrors,
    /// Packets that could not be sent (no memory, no route).
    TxErrors,
    /// Request packets sent again (go-back-N).
    Retransmits,
    /// Local ACK timeouts.
    AckTimeouts,
    /// PSN sequence error NAKs received.
    SeqNaksRcvd,
    /// RNR NAKs received.
    RnrNaksRcvd,
    /// `retry_cnt` exhausted.
    RetryExceeded,
    /// `rnr_retry` exhausted.
    RnrRetryExceeded,
    /// Duplicate requests received (re-ACKed or re-executed).
    DuplicateRequests,
    /// Out-of-sequence requests received (NAKed or dropped).
    OutOfSequence,
    /// RNR NAKs sent (no receive WQE).
    RnrNaksSent,
    /// Completions with an error status (both directions).
    CompletionErrors,
    /// UC request packets dropped by the responder (PSN gap, no First, no
    /// receive WQE, bad R_Key, malformed): their messages are lost.
    UcDropped,
    /// RC responses the requester discarded: duplicates (PSN already
    /// acknowledged, or nothing outstanding), PSNs never sent, wrong
    /// length/position/syndrome for their PSN.
    IgnoredResponses,
    /// RC requests refused with NAK remote access error (bad R_Key, range
    /// or permission); the responder QP entered the error state.
    AccessNaksSent,
    /// RC requests refused with NAK invalid request (opcode sequence,
    /// length, alignment, receive buffer too short); the responder QP
    /// entered the error state.
    InvalidNaksSent,
}

const N: usize = Counter::InvalidNaksSent as usize + 1;

/// Names, NUL-terminated, in [`Counter`] order.
const NAMES: [&[u8]; N] = [
    b"rx_packets\0",
    b"tx_packets\0",
    b"rx_dropped\0",
    b"rx_icrc_errors\0",
    b"tx_errors\0",
    b"retransmits\0",
    b"ack_timeouts\0",
    b"seq_naks_rcvd\0",
    b"rnr_naks_rcvd\0",
    b"retry_exceeded\0",
    b"rnr_retry_exceeded\0",
    b"duplicate_requests\0",
    b"out_of_sequence\0",
    b"rnr_naks_sent\0",
    b"completion_errors\0",
    b"uc_dropped\0",
    b"ignored_responses\0",
    b"access_naks_sent\0",
    b"invalid_naks_sent\0",
];

/// Descriptors handed to ib_core (must outlive every device).
struct Descs([bindings::rdma_stat_desc; N]);

// SAFETY: the descriptors only point to static strings.
unsafe impl Sync for Descs {}

static DESCS: Descs = {
    let mut d = [bindings::rdma_stat_desc { name: core::ptr::null(), flags: 0, priv_: core::ptr::null() }; N];
    let mut i = 0;
    while i < N {
        d[i].name = NAMES[i].as_ptr().cast::<c_char>();
        i += 1;
    }
    Descs(d)
};

/// A device's counters.
pub(crate) struct Stats([AtomicU64; N]);

impl Stats {
    pub(crate) const fn new() -> Self {
        Stats([const { AtomicU64::new(0) }; N])
    }

    /// Adds `n` to `c`.
    pub(crate) fn add(&self, c: Counter, n: u64) {
        if n != 0 {
            if let Some(a) = self.0.get(c as usize) {
                a.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    /// Adds one to `c`.
    pub(crate) fn inc(&self, c: Counter) {
        self.add(c, 1);
    }
}

/// # Safety
///
/// `ib_device_ops::alloc_hw_port_stats` contract.
pub(crate) unsafe extern "C" fn alloc_hw_port_stats(
    _ib: *mut bindings::ib_device,
    _port: u32,
) -> *mut bindings::rdma_hw_stats {
    // SAFETY: static descriptors; ib_core frees the result.
    unsafe { bindings::rdma_alloc_hw_stats_struct(DESCS.0.as_ptr(), N as c_int, 0) }
}

/// # Safety
///
/// `ib_device_ops::get_hw_stats` contract.
pub(crate) unsafe extern "C" fn get_hw_stats(
    ib: *mut bindings::ib_device,
    stats: *mut bindings::rdma_hw_stats,
    _port: u32,
    _index: c_int,
) -> c_int {
    // SAFETY: `ib` is one of our registered devices.
    let dev = unsafe { crate::device::RroceDev::from_ib(ib) };
    // SAFETY: `stats` came from `alloc_hw_port_stats`, so it has `N` values.
    let values = unsafe { (*stats).value.as_mut_slice(N) };
    for (v, a) in values.iter_mut().zip(dev.p.stats.0.iter()) {
        *v = a.load(Ordering::Relaxed);
    }
    N as c_int
}
