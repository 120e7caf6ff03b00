// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Target `requester`: the RC requester and completer fed arbitrary
//! responses.
//!
//! Input: a requester configuration, then steps: posting send WQEs,
//! pulling packets (`next_packet`), responses (structured ACK/NAK/READ
//! response/ATOMIC ACK with PSNs near the window and arbitrary syndromes
//! and MSNs, or raw bytes through `parse_packet`), timer expiries, polls,
//! `restart_from`, window changes, local errors and flushes.  Requests can
//! also go through a real `Responder` ("echo") over a lossy, duplicating
//! wire, whose responses come back the same way.  Checked:
//!
//! * every request packet builds and parses, belongs to a posted WQE and
//!   carries payload only inside that WQE's message;
//! * `ReadData`/`AtomicData` verdicts name an outstanding READ/atomic WQE
//!   and a range inside its message, in order;
//! * completions come in posting order, each WQE exactly once, with the
//!   right `wr_id`; a successful READ got all its data first, a successful
//!   atomic its original value;
//! * local operations (REG_MR, BIND_MW, LOCAL_INV, fenced or not) send
//!   nothing, wait only when they must (LOCAL_INV until every earlier
//!   message was sent whole, a fenced one until every earlier WQE
//!   completed), and complete with the glue's
//!   result or a flush, never with success after an error completion;
//! * after a final `flush` every posted WQE has completed.

use crate::responder::{check_reply, Mem, Mr, Rq};
use crate::{build_packet, pmtu_from, psn_near, Reader};
use rroce_proto::hdr::{parse_packet, Aeth, MAX_24};
use rroce_proto::opcode::{self, lookup, ExtHdrs};
use rroce_proto::psn::Psn;
use rroce_proto::qp::{ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE};
use rroce_proto::rc::req::Blocked;
use rroce_proto::rc::{
    InRequest, InResponse, PostError, Reply, ReqConfig, Requester, ResSlot, RespConfig,
    RespVerdict, Responder, Slot,
};
use rroce_proto::wqe::{SendOpcode, SendWqe, WcStatus, MAX_MSG_SIZE};
use std::collections::VecDeque;

const SLOTS: usize = 8;
const RKEY: u32 = 0x100;
const VA: u64 = 0x1_0000;
const MR_LEN: usize = 1 << 16;

struct Posted {
    idx: u32,
    wqe: SendWqe,
    len: u32,
    /// READ bytes received contiguously from offset 0.
    got: u64,
    atomic_done: bool,
    /// The packet that ends the message (or the READ/atomic request) was
    /// sent at least once.
    sent_last: bool,
    /// A local operation, with the result the glue recorded.
    local: Option<WcStatus>,
    /// `local_error` was called for it.
    hit: bool,
}

struct H {
    req: Requester<[Slot; SLOTS]>,
    mtu: u32,
    posted: VecDeque<Posted>,
    next_idx: u32,
    now: u64,
    wr_id: u64,
    echo: Responder<[ResSlot; 16]>,
    echo_mem: Mem,
    echo_rq: Rq,
    echo_recv_open: bool,
    to_resp: VecDeque<InRequest>,
    to_req: VecDeque<InResponse>,
    /// The last packet sent asked for an acknowledgement.
    last_ack_req: bool,
    /// A completion with an error status was polled.
    error_polled: bool,
    /// A completion with an error status other than a flush was polled.
    real_error_polled: bool,
    /// `restart_from` moved the send position forward past packets not
    /// sent again (the glue may; the engine itself only goes back), until
    /// everything is acknowledged.
    skipped_forward: bool,
}

const RC_RESPONSES: [u8; 7] = [
    opcode::RC_ACKNOWLEDGE,
    opcode::RC_ACKNOWLEDGE,
    opcode::RC_RDMA_READ_RESPONSE_FIRST,
    opcode::RC_RDMA_READ_RESPONSE_MIDDLE,
    opcode::RC_RDMA_READ_RESPONSE_LAST,
    opcode::RC_RDMA_READ_RESPONSE_ONLY,
    opcode::RC_ATOMIC_ACKNOWLEDGE,
];

