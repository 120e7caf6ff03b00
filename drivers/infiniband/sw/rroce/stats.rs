// SPDX-License-Identifier: GPL-2.0
//! Device counters, exported as the port's `hw_counters` (sysfs
//! `/sys/class/infiniband/DEV/ports/1/hw_counters/` and `rdma statistic`).
//!
//! The data path adds to relaxed atomics; ib_core reads them through
//! `get_hw_stats`.  Protocol-engine counters are per QP inside `proto::rc`
//! and are folded in as deltas after each engine call (see `dp`).

#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicU64, Ordering};
use kernel::c_str;

use crate::ib::stats::StatDescs;
use crate::net::skb::SkBuff;
use crate::proto::split::Split;
use crate::net::udp::Receiver;

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
    /// RC requests dropped unprocessed because the QP's response queue
    /// was full (back-pressure: the requester retransmits them).
    RespBackpressure,
    /// Data-path accesses that found a page of an on-demand paging region
    /// missing: the QP waited for its work item to fault it in.
    OdpFaults,
    /// Packets a QP dropped unprocessed while it waited for an on-demand
    /// paging fault (the peer's retransmission brings them back).
    OdpStallDrops,
    /// XRC requests dropped because their XRCETH names no XRC SRQ of the
    /// target QP's domain.
    XrcBadSrqn,
    /// Times an RC requester halved its window at a go-back-N (sequence
    /// NAK, implied NAK or timeout): see `proto::rc::req`.
    WindowCuts,
    /// Times a QP stopped sending because `TX_HIGH` of its packets were
    /// still in the network stack (`net::txgauge`); it goes on when they
    /// drain.
    TxWaits,
    /// Received packets copied into one buffer before they were read: the
    /// receive path reads a packet where the network driver put it when
    /// its headers are followed by one page fragment (virtio-net and other
    /// NAPI drivers) or it is linear, and copies any other shape (several
    /// fragments, spliced pages, a fragment that starts inside the
    /// payload).
    RxLinearized,
}

const N: usize = Counter::RxLinearized as usize + 1;

/// Descriptors, in [`Counter`] order.
pub(crate) static DESCS: StatDescs<N> = StatDescs::new([
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
    c_str!("resp_backpressure"),
    c_str!("odp_faults"),
    c_str!("odp_stall_drops"),
    c_str!("xrc_bad_srqn"),
    c_str!("window_cuts"),
    c_str!("tx_waits"),
    c_str!("rx_linearized"),
]);

/// A device's counters.
pub(crate) struct Stats(pub(crate) [AtomicU64; N]);

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

/// Receive counters of one namespace's sockets, and their receiver.
pub(crate) struct RxStats {
    /// What parses and delivers each datagram (`dp::rx`).
    handler: RxHandler,
    /// Packets delivered to the sockets.
    packets: AtomicU64,
    /// Packets dropped because no queue pair could take them.
    dropped_no_qp: AtomicU64,
    /// Packets dropped because they are malformed (IP/UDP/BTH layout).
    dropped_malformed: AtomicU64,
    /// Packets dropped for a wrong ICRC.
    dropped_icrc: AtomicU64,
    /// Packets for which no rroce device was found.
    dropped_no_dev: AtomicU64,
}

impl RxStats {
    /// Counters of new sockets whose datagrams go to `handler`.
    pub(crate) fn new(handler: RxHandler) -> Self {
        Self {
            handler,
            packets: AtomicU64::new(0),
            dropped_no_qp: AtomicU64::new(0),
            dropped_malformed: AtomicU64::new(0),
            dropped_icrc: AtomicU64::new(0),
            dropped_no_dev: AtomicU64::new(0),
        }
    }
}

/// Parses and delivers one datagram, given the netdev it arrived on
/// (identity only), its bytes, and whether they were copied into one
/// buffer first; `Err` says why it was dropped.
pub(crate) type RxHandler = fn(crate::net::netdev::NetDevView<'_>, Split<'_>, bool) -> Result<(), RxDrop>;

impl Receiver for RxStats {
    fn receive(&self, mut skb: SkBuff) {
        self.packets.fetch_add(1, Ordering::Relaxed);
        // Read where it lies: the headers in the linear area, the payload
        // in place (a copy only for an skb of another shape).
        let r = match skb.prepare_rx(crate::proto::icrc::headers_len) {
            Some(copied) => match (skb.in_dev(), skb.pieces()) {
                (Some(d), Some((head, tail))) => (self.handler)(d, Split { head, tail }, copied),
                (None, _) => Err(RxDrop::NoDevice),
                (_, None) => Err(RxDrop::Malformed),
            },
            None => Err(RxDrop::Malformed),
        };
        let counter = match r {
            Ok(()) => return,
            Err(RxDrop::Malformed) => &self.dropped_malformed,
            Err(RxDrop::Icrc) => &self.dropped_icrc,
            Err(RxDrop::NoDevice) => &self.dropped_no_dev,
            Err(RxDrop::NoQp) => &self.dropped_no_qp,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Why a received datagram was dropped.
pub(crate) enum RxDrop {
    /// Not a well-formed RoCEv2 packet.
    Malformed,
    /// Wrong ICRC.
    Icrc,
    /// No rroce device for its destination.
    NoDevice,
    /// No QP took it.
    NoQp,
}

