// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! The Unreliable Connected (UC) responder.
//!
//! UC carries SEND and RDMA WRITE (each optionally with immediate data) in
//! First/Middle/Last or Only packets, like RC, but there are no ACKs, no
//! NAKs, no retransmissions and no READ/atomic operations.  The requester
//! side is the RC [`Requester`](super::Requester) with
//! [`ReqConfig::unreliable`](super::ReqConfig::unreliable) set; this is the
//! receive side.
//!
//! Rules (IBA 9.7.5.1 / 9.9 for UC, as this responder implements them):
//!
//! * A packet whose PSN is not the expected PSN (ePSN), or a First/Only
//!   packet arriving while a message is in progress, ends the message in
//!   progress: it is **silently dropped**.  Data of a dropped SEND may
//!   already be in the receive buffer, but that receive WQE is *not*
//!   completed: it stays current and the next SEND fills it from the start
//!   (and the next WRITE with immediate completes it).  Data of a dropped
//!   RDMA WRITE may already be in memory (UC leaves it undefined).
//! * A First/Only packet at or after the ePSN starts a new message
//!   (resynchronisation after a gap); Middle/Last packets without their
//!   First are dropped.  Every such packet sets the ePSN to its PSN + 1.
//! * A packet *behind* the ePSN (in the half of the PSN space before it) is
//!   a duplicate or a straggler overtaken by later packets: it is dropped
//!   without touching the message in progress, so a message is never
//!   delivered twice or out of order.
//! * A SEND without a receive WQE, a WRITE whose R_Key/range/permission
//!   check fails, and malformed packets (length, missing headers) drop the
//!   message silently; the QP stays usable.
//! * A SEND longer than its receive buffer completes that receive WQE with
//!   `LOC_LEN_ERR` and the QP enters the error state (a local error).
//!
//! The returned [`Action`] has the same meaning as for RC, except that
//! `reply` is always [`Reply::None`].

use super::super::hdr::payload_len_ok;
use super::super::opcode::{lookup, Kind, Operation, Position, Transport};
use super::super::psn::{PathMtu, Psn};
use super::super::qp::QpAttrs;
use super::super::wqe::{WcOpcode, WcStatus, MAX_MSG_SIZE};
use super::resp::RespCounters;
use super::resp::{Access, Action, MemCheck, Outcome, Place, RecvCompletion, RecvSource, Reply};
use super::{imm_to_cqe, InRequest};

/// Whether `opcode` is a UC request (the only UC packets there are).
pub fn is_uc_request(opcode: u8) -> bool {
    lookup(opcode).is_some_and(|i| i.transport == Transport::Uc && i.kind == Kind::Request)
}

/// The message being received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Msg {
    /// Between messages (or dropping the rest of one).
    None,
    Send {
        recv_len: u32,
        offset: u32,
    },
    Write {
        rkey: u32,
        va: u64,
        offset: u32,
        total: u32,
    },
}

/// The responder of one UC QP.
#[derive(Clone, Debug)]
pub struct UcResponder {
    pmtu: PathMtu,
    epsn: Psn,
    msg: Msg,
    /// Buffer length of a receive WQE taken by a SEND that was dropped: it
    /// is still the glue's current receive WQE and serves the next message
    /// that needs one.
    held: Option<u32>,
    error: bool,
    counters: RespCounters,
}

impl UcResponder {
    /// A responder in RTR expecting `rq_psn` first, for path MTU `pmtu`.
    pub fn new(rq_psn: Psn, pmtu: PathMtu) -> Self {
        UcResponder {
            pmtu,
            epsn: rq_psn,
            msg: Msg::None,
            held: None,
            error: false,
            counters: RespCounters::default(),
        }
    }

    /// From the QP attributes (RTR).
    pub fn from_attrs(a: &QpAttrs) -> Self {
        Self::new(Psn::new(a.rq_psn), a.mtu())
    }

    /// The expected PSN.
    pub fn expected_psn(&self) -> Psn {
        self.epsn
    }

