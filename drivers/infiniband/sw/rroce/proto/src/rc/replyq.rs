// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! The responder's queue of responses waiting to be sent.
//!
//! Responses leave in PSN order: a READ response stream is paced (a whole
//! READ in one burst would overflow the receiver's backlog), and an ACK
//! must not overtake the READ responses queued before it.  The queue has a
//! fixed capacity (its [`Store`]), so two rules keep it from losing what
//! it was given:
//!
//! * **Coalescing.** RC ACKs are cumulative: an ACK for PSN `p` with MSN
//!   `m` acknowledges every earlier request too.  A plain ACK queued right
//!   behind another plain ACK replaces it; a run of SENDs or WRITEs behind
//!   a READ stream then holds one entry, not one per message.  NAKs, RNR
//!   NAKs and atomic acknowledgements are never merged.
//! * **Replays in PSN order, one stream per READ.** A duplicate READ
//!   request (the requester went back N after losing a response, or the
//!   network duplicated the request) for a READ whose stream is still
//!   queued rewinds that stream ([`ReadResponder::absorb`]) instead of
//!   queueing a second one: under loss or reordering, every retry would
//!   otherwise add a stream for the whole tail of every READ in flight,
//!   all sent in full.  A replay whose READ has left the queue goes in
//!   before the responses of later PSNs: the requester takes responses in
//!   PSN order only, and would ignore later READs sent ahead of it (and
//!   then time out waiting for them).
//! * **Back-pressure.** The glue asks [`ReplyQueue::has_room`] before it
//!   hands a request to the responder and drops the packet untouched when
//!   there is none: the responder's state (ePSN, MSN, resources) does not
//!   move, so the requester's retransmission (after its sequence NAK or
//!   timeout) finds the request again.  A response is never created and
//!   then thrown away.
//!
//! With at most `max_dest_rd_atomic` READ/atomic responses outstanding
//! and coalesced ACKs between them, a queue twice that long plus one never
//! fills in a conforming exchange.

use super::super::hdr::Syndrome;
use super::super::opcode::op;
use super::super::psn::Psn;
use super::resp::ReadResponder;
use super::{RespDesc, Store};
use core::cmp::Ordering;

/// A queued response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pending {
    /// A READ response stream, partly sent.
    Read(ReadResponder),
    /// One packet: ACK, NAK, RNR NAK or atomic acknowledgement.
    Pkt(RespDesc),
}

impl Pending {
    /// The PSN of the next packet this entry sends.
    pub fn psn(&self) -> Psn {
        match self {
            Pending::Read(r) => r.next_psn(),
            Pending::Pkt(d) => d.psn,
        }
    }

    /// A plain (positive) ACK: may be replaced by a later one.
    pub fn is_plain_ack(&self) -> bool {
        matches!(self, Pending::Pkt(d) if d.opcode == op::ACKNOWLEDGE
            && d.aeth.is_some_and(|a| matches!(Syndrome::decode(a.syndrome), Syndrome::Ack { .. })))
    }
}

/// What [`ReplyQueue::push`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pushed {
    /// Appended.
    Queued,
    /// Replaced the plain ACK at the tail.
    Coalesced,
    /// A replayed READ, taken in by the queued stream of the same READ.
    Absorbed,
    /// The queue was full: dropped (the glue checks
    /// [`ReplyQueue::has_room`] first, so this is a bug counter).
    Full,
}

/// A FIFO of [`Pending`] responses in a fixed [`Store`].
#[derive(Debug)]
pub struct ReplyQueue<S: Store<Option<Pending>>> {
    store: S,
    head: usize,
    len: usize,
}

impl<S: Store<Option<Pending>>> ReplyQueue<S> {
    /// An empty queue in `store` (what it holds is never read: only the
    /// `len` slots from `head` are).
    pub fn new(store: S) -> Self {
        ReplyQueue {
            store,
            head: 0,
            len: 0,
        }
    }