fn syndrome(r: &mut Reader<'_>) -> u8 {
    match r.u8() % 8 {
        0..=2 => 0x1F,             // ACK
        3 => 0x60,                 // NAK PSN sequence error
        4 => 0x20 | r.u8() & 0x1F, // RNR NAK
        5 => 0x60 | (r.u8() % 6),  // other NAKs
        _ => r.u8(),
    }
}

impl H {
    fn posted_mut(&mut self, idx: u32) -> Option<&mut Posted> {
        self.posted.iter_mut().find(|p| p.idx == idx)
    }

    fn post(&mut self, r: &mut Reader<'_>) {
        // The IBTA 1.5 opcodes (values 14, 15) from the top of the byte.
        let b = r.u8();
        let op = if b >= 250 {
            Some([SendOpcode::Flush, SendOpcode::AtomicWrite][usize::from(b % 2)])
        } else {
            SendOpcode::from_u8(b % 10)
        };
        let Some(op) = op else {
            return;
        };
        let len = match r.u8() % 6 {
            0 => u32::from(r.u8()),
            1 => self.mtu * u32::from(r.u8() % 6) + u32::from(r.u8() % 4),
            2 => u32::from(r.u16()),
            3 => 8,
            4 => 0,
            _ => r.u32(),
        };
        self.wr_id += 1;
        let mut w = SendWqe::new(self.wr_id, op);
        w.flags = r.u8() & 0x0F;
        w.imm_or_inv = r.u32();
        w.rkey = if r.u8() < 240 { RKEY } else { r.u32() };
        w.remote_addr = if r.u8() < 240 {
            (VA + u64::from(r.u16() % 0x8000)) & !7
        } else {
            r.u64()
        };
        w.compare_add = r.u64();
        w.swap = r.u64();
        let before = self.req.outstanding();
        if op.is_local() {
            self.post_local(w, r);
            return;
        }
        match self.req.post(w, len) {
            Ok(idx) => self.record(idx, w, len, None),
            Err(PostError::Full) => assert_eq!(before as usize, SLOTS),
            Err(PostError::Unsupported) => panic!("post refused {op:?} as a local operation"),
            Err(PostError::TooLong) => assert!(
                len > MAX_MSG_SIZE
                    || (op == SendOpcode::AtomicWrite && len != 8)
                    || (op == SendOpcode::Flush && (len != 0 || w.flush_params().is_none()))
            ),
            Err(PostError::NoRdAtomic) => {
                assert_eq!(self.req.config().max_rd_atomic, 0);
            }
            Err(PostError::NotOnTransport) => {
                assert!(self.req.config().unreliable, "RC has every operation");
            }
            Err(PostError::Busy) => panic!("only post_local answers Busy"),
        }
        assert!(self.req.outstanding() as usize <= SLOTS);
        assert_eq!(self.req.outstanding() as usize, self.posted.len());
    }

    /// Keeps WQE `idx` as posted (`local`: a local operation's result).
    fn record(&mut self, idx: u32, wqe: SendWqe, len: u32, local: Option<WcStatus>) {
        assert_eq!(idx, self.next_idx, "WQE indices are assigned in order");
        self.next_idx = idx.wrapping_add(1);
        self.posted.push_back(Posted {
            idx,
            wqe,
            len,
            got: 0,
            atomic_done: false,
            // (a local operation has no packet to send)
            sent_last: local.is_some(),
            local,
            hit: false,
        });
    }

    /// A local operation the glue executed with some result: REG_MR and
    /// BIND_MW may be recorded behind WQEs still outstanding, LOCAL_INV
    /// and fenced ones only once everything before them has completed.
    fn post_local(&mut self, w: SendWqe, r: &mut Reader<'_>) {
        let status = match r.u8() % 4 {
            // (the glue does not execute it then)
            _ if self.req.will_flush() => WcStatus::WrFlushErr,
            0 => WcStatus::LocProtErr,
            1 => WcStatus::MwBindErr,
            _ => WcStatus::Success,
        };
        let before = self.req.outstanding();
        let must_wait = Requester::<[Slot; SLOTS]>::local_must_wait(&w);
        let waits_for_sends = Requester::<[Slot; SLOTS]>::local_waits_for_sends(&w);
        let all_sent = self.posted.iter().all(|p| p.sent_last);
        if !self.req.will_flush() {
            // (In the error state, or behind a failed WQE, nothing more is
            // sent.)
            assert_eq!(
                self.req.all_sent(),
                all_sent || self.req.all_completed(),
                "{:?} {:?}",
                self.req,
                self.posted
                    .iter()
                    .map(|p| (p.idx, p.wqe.opcode, p.len, p.sent_last, p.local))
                    .collect::<Vec<_>>()
            );
        }
        assert_eq!(
            self.req.local_may_run(&w),
            self.req.will_flush()
                || self.req.all_completed()
                || (!must_wait && (!waits_for_sends || all_sent))
        );
        match self.req.post_local(w, status) {
            Ok(idx) => self.record(idx, w, 0, Some(status)),
            Err(PostError::Full) => assert_eq!(before as usize, SLOTS),
            Err(PostError::Busy) => assert!(!self.req.local_may_run(&w)),
            Err(e) => panic!("post_local: {e:?}"),
        }
    }

