// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! The RC completer: responses, timers and send completions.
//!
//! Responses are taken in order of arrival.  A response for PSN `p` is
//! accepted only if `p` lies in `[una, hi_psn)` (the oldest unacknowledged
//! PSN up to the highest sent); older ones are duplicates, newer ones bogus.
//!
//! * ACK `p`: acknowledges every PSN up to `p` (coalesced ACK) and completes
//!   every SEND/WRITE WQE that ends there.  If a READ/atomic WQE is reached
//!   whose response has not arrived, the responses were lost (implied NAK):
//!   go-back-N from `una`.
//! * READ response / ATOMIC ACK `p`: implicitly acknowledges the PSNs before
//!   `p` as above, then must be exactly the next missing response (`p ==
//!   una`, the right length for its message offset and the right end-ness);
//!   a gap means lost responses (implied NAK → go-back-N).  The verdict
//!   tells the glue where the payload goes.
//! * NAK PSN sequence error `p` (the responder's expected PSN): acknowledges
//!   the PSNs before `p`, then go-back-N from `p`.
//! * RNR NAK `p`: acknowledges the PSNs before `p`, then waits
//!   `rnr_timer_ns(timer)` and resends from `p` (`rnr_retry`, 7 = infinite).
//! * Invalid request / remote access / remote operational NAK `p`: the WQE
//!   holding `p` completes with the matching error, the QP enters the error
//!   state and every later WQE is flushed (`WR_FLUSH_ERR`).
//! * Timeout: go-back-N from `una`.
//!
//! Timeouts, sequence NAKs and implied NAKs share the `retry_cnt` budget,
//! which any progress reloads; when it runs out the oldest WQE completes
//! with `RETRY_EXC_ERR` and the QP enters the error state.  Several triggers
//! for the same loss (the NAK plus every later in-flight response) cause one
//! retry: a NAK or implied NAK is ignored while `una` has not moved since
//! the last retry (the timer still catches a lost retransmission).
//!
//! The MSN of received AETHs is not used: completion is by PSN, which is
//! exact for RC (the MSN only matters to requesters that cannot tell which
//! message a PSN belongs to).

use super::super::hdr::{
    Syndrome, NAK_INVALID_RD_REQUEST, NAK_INVALID_REQUEST, NAK_PSN_SEQ_ERROR,
    NAK_REMOTE_ACCESS_ERROR, NAK_REMOTE_OPERATIONAL_ERROR,
};
use super::super::opcode::{lookup, Kind, Operation, Position, Transport};
use super::super::psn::{psn_diff, Psn};
use super::super::qp::rnr_timer_ns;
use super::super::wqe::{SendOpcode, WcOpcode, WcStatus, SEND_SIGNALED};
use super::req::{Requester, Slot};
use super::InResponse;
use super::Store;

/// What the completer made of a response (see [`Requester::on_response`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RespVerdict {
    /// An ACK was processed (WQEs may have completed).
    Ack,
    /// Copy the response payload into READ WQE `wqe` at message offset
    /// `offset` (through its local SGEs) *before* polling completions.
    ReadData {
        /// WQE index.
        wqe: u32,
        /// Offset in the READ message.
        offset: u32,
        /// Neither the first nor the last response of its READ: it
        /// completed nothing and freed no READ credit or SQ slot, so the
        /// caller need not look for more to send (the window may have
        /// grown by one PSN, which the READ's last response makes use of).
        middle: bool,
    },
    /// Store `orig` (8 bytes, host order) in the local buffer of atomic WQE
    /// `wqe` before polling completions.
    AtomicData {
        /// WQE index.
        wqe: u32,
        /// The original remote value.
        orig: u64,
    },
    /// Go-back-N or RNR wait started: call `next_packet` again (after the
    /// deadline for RNR).
    Retry,
    /// The QP entered the error state: poll the completions (one error,
    /// then flushes) and move the QP to ERR.
    Fatal(WcStatus),
    /// Nothing to do; the reason is counted.
    Ignored(IgnoreReason),
}

/// Why a response was ignored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IgnoreReason {
    /// The QP is in the error state.
    QpError,
    /// Not an RC response opcode.
    NotResponse,
    /// For a PSN already acknowledged (or nothing outstanding).
    Duplicate,
    /// For a PSN never sent.
    Unexpected,
    /// Wrong length, position, syndrome or WQE type for its PSN.
    Malformed,
    /// A NAK for a loss already being recovered.
    RetryPending,
}

