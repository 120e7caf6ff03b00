// SPDX-License-Identifier: GPL-2.0
//! Device counters, exported as the port's `hw_counters` (sysfs
//! `/sys/class/infiniband/DEV/ports/1/hw_counters/` and `rdma statistic`).
//!
//! The data path adds to per-CPU counters; ib_core reads their sums
//! through `get_hw_stats`.  Protocol-engine counters are per QP inside `proto::rc`
//! and are folded in as deltas after each engine call (see `dp`).

#![forbid(unsafe_code)]

use kernel::c_str;

use crate::ib::stats::StatDescs;
use crate::net::skb::SkBuff;
use crate::proto::split::Split;
use crate::net::udp::Receiver;
use crate::sync::percpu::PerCpuCounters;
use kernel::prelude::*;

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

/// A device's counters: per CPU, so that the packets of one device
/// received or sent on several CPUs share no counter cache line.
pub(crate) struct Stats(PerCpuCounters<N>);

impl Stats {
    /// Zeroed counters.  Process context.
    pub(crate) fn new() -> Result<Self> {
        Ok(Stats(PerCpuCounters::new()?))
    }

    /// Adds `n` to `c`.
    pub(crate) fn add(&self, c: Counter, n: u64) {
        if n != 0 {
            self.0.add(c as usize, n);
        }
    }

    /// Adds one to `c`.
    pub(crate) fn inc(&self, c: Counter) {
        self.0.add(c as usize, 1);
    }

    /// The counters in [`Counter`] order (as many as `values` holds).
    pub(crate) fn read(&self, values: &mut [u64]) {
        self.0.read(values);
    }
}

/// The receiver of one namespace's sockets: what parses and delivers each
/// datagram.  (Drops are counted by the device a packet is for, in
/// [`Stats`]; a packet for no device has no counter to go to.)
pub(crate) struct RxDispatch {
    /// What parses and delivers each datagram (`dp::rx`).
    handler: RxHandler,
}

impl RxDispatch {
    /// The receiver of new sockets whose datagrams go to `handler`.
    pub(crate) fn new(handler: RxHandler) -> Self {
        Self { handler }
    }
}

/// Parses and delivers one datagram, given the netdev it arrived on
/// (identity only), its bytes, and whether they were copied into one
/// buffer first; `Err` says why it was dropped.
pub(crate) type RxHandler = fn(crate::net::netdev::NetDevView<'_>, Split<'_>, bool) -> Result<(), RxDrop>;

impl Receiver for RxDispatch {
    fn receive(&self, mut skb: SkBuff) {
        // Read where it lies: the headers in the linear area, the payload
        // in place (a copy only for an skb of another shape).  The handler
        // counts what it drops in its device's counters.
        if let Some(copied) = skb.prepare_rx(crate::proto::icrc::headers_len) {
            if let (Some(d), Some((head, tail))) = (skb.in_dev(), skb.pieces()) {
                let _ = (self.handler)(d, Split { head, tail }, copied);
            }
        }
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

