// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! The RC requester: packetisation of send WQEs and go-back-N positioning.
//!
//! [`Requester`] holds the QP's send-side state: the posted WQEs that have
//! not been returned as completions yet (a fixed ring of `N` slots), the next
//! PSN, the oldest unacknowledged PSN, the READ/atomic credits and the retry
//! timers.  [`Requester::next_packet`] produces one [`PacketDesc`] at a time;
//! the response side (completer) lives in `comp` and works on the same
//! struct.
//!
//! Per WQE the requester only needs its first PSN: packet `k` of a message
//! is at `first_psn + k` and carries bytes `k * pmtu ..` of the message, so
//! [`Requester::restart_from`] can resume anywhere: a SEND/WRITE continues
//! with the Middle/Last opcode at the right offset (no RETH), a READ is
//! re-requested for the remaining range with an adjusted RETH at the PSN of
//! the first missing response.
//!
//! Flow control: at most `window` PSNs after the oldest unacknowledged
//! one are sent, at most `max_rd_atomic` READ/atomic requests are
//! outstanding, and a WQE with `SEND_FENCE` waits until every earlier READ
//! and atomic has completed.  AckReq is set on the last packet of a
//! message that is signaled or the last one queued (rdma_rxe sets it on
//! every message's last packet; an unsignaled message followed by another
//! is acknowledged by that one's cumulative ACK), on every `ack_every`-th
//! packet and on the packet that fills the window, so the ACK clock keeps
//! running on long messages.  On a clean path the PSNs of RDMA READ responses do not
//! count against the window ([`Requester::window_used`]); READs are limited
//! by `max_rd_atomic`, and all PSNs in flight by [`MAX_SPAN`].  After a
//! loss they do, until the window has grown whole again.
//!
//! The window adapts to loss: it starts at `max_unacked` (an RDMA fabric
//! is meant to be lossless, so a clean path runs at full speed at once),
//! halves (down to [`ReqConfig::MIN_WINDOW`]) at each go-back-N (sequence
//! NAK, implied NAK, timeout), and grows again by one PSN per
//! [`WINDOW_GROWTH`] PSNs acknowledged.  With a large window and a lossy
//! path, each loss would otherwise resend up to `max_unacked` packets.
//!
//! Local operations (REG_MR, BIND_MW, LOCAL_INV) are executed by the glue
//! and recorded with [`Requester::post_local`]: they take a slot and no
//! PSN, and complete in WQE order like the others.  REG_MR and BIND_MW
//! need not wait for the WQEs before them: a region being registered was
//! invalid when those were posted, so none of them can use it, and no
//! local access goes through a memory window (a bind changes what the
//! peer may reach, as it would once the earlier messages were sent).  So
//! a registration chained before a SEND, as NVMe-oF, iSER and NFS post
//! them, does not cost a round trip when other messages are in flight.
//! LOCAL_INV runs once every earlier message has been sent whole (its
//! place in the send order, as on hardware and rdma_rxe), not once it has
//! been acknowledged: an NFS client invalidating a reply's regions does
//! not stall the requests queued behind it for a round trip.  An earlier
//! message that still needs the region (a retransmission reads its data
//! again, a READ response lands in it) then fails with a local protection
//! error; the IBA leaves that ordering to the fence.  Any local operation
//! with `SEND_FENCE` waits until every earlier WQE has completed
//! ([`Requester::local_may_run`]).

use super::super::hdr::{pad_count, AtomicEth, Feth, Ieth, Reth};
use super::super::opcode::{request_opcode, Position, RequestOp, Transport};
use super::super::psn::{npkts, PathMtu, Psn};
use super::super::qp::{ack_timeout_ns, QpAttrs, RetryState};
use super::super::wqe::{
    SendOpcode, SendWqe, WcStatus, MAX_MSG_SIZE, SEND_FENCE, SEND_SIGNALED, SEND_SOLICITED,
};
use super::{imm_from_wqe, PacketDesc, Store};

/// PSNs acknowledged per PSN the window grows back after a loss: from
/// half to whole in 8 windows' worth of packets, so that on a path losing
/// 2 % of its packets the window settles near [`ReqConfig::MIN_WINDOW`]
/// (each loss resends about a window) and after a rare loss it is whole
/// again within a few thousand packets.
pub const WINDOW_GROWTH: u32 = 8;

/// The most PSNs from the oldest unacknowledged one to the next to send
/// before the requester stops (the window aside): a quarter of the PSN
/// space, so that PSN comparisons stay unambiguous with many large READs
/// outstanding (one READ may still span up to 2^23 PSNs by itself).
pub const MAX_SPAN: u32 = 1 << 22;

/// The shortest pause after the network stack refused a packet
/// ([`Backoff`]).
pub const REFUSAL_HOLD_NS: u64 = 50_000;

/// The longest pause after a refusal (8 ms).  A device that refuses for
/// longer than the ACK timeout costs a retry as a lost packet would (the
/// refused packets do not restart the ACK timer).
pub const REFUSAL_HOLD_MAX_NS: u64 = 8_000_000;

/// The pauses of a sender whose packets the network stack refuses (a
/// full device queue or backlog): the requester's ([`Requester::refused`])
/// and the glue's READ response streams.  The pause doubles when the
/// packet sent again at its end is refused again (too short: the queue
/// had not drained), and halves when a later packet is refused after it
/// went (long enough), so that on a queue that keeps refusing it settles
/// near the queue's drain time instead of starting from the shortest
/// pause each time, which would build and lose a packet for each try.
/// After twice the longest pause without a refusal it starts again from
/// the shortest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Backoff {
    /// The PSN last refused.
    psn: Option<Psn>,
    /// The pause is `REFUSAL_HOLD_NS << (level - 1)`.
    level: u32,
    /// Refusals of `psn` in a row.
    same: u32,
    /// When the last refusal was (ns).
    last: u64,
}

impl Backoff {
    /// Packet `psn` was refused at `now` (ns): the pause before sending
    /// it again (ns).
    pub fn refused(&mut self, psn: Psn, now: u64) -> u64 {
        let again = self.psn == Some(psn);
        let stale = self.psn.is_none() || now.saturating_sub(self.last) > 2 * REFUSAL_HOLD_MAX_NS;
        self.level = if stale {
            1
        } else if again {
            self.level.saturating_add(1).min(17)
        } else {
            self.level.saturating_sub(1).max(1)
        };
        self.same = if again && !stale {
            self.same.saturating_add(1)
        } else {
            1
        };
        self.psn = Some(psn);
        self.last = now;
        self.hold()
    }

    /// The current pause (ns).
    pub fn hold(&self) -> u64 {
        REFUSAL_HOLD_NS
            .checked_shl(self.level.saturating_sub(1))
            .map_or(REFUSAL_HOLD_MAX_NS, |h| h.min(REFUSAL_HOLD_MAX_NS))
    }

    /// Refusals of the last refused PSN in a row (0 before any).
    pub fn same(&self) -> u32 {
        self.same
    }

    /// Forget the refusals (the PSN is given up, or the sender reset).
    pub fn reset(&mut self) {
        *self = Backoff::default();
    }
}

/// Unreliable mode: refusals of one packet after which it is given up as
/// lost (UC has no ACK timer to bound them): ~12.8 ms of pauses.
pub const UC_MAX_REFUSALS: u32 = 8;

/// Static parameters of the requester.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReqConfig {
    /// First PSN to send (`sq_psn`).
    pub sq_psn: Psn,
    /// Path MTU.
    pub pmtu: PathMtu,
    /// Outstanding READ/atomic requests allowed (`max_rd_atomic`); 0 rejects
    /// READ and atomic WQEs at post time.
    pub max_rd_atomic: u8,
    /// Local ACK timeout exponent (0: no retransmit timer).
    pub timeout: u8,
    /// Retries after a timeout, sequence NAK or implied NAK.
    pub retry_cnt: u8,
    /// Retries after an RNR NAK (7 = infinite).
    pub rnr_retry: u8,
    /// Window: PSNs in flight after the oldest unacknowledged one (≥ 1).
    pub max_unacked: u32,
    /// Set AckReq at least every `ack_every` packets (≥ 1).
    pub ack_every: u32,
    /// Unreliable Connected (UC) service: UC opcodes, no AckReq, no
    /// window, no timers, and a WQE completes as soon as its last packet
    /// has been produced (nothing is ever retransmitted).  RDMA READ,
    /// atomics and SEND with invalidate are refused at post time.
    pub unreliable: bool,
}

impl ReqConfig {
    /// Default window: 4 times rxe's `RXE_MAX_UNACKED_PSNS` (128).  Between
    /// two VMs 128 PSNs left the requester waiting for ACKs; 512 moved
    /// 1.36x the WRITE and 2.4x the SEND bandwidth at 64 KiB (2026-12-05,
    /// `Documentation/benchmarks.md`).
    pub const DEFAULT_MAX_UNACKED: u32 = 512;
    /// Default AckReq period: an ACK costs the responder a packet to build
    /// and the requester one to receive.
    pub const DEFAULT_ACK_EVERY: u32 = 64;
    /// The least the window shrinks to after losses (or `max_unacked` if
    /// that is smaller).
    pub const MIN_WINDOW: u32 = 16;

    /// From the QP attributes (RTS), with the default window.
    pub fn from_attrs(a: &QpAttrs) -> ReqConfig {
        ReqConfig {
            sq_psn: Psn::new(a.sq_psn),
            pmtu: a.mtu(),
            max_rd_atomic: a.max_rd_atomic,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            max_unacked: Self::DEFAULT_MAX_UNACKED,
            ack_every: Self::DEFAULT_ACK_EVERY,
            unreliable: false,
        }
    }

    /// For a UC QP from its attributes (RTS).
    pub fn uc_from_attrs(a: &QpAttrs) -> ReqConfig {
        ReqConfig {
            unreliable: true,
            ..Self::from_attrs(a)
        }
    }
}

/// Why [`Requester::post`] refused a WQE.  The glue completes it with an
/// error itself (or fails `post_send`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostError {
    /// All slots hold WQEs that have not been polled yet.
    Full,
    /// Local operations (LOCAL_INV, BIND_MW) are executed by the glue, not
    /// by the RC engine.
    Unsupported,
    /// Longer than 2^31 bytes.
    TooLong,
    /// READ/atomic with `max_rd_atomic == 0`.
    NoRdAtomic,
    /// An operation the transport does not have (READ, atomics and SEND
    /// with invalidate on UC).
    NotOnTransport,
    /// [`Requester::post_local`] of an operation that must wait
    /// ([`Requester::local_may_run`]): earlier WQEs not complete, or not
    /// sent yet.
    Busy,
}

/// Requester and completer counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReqCounters {
    /// Request packets produced.
    pub packets: u64,
    /// Of those, retransmissions (PSN sent before).
    pub retransmitted: u64,
    /// Go-back-N restarts after a local ACK timeout.
    pub timeouts: u64,
    /// Sequence-error NAKs received.
    pub seq_naks: u64,
    /// Go-back-N restarts after a sequence NAK.
    pub seq_nak_retries: u64,
    /// Go-back-N restarts after an implied NAK (missing READ/atomic response
    /// or an out-of-order READ response).
    pub implied_nak_retries: u64,
    /// RNR NAKs received.
    pub rnr_naks: u64,
    /// Other NAKs received (invalid request, access, operational).
    pub fatal_naks: u64,
    /// Responses for PSNs already acknowledged.
    pub duplicate_responses: u64,
    /// Responses ignored for another reason.
    pub ignored_responses: u64,
    /// `retry_cnt` exhausted.
    pub retry_exceeded: u64,
    /// `rnr_retry` exhausted.
    pub rnr_retry_exceeded: u64,
    /// Completions returned (any status).
    pub completions: u64,
    /// Times the window was halved at a go-back-N.
    pub window_cuts: u64,
    /// Packets the network stack refused ([`Requester::refused`]).
    pub refusals: u64,
}

/// One posted WQE (opaque; the requester's [`Store`]).
#[derive(Clone, Copy, Debug)]
pub struct Slot {
    pub(super) wqe: SendWqe,
    pub(super) len: u32,
    /// PSNs the message uses (≥ 1; 0 for a local operation).
    pub(super) npkts: u32,
    /// Valid once the requester has reached the WQE.
    pub(super) first_psn: Psn,
    /// Completion status once decided (a local operation's from the
    /// start).
    pub(super) done: Option<WcStatus>,
}

impl Slot {
    /// An unused slot, to fill a [`Store`] with.
    pub const EMPTY: Slot = Slot {
        wqe: SendWqe::new(0, SendOpcode::Send),
        len: 0,
        npkts: 1,
        first_psn: Psn::ZERO,
        done: None,
    };

    pub(super) fn is_rd_atomic(&self) -> bool {
        is_rd_atomic(self.wqe.opcode)
    }

    /// Whether the WQE takes an initiator-depth credit (`max_rd_atomic`):
    /// READ, atomics, ATOMIC WRITE and FLUSH, which a responder may answer
    /// from a responder resource (rdma_rxe takes one per ATOMIC WRITE and
    /// per FLUSH, recycling the oldest: without a credit, a FLUSH could
    /// evict the resource of a READ still in flight, whose retransmission
    /// rdma_rxe would then drop).  Unlike READ and atomics, an ACK that
    /// covers an ATOMIC WRITE or a FLUSH completes it.
    pub(super) fn takes_rd_credit(&self) -> bool {
        takes_rd_credit(self.wqe.opcode)
    }

    /// Whether the WQE is answered by an empty READ response Only (or a
    /// covering ACK): ATOMIC WRITE and FLUSH (IBTA 1.5).
    pub(super) fn answered_empty(&self) -> bool {
        answered_empty(self.wqe.opcode)
    }

    /// The PSN after the last one of the message.
    pub(super) fn end_psn(&self) -> Psn {
        self.first_psn.add(self.npkts)
    }
}

fn is_rd_atomic(op: SendOpcode) -> bool {
    matches!(
        op,
        SendOpcode::RdmaRead | SendOpcode::AtomicCmpAndSwp | SendOpcode::AtomicFetchAndAdd
    )
}

fn answered_empty(op: SendOpcode) -> bool {
    matches!(op, SendOpcode::AtomicWrite | SendOpcode::Flush)
}

/// See [`Slot::takes_rd_credit`].
fn takes_rd_credit(op: SendOpcode) -> bool {
    is_rd_atomic(op) || answered_empty(op)
}