    /// Forgets every queued response (the QP left RTR/RTS, or its path is
    /// gone).  O(1): the stale slots are never read.
    pub fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }

    /// Responses queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether a request may be processed now: one more response fits,
    /// even if it cannot be coalesced.
    pub fn has_room(&self) -> bool {
        self.len < self.store.items().len()
    }

    fn slot(&self, i: usize) -> Option<&Option<Pending>> {
        let cap = self.store.items().len();
        (cap != 0)
            .then(|| self.store.items().get((self.head + i) % cap))
            .flatten()
    }

    fn slot_mut(&mut self, i: usize) -> Option<&mut Option<Pending>> {
        let cap = self.store.items().len();
        if cap == 0 {
            return None;
        }
        let at = (self.head + i) % cap;
        self.store.items_mut().get_mut(at)
    }

    /// Queues `p` behind everything queued, merging a plain ACK into a
    /// plain ACK at the tail and a replayed READ into the queued stream of
    /// the same READ.
    pub fn push(&mut self, p: Pending) -> Pushed {
        let mut at = self.len;
        if let Pending::Read(replay) = p {
            for i in 0..self.len {
                if let Some(Some(Pending::Read(s))) = self.slot_mut(i) {
                    if s.absorb(&replay) {
                        return Pushed::Absorbed;
                    }
                }
            }
            // (A new READ is the newest PSN: it goes at the tail.)
            at = self.first_after(replay.next_psn());
        } else if !p.is_plain_ack() {
            // A duplicate atomic's acknowledgement (or a duplicate ATOMIC
            // WRITE's or FLUSH's response) answers an old PSN: before the
            // READ responses of later PSNs, which the requester would
            // otherwise ignore and then wait a timeout for (until
            // 2026-12-07 it went to the tail; found by review).  Any other
            // packet has the newest PSN and goes to the tail all the same.
            at = self.first_after(p.psn());
        }
        if p.is_plain_ack() && self.len > 0 {
            let tail = self.len - 1;
            if let Some(slot) = self.slot_mut(tail) {
                if slot.is_some_and(|t| t.is_plain_ack()) {
                    *slot = Some(p);
                    return Pushed::Coalesced;
                }
            }
        }
        if !self.has_room() {
            return Pushed::Full;
        }
        // Shift the entries from `at` on back by one (the slot past the
        // tail is free: there is room).
        let mut moved = Some(p);
        for i in at..=self.len {
            match self.slot_mut(i) {
                Some(slot) => moved = core::mem::replace(slot, moved),
                None => return Pushed::Full,
            }
        }
        self.len += 1;
        Pushed::Queued
    }

    /// The index of the first entry whose next PSN comes after `psn`
    /// (`len` if none does).
    fn first_after(&self, psn: Psn) -> usize {
        (0..self.len)
            .find(|&i| {
                self.slot(i)
                    .and_then(|s| s.as_ref())
                    .is_some_and(|e| e.psn().cmp_psn(psn) == Ordering::Greater)
            })
            .unwrap_or(self.len)
    }

    /// The oldest queued response, to send (a READ stream is advanced in
    /// place and popped once exhausted).
    pub fn front_mut(&mut self) -> Option<&mut Pending> {
        if self.len == 0 {
            return None;
        }
        self.slot_mut(0).and_then(|s| s.as_mut())
    }

    /// Removes the oldest queued response.
    pub fn pop(&mut self) {
        if self.len == 0 {
            return;
        }
        let cap = self.store.items().len();
        self.head = (self.head + 1) % cap.max(1);
        self.len -= 1;
    }

    /// The oldest queued response (tests, diagnostics).
    pub fn front(&self) -> Option<&Pending> {
        if self.len == 0 {
            return None;
        }
        self.slot(0).and_then(|s| s.as_ref())
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::hdr::{Aeth, NAK_PSN_SEQ_ERROR};
    use crate::opcode::{read_response_opcode, Position};
    use crate::psn::{PathMtu, Psn};
    use std::vec::Vec;

    fn ack(psn: u32, msn: u32) -> Pending {
        Pending::Pkt(RespDesc {
            opcode: op::ACKNOWLEDGE,
            psn: Psn::new(psn),
            aeth: Some(Aeth {
                syndrome: Syndrome::Ack { credits: 0x1f }.encode(),
                msn,
            }),
            atomic_orig: None,
            payload: None,
            pad: 0,
        })
    }

    fn nak(psn: u32) -> Pending {
        Pending::Pkt(RespDesc {
            opcode: op::ACKNOWLEDGE,
            psn: Psn::new(psn),
            aeth: Some(Aeth {
                syndrome: Syndrome::Nak {
                    code: NAK_PSN_SEQ_ERROR,
                }
                .encode(),
                msn: 0,
            }),
            atomic_orig: None,
            payload: None,
            pad: 0,
        })
    }

    fn read(psn: u32, len: u32) -> Pending {
        Pending::Read(ReadResponder::new(
            Psn::new(psn),
            7,
            0x1000,
            len,
            PathMtu::Mtu1024,
            1,
        ))
    }

    /// Pops everything, returning the first PSN of each entry in order.
    fn drain_psns<const N: usize>(q: &mut ReplyQueue<[Option<Pending>; N]>) -> Vec<u32> {
        let mut out = Vec::new();
        while let Some(p) = q.front() {
            out.push(match *p {
                Pending::Pkt(d) => d.psn.get(),
                Pending::Read(mut r) => r.next().map_or(u32::MAX, |d| d.psn.get()),
            });
            q.pop();
        }
        out
    }

    #[test]
    fn acks_behind_a_read_coalesce_into_the_newest() {
        let mut q = ReplyQueue::new([None; 4]);
        assert_eq!(q.push(read(10, 8192)), Pushed::Queued);
        for i in 0..100 {
            let want = if i == 0 {
                Pushed::Queued
            } else {
                Pushed::Coalesced
            };
            assert_eq!(q.push(ack(18 + i, 2 + i)), want);
        }
        assert_eq!(q.len(), 2);
        assert!(matches!(q.front(), Some(Pending::Read(_))));
        q.pop();
        assert_eq!(q.front(), Some(&ack(117, 101)));
        q.pop();
        assert!(q.is_empty() && q.front().is_none());
    }

    #[test]
    fn naks_and_reads_are_never_merged() {
        let mut q = ReplyQueue::new([None; 8]);
        assert_eq!(q.push(ack(1, 1)), Pushed::Queued);
        assert_eq!(q.push(nak(2)), Pushed::Queued);
        // a plain ACK behind a NAK is not merged into it
        assert_eq!(q.push(ack(3, 2)), Pushed::Queued);
        assert_eq!(q.push(read(4, 1024)), Pushed::Queued);
        assert_eq!(q.push(read(5, 1024)), Pushed::Queued);
        assert_eq!(q.len(), 5);
        assert_eq!(drain_psns(&mut q), [1, 2, 3, 4, 5]);
    }

    /// A duplicate atomic's acknowledgement (PSN 10) queued while the
    /// stream of the READ after it (PSN 11) is partly sent goes before the
    /// stream: the requester went back to PSN 10 and takes responses in
    /// PSN order only.
    #[test]
    fn duplicate_atomic_ack_goes_before_later_read_responses() {
        let mut q = ReplyQueue::new([None; 8]);
        assert_eq!(q.push(read(11, 8192)), Pushed::Queued);
        if let Some(Pending::Read(r)) = q.front_mut() {
            for _ in 0..3 {
                assert!(r.next().is_some());
            }
        }
        let dup_atomic = Pending::Pkt(RespDesc {
            opcode: op::ATOMIC_ACKNOWLEDGE,
            atomic_orig: Some(5),
            ..match nak(10) {
                Pending::Pkt(d) => d,
                Pending::Read(_) => unreachable!(),
            }
        });
        assert_eq!(q.push(dup_atomic), Pushed::Queued);
        // The requester's replay of the READ rewinds its stream.
        assert_eq!(q.push(read(11, 8192)), Pushed::Absorbed);
        assert_eq!(drain_psns(&mut q), [10, 11]);
    }

    #[test]
    fn full_queue_refuses_and_wraps() {
        let mut q = ReplyQueue::new([None; 3]);
        for i in 0..3 {
            assert!(q.has_room());
            assert_eq!(q.push(read(i, 1024)), Pushed::Queued);
        }
        assert!(!q.has_room());
        assert_eq!(q.push(read(9, 1024)), Pushed::Full);
        assert_eq!(q.push(nak(9)), Pushed::Full);
        q.pop();
        assert!(q.has_room());
        // the freed slot is reused at the wrapped tail, FIFO order kept
        assert_eq!(q.push(ack(20, 3)), Pushed::Queued);
        // a full queue still merges an ACK into its tail ACK
        assert!(!q.has_room());
        assert_eq!(q.push(ack(21, 4)), Pushed::Coalesced);
        assert_eq!(drain_psns(&mut q), [1, 2, 21]);
        assert!(q.is_empty());
    }

    #[test]
    fn a_stream_advanced_in_place_stays_at_the_front() {
        let mut q = ReplyQueue::new([None; 2]);
        q.push(read(0, 3000));
        q.push(ack(3, 2));
        let mut sent = 0;
        while let Some(Pending::Read(r)) = q.front_mut() {
            match r.next() {
                Some(d) => {
                    assert_eq!(d.psn.get(), sent);
                    sent += 1;
                }
                None => q.pop(),
            }
        }
        assert_eq!(sent, 3);
        assert_eq!(q.front(), Some(&ack(3, 2)));
    }

    /// The stream for `len` bytes at `0x1000` from `psn`, replayed from
    /// its packet `k` (what a duplicate request for its tail produces).
    fn replay(psn: u32, len: u32, k: u32) -> Pending {
        Pending::Read(ReadResponder::new(
            Psn::new(psn + k),
            7,
            0x1000 + u64::from(k) * 1024,
            len - k * 1024,
            PathMtu::Mtu1024,
            1,
        ))
    }

    fn send_from_front<const N: usize>(
        q: &mut ReplyQueue<[Option<Pending>; N]>,
        n: usize,
    ) -> Vec<u32> {
        let mut out = Vec::new();
        for _ in 0..n {
            if let Some(Pending::Read(r)) = q.front_mut() {
                if let Some(d) = r.next() {
                    out.push(d.psn.get());
                }
            }
        }
        out
    }

    #[test]
    fn a_replayed_read_rewinds_its_queued_stream() {
        let mut q = ReplyQueue::new([None; 4]);
        q.push(read(100, 8 * 1024));
        q.push(read(108, 4 * 1024));
        assert_eq!(send_from_front(&mut q, 5), [100, 101, 102, 103, 104]);
        // the requester lost 102 and asks again from there: the stream
        // restarts at 102 as the replay (First of a 6-packet READ)
        assert_eq!(q.push(replay(100, 8 * 1024, 2)), Pushed::Absorbed);
        assert_eq!(q.len(), 2);
        let Some(Pending::Read(mut r)) = q.front().copied() else {
            panic!()
        };
        let d = r.next().unwrap();
        assert_eq!(
            (d.psn.get(), d.payload.unwrap().va),
            (102, 0x1000 + 2 * 1024)
        );
        assert_eq!(d.opcode, read_response_opcode(Position::First));
        assert_eq!(r.remaining(), 5);
        // a replay from beyond where the stream is (7 > 105): unchanged
        assert_eq!(send_from_front(&mut q, 3), [102, 103, 104]);
        assert_eq!(q.push(replay(100, 8 * 1024, 7)), Pushed::Absorbed);
        assert_eq!(send_from_front(&mut q, 3), [105, 106, 107]);
        // the second READ's replay (of all of it) finds its own stream
        assert_eq!(q.push(replay(108, 4 * 1024, 0)), Pushed::Absorbed);
        assert_eq!(q.len(), 2);
        // a replay of a READ that has left the queue is a new stream,
        // ahead of the later READ (the requester takes PSNs in order)
        q.pop();
        assert_eq!(send_from_front(&mut q, 2), [108, 109]);
        assert_eq!(q.push(replay(100, 8 * 1024, 3)), Pushed::Queued);
        // another READ (other R_Key, other end) is never taken in
        let other = Pending::Read(ReadResponder::new(
            Psn::new(112),
            8,
            0x1000,
            1024,
            PathMtu::Mtu1024,
            1,
        ));
        assert_eq!(q.push(other), Pushed::Queued);
        assert_eq!(drain_psns(&mut q), [103, 110, 112]);
    }

    #[test]
    fn reuse_and_clear_forget_everything() {
        let mut q = ReplyQueue::new([None; 2]);
        q.push(read(0, 1024));
        q.push(nak(1));
        q.clear();
        assert!(q.is_empty() && q.has_room() && q.front().is_none());
        let store = [Some(nak(5)); 2];
        let q2 = ReplyQueue::new(store);
        assert!(q2.is_empty() && q2.front().is_none());
    }

    #[test]
    fn zero_capacity_is_always_full() {
        let mut q: ReplyQueue<[Option<Pending>; 0]> = ReplyQueue::new([]);
        assert!(!q.has_room());
        assert_eq!(q.push(ack(1, 1)), Pushed::Full);
        assert!(q.front_mut().is_none());
        q.pop();
        assert!(q.is_empty());
    }
}