/// A completed send WQE, returned in WQE order by
/// [`Requester::poll_completion`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendCompletion {
    /// WQE index (SQ ring index).
    pub wqe: u32,
    /// The WQE's `wr_id`.
    pub wr_id: u64,
    /// Status.
    pub status: WcStatus,
    /// Completion opcode.
    pub opcode: WcOpcode,
    /// Bytes transferred (message length, 8 for atomics; 0 on error).
    pub byte_len: u32,
    /// The WQE was posted with `SEND_SIGNALED`.
    pub signaled: bool,
}

impl SendCompletion {
    /// Whether a CQE must be written (signaled, or any error).
    pub fn needs_cqe(&self) -> bool {
        self.signaled || self.status != WcStatus::Success
    }
}

impl<S: Store<Slot>> Requester<S> {
    /// Process one response received at time `now` (ns).  Then act on the
    /// verdict, call [`Requester::poll_completion`] until `None` and
    /// [`Requester::next_packet`] until `None`.
    pub fn on_response(&mut self, r: &InResponse, now: u64) -> RespVerdict {
        if self.error {
            return self.ignore(IgnoreReason::QpError);
        }
        if self.cfg.unreliable {
            // UC has no responses.
            return self.ignore(IgnoreReason::NotResponse);
        }
        let Some(info) =
            lookup(r.opcode).filter(|i| i.transport == Transport::Rc && i.kind == Kind::Response)
        else {
            return self.ignore(IgnoreReason::NotResponse);
        };
        let p = r.psn;
        if p.distance_from(self.una) >= self.hi_psn.distance_from(self.una) {
            let why = if psn_diff(p.get(), self.una.get()) < 0 || self.una == self.hi_psn {
                self.counters.duplicate_responses =
                    self.counters.duplicate_responses.wrapping_add(1);
                IgnoreReason::Duplicate
            } else {
                self.counters.ignored_responses = self.counters.ignored_responses.wrapping_add(1);
                IgnoreReason::Unexpected
            };
            return RespVerdict::Ignored(why);
        }
        match info.operation {
            Operation::Acknowledge => {
                let Some(aeth) = r.aeth else {
                    return self.ignore(IgnoreReason::Malformed);
                };
                match aeth.decoded() {
                    Syndrome::Ack { .. } => {
                        if let Some(v) = self.ack_checked(p.next(), now) {
                            return v;
                        }
                        RespVerdict::Ack
                    }
                    Syndrome::RnrNak { timer } => {
                        self.counters.rnr_naks = self.counters.rnr_naks.wrapping_add(1);
                        if let Some(v) = self.ack_checked(p, now) {
                            return v;
                        }
                        if self.rnr_until.is_some() {
                            return self.ignore(IgnoreReason::RetryPending);
                        }
                        if !self.retry.on_rnr_nak() {
                            self.counters.rnr_retry_exceeded =
                                self.counters.rnr_retry_exceeded.wrapping_add(1);
                            return self.fatal_at(p, WcStatus::RnrRetryExcErr);
                        }
                        self.seek(p);
                        self.rnr_until = Some(now.saturating_add(rnr_timer_ns(timer)));
                        self.deadline = None;
                        RespVerdict::Retry
                    }
                    Syndrome::Nak { code } if code == NAK_PSN_SEQ_ERROR => {
                        self.counters.seq_naks = self.counters.seq_naks.wrapping_add(1);
                        if let Some(v) = self.ack_checked(p, now) {
                            return v;
                        }
                        // During an RNR wait the requester resends from
                        // the NAKed PSN when the wait ends anyway: a
                        // sequence NAK for the messages pipelined behind
                        // it (the responder's answer to the next PSN)
                        // must not spend `retry_cnt` or restart the ACK
                        // timer meanwhile.
                        if self.retry_psn == Some(self.una) || self.rnr_until.is_some() {
                            return self.ignore(IgnoreReason::RetryPending);
                        }
                        self.counters.seq_nak_retries =
                            self.counters.seq_nak_retries.wrapping_add(1);
                        self.retry_from_una(now)
                    }
                    Syndrome::Nak { code } => {
                        self.counters.fatal_naks = self.counters.fatal_naks.wrapping_add(1);
                        // The PSNs before the failing request were executed.
                        let _ = self.ack_before(p, now);
                        if self.error {
                            return self.reached_pending_error();
                        }
                        let status = match code {
                            NAK_INVALID_REQUEST => WcStatus::RemInvReqErr,
                            NAK_REMOTE_ACCESS_ERROR => WcStatus::RemAccessErr,
                            NAK_REMOTE_OPERATIONAL_ERROR => WcStatus::RemOpErr,
                            NAK_INVALID_RD_REQUEST => WcStatus::RemInvRdReqErr,
                            _ => WcStatus::BadRespErr,
                        };
                        self.fatal_at(p, status)
                    }
                    Syndrome::Reserved(_) => self.ignore(IgnoreReason::Malformed),
                }
            }
            Operation::RdmaReadResponse => {
                if r.aeth
                    .is_some_and(|a| !matches!(a.decoded(), Syndrome::Ack { .. }))
                {
                    return self.ignore(IgnoreReason::Malformed);
                }
                if let Some(v) = self.ack_checked(p, now) {
                    return v;
                }
                let idx = self.done_upto;
                let Some(s) = self.slot(idx).copied().filter(|_| idx != self.hi) else {
                    return self.ignore(IgnoreReason::Malformed);
                };
                if s.answered_empty() {
                    // ATOMIC WRITE, FLUSH: an empty READ response Only
                    // (IBTA 1.5).
                    if s.first_psn != p || r.payload_len != 0 || info.position != Position::Only {
                        return self.ignore(IgnoreReason::Malformed);
                    }
                    self.una = p.next();
                    self.complete_next(WcStatus::Success);
                    if self.error {
                        return self.reached_pending_error();
                    }
                    self.progress(now);
                    return RespVerdict::Ack;
                }
                let k = p.distance_from(s.first_psn);
                if s.wqe.opcode != SendOpcode::RdmaRead || k >= s.npkts {
                    return self.ignore(IgnoreReason::Malformed);
                }
                let shift = self.cfg.pmtu.shift();
                let Some(offset) = u32::try_from(u64::from(k) << shift).ok() else {
                    return self.ignore(IgnoreReason::Malformed);
                };
                let expect = s.len.saturating_sub(offset).min(self.cfg.pmtu.bytes());
                let last = k.wrapping_add(1) == s.npkts;
                if r.payload_len != expect || info.position.is_end() != last {
                    return self.ignore(IgnoreReason::Malformed);
                }
                self.una = p.next();
                if last {
                    // (May reach a failed WQE and enter the error state:
                    // the data is still placed, this READ completed.)
                    self.complete_next(WcStatus::Success);
                }
                if !self.error {
                    self.progress(now);
                }
                RespVerdict::ReadData {
                    wqe: idx,
                    offset,
                    middle: k != 0 && !last,
                }
            }
            Operation::AtomicAcknowledge => {
                let orig = match (r.aeth.map(|a| a.decoded()), r.atomic_orig) {
                    (Some(Syndrome::Ack { .. }), Some(o)) => o,
                    _ => return self.ignore(IgnoreReason::Malformed),
                };
                if let Some(v) = self.ack_checked(p, now) {
                    return v;
                }
                let idx = self.done_upto;
                let ok = idx != self.hi
                    && self
                        .slot(idx)
                        .is_some_and(|s| s.wqe.opcode.is_atomic() && s.first_psn == p);
                if !ok {
                    return self.ignore(IgnoreReason::Malformed);
                }
                self.una = p.next();
                self.complete_next(WcStatus::Success);
                if !self.error {
                    self.progress(now);
                }
                RespVerdict::AtomicData { wqe: idx, orig }
            }
            _ => self.ignore(IgnoreReason::NotResponse),
        }
    }