    /// A packet the glue could not send (its data is not there yet, an
    /// on-demand page): UC takes it back (`unsend`), so it is produced
    /// again and completes nothing meanwhile; RC goes back to it with
    /// `restart_from`, as the glue does when the page is in.
    fn unsent_packet(&mut self) {
        let Some(d) = self.req.next_packet(self.now) else {
            return;
        };
        let ends = lookup(d.opcode).is_some_and(|i| i.position.is_end());
        let uc = self.req.config().unreliable;
        let error = self.req.is_error();
        let ok = self.req.unsend(&d);
        if !uc || error {
            assert!(!ok);
        }
        if ok {
            return;
        }
        if uc {
            // The glue fails the WQE then (the QP entered the error state
            // as the packet completed its WQE).
            assert!(self.req.is_error());
            self.req.local_error(d.wqe, WcStatus::WrFlushErr);
            if let Some(p) = self.posted_mut(d.wqe) {
                p.hit = true;
            }
            return;
        }
        if let Some(p) = self.posted_mut(d.wqe) {
            p.sent_last |= ends;
        }
        self.req.restart_from(d.psn);
    }

    /// A packet the network stack refused (`refused`): the requester
    /// pauses and produces it again; if it takes it as lost instead (the
    /// error state, UC's limit), it counts as sent.
    fn refused_packet(&mut self) {
        let Some(d) = self.req.next_packet(self.now) else {
            return;
        };
        let ends = lookup(d.opcode).is_some_and(|i| i.position.is_end());
        let was_error = self.req.is_error();
        let ok = self.req.refused(&d, self.now);
        if was_error {
            assert!(!ok);
        }
        if ok && self.req.is_error() {
            // An ACK timeout's worth of refusals of this PSN used up the
            // last retry (RETRY_EXC_ERR).
            return;
        }
        if ok {
            assert_eq!(self.req.blocked(), Some(Blocked::Refused));
            assert!(self.req.next_packet(self.now).is_none());
            assert!(self.req.next_deadline().is_some());
            return;
        }
        if let Some(p) = self.posted_mut(d.wqe) {
            p.sent_last |= ends;
        }
    }

    fn send(&mut self, max: u32) {
        for _ in 0..max {
            let Some(d) = self.req.next_packet(self.now) else {
                break;
            };
            let ends = lookup(d.opcode).is_some_and(|i| i.position.is_end());
            self.last_ack_req = d.ack_req;
            let p = self
                .posted_mut(d.wqe)
                .expect("packet for a WQE not outstanding");
            assert!(p.local.is_none(), "a packet for a local operation");
            p.sent_last |= ends;
            if let Some((off, len)) = d.payload {
                let end = u64::from(off) + u64::from(len);
                assert!(end <= u64::from(p.len), "payload beyond the message");
                assert!(len <= self.mtu);
            }
            assert!(d.psn.get() <= MAX_24);
            let n = d.payload_len() as usize;
            let pkt = build_packet(&d.bth(0x11, 0xFFFF), &d.ext(), n)
                .expect("request headers must build");
            let parsed = parse_packet(&pkt).expect("request must parse");
            assert_eq!(parsed.bth.opcode, d.opcode);
            assert_eq!(parsed.payload_len, n);
            if self.to_resp.len() < 256 {
                self.to_resp
                    .push_back(InRequest::from_parsed(&parsed, parsed.payload(&pkt)));
            }
        }
        // Liveness of the ACK clock: with everything sent and PSNs still
        // unacknowledged, the last packet out asked for an ACK (AckReq is
        // left off only when a later message follows), so the responder
        // answers without waiting for the retransmission timer.  Not
        // after the glue skipped forward (then the timer recovers).
        if self.req.unacked_psn() == self.req.next_psn() {
            self.skipped_forward = false;
        }
        if !self.req.config().unreliable
            && !self.skipped_forward
            && self.req.blocked() == Some(Blocked::Empty)
            && self.req.unacked_psn() != self.req.next_psn()
        {
            assert!(
                self.last_ack_req,
                "everything sent, PSNs unacknowledged, and no AckReq on the last packet"
            );
        }
    }