/// The requester (and, through `comp`, the completer) of one RC QP, with
/// room for as many WQEs as `S` has slots between [`Requester::post`] and
/// [`Requester::poll_completion`].
#[derive(Clone, Debug)]
pub struct Requester<S: Store<Slot>> {
    pub(super) cfg: ReqConfig,
    pub(super) slots: S,
    /// Oldest WQE not yet returned by `poll_completion`.
    pub(super) head: u32,
    /// Oldest WQE not yet completed (`head <= done_upto`).
    pub(super) done_upto: u32,
    /// One past the last WQE whose `first_psn` is assigned.
    pub(super) hi: u32,
    /// One past the last posted WQE.
    pub(super) tail: u32,
    /// One past the last posted WQE that is not a local operation: its
    /// last packet asks for an ACK (the local operations after it send
    /// nothing that would).
    pub(super) end_remote: u32,
    /// WQE being sent and the packet index in it.
    pub(super) cursor: u32,
    pub(super) pkt: u32,
    /// Next PSN to send.
    pub(super) psn: Psn,
    /// Oldest unacknowledged PSN.
    pub(super) una: Psn,
    /// One past the highest PSN ever sent.
    pub(super) hi_psn: Psn,
    /// READ/atomic WQEs in `[done_upto, cursor)`.
    pub(super) rd_inflight: u32,
    /// PSNs of the RDMA READ WQEs in `[done_upto, cursor)` (their
    /// responses' PSNs, which do not count against the window).
    pub(super) rd_psns: u32,
    /// Packets since the last AckReq.
    pub(super) since_ack: u32,
    /// The window in use (`MIN_WINDOW..=max_unacked`, see the module docs).
    pub(super) window: u32,
    /// `una` when the window last grew, and the PSNs acknowledged since
    /// that did not yet make a whole PSN of growth.
    pub(super) window_una: Psn,
    pub(super) window_acc: u32,
    /// Retransmit deadline (ns).
    pub(super) deadline: Option<u64>,
    /// End of an RNR wait (ns).
    pub(super) rnr_until: Option<u64>,
    /// End of the pause after a refused packet (ns).
    pub(super) hold_until: Option<u64>,
    /// The pauses after refused packets, and when the refusals of the
    /// PSN refused last began or last cost a retry (ns).
    pub(super) backoff: Backoff,
    pub(super) refused_since: u64,
    /// `deadline` before the last packet produced restarted it (a refused
    /// packet did not go out, so it must not delay the ACK timeout).
    pub(super) deadline_before: Option<u64>,
    pub(super) retry: RetryState,
    /// `una` at the last NAK/implied-NAK retry, until progress.
    pub(super) retry_psn: Option<Psn>,
    /// The QP is in the error state.
    pub(super) error: bool,
    /// A WQE that failed locally (its status is in its slot) while earlier
    /// WQEs still waited for their acknowledgements: nothing from it on is
    /// sent, and the QP enters the error state once the earlier ones have
    /// completed ([`Requester::local_error`]).
    pub(super) pending_error: Option<u32>,
    pub(super) counters: ReqCounters,
}

impl<const N: usize> Requester<[Slot; N]> {
    /// A requester in RTS with `cfg` and `N` inline slots.
    pub fn new(cfg: ReqConfig) -> Self {
        Self::with_store(cfg, [Slot::EMPTY; N])
    }
}