    /// The counters (`acks`, `naks` and `read_responses` stay 0).
    pub fn counters(&self) -> &RespCounters {
        &self.counters
    }

    /// Whether the receive side is in the error state.
    pub fn is_error(&self) -> bool {
        self.error
    }

    /// Whether a receive WQE is taken and not completed (the glue's current
    /// receive WQE).
    pub fn holds_recv(&self) -> bool {
        self.held.is_some() || matches!(self.msg, Msg::Send { .. })
    }

    /// Enter the error state (`modify_qp` to ERR).  Returns `true` if a
    /// receive WQE was taken and is not completed (the glue flushes it).
    pub fn flush(&mut self) -> bool {
        let taken = self.holds_recv();
        self.error = true;
        self.msg = Msg::None;
        self.held = None;
        taken
    }

    /// Decide what to do with UC request `pkt` (already checked for ICRC,
    /// destination QP and P_Key).  Never asks for a reply.
    pub fn on_request<M: MemCheck, Q: RecvSource>(
        &mut self,
        pkt: &InRequest,
        mem: &mut M,
        rq: &mut Q,
    ) -> Action {
        let a = self.classify(pkt, mem, rq);
        if let Some(c) = self.counters.by_outcome.get_mut(a.outcome.index()) {
            *c = c.wrapping_add(1);
        }
        a
    }

    /// Drop the message in progress (its receive WQE, if any, is kept).
    fn abort(&mut self) {
        if let Msg::Send { recv_len, .. } = self.msg {
            self.held = Some(recv_len);
        }
        self.msg = Msg::None;
    }

    fn dropped(&mut self, outcome: Outcome) -> Action {
        self.abort();
        Action::drop(outcome)
    }

    fn classify<M: MemCheck, Q: RecvSource>(
        &mut self,
        pkt: &InRequest,
        mem: &mut M,
        rq: &mut Q,
    ) -> Action {
        if self.error {
            return Action::drop(Outcome::QpError);
        }
        let Some(info) = lookup(pkt.opcode).filter(|_| is_uc_request(pkt.opcode)) else {
            return Action::drop(Outcome::NotRequest);
        };
        let pos = info.position;
        let d = pkt.psn.diff(self.epsn);
        if d < 0 {
            // Behind the ePSN: a duplicate or a straggler of a message
            // already delivered or dropped.  It neither starts a message
            // (so nothing is delivered twice or out of order) nor disturbs
            // the one in progress.
            return Action::drop(Outcome::SeqDrop);
        }
        let in_seq = d == 0;
        self.epsn = pkt.psn.next();
        if !in_seq || pos.is_start() {
            self.abort();
        }
        if !pos.is_start() {
            let continues = match self.msg {
                Msg::None => false,
                Msg::Send { .. } => info.operation == Operation::Send,
                Msg::Write { .. } => info.operation == Operation::RdmaWrite,
            };
            if !continues {
                // A PSN gap, or a Middle/Last without its First.
                return self.dropped(Outcome::SeqDrop);
            }
        }
        if !payload_len_ok(pos, pkt.payload_len as usize, self.pmtu.bytes() as usize)
            || (info.imm && pkt.imm.is_none())
        {
            return self.dropped(Outcome::MsgDrop);
        }
        match info.operation {
            Operation::Send => self.send(pkt, pos, rq),
            Operation::RdmaWrite => self.write(pkt, pos, info.imm, mem, rq),
            _ => self.dropped(Outcome::NotRequest),
        }
    }