    fn deliver_request(&mut self, mode: u8) {
        let Some(q) = self.to_resp.pop_front() else {
            return;
        };
        match mode % 8 {
            0 => return, // lost
            1 => self.to_resp.push_front(q),
            2 => {
                // reordered with the next one
                if let Some(n) = self.to_resp.pop_front() {
                    self.to_resp.push_front(q);
                    self.to_resp.push_front(n);
                    return;
                }
            }
            _ => {}
        }
        let a = self
            .echo
            .on_request(&q, &mut self.echo_mem, &mut self.echo_rq);
        if a.take_recv {
            self.echo_recv_open = true;
        }
        if a.recv_done.is_some() || a.qp_error {
            self.echo_recv_open = false;
        }
        let mut push = |x: InResponse| {
            if self.to_req.len() < 256 {
                self.to_req.push_back(x);
            }
        };
        match a.reply {
            Reply::None => {}
            Reply::Packet(d) => {
                check_reply(&d);
                push(InResponse {
                    opcode: d.opcode,
                    psn: d.psn,
                    aeth: d.aeth,
                    atomic_orig: d.atomic_orig,
                    payload_len: 0,
                });
            }
            Reply::Read(s) => {
                for d in s {
                    push(InResponse {
                        opcode: d.opcode,
                        psn: d.psn,
                        aeth: d.aeth,
                        atomic_orig: None,
                        payload_len: d.payload_len(),
                    });
                }
            }
        }
    }

    fn deliver_response(&mut self, mode: u8) {
        let Some(x) = self.to_req.pop_front() else {
            return;
        };
        match mode % 8 {
            0 => {}
            1 => {
                self.to_req.push_front(x);
                self.respond(&x);
            }
            2 => {
                if let Some(n) = self.to_req.pop_front() {
                    self.to_req.push_front(x);
                    self.respond(&n);
                } else {
                    self.respond(&x);
                }
            }
            _ => self.respond(&x),
        }
    }

    fn respond(&mut self, x: &InResponse) {
        let was_error = self.req.is_error();
        let v = self.req.on_response(x, self.now);
        if was_error {
            assert!(matches!(v, RespVerdict::Ignored(_)));
        }
        match v {
            RespVerdict::ReadData {
                wqe,
                offset,
                middle,
            } => {
                let mtu = self.mtu;
                let p = self
                    .posted_mut(wqe)
                    .expect("READ data for a WQE not outstanding");
                assert_eq!(p.wqe.opcode, SendOpcode::RdmaRead);
                let end = u64::from(offset) + u64::from(x.payload_len);
                assert!(end <= u64::from(p.len), "READ data beyond the message");
                assert_eq!(offset % mtu, 0);
                assert!(u64::from(offset) <= p.got, "READ data with a gap");
                // "Middle" lets the driver skip its send engine: it must
                // never be said of a READ's first or last response.
                assert_eq!(middle, offset != 0 && end < u64::from(p.len));
                p.got = p.got.max(end);
            }
            RespVerdict::AtomicData { wqe, .. } => {
                let p = self
                    .posted_mut(wqe)
                    .expect("atomic data for a WQE not outstanding");
                assert!(p.wqe.opcode.is_atomic());
                p.atomic_done = true;
            }
            RespVerdict::Fatal(_) => assert!(self.req.is_error()),
            RespVerdict::Ack | RespVerdict::Retry | RespVerdict::Ignored(_) => {}
        }
    }