impl<S: Store<Slot>> Requester<S> {
    /// A requester in RTS with `cfg` and the WQE storage `slots` (all
    /// [`Slot::EMPTY`]; its length is the number of WQEs it can hold).
    pub fn with_store(cfg: ReqConfig, slots: S) -> Self {
        let cfg = ReqConfig {
            max_unacked: cfg.max_unacked.clamp(1, 1 << 22),
            ack_every: cfg.ack_every.max(1),
            ..cfg
        };
        Requester {
            cfg,
            slots,
            head: 0,
            done_upto: 0,
            hi: 0,
            tail: 0,
            end_remote: 0,
            cursor: 0,
            pkt: 0,
            psn: cfg.sq_psn,
            una: cfg.sq_psn,
            hi_psn: cfg.sq_psn,
            rd_inflight: 0,
            rd_psns: 0,
            since_ack: 0,
            window: cfg.max_unacked,
            window_una: cfg.sq_psn,
            window_acc: 0,
            deadline: None,
            rnr_until: None,
            hold_until: None,
            backoff: Backoff::default(),
            refused_since: 0,
            deadline_before: None,
            retry: RetryState::new(cfg.retry_cnt, cfg.rnr_retry),
            retry_psn: None,
            error: false,
            pending_error: None,
            counters: ReqCounters::default(),
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &ReqConfig {
        &self.cfg
    }

    /// The counters.
    pub fn counters(&self) -> &ReqCounters {
        &self.counters
    }

    /// The next PSN the requester will send.
    pub fn next_psn(&self) -> Psn {
        self.psn
    }

    /// The oldest unacknowledged PSN.
    pub fn unacked_psn(&self) -> Psn {
        self.una
    }

    /// Whether the QP's send side is in the error state.
    pub fn is_error(&self) -> bool {
        self.error
    }

    /// WQEs posted and not yet polled.
    pub fn outstanding(&self) -> u32 {
        self.tail.wrapping_sub(self.head)
    }

    /// Whether every posted WQE has been polled.
    pub fn is_idle(&self) -> bool {
        self.head == self.tail
    }

    /// A local error in WQE `idx` found by the glue (bad L_Key, garbage
    /// in the ring): it completes with `status` and the QP enters the error
    /// state (later WQEs are flushed).  The error also replaces a success
    /// not polled yet: the last READ response or the atomic ACK completes
    /// its WQE before the glue places the data into the local SGEs, and a
    /// failed placement must not be reported as a success.
    ///
    /// Completions are in order and the first error is the one that
    /// explains the others: if earlier WQEs are still waiting for their
    /// acknowledgements (sent, not yet acknowledged), the error waits for
    /// them.  Nothing more is sent from `idx` on, retransmissions of the
    /// earlier WQEs go on, and once they have completed (with success or
    /// their own error) the QP enters the error state, `idx` completing
    /// with `status` and the rest flushed.
    ///
    /// A WQE that completed but was not polled yet (a READ or atomic whose
    /// data could not be placed) takes the error even in the error state,
    /// and everything after it not polled yet then flushes, whatever it
    /// completed with: no success and no second error follows the first
    /// error.  In the error state nothing else changes (a WQE not
    /// completed yet, or flushed by an earlier error, flushes anyway).
    pub fn local_error(&mut self, idx: u32, status: WcStatus) {
        let pos = idx.wrapping_sub(self.head);
        let unpolled = pos < self.tail.wrapping_sub(self.head);
        let completed = pos < self.done_upto.wrapping_sub(self.head);
        let succeeded = self
            .slot(idx)
            .is_some_and(|s| s.done == Some(WcStatus::Success));
        if !unpolled || (self.error && !(completed && succeeded)) {
            return;
        }
        if let Some(s) = self.slot_mut(idx) {
            if matches!(s.done, None | Some(WcStatus::Success)) {
                s.done = Some(status);
            }
        }
        if completed {
            let mut i = idx.wrapping_add(1);
            while i != self.tail {
                if let Some(s) = self.slot_mut(i) {
                    s.done = None;
                }
                i = i.wrapping_add(1);
            }
            // (A pending error after it is not reported now: `flush`
            // leaves it flushed.)
            self.flush();
            return;
        }
        if self.error {
            return;
        }
        if pos > self.done_upto.wrapping_sub(self.head) {
            // Earlier WQEs first; the oldest local error counts, and the
            // other one flushes with the rest (no second error).
            let (keep, drop) = match self.pending_error {
                Some(e) if e.wrapping_sub(self.head) < pos => (e, idx),
                Some(e) => (idx, e),
                None => (idx, idx),
            };
            if drop != keep {
                if let Some(s) = self.slot_mut(drop) {
                    s.done = None;
                }
            }
            let fresh = self.pending_error.is_none();
            self.pending_error = Some(keep);
            // The earlier messages must be acknowledged before the error
            // is reported.  If the last one sent is a SEND or WRITE, its
            // last packet may not have asked for an ACK (unsignaled, with
            // this one queued behind it), and a responder that
            // acknowledges only on AckReq (rdma_rxe) never would: that
            // packet is sent again, asking (every message asks once an
            // error is pending; a duplicate is acknowledged, C9-105).  A
            // READ or atomic is answered anyway.  Until 2026-12-07 the
            // error waited a whole ACK timeout and a retry for it, for
            // ever at timeout 0 (found by review).
            if let Some(p) = self.last_sent_before(keep).filter(|_| fresh) {
                self.restart_from(p);
            }
            return;
        }
        self.flush();
    }

    /// The last PSN of the latest message before WQE `idx` that was sent
    /// whole and is not complete, if it is a SEND or WRITE (not answered
    /// by a response of its own).
    fn last_sent_before(&self, idx: u32) -> Option<Psn> {
        let mut i = idx;
        while i != self.done_upto {
            i = i.wrapping_sub(1);
            let s = self.slot(i)?;
            if s.npkts == 0 {
                continue;
            }
            let sent_whole =
                i.wrapping_sub(self.done_upto) < self.cursor.wrapping_sub(self.done_upto);
            if !sent_whole || s.done.is_some() || s.takes_rd_credit() {
                return None;
            }
            return Some(s.first_psn.add(s.npkts - 1));
        }
        None
    }

    /// Whether a WQE posted now can only complete with a flush: the QP is
    /// in the error state, or will be once the WQEs before a failed one
    /// have completed.  The glue flushes a local operation then instead of
    /// executing it.
    pub fn will_flush(&self) -> bool {
        self.error || self.pending_error.is_some()
    }

    /// Whether every posted WQE has completed.
    pub fn all_completed(&self) -> bool {
        self.done_upto == self.tail
    }

    /// Whether every packet of every message posted has been sent at
    /// least once (a go-back-N may be resending some of them again).
    pub fn all_sent(&self) -> bool {
        if self.cursor == self.tail && self.pkt == 0 {
            return true;
        }
        // The last message posted decides (local operations after it have
        // no packets).  It is whole once `hi` passed it (its first packet
        // went out, after every packet of the messages before it) and the
        // highest PSN sent reached its end.
        let pos = |i: u32| i.wrapping_sub(self.head);
        let end = pos(self.end_remote);
        if end > pos(self.tail) || end <= pos(self.done_upto) {
            // Polled or completed already.
            return true;
        }
        pos(self.hi) >= end
            && self.slot(self.end_remote.wrapping_sub(1)).is_some_and(|s| {
                s.end_psn().distance_from(self.una) <= self.hi_psn.distance_from(self.una)
            })
    }

    /// Whether local operation `wqe` must wait until every earlier WQE has
    /// completed before the glue executes it: anything with `SEND_FENCE`.
    pub fn local_must_wait(wqe: &SendWqe) -> bool {
        wqe.flags & SEND_FENCE != 0
    }

    /// Whether local operation `wqe` must wait until every earlier WQE has
    /// been sent whole ([`Requester::all_sent`]) before the glue executes
    /// it: LOCAL_INV, so that no earlier message starts after the region
    /// it names became invalid.
    pub fn local_waits_for_sends(wqe: &SendWqe) -> bool {
        wqe.opcode == SendOpcode::LocalInv
    }

    /// Whether the glue may execute local operation `wqe` now and record
    /// it with [`Requester::post_local`]: REG_MR and BIND_MW at once,
    /// LOCAL_INV once every earlier message was sent, fenced ones once
    /// every earlier WQE completed.  Also whenever it can only be flushed
    /// ([`Requester::will_flush`]: the glue records it flushed, without
    /// executing it).
    pub fn local_may_run(&self, wqe: &SendWqe) -> bool {
        if self.will_flush() || self.all_completed() {
            return true;
        }
        !Self::local_must_wait(wqe) && (!Self::local_waits_for_sends(wqe) || self.all_sent())
    }

    /// Records a local operation (LOCAL_INV, REG_MR, BIND_MW) that the glue
    /// executed with result `status` ([`Requester::local_may_run`] said it
    /// could).  It uses no PSN and sends nothing, and completes in WQE
    /// order: once every earlier WQE has.  A failure moves the QP to the
    /// error state, after the earlier WQEs have completed (as
    /// [`Requester::local_error`]); in the error state the glue must not
    /// execute it and it completes with `WR_FLUSH_ERR` whatever `status`
    /// says.
    pub fn post_local(&mut self, wqe: SendWqe, status: WcStatus) -> Result<u32, PostError> {
        let used = usize::try_from(self.tail.wrapping_sub(self.head)).unwrap_or(usize::MAX);
        if used >= self.capacity() {
            return Err(PostError::Full);
        }
        if !wqe.opcode.is_local() {
            return Err(PostError::Unsupported);
        }
        if !self.local_may_run(&wqe) {
            return Err(PostError::Busy);
        }
        let idx = self.tail;
        let error = self.error;
        let psn = self.psn;
        let s = self.slot_mut(idx).ok_or(PostError::Full)?;
        *s = Slot {
            wqe,
            len: 0,
            npkts: 0,
            first_psn: psn,
            done: Some(if error { WcStatus::WrFlushErr } else { status }),
        };
        self.tail = idx.wrapping_add(1);
        if error {
            return Ok(idx);
        }
        if status == WcStatus::Success {
            self.pass_locals();
        } else if self.done_upto == idx {
            // Nothing before it is outstanding: every index moves past it.
            self.done_upto = self.tail;
            self.hi = self.tail;
            self.cursor = self.tail;
            self.pkt = 0;
            self.flush();
        } else if self.pending_error.is_none() {
            // Earlier WQEs first; nothing after it is sent.
            self.pending_error = Some(idx);
        }
        // (With an earlier local error pending, this one flushes with the
        // rest: `flush` clears the status of local operations after the
        // one reported.)
        Ok(idx)
    }

    /// Moves the send position past local operations (they have no
    /// packets) and the completion position past the ones whose earlier
    /// WQEs have all completed.  Stops at a failed one waiting to be
    /// reported (`pending_error`).  Called after anything that moves
    /// `cursor`, `done_upto` or `tail`, so that neither rests on a local
    /// operation that could pass.
    pub(super) fn pass_locals(&mut self) {
        if self.error {
            return;
        }
        while self.pkt == 0 && self.cursor != self.tail && Some(self.cursor) != self.pending_error {
            let (cursor, at_hi, psn) = (self.cursor, self.cursor == self.hi, self.psn);
            match self.slot_mut(cursor) {
                Some(s) if s.wqe.opcode.is_local() => {
                    if at_hi {
                        s.first_psn = psn;
                    }
                }
                _ => break,
            }
            if at_hi {
                self.hi = cursor.wrapping_add(1);
            }
            self.cursor = cursor.wrapping_add(1);
        }
        while self.done_upto != self.hi && Some(self.done_upto) != self.pending_error {
            if !self
                .slot(self.done_upto)
                .is_some_and(|s| s.wqe.opcode.is_local())
            {
                break;
            }
            self.done_upto = self.done_upto.wrapping_add(1);
            if self.pending_error == Some(self.done_upto) {
                // Everything before the failed WQE has completed.
                self.flush();
                return;
            }
        }
    }

    /// Give back the WQE storage (e.g. to reuse it after a reset).
    pub fn into_store(self) -> S {
        self.slots
    }

    /// Number of WQEs the requester can hold.
    pub fn capacity(&self) -> usize {
        self.slots.items().len()
    }

    pub(super) fn slot(&self, i: u32) -> Option<&Slot> {
        let n = self.capacity();
        usize::try_from(i)
            .ok()
            .and_then(|i| i.checked_rem(n))
            .and_then(|i| self.slots.items().get(i))
    }

    pub(super) fn slot_mut(&mut self, i: u32) -> Option<&mut Slot> {
        let n = self.capacity();
        usize::try_from(i)
            .ok()
            .and_then(|i| i.checked_rem(n))
            .and_then(|i| self.slots.items_mut().get_mut(i))
    }

    /// Queue a decoded send WQE whose local data is `length` bytes.  Returns
    /// its index.  In the error state the WQE is accepted and completes with
    /// `WR_FLUSH_ERR`.
    pub fn post(&mut self, wqe: SendWqe, length: u32) -> Result<u32, PostError> {
        let used = usize::try_from(self.tail.wrapping_sub(self.head)).unwrap_or(usize::MAX);
        if used >= self.capacity() {
            return Err(PostError::Full);
        }
        if wqe.opcode.is_local() {
            return Err(PostError::Unsupported);
        }
        if length > MAX_MSG_SIZE {
            return Err(PostError::TooLong);
        }
        if self.cfg.unreliable
            && matches!(
                wqe.opcode,
                SendOpcode::RdmaRead
                    | SendOpcode::AtomicCmpAndSwp
                    | SendOpcode::AtomicFetchAndAdd
                    | SendOpcode::SendWithInv
                    | SendOpcode::AtomicWrite
                    | SendOpcode::Flush
            )
        {
            return Err(PostError::NotOnTransport);
        }
        if takes_rd_credit(wqe.opcode) && self.cfg.max_rd_atomic == 0 {
            return Err(PostError::NoRdAtomic);
        }
        let n = match wqe.opcode {
            SendOpcode::AtomicCmpAndSwp | SendOpcode::AtomicFetchAndAdd => 1,
            SendOpcode::AtomicWrite => {
                if length != 8 {
                    return Err(PostError::TooLong);
                }
                1
            }
            SendOpcode::Flush => {
                if length != 0 || wqe.flush_params().is_none() {
                    return Err(PostError::TooLong);
                }
                1
            }
            _ => npkts(length, self.cfg.pmtu),
        };
        let idx = self.tail;
        let error = self.error;
        let s = self.slot_mut(idx).ok_or(PostError::Full)?;
        *s = Slot {
            wqe,
            len: length,
            npkts: n,
            first_psn: Psn::ZERO,
            done: if error {
                Some(WcStatus::WrFlushErr)
            } else {
                None
            },
        };
        self.tail = idx.wrapping_add(1);
        self.end_remote = self.tail;
        Ok(idx)
    }

    /// Why the requester cannot send now, or `None` if
    /// [`Requester::next_packet`] would produce a packet.
    pub fn blocked(&self) -> Option<Blocked> {
        if self.error {
            return Some(Blocked::Error);
        }
        if let Some(e) = self.pending_error {
            if self.cursor.wrapping_sub(self.done_upto) >= e.wrapping_sub(self.done_upto) {
                return Some(Blocked::Error);
            }
        }
        if self.rnr_until.is_some() {
            return Some(Blocked::RnrWait);
        }
        if self.hold_until.is_some() {
            return Some(Blocked::Refused);
        }
        if self.cursor == self.tail {
            return Some(Blocked::Empty);
        }
        let s = self.slot(self.cursor)?;
        if self.cfg.unreliable {
            return None;
        }
        if self.window_used() >= self.window || self.psn.distance_from(self.una) >= MAX_SPAN {
            return Some(Blocked::Window);
        }
        if self.pkt == 0 && s.wqe.flags & SEND_FENCE != 0 && self.rd_inflight > 0 {
            return Some(Blocked::Fence);
        }
        if s.takes_rd_credit() && self.rd_inflight >= u32::from(self.cfg.max_rd_atomic) {
            return Some(Blocked::RdAtomicCredits);
        }
        None
    }

    /// The next request packet to send at time `now` (ns), or `None` if
    /// nothing may be sent now (see [`Requester::blocked`]).  Call it until
    /// it returns `None` after every post, response and timer event.
    pub fn next_packet(&mut self, now: u64) -> Option<PacketDesc> {
        if self.blocked().is_some() {
            return None;
        }
        let idx = self.cursor;
        if self.pkt == 0 && idx == self.hi {
            let psn = self.psn;
            let s = self.slot_mut(idx)?;
            s.first_psn = psn;
            self.hi = idx.wrapping_add(1);
        }
        let s = *self.slot(idx)?;
        let shift = self.cfg.pmtu.shift();
        let mtu = self.cfg.pmtu.bytes();
        let k = self.pkt;
        let offset = u32::try_from(u64::from(k) << shift).ok()?;
        let psn = self.psn;
        let w = &s.wqe;
        let mut d = PacketDesc {
            wqe: idx,
            opcode: 0,
            psn,
            ack_req: false,
            solicited: false,
            pad: 0,
            payload: None,
            reth: None,
            feth: None,
            imm: None,
            ieth: None,
            atomic: None,
            retransmit: psn.distance_from(self.una) < self.hi_psn.distance_from(self.una),
        };
        let transport = if self.cfg.unreliable {
            Transport::Uc
        } else {
            Transport::Rc
        };
        let used; // PSNs consumed by this packet
        let finished; // the WQE is fully sent
        match w.opcode {
            SendOpcode::RdmaRead => {
                let rest = s.len.checked_sub(offset)?;
                d.opcode = request_opcode(Transport::Rc, RequestOp::RdmaRead, Position::Only)?;
                d.reth = Some(Reth {
                    va: w.remote_addr.wrapping_add(u64::from(offset)),
                    rkey: w.rkey,
                    len: rest,
                });
                d.ack_req = true;
                used = s.npkts.checked_sub(k)?;
                finished = true;
            }
            SendOpcode::AtomicCmpAndSwp | SendOpcode::AtomicFetchAndAdd => {
                let (r, swap_add, compare) = if w.opcode == SendOpcode::AtomicCmpAndSwp {
                    (RequestOp::CompareSwap, w.swap, w.compare_add)
                } else {
                    (RequestOp::FetchAdd, w.compare_add, 0)
                };
                d.opcode = request_opcode(Transport::Rc, r, Position::Only)?;
                d.atomic = Some(AtomicEth {
                    va: w.remote_addr,
                    rkey: w.rkey,
                    swap_add,
                    compare,
                });
                d.ack_req = true;
                used = 1;
                finished = true;
            }
            SendOpcode::AtomicWrite => {
                // RETH and the 8 bytes (the WQE's source); answered by an
                // empty READ response, and it takes an initiator-depth
                // credit (`takes_rd_credit`).
                d.opcode = request_opcode(Transport::Rc, RequestOp::AtomicWrite, Position::Only)?;
                d.reth = Some(Reth {
                    va: w.remote_addr,
                    rkey: w.rkey,
                    len: 8,
                });
                d.payload = Some((0, 8));
                d.ack_req = true;
                used = 1;
                finished = true;
            }
            SendOpcode::Flush => {
                // FETH and RETH, no payload; answered like ATOMIC WRITE
                // (an empty READ response or a covering ACK).
                let f = w.flush_params()?;
                d.opcode = request_opcode(Transport::Rc, RequestOp::Flush, Position::Only)?;
                d.feth = Some(Feth::new(f.placement, f.level));
                d.reth = Some(Reth {
                    va: w.remote_addr,
                    rkey: w.rkey,
                    len: f.len,
                });
                d.ack_req = true;
                used = 1;
                finished = true;
            }
            op => {
                let r = match op {
                    SendOpcode::Send => RequestOp::Send,
                    SendOpcode::SendWithImm => RequestOp::SendWithImm,
                    SendOpcode::SendWithInv => RequestOp::SendWithInv,
                    SendOpcode::RdmaWrite => RequestOp::RdmaWrite,
                    SendOpcode::RdmaWriteWithImm => RequestOp::RdmaWriteWithImm,
                    _ => return None,
                };
                let pos = super::super::opcode::position_of(k, s.npkts);
                let len = s.len.checked_sub(offset)?.min(mtu);
                d.opcode = request_opcode(transport, r, pos)?;
                d.payload = Some((offset, len));
                d.pad = pad_count(len as usize);
                if pos.is_start() && matches!(r, RequestOp::RdmaWrite | RequestOp::RdmaWriteWithImm)
                {
                    d.reth = Some(Reth {
                        va: w.remote_addr,
                        rkey: w.rkey,
                        len: s.len,
                    });
                }
                if pos.is_end() {
                    if w.opcode.has_imm() {
                        d.imm = Some(imm_from_wqe(w.imm_or_inv));
                    }
                    if r == RequestOp::SendWithInv {
                        d.ieth = Some(Ieth { rkey: w.imm_or_inv });
                    }
                    d.solicited = w.flags & SEND_SOLICITED != 0
                        && matches!(
                            r,
                            RequestOp::Send
                                | RequestOp::SendWithImm
                                | RequestOp::SendWithInv
                                | RequestOp::RdmaWriteWithImm
                        );
                }
                // A message's last packet asks for an ACK if its WQE is
                // signaled or no other message is queued behind it (local
                // operations send nothing): an unsignaled message followed
                // by another is acknowledged by that one's ACK (ACKs are
                // cumulative), so a burst of small unsignaled messages
                // costs one ACK, not one each.  The chain always ends in
                // an AckReq: the last message the requester holds asks
                // (a local operation waiting for it to be sent or to
                // complete is not taken before); with a failed WQE waiting to be reported,
                // after which nothing is sent, every message asks.
                d.ack_req = pos.is_end()
                    && (w.flags & SEND_SIGNALED != 0
                        || idx.wrapping_add(1) == self.end_remote
                        || self.pending_error.is_some());
                used = 1;
                finished = pos.is_end();
            }
        }
        let next = psn.add(used);
        if self.cfg.unreliable {
            // No ACKs will come: every packet is "acknowledged" once
            // produced, and the WQE completes with its last packet.
            d.ack_req = false;
            self.psn = next;
            self.una = next;
            self.hi_psn = next;
            if finished {
                self.cursor = idx.wrapping_add(1);
                self.pkt = 0;
                self.complete_next(WcStatus::Success);
            } else {
                self.pkt = k.wrapping_add(1);
            }
            self.counters.packets = self.counters.packets.wrapping_add(1);
            return Some(d);
        }
        if self.since_ack.wrapping_add(1) >= self.cfg.ack_every
            || self.window_used().saturating_add(used) >= self.window
        {
            d.ack_req = true;
        }
        if d.ack_req {
            self.since_ack = 0;
        } else {
            self.since_ack = self.since_ack.wrapping_add(1);
        }
        // Commit.
        self.psn = next;
        if next.distance_from(self.una) > self.hi_psn.distance_from(self.una) {
            self.hi_psn = next;
        }
        if finished {
            self.cursor = idx.wrapping_add(1);
            self.pkt = 0;
            if s.takes_rd_credit() {
                self.rd_inflight = self.rd_inflight.wrapping_add(1);
            }
            if s.wqe.opcode == SendOpcode::RdmaRead {
                self.rd_psns = self.rd_psns.saturating_add(s.npkts);
            }
            self.pass_locals();
        } else {
            self.pkt = k.wrapping_add(1);
        }
        // The transport timer restarts with every packet sent: it fires
        // only after a whole timeout with neither progress nor sending.  A
        // host slower than the timeout (an emulated or debug kernel) then
        // still completes long messages instead of rewinding to the first
        // unacknowledged packet again and again; losses in the middle of a
        // burst are reported sooner by the responder's sequence NAK.
        self.deadline_before = self.deadline;
        self.deadline = self.timeout_ns().map(|t| now.saturating_add(t));
        self.counters.packets = self.counters.packets.wrapping_add(1);
        if d.retransmit {
            self.counters.retransmitted = self.counters.retransmitted.wrapping_add(1);
        }
        Some(d)
    }

    pub(super) fn timeout_ns(&self) -> Option<u64> {
        ack_timeout_ns(self.cfg.timeout)
    }

    /// Unreliable mode: packet `d`, the last one [`Requester::next_packet`]
    /// produced, did not go out (its data could not be read yet: an
    /// on-demand page is missing).  The next call produces it again, with
    /// the same PSN, and a WQE it completed is not complete any more.
    /// (Reliable mode goes back with [`Requester::restart_from`]; UC has
    /// nothing to go back to: every PSN before `d` is gone.)  `false`,
    /// changing nothing, if `d` is not that packet or the requester
    /// entered the error state meanwhile (then the glue fails the WQE with
    /// [`Requester::local_error`]).
    pub fn unsend(&mut self, d: &PacketDesc) -> bool {
        if !self.cfg.unreliable || self.error || d.psn.next() != self.psn {
            return false;
        }
        let idx = d.wqe;
        let pos = idx.wrapping_sub(self.head);
        if pos >= self.tail.wrapping_sub(self.head) {
            return false;
        }
        let Some(s) = self.slot(idx).copied() else {
            return false;
        };
        let k = d.psn.distance_from(s.first_psn);
        if k >= s.npkts {
            return false;
        }
        if self.done_upto.wrapping_sub(self.head) > pos {
            // Its last packet completed it (and `pass_locals` may have
            // passed local operations after it): back to before that.
            if s.done != Some(WcStatus::Success) || k + 1 != s.npkts {
                return false;
            }
            if let Some(s) = self.slot_mut(idx) {
                s.done = None;
            }
            self.done_upto = idx;
        }
        self.cursor = idx;
        self.pkt = k;
        self.psn = d.psn;
        self.una = d.psn;
        self.hi_psn = d.psn;
        self.counters.packets = self.counters.packets.wrapping_sub(1);
        true
    }

    /// The glue could not transmit packet `d`, the last one
    /// [`Requester::next_packet`] produced, at time `now` (ns): the network
    /// stack refused it (a full device queue or backlog, no memory).  The
    /// requester goes back to it and sends nothing for a pause
    /// ([`Blocked::Refused`]; [`Requester::next_deadline`] is its end; its
    /// length: [`Backoff`]).  Treated as lost instead, the packet
    /// would cost a sequence NAK's round trip or, at the end of a burst, an
    /// ACK timeout, and the rest of the burst would be built only to be
    /// refused too.
    ///
    /// Reliable mode: a packet that had never been sent is taken back
    /// whole (it was not sent: no retransmission when it goes, not part of
    /// [`Requester::all_sent`]); the refused packet does not restart the
    /// ACK timer; and each ACK timeout's worth of refusals of one PSN
    /// costs a retry, as a lost packet's ACK timeout does, so a device
    /// that never takes the packet ends in `RETRY_EXC_ERR`.  Unreliable
    /// mode: the packet is taken back ([`Requester::unsend`]) up to
    /// [`UC_MAX_REFUSALS`] times in a row, then it is lost.
    ///
    /// `false`, changing nothing but the count, if the packet is to be
    /// treated as lost: not the last one produced, the QP in the error
    /// state, or UC's limit reached.
    pub fn refused(&mut self, d: &PacketDesc, now: u64) -> bool {
        self.counters.refusals = self.counters.refusals.wrapping_add(1);
        if self.error {
            return false;
        }
        let mut b = self.backoff;
        let hold = b.refused(d.psn, now);
        if self.cfg.unreliable {
            if b.same() > UC_MAX_REFUSALS || !self.unsend(d) {
                self.backoff.reset();
                return false;
            }
        } else {
            if d.psn.distance_from(self.una) >= self.psn.distance_from(self.una) {
                return false;
            }
            if b.same() == 1 {
                self.refused_since = now;
            } else if self
                .timeout_ns()
                .is_some_and(|t| now.saturating_sub(self.refused_since) >= t)
            {
                self.refused_since = now;
                self.counters.timeouts = self.counters.timeouts.wrapping_add(1);
                if !self.retry.on_timeout() {
                    self.counters.retry_exceeded = self.counters.retry_exceeded.wrapping_add(1);
                    self.backoff.reset();
                    self.fatal_at(d.psn, WcStatus::RetryExcErr);
                    return true;
                }
            }
            if !d.retransmit {
                // Its PSNs were new: back to before `next_packet` made it.
                self.hi_psn = d.psn;
                let first = self.slot(d.wqe).is_some_and(|s| s.first_psn == d.psn);
                if first && self.hi == d.wqe.wrapping_add(1) {
                    self.hi = d.wqe;
                }
            }
            self.seek(d.psn);
            self.deadline = if self.una == self.hi_psn {
                None
            } else {
                self.deadline_before.or(self.deadline)
            };
        }
        self.backoff = b;
        self.hold_until = Some(now.saturating_add(hold));
        true
    }

    /// Go-back-N: resend from `psn`, which must lie between the oldest
    /// unacknowledged PSN and the highest PSN sent (inclusive); other values
    /// are ignored.  The completer calls this itself on sequence NAKs,
    /// implied NAKs, RNR NAKs and timeouts; it is public for the glue (e.g.
    /// to resume after an SQ drain) and for tests.
    pub fn restart_from(&mut self, psn: Psn) {
        if psn.distance_from(self.una) > self.hi_psn.distance_from(self.una) {
            return;
        }
        self.seek(psn);
    }

    /// Position the cursor on `target` (in `[una, hi_psn]`).
    pub(super) fn seek(&mut self, target: Psn) {
        let mut i = self.done_upto;
        let mut found = None;
        while i != self.hi {
            if let Some(s) = self.slot(i) {
                let k = target.distance_from(s.first_psn);
                if k < s.npkts {
                    found = Some((i, k));
                    break;
                }
            }
            i = i.wrapping_add(1);
        }
        let (cursor, pkt) = found.unwrap_or((self.hi, 0));
        self.cursor = cursor;
        self.pkt = pkt;
        self.psn = target;
        self.since_ack = 0;
        let mut n = 0u32;
        let mut rd_psns = 0u32;
        let mut i = self.done_upto;
        while i != cursor {
            if let Some(s) = self
                .slot(i)
                .filter(|s| s.takes_rd_credit() && s.done.is_none())
            {
                n = n.wrapping_add(1);
                if s.wqe.opcode == SendOpcode::RdmaRead {
                    rd_psns = rd_psns.saturating_add(s.npkts);
                }
            }
            i = i.wrapping_add(1);
        }
        self.rd_inflight = n;
        self.rd_psns = rd_psns;
        self.pass_locals();
    }

    /// New `timeout`, `retry_cnt`, `rnr_retry` and `max_rd_atomic` from a
    /// `modify_qp` in RTS or SQD (RTS → RTS, SQD → SQD, SQD → RTS): they
    /// apply from now on, with whole retry budgets.  A QP that had
    /// READ/atomic credits keeps at least one (with none, a READ already
    /// posted would wait for ever).
    pub fn set_timing(&mut self, timeout: u8, retry_cnt: u8, rnr_retry: u8, max_rd_atomic: u8) {
        self.cfg.timeout = timeout;
        self.cfg.retry_cnt = retry_cnt;
        self.cfg.rnr_retry = rnr_retry;
        self.retry = RetryState::new(retry_cnt, rnr_retry);
        self.cfg.max_rd_atomic = if self.cfg.max_rd_atomic > 0 {
            max_rd_atomic.max(1)
        } else {
            max_rd_atomic
        };
    }

    /// Reset the flow-control window and AckReq period (e.g. for tests).
    pub fn set_window(&mut self, max_unacked: u32, ack_every: u32) {
        self.cfg.max_unacked = max_unacked.clamp(1, 1 << 22);
        self.cfg.ack_every = ack_every.max(1);
        self.window = self.cfg.max_unacked;
    }

    /// The window in use now: `max_unacked`, or less after losses.
    pub fn window(&self) -> u32 {
        self.window
    }

    /// PSNs in flight that count against the window: those from `una` to
    /// the next PSN to send, less the PSNs of the RDMA READ responses
    /// still expected.  A READ request is one packet; its responses are
    /// limited by `max_rd_atomic` and paced by the responder, so a 1 MiB
    /// READ does not stop the requester from sending anything else (nor
    /// more READs) for 1,024 PSNs.
    ///
    /// After a loss (the window below `max_unacked`), READ responses count
    /// too: a go-back-N re-requests every READ in flight, and the
    /// responder sends each again in full, so on a lossy or reordering path
    /// READs outside the window multiplied the packets sent (16 MiB of
    /// READs under netem reorder: 2.4 million responses for 16,384).
    pub fn window_used(&self) -> u32 {
        if self.window < self.cfg.max_unacked {
            return self.psn.distance_from(self.una);
        }
        let mut rd = self.rd_psns;
        if self.done_upto != self.cursor {
            if let Some(s) = self
                .slot(self.done_upto)
                .filter(|s| s.wqe.opcode == SendOpcode::RdmaRead)
            {
                // The responses of the oldest READ already received.
                rd = rd.saturating_sub(self.una.distance_from(s.first_psn).min(s.npkts));
            }
        }
        self.psn.distance_from(self.una).saturating_sub(rd)
    }

    /// A loss (go-back-N): halve the window, down to
    /// [`ReqConfig::MIN_WINDOW`].
    pub(super) fn shrink_window(&mut self) {
        let floor = ReqConfig::MIN_WINDOW.min(self.cfg.max_unacked);
        self.window = (self.window / 2).max(floor);
        self.window_acc = 0;
        self.counters.window_cuts = self.counters.window_cuts.wrapping_add(1);
    }

    /// `una` moved forward: one PSN of window back per [`WINDOW_GROWTH`]
    /// PSNs acknowledged, up to `max_unacked`.
    pub(super) fn grow_window(&mut self) {
        let acked = self.una.distance_from(self.window_una);
        self.window_una = self.una;
        if self.window >= self.cfg.max_unacked {
            return;
        }
        let acc = self.window_acc.saturating_add(acked);
        self.window = self
            .window
            .saturating_add(acc / WINDOW_GROWTH)
            .min(self.cfg.max_unacked);
        self.window_acc = acc % WINDOW_GROWTH;
    }
}

/// Why the requester sends nothing (see [`Requester::blocked`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocked {
    /// The QP is in the error state, or a WQE failed locally and the QP
    /// enters it once the WQEs before that one have completed.
    Error,
    /// Waiting for the RNR timer.
    RnrWait,
    /// Pausing after the network stack refused a packet
    /// ([`Requester::refused`]).
    Refused,
    /// Every posted WQE has been sent.
    Empty,
    /// `max_unacked` PSNs are in flight.
    Window,
    /// A fenced WQE waits for earlier READ/atomic WQEs.
    Fence,
    /// `max_rd_atomic` READ/atomic requests are outstanding.
    RdAtomicCredits,
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::super::super::opcode::*;
    use super::super::super::wqe::{WcOpcode, SEND_SIGNALED};
    use super::super::SendCompletion;
    use super::*;
    use std::vec;
    use std::vec::Vec;

    fn cfg(pmtu: PathMtu) -> ReqConfig {
        ReqConfig {
            sq_psn: Psn::new(0xFF_FFF0),
            pmtu,
            max_rd_atomic: 4,
            timeout: 10,
            retry_cnt: 3,
            rnr_retry: 3,
            max_unacked: 1 << 20,
            ack_every: 1 << 20,
            unreliable: false,
        }
    }

    fn wqe(op: SendOpcode) -> SendWqe {
        let mut w = SendWqe::new(7, op);
        w.remote_addr = 0x1000;
        w.rkey = 0x42;
        w.imm_or_inv = 0x0403_0201;
        w
    }

    fn drain<const N: usize>(r: &mut Requester<[Slot; N]>) -> Vec<PacketDesc> {
        let mut v = Vec::new();
        while let Some(p) = r.next_packet(0) {
            v.push(p);
        }
        v
    }

    /// A positive ACK of every PSN up to `psn`, with MSN `msn`.
    fn ack(psn: Psn, msn: u32) -> super::super::InResponse {
        use super::super::super::hdr::{Aeth, Syndrome};
        super::super::InResponse {
            opcode: RC_ACKNOWLEDGE,
            psn,
            aeth: Some(Aeth {
                syndrome: Syndrome::Ack { credits: 0x1F }.encode(),
                msn,
            }),
            ..Default::default()
        }
    }

    /// The timer restarts with every packet: a burst sent more slowly
    /// than the timeout does not time out while it is being sent, only a
    /// whole timeout after its last packet.
    #[test]
    fn timer_restarts_per_packet() {
        let mut r: Requester<[Slot; 4]> = Requester::new(cfg(PathMtu::Mtu1024));
        r.post(wqe(SendOpcode::Send), 64 * 1024).unwrap();
        let t = r.timeout_ns().unwrap();
        let step = t / 4;
        let mut now = 0;
        let mut sent = 0;
        while let Some(p) = r.next_packet(now) {
            assert!(!p.retransmit);
            sent += 1;
            now += step;
            assert!(!r.on_timer(now), "timed out while sending packet {sent}");
        }
        assert_eq!(sent, 64);
        let last = now - step;
        assert_eq!(r.next_deadline(), Some(last + t));
        assert!(r.on_timer(last + t));
        assert_eq!(r.counters().timeouts, 1);
        assert!(r.next_packet(last + t).is_some_and(|p| p.retransmit));
    }

    #[test]
    fn segmentation_all_sizes() {
        for pmtu in PathMtu::ALL {
            let m = pmtu.bytes();
            for len in [0, 1, m - 1, m, m + 1, 3 * m, 3 * m + 5, 1 << 20] {
                for op in [SendOpcode::Send, SendOpcode::RdmaWriteWithImm] {
                    let mut r: Requester<[Slot; 4]> = Requester::new(cfg(pmtu));
                    r.post(wqe(op), len).unwrap();
                    let v = drain(&mut r);
                    assert_eq!(v.len() as u32, npkts(len, pmtu));
                    let mut off = 0;
                    for (i, p) in v.iter().enumerate() {
                        let info = lookup(p.opcode).unwrap();
                        assert_eq!(info.position, position_of(i as u32, v.len() as u32));
                        assert_eq!(p.psn, Psn::new(0xFF_FFF0).add(i as u32));
                        let (o, l) = p.payload.unwrap();
                        assert_eq!(o, off);
                        off += l;
                        assert!(payload_len_ok(info.position, l, m));
                        assert_eq!(p.pad, pad_count(l as usize));
                        assert_eq!(p.ack_req, info.position.is_end());
                        assert_eq!(p.imm.is_some(), info.imm);
                        assert_eq!(p.reth.is_some(), info.hdrs.contains(ExtHdrs::RETH));
                        if let Some(reth) = p.reth {
                            assert_eq!(reth.len, len);
                        }
                        // The descriptor builds with hdr.rs.
                        let mut buf = [0u8; 64];
                        build_headers(&mut buf, &p.bth(5, 0xFFFF), &p.ext()).unwrap();
                    }
                    assert_eq!(off, len);
                    assert!(r.next_packet(0).is_none());
                }
            }
        }
    }

    fn payload_len_ok(pos: Position, l: u32, m: u32) -> bool {
        super::super::super::hdr::payload_len_ok(pos, l as usize, m as usize)
    }
    use super::super::super::hdr::build_headers;

    #[test]
    fn read_and_atomic_psns() {
        let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu1024));
        r.post(wqe(SendOpcode::RdmaRead), 5000).unwrap();
        r.post(wqe(SendOpcode::AtomicFetchAndAdd), 8).unwrap();
        r.post(wqe(SendOpcode::Send), 0).unwrap();
        let v = drain(&mut r);
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].opcode, RC_RDMA_READ_REQUEST);
        assert_eq!(v[0].reth.unwrap().len, 5000);
        assert_eq!(v[0].payload, None);
        assert_eq!(v[1].psn, v[0].psn.add(5));
        assert_eq!(v[1].opcode, RC_FETCH_ADD);
        assert_eq!(
            v[1].atomic.unwrap().swap_add,
            wqe(SendOpcode::Send).compare_add
        );
        assert_eq!(v[2].psn, v[0].psn.add(6));
        assert_eq!(v[2].opcode, RC_SEND_ONLY);
        assert_eq!(v[2].payload, Some((0, 0)));
    }

    #[test]
    fn flush_packet() {
        use super::super::super::hdr::{FLUSH_GLOBAL, FLUSH_MR, FLUSH_RANGE};
        use super::super::super::opcode::RC_FLUSH;
        let w = SendWqe::flush(1, 0x77, 0x4000, 300, FLUSH_GLOBAL, FLUSH_RANGE);
        // It takes an initiator-depth credit, like ATOMIC WRITE.
        let mut z: Requester<[Slot; 8]> = Requester::new(ReqConfig {
            max_rd_atomic: 0,
            ..cfg(PathMtu::Mtu1024)
        });
        assert_eq!(z.post(w, 0), Err(PostError::NoRdAtomic));
        let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu1024));
        assert_eq!(r.post(w, 8), Err(PostError::TooLong), "no local data");
        assert_eq!(
            r.post(SendWqe::flush(1, 0x77, 0x4000, 300, 0, FLUSH_RANGE), 0),
            Err(PostError::TooLong),
            "no placement type"
        );
        r.post(w, 0).unwrap();
        r.post(
            SendWqe::flush(2, 0x77, 0, 1 << 40, FLUSH_GLOBAL, FLUSH_MR),
            0,
        )
        .unwrap();
        let v = drain(&mut r);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].opcode, RC_FLUSH);
        let f = v[0].feth.unwrap();
        assert_eq!((f.placement(), f.level()), (FLUSH_GLOBAL, FLUSH_RANGE));
        let reth = v[0].reth.unwrap();
        assert_eq!((reth.va, reth.rkey, reth.len), (0x4000, 0x77, 300));
        assert_eq!((v[0].payload, v[0].ack_req), (None, true));
        assert_eq!(v[1].psn, v[0].psn.add(1));
        // The whole region: the length is not sent.
        assert_eq!(v[1].feth.unwrap().level(), FLUSH_MR);
        assert_eq!(v[1].reth.unwrap().len, 0);
        assert_eq!(r.rd_inflight, 2);
        // UC has no FLUSH.
        let mut u: Requester<[Slot; 8]> = Requester::new(ReqConfig {
            unreliable: true,
            ..cfg(PathMtu::Mtu1024)
        });
        assert_eq!(u.post(w, 0), Err(PostError::NotOnTransport));
    }

    #[test]
    fn atomic_write_packet() {
        let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu1024));
        let mut w = wqe(SendOpcode::AtomicWrite);
        w.remote_addr = 0x4000;
        w.rkey = 0x77;
        assert_eq!(r.post(w, 9), Err(PostError::TooLong));
        r.post(w, 8).unwrap();
        r.post(wqe(SendOpcode::Send), 0).unwrap();
        let v = drain(&mut r);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].opcode, RC_ATOMIC_WRITE);
        let reth = v[0].reth.unwrap();
        assert_eq!((reth.va, reth.rkey, reth.len), (0x4000, 0x77, 8));
        assert_eq!(
            (v[0].payload, v[0].pad, v[0].ack_req),
            (Some((0, 8)), 0, true)
        );
        assert_eq!(v[0].atomic, None);
        assert_eq!(v[1].psn, v[0].psn.add(1));
        // It takes an initiator-depth credit like a READ/atomic...
        assert_eq!(r.rd_inflight, 1);
        // ...and none is posted on a QP without any.
        let mut z: Requester<[Slot; 8]> = Requester::new(ReqConfig {
            max_rd_atomic: 0,
            ..cfg(PathMtu::Mtu1024)
        });
        assert_eq!(z.post(w, 8), Err(PostError::NoRdAtomic));
        // UC has no ATOMIC WRITE.
        let mut u: Requester<[Slot; 8]> = Requester::new(ReqConfig {
            unreliable: true,
            ..cfg(PathMtu::Mtu1024)
        });
        assert_eq!(u.post(w, 8), Err(PostError::NotOnTransport));
    }

    #[test]
    fn restart_mid_message() {
        let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu256));
        r.post(wqe(SendOpcode::RdmaWrite), 1000).unwrap(); // 4 pkts
        r.post(wqe(SendOpcode::RdmaRead), 1000).unwrap(); // 4 PSNs
        r.post(wqe(SendOpcode::Send), 600).unwrap(); // 3 pkts
        let all = drain(&mut r);
        assert_eq!(all.len(), 4 + 1 + 3);
        let base = Psn::new(0xFF_FFF0);
        // Resume the WRITE at packet 2: MIDDLE at offset 512, no RETH.
        r.restart_from(base.add(2));
        let v = drain(&mut r);
        assert_eq!(v[0].opcode, RC_RDMA_WRITE_MIDDLE);
        assert_eq!(v[0].payload, Some((512, 256)));
        assert!(v[0].reth.is_none() && v[0].retransmit);
        assert_eq!(v[1].opcode, RC_RDMA_WRITE_LAST);
        assert_eq!(v[2].opcode, RC_RDMA_READ_REQUEST);
        assert_eq!(v[2].reth.unwrap().len, 1000);
        assert_eq!(v.len(), 2 + 1 + 3);
        // Resume the READ at its third response: new READ for the rest.
        r.restart_from(base.add(4 + 2));
        let v = drain(&mut r);
        assert_eq!(v[0].opcode, RC_RDMA_READ_REQUEST);
        assert_eq!(v[0].psn, base.add(6));
        assert_eq!(
            v[0].reth.unwrap(),
            Reth {
                va: 0x1000 + 512,
                rkey: 0x42,
                len: 1000 - 512
            }
        );
        assert_eq!(v[1].psn, base.add(8));
        assert_eq!(v[1].opcode, RC_SEND_FIRST);
        // Out-of-window restarts are ignored.
        r.restart_from(base.add(100));
        assert!(drain(&mut r).is_empty());
    }

    #[test]
    fn credits_fence_window() {
        let mut c = cfg(PathMtu::Mtu256);
        c.max_rd_atomic = 1;
        let mut r: Requester<[Slot; 8]> = Requester::new(c);
        r.post(wqe(SendOpcode::RdmaRead), 10).unwrap();
        r.post(wqe(SendOpcode::RdmaRead), 10).unwrap();
        assert_eq!(drain(&mut r).len(), 1);
        assert_eq!(r.blocked(), Some(Blocked::RdAtomicCredits));
        let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu256));
        r.post(wqe(SendOpcode::RdmaRead), 10).unwrap();
        let mut f = wqe(SendOpcode::Send);
        f.flags = SEND_FENCE;
        r.post(f, 10).unwrap();
        assert_eq!(drain(&mut r).len(), 1);
        assert_eq!(r.blocked(), Some(Blocked::Fence));
        let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu256));
        r.set_window(3, 2);
        r.post(wqe(SendOpcode::Send), 2560).unwrap();
        let v = drain(&mut r);
        assert_eq!(v.len(), 3);
        assert_eq!(r.blocked(), Some(Blocked::Window));
        assert!(!v[0].ack_req && v[1].ack_req && v[2].ack_req);
        assert_eq!(
            r.post(wqe(SendOpcode::LocalInv), 0),
            Err(PostError::Unsupported)
        );
        assert_eq!(
            r.post_local(wqe(SendOpcode::LocalInv), WcStatus::Success),
            Err(PostError::Busy)
        );
        assert_eq!(
            r.post_local(wqe(SendOpcode::Send), WcStatus::Success),
            Err(PostError::Unsupported)
        );
        assert_eq!(
            r.post(wqe(SendOpcode::Send), MAX_MSG_SIZE + 1),
            Err(PostError::TooLong)
        );
    }

    /// The window halves at each go-back-N (timeout, sequence NAK) down to
    /// `MIN_WINDOW`, AckReq marks its new edge, and acknowledged PSNs grow
    /// it back, one PSN per `WINDOW_GROWTH`, up to `max_unacked`.
    #[test]
    fn window_halves_on_loss_and_grows_back() {
        use super::super::super::hdr::{Aeth, Syndrome, NAK_PSN_SEQ_ERROR};
        use super::super::InResponse;
        let mut c = cfg(PathMtu::Mtu256);
        c.max_unacked = 64;
        let mut r: Requester<[Slot; 8]> = Requester::new(c);
        r.post(wqe(SendOpcode::Send), 256 * 1000).unwrap();
        let base = Psn::new(0xFF_FFF0);
        assert_eq!(drain(&mut r).len(), 64);
        assert_eq!((r.window(), r.blocked()), (64, Some(Blocked::Window)));
        // Timeouts: 32, then 16, then no less than MIN_WINDOW.
        for (want, cuts) in [(32, 1), (16, 2), (16, 3)] {
            let t = r.next_deadline().unwrap();
            assert!(r.on_timer(t));
            assert_eq!((r.window(), r.counters().window_cuts), (want, cuts));
            let v = drain(&mut r);
            assert_eq!(v.len() as u32, want);
            assert!(v.iter().all(|p| p.retransmit));
            assert_eq!(v[0].psn, base);
            assert!(
                v[want as usize - 1].ack_req,
                "the window's last packet asks for an ACK"
            );
        }
        // 16 PSNs acknowledged: the window grows by 16 / WINDOW_GROWTH.
        r.on_response(&ack(base.add(15), 0), 1);
        assert_eq!(r.window(), 16 + 16 / WINDOW_GROWTH);
        // Later packets go out up to the new edge, beyond the 64 sent.
        assert_eq!(drain(&mut r).len() as u32, r.window());
        // A sequence NAK at the oldest unacknowledged PSN halves it again.
        let nak = InResponse {
            opcode: RC_ACKNOWLEDGE,
            psn: base.add(16),
            aeth: Some(Aeth {
                syndrome: Syndrome::Nak {
                    code: NAK_PSN_SEQ_ERROR,
                }
                .encode(),
                msn: 0,
            }),
            ..Default::default()
        };
        r.on_response(&nak, 2);
        assert_eq!((r.window(), r.counters().window_cuts), (16, 4));
        // Acknowledging enough PSNs makes it whole again, and no larger.
        let mut msn = 0;
        while r.window() < 64 {
            let v = drain(&mut r);
            let last = v
                .last()
                .expect("packets to send while the window is open")
                .psn;
            msn += 1;
            r.on_response(&ack(last, msn), 3);
        }
        assert_eq!(r.window(), 64);
    }

    /// The PSNs of READ responses do not count against the window: READs
    /// are limited by `max_rd_atomic` alone, and SENDs/WRITEs behind them
    /// by the window less those PSNs; partial READ progress and a
    /// go-back-N into a READ keep the account right.
    #[test]
    fn read_responses_outside_the_window() {
        use super::super::super::hdr::{Aeth, Syndrome};
        use super::super::{InResponse, RespVerdict};
        let mut c = cfg(PathMtu::Mtu256);
        c.max_unacked = 32;
        c.max_rd_atomic = 3;
        let mut r: Requester<[Slot; 16]> = Requester::new(c);
        let base = Psn::new(0xFF_FFF0);
        // Three READs of 100 packets each, then a 50-packet SEND.
        for _ in 0..4 {
            r.post(wqe(SendOpcode::RdmaRead), 256 * 100).unwrap();
        }
        let v = drain(&mut r);
        assert_eq!(v.len(), 3, "three READ requests, not one");
        assert_eq!(r.blocked(), Some(Blocked::RdAtomicCredits));
        assert_eq!((r.window_used(), r.rd_psns), (0, 300));
        // The first READ's responses: 40 of 100 received.
        for k in 0..40u32 {
            let resp = InResponse {
                opcode: match k {
                    0 => RC_RDMA_READ_RESPONSE_FIRST,
                    _ => RC_RDMA_READ_RESPONSE_MIDDLE,
                },
                psn: base.add(k),
                aeth: (k == 0).then_some(Aeth {
                    syndrome: Syndrome::Ack { credits: 0x1F }.encode(),
                    msn: 0,
                }),
                payload_len: 256,
                ..Default::default()
            };
            // Only the first response may complete earlier WQEs.
            assert!(matches!(
                r.on_response(&resp, 1),
                RespVerdict::ReadData { middle, .. } if middle == (k != 0)
            ));
        }
        assert_eq!(r.window_used(), 0);
        // Going back to PSN 40 (e.g. a lost response): the READ is asked
        // for again from there, still outside the window.
        r.restart_from(base.add(40));
        assert_eq!((r.rd_inflight, r.rd_psns), (0, 0));
        let v = drain(&mut r);
        assert_eq!(v.len(), 3);
        assert_eq!((v[0].psn, v[0].reth.unwrap().len), (base.add(40), 256 * 60));
        assert_eq!(r.window_used(), 0);
        // A SEND behind a WRITE-free window: with READ PSNs counted it
        // could not start (260 PSNs ahead of una, window 32).
        let mut r: Requester<[Slot; 16]> = Requester::new(c);
        r.post(wqe(SendOpcode::RdmaRead), 256 * 100).unwrap();
        r.post(wqe(SendOpcode::Send), 256 * 50).unwrap();
        let v = drain(&mut r);
        assert_eq!(
            v.len(),
            1 + 32,
            "the READ request and a window of SEND packets"
        );
        assert_eq!(v[32].psn, base.add(100 + 31));
        assert!(
            v[32].ack_req,
            "the packet filling the window asks for an ACK"
        );
        assert_eq!((r.window_used(), r.blocked()), (32, Some(Blocked::Window)));
    }

    /// After a loss the window is cut and READ responses count against it
    /// until it is whole again: one READ of 100 PSNs at a time, where a
    /// clean path has three outstanding.
    #[test]
    fn read_responses_count_after_a_loss() {
        let mut c = cfg(PathMtu::Mtu256);
        c.max_unacked = 32;
        c.max_rd_atomic = 3;
        let mut r: Requester<[Slot; 16]> = Requester::new(c);
        r.shrink_window();
        assert_eq!(r.window(), 16);
        for _ in 0..3 {
            r.post(wqe(SendOpcode::RdmaRead), 256 * 100).unwrap();
        }
        let v = drain(&mut r);
        assert_eq!(v.len(), 1, "one READ request while the window is cut");
        assert_eq!((r.window_used(), r.blocked()), (100, Some(Blocked::Window)));
        // Whole again: READ PSNs are outside the window, the other two go.
        r.window = r.cfg.max_unacked;
        assert_eq!(r.window_used(), 0);
        assert_eq!(drain(&mut r).len(), 2);
        assert_eq!(r.blocked(), Some(Blocked::Empty));
    }

    /// UC: UC opcodes, no AckReq, no window, no timer; each WQE completes
    /// as soon as its last packet is produced; READ/atomics/SEND with
    /// invalidate are refused.
    #[test]
    fn unreliable_requester() {
        let mut c = cfg(PathMtu::Mtu256);
        c.unreliable = true;
        c.max_unacked = 2; // ignored by UC
        let mut r: Requester<[Slot; 8]> = Requester::new(c);
        for op in [
            SendOpcode::RdmaRead,
            SendOpcode::AtomicCmpAndSwp,
            SendOpcode::AtomicFetchAndAdd,
            SendOpcode::SendWithInv,
        ] {
            assert_eq!(r.post(wqe(op), 8), Err(PostError::NotOnTransport));
        }
        let mut s = wqe(SendOpcode::SendWithImm);
        s.flags = SEND_SIGNALED | SEND_SOLICITED;
        r.post(s, 600).unwrap(); // 3 packets
        r.post(wqe(SendOpcode::RdmaWrite), 256 * 10).unwrap(); // 10 packets
        r.post(wqe(SendOpcode::RdmaWriteWithImm), 0).unwrap();
        // Nothing completes before it is sent.
        assert!(r.poll_completion().is_none());
        let p = r.next_packet(0).unwrap();
        assert_eq!(p.opcode, 0x20); // UC SEND First
        assert!(r.poll_completion().is_none());
        let mut v = vec![p];
        v.extend(drain(&mut r));
        let ops: Vec<u8> = v.iter().map(|p| p.opcode).collect();
        let mut want = vec![0x20, 0x21, 0x23, 0x26];
        want.extend([0x27; 8]);
        want.extend([0x28, 0x2B]);
        assert_eq!(ops, want);
        for (i, p) in v.iter().enumerate() {
            assert_eq!(p.psn, Psn::new(0xFF_FFF0).add(i as u32));
            assert!(!p.ack_req && !p.retransmit);
            assert_eq!(lookup(p.opcode).unwrap().transport, Transport::Uc);
        }
        assert!(v[2].solicited && v[2].imm.is_some());
        assert_eq!(v[3].reth.unwrap().len, 2560);
        assert_eq!(v[13].reth.unwrap().len, 0);
        assert_eq!(r.next_deadline(), None);
        assert!(!r.on_timer(u64::MAX));
        let done: Vec<SendCompletion> = core::iter::from_fn(|| r.poll_completion()).collect();
        assert_eq!(done.len(), 3);
        assert!(done.iter().all(|c| c.status == WcStatus::Success));
        assert_eq!(
            done.iter().map(|c| c.byte_len).collect::<Vec<_>>(),
            [600, 2560, 0]
        );
        assert!(done[0].needs_cqe() && !done[1].needs_cqe());
        assert!(r.is_idle());
        // Responses are not for UC.
        let ack = super::super::InResponse {
            opcode: RC_ACKNOWLEDGE,
            psn: Psn::new(0xFF_FFF0),
            ..Default::default()
        };
        assert!(matches!(
            r.on_response(&ack, 0),
            super::super::RespVerdict::Ignored(_)
        ));
    }

    /// AckReq on a message's last packet only if the WQE is signaled or
    /// nothing is queued behind it; one cumulative ACK of the last PSN
    /// completes the unsignaled messages before it, in order.
    #[test]
    fn ack_req_on_signaled_or_last_queued() {
        let mut r: Requester<[Slot; 16]> = Requester::new(cfg(PathMtu::Mtu1024));
        // 3 unsignaled 1-packet WRITEs, a signaled one, 2 unsignaled, and a
        // 3-packet unsignaled SEND last.
        for (i, signaled) in [false, false, false, true, false, false]
            .into_iter()
            .enumerate()
        {
            let mut w = wqe(SendOpcode::RdmaWrite);
            w.wr_id = i as u64;
            w.flags = if signaled { SEND_SIGNALED } else { 0 };
            r.post(w, 64).unwrap();
        }
        let mut w = wqe(SendOpcode::Send);
        w.wr_id = 6;
        r.post(w, 3000).unwrap();
        let v = drain(&mut r);
        assert_eq!(
            v.iter().map(|p| p.ack_req).collect::<Vec<_>>(),
            [false, false, false, true, false, false, false, false, true]
        );
        // A message posted after the queue ran empty asks again.
        let mut w = wqe(SendOpcode::RdmaWrite);
        w.wr_id = 7;
        r.post(w, 64).unwrap();
        let last = drain(&mut r);
        assert!(last.len() == 1 && last[0].ack_req);
        // One ACK of the last PSN completes all eight, in order.
        let ack = ack(last[0].psn, 8);
        r.on_response(&ack, 0);
        let done: Vec<_> = core::iter::from_fn(|| r.poll_completion())
            .map(|c| (c.wr_id, c.status, c.needs_cqe()))
            .collect();
        assert_eq!(done.len(), 8);
        for (i, (id, st, cqe)) in done.into_iter().enumerate() {
            assert_eq!((id, st, cqe), (i as u64, WcStatus::Success, i == 3));
        }
        assert!(r.is_idle());
    }

    /// LOCAL_INV waits until every earlier message was sent; local
    /// operations use no PSN, complete in order, and a failed one flushes
    /// the QP.
    #[test]
    fn local_operations() {
        use super::super::InResponse;
        let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu256));
        let mut s = wqe(SendOpcode::Send);
        s.wr_id = 1;
        r.post(s, 10).unwrap();
        let mut inv = wqe(SendOpcode::LocalInv);
        inv.wr_id = 2;
        assert!(!r.all_sent());
        assert_eq!(r.post_local(inv, WcStatus::Success), Err(PostError::Busy));
        let p = drain(&mut r);
        assert_eq!(p.len(), 1);
        assert!(!r.all_completed());
        assert!(r.all_sent());
        r.post_local(inv, WcStatus::Success).unwrap();
        // It completes after the SEND, with the SEND's ACK.
        assert!(r.poll_completion().is_none());
        let ack = ack(p[0].psn, 1);
        r.on_response(&ack, 0);
        assert!(r.all_completed());
        let mut reg = wqe(SendOpcode::RegMr);
        reg.wr_id = 3;
        r.post_local(reg, WcStatus::Success).unwrap();
        // The next message takes the next PSN.
        r.post(s, 10).unwrap();
        let q = drain(&mut r);
        assert_eq!(q.len(), 1);
        assert_eq!(q[0].psn, p[0].psn.next());
        let got: Vec<_> = core::iter::from_fn(|| r.poll_completion())
            .map(|c| (c.wr_id, c.opcode, c.status))
            .collect();
        assert_eq!(
            got,
            [
                (1, WcOpcode::Send, WcStatus::Success),
                (2, WcOpcode::LocalInv, WcStatus::Success),
                (3, WcOpcode::RegMr, WcStatus::Success),
            ]
        );
        // The second SEND completes with its ACK.
        let ack2 = InResponse {
            psn: q[0].psn,
            ..ack
        };
        r.on_response(&ack2, 0);
        assert_eq!(r.poll_completion().map(|c| c.wr_id), Some(1));
        // A failed local operation: error completion, then flushes.
        r.post_local(reg, WcStatus::LocProtErr).unwrap();
        assert!(r.is_error());
        r.post(s, 10).unwrap();
        r.post_local(inv, WcStatus::Success).unwrap();
        let got: Vec<_> = core::iter::from_fn(|| r.poll_completion())
            .map(|c| (c.wr_id, c.status))
            .collect();
        assert_eq!(
            got,
            [
                (3, WcStatus::LocProtErr),
                (1, WcStatus::WrFlushErr),
                (2, WcStatus::WrFlushErr)
            ]
        );
        assert!(r.is_idle());
    }

    /// The completions polled so far: (wr_id, status).
    fn polled<const N: usize>(r: &mut Requester<[Slot; N]>) -> Vec<(u64, WcStatus)> {
        core::iter::from_fn(|| r.poll_completion())
            .map(|c| (c.wr_id, c.status))
            .collect()
    }

    fn wqe_id(op: SendOpcode, id: u64) -> SendWqe {
        let mut w = wqe(op);
        w.wr_id = id;
        w
    }

    /// REG_MR and BIND_MW do not wait for the messages before them (a
    /// registration chained before a SEND, with other SENDs in flight, as
    /// nvme-rdma posts them): they send nothing, take no PSN and complete
    /// once everything before them has, in order.
    #[test]
    fn registration_does_not_wait() {
        let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu256));
        r.post(wqe_id(SendOpcode::Send, 1), 600).unwrap(); // 3 packets
        let a = drain(&mut r);
        assert_eq!(a.len(), 3);
        assert!(!r.all_completed());
        let reg = wqe_id(SendOpcode::RegMr, 2);
        assert!(r.local_may_run(&reg));
        r.post_local(reg, WcStatus::Success).unwrap();
        r.post_local(wqe_id(SendOpcode::BindMw, 3), WcStatus::Success)
            .unwrap();
        r.post(wqe_id(SendOpcode::RdmaWrite, 4), 10).unwrap();
        let b = drain(&mut r);
        assert_eq!(b.len(), 1);
        assert_eq!((b[0].wqe, b[0].psn), (3, a[2].psn.next()));
        // Nothing completes before the SEND is acknowledged.
        assert!(polled(&mut r).is_empty());
        r.on_response(&ack(a[2].psn, 1), 0);
        assert_eq!(
            polled(&mut r),
            [
                (1, WcStatus::Success),
                (2, WcStatus::Success),
                (3, WcStatus::Success)
            ]
        );
        r.on_response(&ack(b[0].psn, 2), 0);
        assert_eq!(polled(&mut r), [(4, WcStatus::Success)]);
        assert!(r.is_idle());
        // Posted with nothing outstanding, it completes at once.
        r.post_local(wqe_id(SendOpcode::RegMr, 5), WcStatus::Success)
            .unwrap();
        assert_eq!(polled(&mut r), [(5, WcStatus::Success)]);
        assert_eq!(r.blocked(), Some(Blocked::Empty));
    }

    /// LOCAL_INV waits until every earlier message was sent whole (a
    /// go-back-N after that does not matter), fenced local operations
    /// until every earlier WQE completed.
    #[test]
    fn invalidation_and_fence_wait() {
        let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu256));
        r.set_window(2, 1 << 20);
        // Three packets, a window of two: the last one waits for an ACK.
        r.post(wqe_id(SendOpcode::RdmaWrite, 1), 600).unwrap();
        let a = drain(&mut r);
        assert_eq!(a.len(), 2);
        let inv = wqe_id(SendOpcode::LocalInv, 2);
        let mut fenced = wqe_id(SendOpcode::RegMr, 3);
        fenced.flags = SEND_FENCE;
        let mut fenced_inv = inv;
        fenced_inv.flags = SEND_FENCE;
        for w in [inv, fenced, fenced_inv] {
            assert!(!r.local_may_run(&w));
            assert_eq!(r.post_local(w, WcStatus::Success), Err(PostError::Busy));
        }
        assert!(Requester::<[Slot; 8]>::local_waits_for_sends(&inv));
        assert!(!Requester::<[Slot; 8]>::local_must_wait(&inv));
        assert!(Requester::<[Slot; 8]>::local_must_wait(&fenced));
        // The first packet's ACK opens the window for the last one: now
        // the whole WRITE was sent, and LOCAL_INV may run, not the fenced
        // ones.
        r.on_response(&ack(a[0].psn, 1), 0);
        let b = drain(&mut r);
        assert_eq!(b.len(), 1);
        assert!(r.all_sent() && !r.all_completed());
        assert!(r.local_may_run(&inv));
        assert!(!r.local_may_run(&fenced) && !r.local_may_run(&fenced_inv));
        // A timeout rewinds to the second packet: everything was sent once
        // all the same.
        let t = r.next_deadline().unwrap();
        assert!(r.on_timer(t));
        assert!(r.all_sent());
        r.post_local(inv, WcStatus::Success).unwrap();
        assert_eq!(
            r.post_local(fenced, WcStatus::Success),
            Err(PostError::Busy)
        );
        let c = drain(&mut r);
        assert_eq!(c.len(), 2);
        r.on_response(&ack(c[1].psn, 1), 0);
        assert!(r.local_may_run(&fenced));
        r.post_local(fenced, WcStatus::Success).unwrap();
        assert_eq!(
            polled(&mut r),
            [
                (1, WcStatus::Success),
                (2, WcStatus::Success),
                (3, WcStatus::Success)
            ]
        );
    }

    /// An unsignaled message followed only by local operations still asks
    /// for an ACK: without it the local operations would never complete.
    #[test]
    fn ack_req_before_trailing_local_operations() {
        let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu256));
        r.post(wqe_id(SendOpcode::Send, 1), 10).unwrap();
        r.post(wqe_id(SendOpcode::Send, 2), 10).unwrap();
        r.post_local(wqe_id(SendOpcode::RegMr, 3), WcStatus::Success)
            .unwrap();
        r.post_local(wqe_id(SendOpcode::BindMw, 4), WcStatus::Success)
            .unwrap();
        let p = drain(&mut r);
        assert_eq!(
            p.iter().map(|p| p.ack_req).collect::<Vec<_>>(),
            [false, true]
        );
        r.on_response(&ack(p[1].psn, 2), 0);
        assert_eq!(polled(&mut r).len(), 4);
        assert!(r.is_idle());
    }

    /// Go-back-N across a local operation resends the messages around it
    /// with the same PSNs and nothing for it.
    #[test]
    fn go_back_n_across_a_local_operation() {
        let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu256));
        r.post(wqe_id(SendOpcode::Send, 1), 600).unwrap(); // 3 packets
        r.post_local(wqe_id(SendOpcode::RegMr, 2), WcStatus::Success)
            .unwrap();
        r.post(wqe_id(SendOpcode::RdmaWrite, 3), 300).unwrap(); // 2 packets
        let first = drain(&mut r);
        assert_eq!(first.len(), 5);
        // The first packet is lost: a timeout sends all five again.
        let t = r.next_deadline().unwrap();
        assert!(r.on_timer(t));
        let again = drain(&mut r);
        let key = |v: &[PacketDesc]| {
            v.iter()
                .map(|p| (p.wqe, p.psn, p.opcode))
                .collect::<Vec<_>>()
        };
        assert_eq!(key(&again), key(&first));
        assert!(again.iter().all(|p| p.retransmit));
        // A sequence NAK at the WRITE's first PSN: only the WRITE again.
        use super::super::super::hdr::{Aeth, Syndrome};
        let nak = super::super::InResponse {
            aeth: Some(Aeth {
                syndrome: Syndrome::Nak { code: 0 }.encode(),
                msn: 1,
            }),
            ..ack(first[3].psn, 1)
        };
        r.on_response(&nak, t);
        assert_eq!(
            polled(&mut r),
            [(1, WcStatus::Success), (2, WcStatus::Success)]
        );
        let w = drain(&mut r);
        assert_eq!(key(&w), key(&first[3..]));
        r.on_response(&ack(first[4].psn, 2), t);
        assert_eq!(polled(&mut r), [(3, WcStatus::Success)]);
    }

    /// A failed REG_MR behind messages in flight: they are sent and
    /// complete first, then it completes with its error, and what follows
    /// is neither sent nor completed with anything but a flush.  A
    /// successful one behind a message that fails flushes.
    #[test]
    fn local_operation_errors_in_order() {
        let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu256));
        r.post(wqe_id(SendOpcode::Send, 1), 10).unwrap();
        r.post_local(wqe_id(SendOpcode::RegMr, 2), WcStatus::LocProtErr)
            .unwrap();
        r.post(wqe_id(SendOpcode::Send, 3), 10).unwrap();
        r.post_local(wqe_id(SendOpcode::BindMw, 4), WcStatus::Success)
            .unwrap();
        let p = drain(&mut r);
        assert_eq!(p.len(), 1);
        assert!(
            p[0].ack_req,
            "the message before the failed one asks for its ACK"
        );
        assert!(!r.is_error());
        assert!(r.will_flush());
        assert_eq!(r.blocked(), Some(Blocked::Error));
        assert!(polled(&mut r).is_empty());
        r.on_response(&ack(p[0].psn, 1), 0);
        assert!(r.is_error());
        assert_eq!(
            polled(&mut r),
            [
                (1, WcStatus::Success),
                (2, WcStatus::LocProtErr),
                (3, WcStatus::WrFlushErr),
                (4, WcStatus::WrFlushErr)
            ]
        );

        use super::super::super::hdr::{Aeth, Syndrome};
        let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu256));
        r.post(wqe_id(SendOpcode::RdmaWrite, 1), 10).unwrap();
        r.post_local(wqe_id(SendOpcode::RegMr, 2), WcStatus::Success)
            .unwrap();
        let p = drain(&mut r);
        let nak = super::super::InResponse {
            aeth: Some(Aeth {
                syndrome: Syndrome::Nak { code: 2 }.encode(), // remote access error
                msn: 0,
            }),
            ..ack(p[0].psn, 0)
        };
        r.on_response(&nak, 0);
        assert!(r.is_error());
        assert_eq!(
            polled(&mut r),
            [(1, WcStatus::RemAccessErr), (2, WcStatus::WrFlushErr)]
        );

        // A READ whose data cannot be placed: its last response completed
        // it and the REG_MR behind it, then the glue reports the local
        // error; the REG_MR flushes.
        let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu256));
        r.post(wqe_id(SendOpcode::RdmaRead, 1), 16).unwrap();
        r.post_local(wqe_id(SendOpcode::RegMr, 2), WcStatus::Success)
            .unwrap();
        let p = drain(&mut r);
        let resp = super::super::InResponse {
            opcode: RC_RDMA_READ_RESPONSE_ONLY,
            payload_len: 16,
            ..ack(p[0].psn, 1)
        };
        assert!(matches!(
            r.on_response(&resp, 0),
            super::super::RespVerdict::ReadData { .. }
        ));
        r.local_error(0, WcStatus::LocProtErr);
        assert_eq!(
            polled(&mut r),
            [(1, WcStatus::LocProtErr), (2, WcStatus::WrFlushErr)]
        );
    }

    /// A response that acknowledges everything before a WQE that failed
    /// locally enters the error state there: the rest of it (here READ
    /// data for the failed WQE) is not looked at.
    #[test]
    fn response_reaching_a_pending_local_error() {
        use super::super::RespVerdict;
        let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu256));
        r.post(wqe_id(SendOpcode::Send, 1), 10).unwrap();
        r.post(wqe_id(SendOpcode::RdmaRead, 2), 600).unwrap(); // 3 responses
        let p = drain(&mut r);
        assert_eq!(p.len(), 2);
        r.local_error(1, WcStatus::LocProtErr);
        assert!(!r.is_error());
        // The READ's second response implies the SEND's ACK.
        let resp = super::super::InResponse {
            opcode: RC_RDMA_READ_RESPONSE_MIDDLE,
            psn: p[1].psn.next(),
            aeth: None,
            payload_len: 256,
            ..Default::default()
        };
        assert!(matches!(
            r.on_response(&resp, 0),
            RespVerdict::Fatal(WcStatus::LocProtErr)
        ));
        assert!(r.is_error());
        assert_eq!(
            polled(&mut r),
            [(1, WcStatus::Success), (2, WcStatus::LocProtErr)]
        );
    }

    /// A failed REG_MR behind a READ: the READ's last response completes
    /// it and reaches the failed REG_MR (the QP enters the error state),
    /// then the READ's data cannot be placed.  The READ reports the error
    /// and the REG_MR flushes: one error, not a success before it.  The
    /// same for an atomic.
    #[test]
    fn placement_error_after_reaching_a_pending_local_error() {
        use super::super::super::hdr::{Aeth, Syndrome};
        use super::super::{InResponse, RespVerdict};
        let aeth = Some(Aeth {
            syndrome: Syndrome::Ack { credits: 0x1F }.encode(),
            msn: 1,
        });
        for (op, resp) in [
            (SendOpcode::RdmaRead, RC_RDMA_READ_RESPONSE_ONLY),
            (SendOpcode::AtomicFetchAndAdd, RC_ATOMIC_ACKNOWLEDGE),
        ] {
            let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu256));
            let len = if op == SendOpcode::RdmaRead { 16 } else { 8 };
            r.post(wqe_id(op, 1), len).unwrap();
            r.post_local(wqe_id(SendOpcode::RegMr, 2), WcStatus::LocProtErr)
                .unwrap();
            r.post(wqe_id(SendOpcode::Send, 3), 1).unwrap();
            let p = drain(&mut r);
            assert_eq!(p.len(), 1);
            let x = InResponse {
                opcode: resp,
                psn: p[0].psn,
                aeth,
                atomic_orig: (resp == RC_ATOMIC_ACKNOWLEDGE).then_some(5),
                payload_len: if resp == RC_ATOMIC_ACKNOWLEDGE { 0 } else { 16 },
            };
            // The data is still to be placed: the WQE completed before
            // the failed one.
            assert!(matches!(
                r.on_response(&x, 0),
                RespVerdict::ReadData { .. } | RespVerdict::AtomicData { .. }
            ));
            assert!(r.is_error());
            r.local_error(0, WcStatus::LocProtErr);
            assert_eq!(
                polled(&mut r),
                [
                    (1, WcStatus::LocProtErr),
                    (2, WcStatus::WrFlushErr),
                    (3, WcStatus::WrFlushErr)
                ],
                "{op:?}"
            );
        }
    }

    /// Two WQEs that fail locally behind one in flight (two garbage
    /// entries in a ring, in either order of discovery): the older one's
    /// error is reported, the younger one flushes.
    #[test]
    fn two_pending_local_errors_one_reported() {
        for order in [[1u32, 2], [2, 1]] {
            let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu256));
            for id in 1..=3u64 {
                r.post(wqe_id(SendOpcode::RdmaWrite, id), 10).unwrap();
            }
            let p = r.next_packet(0).unwrap();
            for i in order {
                r.local_error(i, WcStatus::LocProtErr);
            }
            assert!(!r.is_error());
            r.on_response(&ack(p.psn, 1), 0);
            assert_eq!(
                polled(&mut r),
                [
                    (1, WcStatus::Success),
                    (2, WcStatus::LocProtErr),
                    (3, WcStatus::WrFlushErr)
                ],
                "{order:?}"
            );
        }
    }

    /// UC: a local operation between messages completes in order as the
    /// messages before it are sent.
    #[test]
    fn uc_local_operation_in_order() {
        let mut c = cfg(PathMtu::Mtu256);
        c.unreliable = true;
        let mut r: Requester<[Slot; 8]> = Requester::new(c);
        r.post(wqe_id(SendOpcode::Send, 1), 600).unwrap();
        r.post_local(wqe_id(SendOpcode::RegMr, 2), WcStatus::Success)
            .unwrap();
        r.post(wqe_id(SendOpcode::RdmaWrite, 3), 10).unwrap();
        assert!(polled(&mut r).is_empty());
        for _ in 0..3 {
            r.next_packet(0).unwrap();
        }
        assert_eq!(
            polled(&mut r),
            [(1, WcStatus::Success), (2, WcStatus::Success)]
        );
        assert_eq!(r.next_packet(0).unwrap().wqe, 2);
        assert_eq!(polled(&mut r), [(3, WcStatus::Success)]);
    }

    /// UC: a packet that could not go out (an on-demand page missing) is
    /// produced again with the same PSN, and the WQE its last packet
    /// completed (with the local operation after it) completes only once
    /// it was really sent.
    #[test]
    fn uc_unsend() {
        let mut c = cfg(PathMtu::Mtu256);
        c.unreliable = true;
        let mut r: Requester<[Slot; 8]> = Requester::new(c);
        r.post(wqe_id(SendOpcode::Send, 1), 300).unwrap(); // 2 packets
        r.post_local(wqe_id(SendOpcode::RegMr, 2), WcStatus::Success)
            .unwrap();
        r.post(wqe_id(SendOpcode::Send, 3), 10).unwrap();
        let first = r.next_packet(0).unwrap();
        // The first packet: the message goes on from it.
        assert!(r.unsend(&first));
        let again = r.next_packet(0).unwrap();
        assert_eq!(
            (again.psn, again.opcode, again.payload),
            (first.psn, first.opcode, first.payload)
        );
        // The last packet, with a local operation behind it: neither is
        // complete until it went out.
        let last = r.next_packet(0).unwrap();
        assert!(r.unsend(&last));
        assert!(polled(&mut r).is_empty());
        let last = r.next_packet(0).unwrap();
        assert_eq!(
            polled(&mut r),
            [(1, WcStatus::Success), (2, WcStatus::Success)]
        );
        // (Polled: too late to take it back.)
        assert!(!r.unsend(&last));
        let third = r.next_packet(0).unwrap();
        // The last packet of a message: its WQE is not complete any more.
        assert!(r.unsend(&third));
        assert!(polled(&mut r).is_empty());
        // Only the last packet produced can be taken back.
        assert!(!r.unsend(&last));
        let again = r.next_packet(0).unwrap();
        assert_eq!((again.psn, again.payload), (third.psn, third.payload));
        assert_eq!(polled(&mut r), [(3, WcStatus::Success)]);
        assert!(r.next_packet(0).is_none());
        assert_eq!(r.counters().packets, 3);
        // Reliable mode goes back with restart_from.
        let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu256));
        r.post(wqe_id(SendOpcode::Send, 1), 10).unwrap();
        let d = r.next_packet(0).unwrap();
        assert!(!r.unsend(&d));
    }

    /// `timeout`/`retry_cnt` changed by a `modify_qp` in RTS apply from
    /// then on: with `retry_cnt` 1 a second timeout fails the WQE; raised
    /// to 3 after the first, it takes three more.
    #[test]
    fn timing_follows_modify() {
        let mut c = cfg(PathMtu::Mtu256);
        c.retry_cnt = 1;
        let mut r: Requester<[Slot; 8]> = Requester::new(c);
        r.post(wqe_id(SendOpcode::Send, 1), 10).unwrap();
        let send = |r: &mut Requester<[Slot; 8]>, now| while r.next_packet(now).is_some() {};
        send(&mut r, 0);
        let mut now = r.next_deadline().unwrap();
        assert!(r.on_timer(now));
        r.set_timing(12, 3, 3, 4);
        send(&mut r, now);
        for _ in 0..3 {
            let d = r.next_deadline().unwrap();
            // The new timeout: 4.096 us << 12.
            assert_eq!(d - now, ack_timeout_ns(12).unwrap());
            now = d;
            assert!(r.on_timer(now));
            assert!(!r.is_error());
            send(&mut r, now);
        }
        let d = r.next_deadline().unwrap();
        assert!(r.on_timer(d));
        assert_eq!(polled(&mut r), [(1, WcStatus::RetryExcErr)]);
    }

    /// An ACK accepted during an RNR wait (a copy of the NAKed SEND that
    /// got through after all) does not start the ACK timer: the timer
    /// fires once, at the wait's end, nothing times out, and the SEND
    /// behind it is resent and completes.  (It used to leave an expired
    /// deadline that the timer met at every tick of the wait, and whose
    /// timeout at the end spent `retry_cnt`: with 0, RETRY_EXC_ERR.)
    #[test]
    fn ack_during_rnr_wait() {
        use super::super::super::hdr::{Aeth, Syndrome};
        let rnr = |psn| super::super::InResponse {
            opcode: RC_ACKNOWLEDGE,
            psn,
            aeth: Some(Aeth {
                syndrome: Syndrome::RnrNak { timer: 0 }.encode(),
                msn: 0,
            }),
            ..Default::default()
        };
        let mut c = cfg(PathMtu::Mtu1024);
        c.retry_cnt = 0;
        let mut r: Requester<[Slot; 4]> = Requester::new(c);
        r.post(wqe_id(SendOpcode::Send, 1), 0).unwrap();
        r.post(wqe_id(SendOpcode::Send, 2), 0).unwrap();
        let a = drain(&mut r);
        r.on_response(&rnr(a[0].psn), 1000);
        r.on_response(&ack(a[0].psn, 1), 2000);
        let rnr_end = 1000 + 655_360_000;
        assert_eq!(r.next_deadline(), Some(rnr_end));
        assert!(r.on_timer(rnr_end));
        assert_eq!(r.counters().timeouts, 0);
        let b: Vec<_> = core::iter::from_fn(|| r.next_packet(rnr_end)).collect();
        assert_eq!(b.iter().map(|p| p.psn).collect::<Vec<_>>(), [a[1].psn]);
        r.on_response(&ack(a[1].psn, 2), rnr_end + 1);
        assert_eq!(
            polled(&mut r),
            [(1, WcStatus::Success), (2, WcStatus::Success)]
        );
    }

    /// A WQE that fails locally while earlier ones wait for their ACKs:
    /// nothing from it on is sent, the earlier ones are retransmitted on a
    /// timeout and complete with their ACK, then the failed one completes
    /// with its error (the first error a user sees explains the rest) and
    /// the later ones flush.
    #[test]
    fn local_error_waits_for_earlier_acks() {
        let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu1024));
        for id in 1..=3u64 {
            let mut w = wqe(SendOpcode::RdmaWrite);
            w.wr_id = id;
            r.post(w, 3000).unwrap();
        }
        // WQE 0 (3 packets) goes out; the first packet of WQE 1 cannot be
        // gathered.
        let p0: Vec<_> = (0..3).map(|_| r.next_packet(0).unwrap()).collect();
        assert!(p0.iter().all(|p| p.wqe == 0));
        let bad = r.next_packet(0).unwrap();
        assert_eq!(bad.wqe, 1);
        r.local_error(1, WcStatus::LocProtErr);
        assert!(!r.is_error());
        // WQE 0's last packet again, asking for the ACK; nothing else.
        let ask = drain(&mut r);
        assert_eq!(ask.len(), 1, "{ask:?}");
        assert!(
            ask[0].psn == p0[2].psn && ask[0].ack_req && ask[0].retransmit,
            "{ask:?}"
        );
        assert_eq!(r.blocked(), Some(Blocked::Error));
        assert!(r.poll_completion().is_none());
        // The ACK timeout: WQE 0 is sent again, not WQE 1.
        let t = r.next_deadline().unwrap();
        assert!(r.on_timer(t));
        let again = drain(&mut r);
        assert_eq!(again.len(), 3);
        assert!(again.iter().all(|p| p.wqe == 0 && p.retransmit));
        let ack = ack(p0[2].psn, 1);
        r.on_response(&ack, t);
        assert!(r.is_error());
        let got: Vec<_> = core::iter::from_fn(|| r.poll_completion())
            .map(|c| (c.wr_id, c.status))
            .collect();
        assert_eq!(
            got,
            [
                (1, WcStatus::Success),
                (2, WcStatus::LocProtErr),
                (3, WcStatus::WrFlushErr)
            ]
        );
        assert!(r.is_idle());
    }

    /// An unsignaled message sent without AckReq, then a WQE that fails
    /// locally: the message's last packet is sent again at once, asking
    /// for the ACK the error waits for.
    #[test]
    fn local_error_asks_for_the_ack_it_waits_for() {
        let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu1024));
        let mut a = wqe(SendOpcode::RdmaWrite);
        a.wr_id = 1;
        a.flags = 0;
        r.post(a, 2000).unwrap();
        let mut b = wqe(SendOpcode::RdmaWrite);
        b.wr_id = 2;
        b.flags = SEND_SIGNALED;
        r.post(b, 100).unwrap();
        let pa: Vec<_> = (0..2).map(|_| r.next_packet(0).unwrap()).collect();
        assert!(pa.iter().all(|p| p.wqe == 0 && !p.ack_req), "{pa:?}");
        let bad = r.next_packet(0).unwrap();
        assert_eq!(bad.wqe, 1);
        r.local_error(1, WcStatus::LocProtErr);
        let again = drain(&mut r);
        assert_eq!(again.len(), 1, "{again:?}");
        assert!(
            again[0].psn == pa[1].psn && again[0].ack_req && again[0].retransmit,
            "{again:?}"
        );
        r.on_response(&ack(pa[1].psn, 1), 0);
        let got: Vec<_> = core::iter::from_fn(|| r.poll_completion())
            .map(|c| (c.wr_id, c.status))
            .collect();
        assert_eq!(got, [(1, WcStatus::Success), (2, WcStatus::LocProtErr)]);
        assert!(r.is_error());
    }

    /// An earlier WQE that fails itself (retries exhausted) is the error
    /// reported; the locally failed later one then only flushes.
    #[test]
    fn earlier_error_wins_over_pending_local_error() {
        let mut r: Requester<[Slot; 8]> = Requester::new(cfg(PathMtu::Mtu1024));
        for id in 1..=2u64 {
            let mut w = wqe(SendOpcode::RdmaWrite);
            w.wr_id = id;
            r.post(w, 100).unwrap();
        }
        assert_eq!(r.next_packet(0).unwrap().wqe, 0);
        assert_eq!(r.next_packet(0).unwrap().wqe, 1);
        r.local_error(1, WcStatus::LocProtErr);
        let mut now = 0;
        while !r.is_error() {
            now = r.next_deadline().unwrap();
            r.on_timer(now);
            drain(&mut r);
        }
        let got: Vec<_> = core::iter::from_fn(|| r.poll_completion())
            .map(|c| (c.wr_id, c.status))
            .collect();
        assert_eq!(got, [(1, WcStatus::RetryExcErr), (2, WcStatus::WrFlushErr)]);
        let _ = now;
    }

    /// The atomic ACK and the only READ response complete their WQE
    /// before the glue writes the data into the local SGEs; a placement
    /// that fails there (bad L_Key) turns that success into the error.
    #[test]
    fn local_error_after_last_response_wins() {
        use super::super::super::hdr::{Aeth, Syndrome};
        use super::super::{InResponse, RespVerdict};
        let aeth = Some(Aeth {
            syndrome: Syndrome::Ack { credits: 0x1F }.encode(),
            msn: 1,
        });
        for (op, resp) in [
            (SendOpcode::AtomicFetchAndAdd, RC_ATOMIC_ACKNOWLEDGE),
            (SendOpcode::RdmaRead, RC_RDMA_READ_RESPONSE_ONLY),
        ] {
            let mut r: Requester<[Slot; 4]> = Requester::new(cfg(PathMtu::Mtu1024));
            let len = if op == SendOpcode::RdmaRead { 16 } else { 8 };
            let idx = r.post(wqe(op), len).unwrap();
            r.post(wqe(SendOpcode::Send), 1).unwrap();
            let first = r.next_packet(0).unwrap();
            let ack = InResponse {
                opcode: resp,
                psn: first.psn,
                aeth,
                atomic_orig: (resp == RC_ATOMIC_ACKNOWLEDGE).then_some(5),
                payload_len: if resp == RC_ATOMIC_ACKNOWLEDGE { 0 } else { 16 },
            };
            assert!(matches!(
                r.on_response(&ack, 0),
                RespVerdict::AtomicData { .. } | RespVerdict::ReadData { .. }
            ));
            r.local_error(idx, WcStatus::LocProtErr);
            let c = r.poll_completion().unwrap();
            assert_eq!((c.status, c.byte_len), (WcStatus::LocProtErr, 0), "{op:?}");
            let c = r.poll_completion().unwrap();
            assert_eq!(c.status, WcStatus::WrFlushErr);
            // An error after the WQE was polled changes nothing.
            r.local_error(idx, WcStatus::LocAccessErr);
            assert!(r.poll_completion().is_none());
        }
    }

    #[test]
    fn full_ring() {
        let mut r: Requester<[Slot; 2]> = Requester::new(cfg(PathMtu::Mtu256));
        assert_eq!(r.post(wqe(SendOpcode::Send), 1), Ok(0));
        assert_eq!(r.post(wqe(SendOpcode::Send), 1), Ok(1));
        assert_eq!(r.post(wqe(SendOpcode::Send), 1), Err(PostError::Full));
    }

    #[test]
    fn max_message_2g() {
        let mut r: Requester<[Slot; 2]> = Requester::new(cfg(PathMtu::Mtu4096));
        r.post(wqe(SendOpcode::RdmaWrite), MAX_MSG_SIZE).unwrap();
        let mut n = 0u32;
        let mut total = 0u64;
        let mut last = None;
        while let Some(p) = r.next_packet(0) {
            total += u64::from(p.payload_len());
            n += 1;
            last = Some(p);
        }
        assert_eq!(n, 1 << 19);
        assert_eq!(total, u64::from(MAX_MSG_SIZE));
        let last = last.unwrap();
        assert_eq!(last.opcode, RC_RDMA_WRITE_LAST);
        assert_eq!(last.payload, Some((MAX_MSG_SIZE - 4096, 4096)));
        // READ of 2^31 at PMTU 256 takes 2^23 PSNs in one request.
        let mut r: Requester<[Slot; 2]> = Requester::new(cfg(PathMtu::Mtu256));
        r.post(wqe(SendOpcode::RdmaRead), MAX_MSG_SIZE).unwrap();
        let p = r.next_packet(0).unwrap();
        assert_eq!(p.reth.unwrap().len, MAX_MSG_SIZE);
        assert_eq!(r.next_psn(), p.psn.add(1 << 23));
    }

    /// An RNR NAK for the first of two pipelined SENDs, then the
    /// responder's sequence NAK for the second (what rroce's and rdma_rxe's
    /// responders answer to the PSN after one they RNR-NAKed): the
    /// requester waits out the RNR timer (655 ms for timer code 0) without
    /// spending `retry_cnt` on ACK timeouts (4 ms each here, 3 retries),
    /// then resends both.  It used to fail with RETRY_EXC_ERR after ~17 ms.
    #[test]
    fn backoff_settles_and_forgets() {
        let mut b = Backoff::default();
        let p = Psn::new(5);
        assert_eq!(b.refused(p, 0), REFUSAL_HOLD_NS);
        assert_eq!(b.refused(p, 100), 2 * REFUSAL_HOLD_NS);
        assert_eq!(b.refused(p, 200), 4 * REFUSAL_HOLD_NS);
        assert_eq!(b.same(), 3);
        // The next PSN refused: the last pause was long enough, half.
        assert_eq!(b.refused(p.next(), 300), 2 * REFUSAL_HOLD_NS);
        assert_eq!(b.same(), 1);
        for i in 0..40 {
            b.refused(p.next(), 400 + i);
        }
        assert_eq!(b.hold(), REFUSAL_HOLD_MAX_NS);
        assert_eq!(b.same(), 41);
        // Long after the last refusal: the shortest again.
        let later = 440 + 2 * REFUSAL_HOLD_MAX_NS + 1;
        assert_eq!(b.refused(p.next(), later), REFUSAL_HOLD_NS);
        assert_eq!(b.same(), 1);
        b.reset();
        assert_eq!(b, Backoff::default());
    }

    /// A refused packet is produced again after a pause that doubles
    /// while the same PSN is refused, is not a retransmission when it had
    /// never gone out, and does not restart the ACK timer: a device that
    /// refuses every packet costs a retry per ACK timeout and ends in
    /// RETRY_EXC_ERR, as a lost packet would.
    #[test]
    fn refused_packet_pauses_and_keeps_the_ack_timer() {
        let mut r: Requester<[Slot; 4]> = Requester::new(cfg(PathMtu::Mtu1024));
        r.post(wqe_id(SendOpcode::Send, 1), 100).unwrap();
        r.post(wqe_id(SendOpcode::RdmaRead, 2), 4000).unwrap();
        let to = ack_timeout_ns(10).unwrap();
        // The SEND goes out at 0, the READ request is refused at 10.
        let d0 = r.next_packet(0).unwrap();
        assert!(!d0.retransmit);
        let d1 = r.next_packet(10).unwrap();
        assert_eq!(d1.psn, d0.psn.next());
        assert!(r.refused(&d1, 10));
        assert_eq!(r.blocked(), Some(Blocked::Refused));
        assert!(r.next_packet(11).is_none());
        assert_eq!(r.next_deadline(), Some(10 + REFUSAL_HOLD_NS));
        // Refused again at the pause's end: twice as long.
        r.on_timer(10 + REFUSAL_HOLD_NS);
        let d1b = r.next_packet(10 + REFUSAL_HOLD_NS).unwrap();
        assert_eq!(
            (d1b.psn, d1b.opcode, d1b.retransmit),
            (d1.psn, d1.opcode, false)
        );
        assert!(r.refused(&d1b, 10 + REFUSAL_HOLD_NS));
        let t = 10 + 3 * REFUSAL_HOLD_NS;
        assert_eq!(r.next_deadline(), Some(t));
        r.on_timer(t);
        // Sent this time: a first transmission, no retransmission counted;
        // its PSNs are the READ's three.
        let d1c = r.next_packet(t).unwrap();
        assert_eq!((d1c.psn, d1c.retransmit), (d1.psn, false));
        assert_eq!(r.counters().retransmitted, 0);
        assert_eq!(r.counters().refusals, 2);
        assert_eq!(r.next_psn(), d1.psn.add(4));
        assert!(r.next_packet(t).is_none());

        // Every packet refused: each ACK timeout of refusals costs a retry,
        // and the retries run out.
        let mut r: Requester<[Slot; 4]> = Requester::new(cfg(PathMtu::Mtu1024));
        r.post(wqe_id(SendOpcode::Send, 1), 100).unwrap();
        let mut now = 0;
        let mut timeouts_at = Vec::new();
        while !r.is_error() && now < 100 * to {
            if let Some(d) = r.next_packet(now) {
                assert!(!d.retransmit);
                let before = r.counters().timeouts;
                assert!(r.refused(&d, now));
                if r.counters().timeouts != before {
                    timeouts_at.push(now);
                }
            }
            if let Some(t) = r.next_deadline() {
                now = t;
                r.on_timer(now);
            }
        }
        assert!(r.is_error());
        // retry_cnt 3: three retries, then the error, each after an ACK
        // timeout (and at most one pause) of refusals.
        assert_eq!(timeouts_at.len(), 4, "{timeouts_at:?}");
        let mut last = 0;
        for &t in &timeouts_at {
            assert!(
                t - last >= to && t - last <= to + REFUSAL_HOLD_MAX_NS,
                "{timeouts_at:?}"
            );
            last = t;
        }
        assert_eq!(
            r.poll_completion().map(|c| c.status),
            Some(WcStatus::RetryExcErr)
        );
        assert_eq!(r.counters().retransmitted, 0);
        // UC: taken back up to UC_MAX_REFUSALS times, then lost.
        let mut c = cfg(PathMtu::Mtu1024);
        c.unreliable = true;
        let mut r: Requester<[Slot; 4]> = Requester::new(c);
        r.post(wqe_id(SendOpcode::Send, 1), 100).unwrap();
        let mut now = 0;
        for i in 0..UC_MAX_REFUSALS {
            let d = r.next_packet(now).unwrap();
            assert!(r.refused(&d, now), "refusal {i}");
            assert!(r.poll_completion().is_none(), "completed though refused");
            now = r.next_deadline().unwrap();
            r.on_timer(now);
        }
        let d = r.next_packet(now).unwrap();
        assert!(!r.refused(&d, now));
        assert_eq!(
            r.poll_completion().map(|c| c.status),
            Some(WcStatus::Success)
        );
    }

    #[test]
    fn rnr_wait_does_not_spend_retry_cnt() {
        use super::super::super::hdr::{Aeth, Syndrome, NAK_PSN_SEQ_ERROR};
        let nak = |psn, syndrome: Syndrome| super::super::InResponse {
            opcode: RC_ACKNOWLEDGE,
            psn,
            aeth: Some(Aeth {
                syndrome: syndrome.encode(),
                msn: 0,
            }),
            ..Default::default()
        };
        let mut r: Requester<[Slot; 4]> = Requester::new(cfg(PathMtu::Mtu1024));
        r.post(wqe_id(SendOpcode::Send, 1), 0).unwrap();
        r.post(wqe_id(SendOpcode::Send, 2), 0).unwrap();
        let a = drain(&mut r);
        assert_eq!(a.len(), 2);
        r.on_response(&nak(a[0].psn, Syndrome::RnrNak { timer: 0 }), 0);
        r.on_response(
            &nak(
                a[0].psn,
                Syndrome::Nak {
                    code: NAK_PSN_SEQ_ERROR,
                },
            ),
            1,
        );
        let rnr_end = 655_360_000;
        let mut now = 1;
        while let Some(d) = r.next_deadline() {
            assert!(drain(&mut r).is_empty(), "sent during the RNR wait");
            now = d;
            r.on_timer(now);
            assert!(!r.is_error(), "failed at {now} ns, during the RNR wait");
            if now >= rnr_end {
                break;
            }
        }
        assert!(now >= rnr_end, "no deadline at the RNR wait's end");
        assert_eq!(r.counters().timeouts, 0);
        assert!(!r.is_error());
        // Both go again, and an ACK completes them.
        let b: Vec<_> = core::iter::from_fn(|| r.next_packet(now)).collect();
        assert_eq!(
            b.iter().map(|p| p.psn).collect::<Vec<_>>(),
            [a[0].psn, a[1].psn]
        );
        r.on_response(&ack(b[1].psn, 2), now);
        assert_eq!(
            polled(&mut r),
            [(1, WcStatus::Success), (2, WcStatus::Success)]
        );
    }
}