    fn send<Q: RecvSource>(&mut self, pkt: &InRequest, pos: Position, rq: &mut Q) -> Action {
        let mut take_recv = false;
        let (recv_len, offset) = match self.msg {
            Msg::Send { recv_len, offset } => (recv_len, offset),
            _ => match self.held.take() {
                Some(l) => (l, 0),
                None => {
                    let Some(l) = rq.peek_len() else {
                        // No receive WQE: UC has no RNR, the message is lost.
                        return self.dropped(Outcome::MsgDrop);
                    };
                    take_recv = true;
                    (l, 0)
                }
            },
        };
        let Some(end) = offset
            .checked_add(pkt.payload_len)
            .filter(|&e| e <= recv_len && e <= MAX_MSG_SIZE)
        else {
            // The receive buffer is too short: a local length error.
            self.msg = Msg::None;
            self.error = true;
            return Action {
                outcome: Outcome::LengthError,
                take_recv,
                place: Place::None,
                recv_done: Some(RecvCompletion {
                    status: WcStatus::LocLenErr,
                    opcode: WcOpcode::Recv,
                    byte_len: 0,
                    imm: None,
                    invalidate: None,
                    solicited: false,
                }),
                reply: Reply::None,
                qp_error: true,
            };
        };
        let mut a = Action::drop(Outcome::Executed);
        a.take_recv = take_recv;
        a.place = Place::Recv { offset };
        if pos.is_end() {
            self.msg = Msg::None;
            a.recv_done = Some(RecvCompletion {
                status: WcStatus::Success,
                opcode: WcOpcode::Recv,
                byte_len: end,
                imm: pkt.imm.map(imm_to_cqe),
                invalidate: None,
                solicited: pkt.solicited,
            });
        } else {
            self.msg = Msg::Send {
                recv_len,
                offset: end,
            };
        }
        a
    }