    /// [`Self::ack_before`], then what to answer instead of looking at the
    /// rest of the response: the error state if it reached a WQE that
    /// failed locally, an implied NAK if a READ/atomic lies before `limit`.
    fn ack_checked(&mut self, limit: Psn, now: u64) -> Option<RespVerdict> {
        let ok = self.ack_before(limit, now);
        if self.error {
            return Some(self.reached_pending_error());
        }
        (!ok).then(|| self.implied_nak(now))
    }

    /// `ack_before` completed every WQE before one that failed locally
    /// (`local_error`, a failed local operation): the QP entered the error
    /// state with that WQE's status, and the rest of the response is not
    /// looked at.
    fn reached_pending_error(&self) -> RespVerdict {
        let status = self.slot(self.done_upto).and_then(|s| s.done);
        RespVerdict::Fatal(status.unwrap_or(WcStatus::WrFlushErr))
    }

    fn ignore(&mut self, why: IgnoreReason) -> RespVerdict {
        self.counters.ignored_responses = self.counters.ignored_responses.wrapping_add(1);
        RespVerdict::Ignored(why)
    }

    /// Acknowledge every PSN before `limit` (which lies in `[una, hi_psn]`):
    /// complete the SEND/WRITE WQEs that end there.  `false` if a READ or
    /// atomic WQE without its response lies before `limit` (implied NAK);
    /// the progress up to it is kept.
    fn ack_before(&mut self, limit: Psn, now: u64) -> bool {
        let mut progressed = false;
        let mut ok = true;
        // (Completing the WQE before a failed one waiting to be reported
        // enters the error state: nothing after it completes.)
        while self.done_upto != self.hi && !self.error {
            let left = limit.distance_from(self.una);
            if left == 0 {
                break;
            }
            let Some(s) = self.slot(self.done_upto).copied() else {
                break;
            };
            if s.is_rd_atomic() {
                ok = false;
                break;
            }
            let end = s.end_psn();
            if end.distance_from(self.una) <= left {
                self.una = end;
                self.complete_next(WcStatus::Success);
            } else {
                self.una = limit;
            }
            progressed = true;
        }
        if progressed && !self.error {
            self.progress(now);
        }
        ok
    }

