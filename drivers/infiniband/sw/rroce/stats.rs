// SPDX-License-Identifier: GPL-2.0
//! Device counters, exported as the port's `hw_counters` (sysfs
//! `/sys/class/infiniband/DEV/ports/1/hw_counters/` and `rdma statistic`).
//!
//! The data path adds to relaxed atomics; ib_core reads them through
//! `get_hw_stats`.  Protocol-engine counters are per QP inside `proto::rc`
//! and are folded in as deltas after each engine call (see `dp`).

#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicU64, Ordering};
use kernel::bindings;
use kernel::c_str;

use crate::device::{DevPriv, RroceDev};
use crate::ib::stats::{HwStats, StatDescs};

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

/// Descriptors, in [`Counter`] order.
static DESCS: StatDescs<N> = StatDescs::new([
    c_str!("rx_packets"),
    c_str!("tx_packets"),
    c_str!("rx_dropped"),
    c_str!("rx_icrc_errors"),
    c_str!("tx_errors"),
    c_str!("retransmits"),
    c_str!("ack_timeouts"),
    c_str!("seq_naks_rcvd"),
    c_str!("rnr_naks_rcvd"),
    c_str!("retry_exceeded"),
    c_str!("rnr_retry_exceeded"),
    c_str!("duplicate_requests"),
    c_str!("out_of_sequence"),
    c_str!("rnr_naks_sent"),
    c_str!("completion_errors"),
    c_str!("uc_dropped"),
    c_str!("ignored_responses"),
    c_str!("access_naks_sent"),
    c_str!("invalid_naks_sent"),
]);

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

impl HwStats for Stats {
    type Dev = DevPriv;
    const DESCS: &'static [bindings::rdma_stat_desc] = DESCS.as_slice();

    fn read(dev: &RroceDev, values: &mut [u64]) {
        for (v, a) in values.iter_mut().zip(dev.p.stats.0.iter()) {
            *v = a.load(Ordering::Relaxed);
        }
    }
}