    fn write<M: MemCheck, Q: RecvSource>(
        &mut self,
        pkt: &InRequest,
        pos: Position,
        imm: bool,
        mem: &mut M,
        rq: &mut Q,
    ) -> Action {
        let (rkey, va, offset, total) = match self.msg {
            Msg::Write {
                rkey,
                va,
                offset,
                total,
            } => (rkey, va, offset, total),
            _ => {
                let Some(reth) = pkt.reth else {
                    return self.dropped(Outcome::MsgDrop);
                };
                let len_ok = reth.len <= MAX_MSG_SIZE
                    && match pos {
                        Position::Only => reth.len == pkt.payload_len,
                        _ => reth.len > self.pmtu.bytes(),
                    };
                if !len_ok {
                    return self.dropped(Outcome::MsgDrop);
                }
                if reth.len > 0
                    && mem
                        .check(reth.rkey, reth.va, reth.len, Access::Write)
                        .is_err()
                {
                    return self.dropped(Outcome::AccessError);
                }
                (reth.rkey, reth.va, 0, reth.len)
            }
        };
        let left = total.saturating_sub(offset);
        if pkt.payload_len > left || (pos.is_end() && pkt.payload_len != left) {
            return self.dropped(Outcome::MsgDrop);
        }
        let mut a = Action::drop(Outcome::Executed);
        if pos.is_end() && imm {
            if self.held.take().is_none() {
                if rq.peek_len().is_none() {
                    // The data is in memory, but the immediate is lost.
                    return self.dropped(Outcome::MsgDrop);
                }
                a.take_recv = true;
            }
            a.recv_done = Some(RecvCompletion {
                status: WcStatus::Success,
                opcode: WcOpcode::RecvRdmaWithImm,
                byte_len: total,
                imm: pkt.imm.map(imm_to_cqe),
                invalidate: None,
                solicited: pkt.solicited,
            });
        }
        a.place = if pkt.payload_len == 0 {
            Place::None
        } else {
            Place::Mem {
                rkey,
                va: va.wrapping_add(u64::from(offset)),
            }
        };
        self.msg = if pos.is_end() {
            Msg::None
        } else {
            Msg::Write {
                rkey,
                va,
                offset: offset.wrapping_add(pkt.payload_len),
                total,
            }
        };
        a
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::super::super::hdr::{ImmDt, Reth};
    use super::super::super::opcode::*;
    use super::super::resp::AccessError;
    use super::super::resp::AtomicOp;
    use super::*;
    use std::vec::Vec;

    const MTU: u32 = 256;
    const UC_SEND_FIRST: u8 = 0x20;
    const UC_SEND_MIDDLE: u8 = 0x21;
    const UC_SEND_LAST: u8 = 0x22;
    const UC_SEND_LAST_IMM: u8 = 0x23;
    const UC_SEND_ONLY: u8 = 0x24;
    const UC_SEND_ONLY_IMM: u8 = 0x25;
    const UC_WRITE_FIRST: u8 = 0x26;
    const UC_WRITE_LAST: u8 = 0x28;
    const UC_WRITE_LAST_IMM: u8 = 0x29;
    const UC_WRITE_ONLY: u8 = 0x2A;

    struct Mem {
        ok: bool,
    }
    impl MemCheck for Mem {
        fn check(&mut self, rkey: u32, _: u64, _: u32, a: Access) -> Result<(), AccessError> {
            assert_eq!(a, Access::Write);
            if self.ok && rkey == 7 {
                Ok(())
            } else {
                Err(AccessError::InvalidKey)
            }
        }
        fn atomic(&mut self, _: u32, _: u64, _: AtomicOp) -> Result<u64, AccessError> {
            panic!("no atomics on UC")
        }
    }

    /// Receive WQEs by buffer length; `take_recv` pops them.
    struct Rq(Vec<u32>);
    impl RecvSource for Rq {
        fn peek_len(&mut self) -> Option<u32> {
            self.0.first().copied()
        }
    }

    fn req(opcode: u8, psn: u32, len: u32) -> InRequest {
        let info = lookup(opcode).unwrap();
        InRequest {
            opcode,
            psn: Psn::new(psn),
            payload_len: len,
            reth: info.hdrs.contains(ExtHdrs::RETH).then_some(Reth {
                va: 0x1000,
                rkey: 7,
                len: if info.position == Position::Only {
                    len
                } else {
                    3 * MTU
                },
            }),
            imm: info.imm.then_some(ImmDt { imm: 0xAB }),
            ..InRequest::default()
        }
    }

    struct T {
        r: UcResponder,
        mem: Mem,
        rq: Rq,
        /// Receive WQE currently held by the "glue" (its length).
        cur: Option<u32>,
        /// (len, byte_len) of completed receive WQEs.
        done: Vec<(u32, RecvCompletion)>,
    }

    impl T {
        fn new(bufs: &[u32]) -> T {
            T {
                r: UcResponder::new(Psn::new(100), PathMtu::Mtu256),
                mem: Mem { ok: true },
                rq: Rq(bufs.to_vec()),
                cur: None,
                done: Vec::new(),
            }
        }
        fn rx(&mut self, opcode: u8, psn: u32, len: u32) -> Action {
            let a = self
                .r
                .on_request(&req(opcode, psn, len), &mut self.mem, &mut self.rq);
            assert_eq!(a.reply, Reply::None, "UC never replies");
            if a.take_recv {
                assert!(self.cur.is_none(), "a held WQE must be reused");
                self.cur = Some(self.rq.0.remove(0));
            }
            if let Place::Recv { offset } = a.place {
                let cur = self.cur.expect("placement into a current WQE");
                assert!(offset + len <= cur);
            }
            if let Some(c) = a.recv_done {
                self.done
                    .push((self.cur.take().expect("completion of a current WQE"), c));
            }
            assert_eq!(
                self.r.holds_recv(),
                self.cur.is_some(),
                "engine and glue agree"
            );
            a
        }
    }

    #[test]
    fn in_order_messages() {
        let mut t = T::new(&[1000, 1000, 1000]);
        assert_eq!(t.rx(UC_SEND_FIRST, 100, MTU).outcome, Outcome::Executed);
        assert_eq!(
            t.rx(UC_SEND_MIDDLE, 101, MTU).place,
            Place::Recv { offset: MTU }
        );
        let a = t.rx(UC_SEND_LAST_IMM, 102, 10);
        assert_eq!(a.place, Place::Recv { offset: 2 * MTU });
        let c = a.recv_done.unwrap();
        assert_eq!((c.status, c.byte_len), (WcStatus::Success, 2 * MTU + 10));
        assert_eq!(c.imm, Some(imm_to_cqe(ImmDt { imm: 0xAB })));
        // WRITE First/Last: placed in memory, no receive WQE.
        let a = t.rx(UC_WRITE_FIRST, 103, MTU);
        assert_eq!(
            a.place,
            Place::Mem {
                rkey: 7,
                va: 0x1000
            }
        );
        assert!(!a.take_recv && a.recv_done.is_none());
        let a = t.rx(UC_WRITE_LAST_IMM, 104, 2 * MTU);
        assert!(a.recv_done.is_none(), "wrong length drops the message");
        assert_eq!(a.outcome, Outcome::MsgDrop);
        // Zero-length SEND Only.
        let a = t.rx(UC_SEND_ONLY, 105, 0);
        assert_eq!(a.recv_done.unwrap().byte_len, 0);
        assert_eq!(t.r.expected_psn(), Psn::new(106));
        assert_eq!(t.done.len(), 2);
        assert_eq!(t.rq.0.len(), 1);
    }

    #[test]
    fn gap_drops_message_and_reuses_wqe() {
        let mut t = T::new(&[1000, 1000]);
        t.rx(UC_SEND_FIRST, 100, MTU);
        // 101 lost: the Last is dropped, the WQE is kept.
        let a = t.rx(UC_SEND_LAST, 102, 5);
        assert_eq!(a.outcome, Outcome::SeqDrop);
        assert!(a.recv_done.is_none() && a.place == Place::None);
        assert!(t.r.holds_recv());
        // The next message reuses the same WQE from offset 0.
        let a = t.rx(UC_SEND_ONLY_IMM, 103, 40);
        assert!(!a.take_recv);
        assert_eq!(a.place, Place::Recv { offset: 0 });
        assert_eq!(a.recv_done.unwrap().byte_len, 40);
        assert_eq!(t.done.len(), 1);
        assert_eq!(t.rq.0.len(), 1, "only one WQE consumed");
        // Lost First: Middle/Last dropped, then resync on the next First
        // after a gap.
        assert_eq!(t.rx(UC_SEND_MIDDLE, 105, MTU).outcome, Outcome::SeqDrop);
        assert_eq!(t.rx(UC_SEND_LAST, 106, 1).outcome, Outcome::SeqDrop);
        assert!(t.rx(UC_SEND_FIRST, 200, MTU).take_recv);
        let a = t.rx(UC_SEND_LAST, 201, 1);
        assert_eq!(a.recv_done.unwrap().byte_len, MTU + 1);
        // Nothing left: a SEND is dropped silently (no RNR).
        let a = t.rx(UC_SEND_ONLY, 202, 1);
        assert_eq!(a.outcome, Outcome::MsgDrop);
        assert!(!a.qp_error && !t.r.is_error());
    }

    #[test]
    fn new_first_aborts_message_in_progress() {
        let mut t = T::new(&[1000, 1000]);
        t.rx(UC_SEND_FIRST, 100, MTU);
        t.rx(UC_SEND_MIDDLE, 101, MTU);
        // In sequence, but a new First: the old message is dropped.
        let a = t.rx(UC_SEND_FIRST, 102, MTU);
        assert!(!a.take_recv);
        assert_eq!(a.place, Place::Recv { offset: 0 });
        let a = t.rx(UC_SEND_LAST, 103, 3);
        assert_eq!(a.recv_done.unwrap().byte_len, MTU + 3);
        // A WRITE Only in the middle of a SEND aborts it; the next WRITE
        // with immediate completes the held WQE.
        t.rx(UC_SEND_FIRST, 104, MTU);
        let a = t.rx(UC_WRITE_ONLY, 105, 16);
        assert_eq!(
            a.place,
            Place::Mem {
                rkey: 7,
                va: 0x1000
            }
        );
        assert!(t.r.holds_recv());
        t.rx(UC_WRITE_FIRST, 106, MTU);
        t.rx(0x27, 107, MTU); // WRITE Middle
        let a = t.rx(UC_WRITE_LAST_IMM, 108, MTU);
        assert!(!a.take_recv);
        let c = a.recv_done.unwrap();
        assert_eq!((c.opcode, c.byte_len), (WcOpcode::RecvRdmaWithImm, 3 * MTU));
        assert_eq!(t.done.len(), 2);
        assert!(t.rq.0.is_empty());
    }

    #[test]
    fn stale_and_duplicate_packets_are_ignored() {
        let mut t = T::new(&[1000, 1000]);
        t.rx(UC_SEND_ONLY, 100, 8);
        // A duplicate of a delivered message is not delivered again.
        let a = t.rx(UC_SEND_ONLY, 100, 8);
        assert_eq!(a.outcome, Outcome::SeqDrop);
        assert!(a.recv_done.is_none() && !a.take_recv);
        t.rx(UC_SEND_FIRST, 101, MTU);
        // A duplicate First does not restart the message in progress.
        assert_eq!(t.rx(UC_SEND_FIRST, 101, MTU).outcome, Outcome::SeqDrop);
        let a = t.rx(UC_SEND_LAST, 102, 1);
        assert_eq!(a.recv_done.unwrap().byte_len, MTU + 1);
        assert_eq!(t.done.len(), 2);
        // PSN wrap-around.
        let mut t = T::new(&[1000]);
        t.r = UcResponder::new(Psn::new(0xFF_FFFF), PathMtu::Mtu256);
        t.rx(UC_SEND_FIRST, 0xFF_FFFF, MTU);
        let a = t.rx(UC_SEND_LAST, 0, 2);
        assert_eq!(a.recv_done.unwrap().byte_len, MTU + 2);
    }

    #[test]
    fn errors() {
        // Bad R_Key: the WRITE is dropped silently, the QP stays up.
        let mut t = T::new(&[1000]);
        t.mem.ok = false;
        let a = t.rx(UC_WRITE_FIRST, 100, MTU);
        assert_eq!(a.outcome, Outcome::AccessError);
        assert_eq!(a.place, Place::None);
        assert!(!a.qp_error);
        assert_eq!(t.rx(UC_WRITE_LAST, 101, MTU).outcome, Outcome::SeqDrop);
        t.mem.ok = true;
        // Malformed: a First shorter than the MTU, a missing RETH.
        assert_eq!(t.rx(UC_SEND_FIRST, 102, 10).outcome, Outcome::MsgDrop);
        let mut p = req(UC_WRITE_ONLY, 103, 4);
        p.reth = None;
        let a = t.r.on_request(&p, &mut t.mem, &mut t.rq);
        assert_eq!(a.outcome, Outcome::MsgDrop);
        // RC and UD opcodes are not UC requests.
        for op in [RC_SEND_ONLY, RC_ACKNOWLEDGE, 0x64, RC_FETCH_ADD] {
            let a = t.r.on_request(&req(op, 104, 0), &mut t.mem, &mut t.rq);
            assert_eq!(a.outcome, Outcome::NotRequest);
        }
        // A SEND longer than its buffer: local length error, QP error.
        let a = t.rx(UC_SEND_FIRST, 104, MTU);
        assert!(a.take_recv);
        assert!(a.recv_done.is_none());
        let mut t2 = T::new(&[MTU]);
        t2.rx(UC_SEND_FIRST, 100, MTU);
        let a = t2.rx(UC_SEND_LAST, 101, 1);
        assert!(a.qp_error && t2.r.is_error());
        assert_eq!(a.recv_done.unwrap().status, WcStatus::LocLenErr);
        assert_eq!(t2.rx(UC_SEND_ONLY, 102, 1).outcome, Outcome::QpError);
        // flush reports the taken WQE.
        assert!(t.r.flush());
        assert_eq!(t.r.counters().acks + t.r.counters().naks, 0);
    }
}