    /// Mark WQE `done_upto` complete with `status` and move past it.
    pub(super) fn complete_next(&mut self, status: WcStatus) {
        let idx = self.done_upto;
        let before_cursor = self.cursor.wrapping_sub(idx) != 0
            && self.cursor.wrapping_sub(idx) <= self.tail.wrapping_sub(idx);
        let mut rd = false;
        let mut read_psns = 0;
        if let Some(s) = self.slot_mut(idx) {
            s.done = Some(status);
            rd = s.takes_rd_credit();
            if s.wqe.opcode == SendOpcode::RdmaRead {
                read_psns = s.npkts;
            }
        }
        if rd && before_cursor {
            self.rd_inflight = self.rd_inflight.saturating_sub(1);
            self.rd_psns = self.rd_psns.saturating_sub(read_psns);
        }
        self.done_upto = idx.wrapping_add(1);
        if self.pending_error == Some(self.done_upto) {
            // Everything before the failed WQE has completed.
            self.flush();
        } else {
            self.pass_locals();
        }
    }

    /// `una` moved forward: reload the retry budgets, restart the timer and
    /// pull the send position forward if it fell behind.
    fn progress(&mut self, now: u64) {
        self.grow_window();
        self.retry.on_progress();
        self.retry_psn = None;
        // (During an RNR wait the ACK timer does not run: the wait's end
        // resends, and `next_packet` arms it again.)
        self.deadline = if self.una == self.hi_psn || self.rnr_until.is_some() {
            None
        } else {
            self.timeout_ns().map(|t| now.saturating_add(t))
        };
        if self.psn.distance_from(self.una) > self.hi_psn.distance_from(self.una) {
            self.seek(self.una);
        }
    }

    fn implied_nak(&mut self, now: u64) -> RespVerdict {
        if self.retry_psn == Some(self.una) || self.rnr_until.is_some() {
            return self.ignore(IgnoreReason::RetryPending);
        }
        self.counters.implied_nak_retries = self.counters.implied_nak_retries.wrapping_add(1);
        self.retry_from_una(now)
    }

    fn retry_from_una(&mut self, now: u64) -> RespVerdict {
        if !self.retry.on_timeout() {
            self.counters.retry_exceeded = self.counters.retry_exceeded.wrapping_add(1);
            return self.fatal_at(self.una, WcStatus::RetryExcErr);
        }
        self.rewind_to_una(now);
        RespVerdict::Retry
    }

    /// Go-back-N from `una` at `now`.
    fn rewind_to_una(&mut self, now: u64) {
        self.shrink_window();
        self.retry_psn = Some(self.una);
        self.seek(self.una);
        self.deadline = self.timeout_ns().map(|t| now.saturating_add(t));
    }

    /// The WQE holding PSN `p` completes with `status`; the QP enters the
    /// error state (earlier unfinished WQEs and all later ones flush).
    pub(super) fn fatal_at(&mut self, p: Psn, status: WcStatus) -> RespVerdict {
        let mut i = self.done_upto;
        while i != self.hi {
            let hit = self
                .slot(i)
                .is_some_and(|s| p.distance_from(s.first_psn) < s.npkts);
            if hit {
                if let Some(s) = self.slot_mut(i) {
                    s.done = Some(status);
                }
                break;
            }
            i = i.wrapping_add(1);
        }
        self.flush();
        RespVerdict::Fatal(status)
    }