    fn structured_response(&mut self, r: &mut Reader<'_>) {
        let sel = r.u8();
        let op = if sel < 240 {
            RC_RESPONSES[usize::from(sel) % RC_RESPONSES.len()]
        } else {
            r.u8()
        };
        let base = if r.bool() {
            self.req.unacked_psn()
        } else {
            self.req.next_psn().prev()
        };
        let hdrs = lookup(op).map_or(ExtHdrs::NONE, |i| i.hdrs);
        let x = InResponse {
            opcode: op,
            psn: psn_near(r, base),
            aeth: hdrs.contains(ExtHdrs::AETH).then(|| Aeth {
                syndrome: syndrome(r),
                msn: r.u32() & MAX_24,
            }),
            atomic_orig: hdrs.contains(ExtHdrs::ATOMIC_ACK_ETH).then(|| r.u64()),
            payload_len: if lookup(op).is_some_and(|i| i.payload) {
                match r.u8() % 4 {
                    0 => self.mtu,
                    1 => u32::from(r.u16()),
                    2 => u32::from(r.u8()),
                    _ => r.u32(),
                }
            } else {
                0
            },
        };
        self.respond(&x);
    }

    fn poll(&mut self) {
        while let Some(c) = self.req.poll_completion() {
            let p = self
                .posted
                .pop_front()
                .expect("completion with nothing outstanding");
            assert_eq!(c.wqe, p.idx, "completion out of order");
            assert_eq!(c.wr_id, p.wqe.wr_id);
            assert_eq!(c.opcode, p.wqe.opcode.wc_opcode());
            if let Some(st) = p.local {
                // Its own result, or a flush after an error.
                assert!(
                    c.status == st
                        || c.status == WcStatus::WrFlushErr
                        || (p.hit && c.status == WcStatus::LocProtErr),
                    "local {:?}: {st:?} recorded, completed {:?}",
                    p.wqe.opcode,
                    c.status
                );
            }
            // After the first completion that is not a success, none is;
            // after the first error (other than a flush), only flushes.
            assert!(
                c.status != WcStatus::Success || !self.error_polled,
                "a success after an error completion"
            );
            assert!(
                c.status == WcStatus::WrFlushErr || !self.real_error_polled,
                "a second error after an error completion: {:?}",
                c.status
            );
            if c.status != WcStatus::Success {
                self.error_polled = true;
            }
            if !matches!(c.status, WcStatus::Success | WcStatus::WrFlushErr) {
                self.real_error_polled = true;
            }
            if c.status == WcStatus::Success {
                assert!(p.sent_last, "completed before its last packet was sent");
                match p.wqe.opcode {
                    SendOpcode::RdmaRead => {
                        assert!(p.got >= u64::from(p.len), "READ completed without its data");
                        assert_eq!(c.byte_len, p.len);
                    }
                    SendOpcode::AtomicCmpAndSwp | SendOpcode::AtomicFetchAndAdd => {
                        assert!(p.atomic_done, "atomic completed without its value");
                        assert_eq!(c.byte_len, 8);
                    }
                    _ => assert_eq!(c.byte_len, p.len),
                }
            } else {
                assert_eq!(c.byte_len, 0);
            }
        }
    }
}