    /// Enter the error state (e.g. `modify_qp` to ERR): nothing more is sent
    /// and every WQE without a status completes with `WR_FLUSH_ERR`.
    pub fn flush(&mut self) {
        if self.error {
            return;
        }
        // A local error pending behind earlier WQEs is the one reported
        // only if they all completed; if one of them failed first, or the
        // QP is moved to ERR, that WQE flushes.  So do local operations
        // not completed yet, whatever they did (as on hardware, every
        // completion after the first error is a flush).  Other statuses
        // already decided stay (the WQE a fatal NAK names).  Completed
        // WQEs are not touched: `local_error` flushes what follows one it
        // turns into an error.  At most one pass over the ring.
        let pending = self.pending_error.take();
        let reported = pending.filter(|&e| e == self.done_upto);
        let mut i = self.done_upto;
        while i != self.tail {
            if Some(i) != reported {
                if let Some(s) = self.slot_mut(i) {
                    if Some(i) == pending || s.wqe.opcode.is_local() {
                        s.done = None;
                    }
                }
            }
            i = i.wrapping_add(1);
        }
        self.error = true;
        self.deadline = None;
        self.rnr_until = None;
        self.hold_until = None;
    }

    /// The earliest time (ns) at which [`Requester::on_timer`] has work.
    pub fn next_deadline(&self) -> Option<u64> {
        // During an RNR wait only its end counts; a pause after a refused
        // packet ends on its own.
        let t = self.rnr_until.or(self.deadline);
        match (t, self.hold_until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The QP timer fired at `now` (ns): end an RNR wait or the pause
    /// after a refused packet, or on an ACK timeout go back to the oldest unacknowledged PSN (or give up with
    /// `RETRY_EXC_ERR`).  Returns `true` if the glue should call
    /// `next_packet`/`poll_completion`.
    pub fn on_timer(&mut self, now: u64) -> bool {
        if self.error {
            return false;
        }
        let mut changed = false;
        if self.hold_until.is_some_and(|t| now >= t) {
            self.hold_until = None;
            changed = true;
        }
        if self.rnr_until.is_some_and(|t| now >= t) {
            // The wait's end resends (and `next_packet` arms the ACK timer
            // again): no ACK timeout is due now.
            self.rnr_until = None;
            self.deadline = None;
            changed = true;
        }
        // (The ACK timer does not run during an RNR wait: the peer said it
        // is not ready, and the wait's end resends.)
        if self.rnr_until.is_none() && self.deadline.is_some_and(|t| now >= t) {
            if self.una == self.hi_psn {
                self.deadline = None;
            } else {
                self.counters.timeouts = self.counters.timeouts.wrapping_add(1);
                if !self.retry.on_timeout() {
                    self.counters.retry_exceeded = self.counters.retry_exceeded.wrapping_add(1);
                    self.fatal_at(self.una, WcStatus::RetryExcErr);
                    return true;
                }
                self.rewind_to_una(now);
                changed = true;
            }
        }
        changed
    }

    /// The next completion in WQE order, or `None`.  Every posted WQE is
    /// returned exactly once; write a CQE if [`SendCompletion::needs_cqe`].
    pub fn poll_completion(&mut self) -> Option<SendCompletion> {
        if self.head == self.tail {
            return None;
        }
        let idx = self.head;
        let s = *self.slot(idx)?;
        let status = match s.done {
            Some(st) => st,
            None if self.error => WcStatus::WrFlushErr,
            None => return None,
        };
        let byte_len = match (status, s.wqe.opcode.is_atomic()) {
            (WcStatus::Success, true) => 8,
            (WcStatus::Success, false) => s.len,
            _ => 0,
        };
        self.head = idx.wrapping_add(1);
        if self.end_remote == idx {
            // No message left after `head`: keep it inside [head, tail]
            // too, so that it never looks like a message again after the
            // indices wrapped.
            self.end_remote = self.head;
        }
        if self.error {
            // Keep the other indices inside [head, tail].
            for i in [&mut self.done_upto, &mut self.hi, &mut self.cursor] {
                if i.wrapping_sub(idx) == 0 || i.wrapping_sub(idx) > self.tail.wrapping_sub(idx) {
                    *i = self.head;
                }
            }
        }
        self.counters.completions = self.counters.completions.wrapping_add(1);
        Some(SendCompletion {
            wqe: idx,
            wr_id: s.wqe.wr_id,
            status,
            opcode: s.wqe.opcode.wc_opcode(),
            byte_len,
            signaled: s.wqe.flags & SEND_SIGNALED != 0,
        })
    }
}