/// The harness.
pub fn run(data: &[u8]) {
    let mut r = Reader::new(data);
    let pmtu = pmtu_from(r.u8());
    let sq_psn = Psn::new(match r.u8() % 3 {
        0 => 0,
        1 => MAX_24 - u32::from(r.u8()),
        _ => r.u32(),
    });
    let max_rd_atomic = r.u8() % 17;
    // The timeout byte's top values make the QP a UC one (no responses,
    // completion as sent), keeping older inputs' byte layout.
    let t = r.u8();
    let cfg = ReqConfig {
        unreliable: t >= 224,
        sq_psn,
        pmtu,
        max_rd_atomic,
        timeout: t % 32,
        retry_cnt: r.u8() % 8,
        rnr_retry: r.u8() % 8,
        max_unacked: match r.u8() % 3 {
            0 => ReqConfig::DEFAULT_MAX_UNACKED,
            1 => u32::from(r.u8()),
            _ => r.u32(),
        },
        ack_every: match r.u8() % 3 {
            0 => ReqConfig::DEFAULT_ACK_EVERY,
            1 => u32::from(r.u8()),
            _ => r.u32(),
        },
    };
    let echo_cfg = RespConfig {
        rq_psn: sq_psn,
        pmtu,
        max_dest_rd_atomic: r.u8() % 17,
        min_rnr_timer: r.u8() & 0x1F,
    };
    let mut h = H {
        req: Requester::new(cfg),
        mtu: pmtu.bytes(),
        posted: VecDeque::new(),
        next_idx: 0,
        now: r.u64() >> 8,
        wr_id: 0,
        echo: Responder::new(echo_cfg),
        echo_mem: Mem {
            mrs: vec![Mr {
                rkey: RKEY,
                va: VA,
                access: ACCESS_REMOTE_READ
                    | ACCESS_REMOTE_WRITE
                    | ACCESS_REMOTE_ATOMIC
                    | rroce_proto::qp::ACCESS_FLUSH_GLOBAL,
                data: vec![0; MR_LEN],
            }],
            write_grant: None,
            atomics: 0,
            flushes: 0,
        },
        echo_rq: Rq::default(),
        echo_recv_open: false,
        to_resp: VecDeque::new(),
        to_req: VecDeque::new(),
        last_ack_req: false,
        error_polled: false,
        real_error_polled: false,
        skipped_forward: false,
    };
    let mut steps = 0;
    while !r.is_empty() && steps < 1000 {
        steps += 1;
        match r.u8() % 16 {
            0 | 1 => h.post(&mut r),
            2 => {
                let n = u32::from(r.u8() % 64);
                h.send(n)
            }
            3 | 4 => {
                let m = r.u8();
                h.deliver_request(m)
            }
            5 | 6 => {
                let m = r.u8();
                h.deliver_response(m)
            }
            7 | 8 => h.structured_response(&mut r),
            9 => {
                let pkt = r.chunk(4200);
                if let Ok(p) = parse_packet(pkt) {
                    h.respond(&InResponse::from_parsed(&p));
                }
            }
            10 => {
                h.now = match r.u8() % 4 {
                    0 => h.req.next_deadline().unwrap_or(h.now).max(h.now),
                    1 => h.now.saturating_add(u64::from(r.u32())),
                    2 => h.now.saturating_add(u64::from(r.u16()) << 20),
                    _ => h.now.saturating_add(r.u64()),
                };
                let was_error = h.req.is_error();
                let changed = h.req.on_timer(h.now);
                if was_error {
                    assert!(!changed);
                }
            }
            11 => h.poll(),
            12 => {
                // The echo's receive queue.
                let n = r.u8() % 4;
                if n == 0 {
                    h.echo_rq.q.clear();
                } else if h.echo_rq.q.len() < 64 {
                    for _ in 0..n {
                        h.echo_rq
                            .q
                            .push_back(if r.bool() { u32::MAX } else { r.u32() });
                    }
                }
            }
            13 => {
                let base = h.req.unacked_psn();
                let p = psn_near(&mut r, base);
                let next = h.req.next_psn();
                h.req.restart_from(p);
                if h.req.next_psn().distance_from(base) > next.distance_from(base) {
                    h.skipped_forward = true;
                }
            }
            14 => {
                let (a, b) = (u32::from(r.u8()), u32::from(r.u8()));
                h.req.set_window(a, b);
            }
            _ => match r.u8() {
                0 => h.req.flush(),
                1 => {
                    let idx = h.posted.front().map_or(0, |p| p.idx);
                    let idx = idx.wrapping_add(u32::from(r.u8() % 4));
                    h.req.local_error(idx, WcStatus::LocProtErr);
                    // (The glue never does this to a local operation; the
                    // requester may then report the error instead of its
                    // result, as for any other WQE.)
                    if let Some(p) = h.posted_mut(idx) {
                        p.hit = true;
                    }
                }
                2 => h.unsent_packet(),
                3 => h.refused_packet(),
                _ => {}
            },
        }
        assert!(h.req.outstanding() as usize <= SLOTS);
        assert!(h.req.next_psn().get() <= MAX_24 && h.req.unacked_psn().get() <= MAX_24);
    }
    // Whatever happened, a flush returns every WQE exactly once.
    h.req.flush();
    h.poll();
    assert!(h.posted.is_empty(), "WQEs lost after flush");
    assert!(h.req.is_idle());
    assert!(h.req.next_packet(h.now).is_none());
}
