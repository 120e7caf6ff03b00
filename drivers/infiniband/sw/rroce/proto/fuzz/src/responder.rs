// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Target `responder`: the RC responder fed arbitrary request sequences.
//!
//! Input: a responder configuration and three memory regions (R_Key, VA,
//! length, access), then steps: received packets (raw bytes through
//! `parse_packet` and `InRequest::from_parsed`, as the glue does),
//! structured requests with chosen opcodes, PSNs near the expected one,
//! RETH/AtomicETH near the regions, receive WQEs posted or drained, and
//! `flush`.  Each `Action` is applied as `dp.rs` applies it, against fake
//! memory, and checked:
//!
//! * payload goes only into a taken receive WQE, inside its length, or into
//!   memory the responder checked with `MemCheck::check` for WRITE (same
//!   R_Key, inside the granted range, the region allows remote write);
//! * atomics are 8-byte aligned and inside an atomic-enabled region
//!   (ATOMIC WRITE: a write-enabled one);
//! * a FLUSH is executed only with valid placement bits, on a region that
//!   grants them, inside it for a range;
//! * READ response streams cover exactly the requested range, inside a
//!   region that allows remote read, with consecutive PSNs and a valid
//!   First/Middle/Last opcode sequence;
//! * every reply builds with `build_headers` and parses back;
//! * receive completions: a WQE was taken, the byte count fits it;
//! * `qp_error` iff the responder is in the error state from then on.

use crate::{build_packet, pmtu_from, psn_near, Reader};
use rroce_proto::hdr::{
    pad_count, parse_packet, AtomicEth, Feth, Ieth, ImmDt, Reth, Syndrome, FLUSH_GLOBAL,
    FLUSH_PERSISTENT, MAX_24,
};
use rroce_proto::opcode::{self, lookup, ExtHdrs, Operation, Position};
use rroce_proto::psn::{npkts, PathMtu, Psn};
use rroce_proto::qp::{
    flush_access, ACCESS_FLUSH_GLOBAL, ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ,
    ACCESS_REMOTE_WRITE,
};
use rroce_proto::rc::{
    Access, AccessError, Action, AtomicOp, InRequest, MemCheck, Outcome, Place, RecvSource, Reply,
    ResSlot, RespConfig, RespDesc, Responder,
};
use rroce_proto::wqe::{WcOpcode, WcStatus};
use std::collections::VecDeque;

/// One fake memory region.
pub struct Mr {
    /// R_Key.
    pub rkey: u32,
    /// First VA.
    pub va: u64,
    /// Access flags (`ACCESS_REMOTE_*`).
    pub access: u32,
    /// Contents.
    pub data: Vec<u8>,
}

impl Mr {
    fn range(&self, va: u64, len: u64) -> Option<std::ops::Range<usize>> {
        let off = va.checked_sub(self.va)?;
        let end = off.checked_add(len)?;
        if end > self.data.len() as u64 {
            return None;
        }
        Some(off as usize..end as usize)
    }
}

/// Fake memory: the regions and the last WRITE grant.
pub struct Mem {
    /// The regions.
    pub mrs: Vec<Mr>,
    /// `(rkey, va, len)` of the last successful WRITE check.
    pub write_grant: Option<(u32, u64, u32)>,
    /// Atomics executed.
    pub atomics: u64,
    /// FLUSHes executed.
    pub flushes: u64,
}

impl Mem {
    fn find(&self, rkey: u32) -> Option<&Mr> {
        self.mrs.iter().find(|m| m.rkey == rkey)
    }
    fn find_mut(&mut self, rkey: u32) -> Option<&mut Mr> {
        self.mrs.iter_mut().find(|m| m.rkey == rkey)
    }
    /// Whether `len` bytes at `va` of `rkey` may be accessed with `flag`.
    pub fn allows(&self, rkey: u32, va: u64, len: u32, flag: u32) -> bool {
        self.find(rkey)
            .is_some_and(|m| m.access & flag != 0 && m.range(va, u64::from(len)).is_some())
    }
}

impl MemCheck for Mem {
    fn check(&mut self, rkey: u32, va: u64, len: u32, access: Access) -> Result<(), AccessError> {
        assert!(len > 0, "check called for a zero-length access");
        let m = self.find(rkey).ok_or(AccessError::InvalidKey)?;
        m.range(va, u64::from(len)).ok_or(AccessError::OutOfRange)?;
        if m.access & access.ib_flag() == 0 {
            return Err(AccessError::NoPermission);
        }
        if access == Access::Write {
            self.write_grant = Some((rkey, va, len));
        }
        Ok(())
    }

    fn atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, AccessError> {
        assert_eq!(va & 7, 0, "unaligned atomic");
        let m = self.find_mut(rkey).ok_or(AccessError::InvalidKey)?;
        let rg = m.range(va, 8).ok_or(AccessError::OutOfRange)?;
        let need = match op {
            AtomicOp::Write { .. } => ACCESS_REMOTE_WRITE,
            _ => ACCESS_REMOTE_ATOMIC,
        };
        if m.access & need == 0 {
            return Err(AccessError::NoPermission);
        }
        let cell: &mut [u8; 8] = (&mut m.data[rg]).try_into().unwrap();
        let orig = u64::from_ne_bytes(*cell);
        let new = match op {
            AtomicOp::CompareSwap { compare, swap } => {
                if orig == compare {
                    swap
                } else {
                    orig
                }
            }
            AtomicOp::FetchAdd { add } => orig.wrapping_add(add),
            AtomicOp::Write { value } => value,
        };
        *cell = new.to_ne_bytes();
        self.atomics += 1;
        Ok(orig)
    }

    fn flush(
        &mut self,
        rkey: u32,
        range: Option<(u64, u32)>,
        placement: u8,
    ) -> Result<(), AccessError> {
        assert!(
            placement != 0 && placement & !(FLUSH_GLOBAL | FLUSH_PERSISTENT) == 0,
            "FLUSH with placement {placement:#x}"
        );
        let m = self.find(rkey).ok_or(AccessError::InvalidKey)?;
        if let Some((va, len)) = range {
            m.range(va, u64::from(len)).ok_or(AccessError::OutOfRange)?;
        }
        let need = flush_access(placement);
        if m.access & need != need {
            return Err(AccessError::NoPermission);
        }
        self.flushes += 1;
        Ok(())
    }
}

/// The receive queue: buffer lengths of posted receive WQEs.
#[derive(Default)]
pub struct Rq {
    /// Posted, not taken.
    pub q: VecDeque<u32>,
}

impl RecvSource for Rq {
    fn peek_len(&mut self) -> Option<u32> {
        self.q.front().copied()
    }
}

const RC_REQUESTS: [u8; 21] = [
    opcode::RC_SEND_FIRST,
    opcode::RC_SEND_MIDDLE,
    opcode::RC_SEND_LAST,
    opcode::RC_SEND_LAST_WITH_IMMEDIATE,
    opcode::RC_SEND_ONLY,
    opcode::RC_SEND_ONLY_WITH_IMMEDIATE,
    opcode::RC_RDMA_WRITE_FIRST,
    opcode::RC_RDMA_WRITE_MIDDLE,
    opcode::RC_RDMA_WRITE_LAST,
    opcode::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
    opcode::RC_RDMA_WRITE_ONLY,
    opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
    opcode::RC_RDMA_READ_REQUEST,
    opcode::RC_COMPARE_SWAP,
    opcode::RC_FETCH_ADD,
    opcode::RC_ATOMIC_WRITE,
    opcode::RC_FLUSH,
    opcode::RC_SEND_LAST_WITH_INVALIDATE,
    opcode::RC_SEND_ONLY_WITH_INVALIDATE,
    opcode::UD_SEND_ONLY,
    opcode::RC_ACKNOWLEDGE,
];

/// A VA near one of the regions (or anywhere).
fn va_near(r: &mut Reader<'_>, mem: &Mem) -> u64 {
    let sel = r.u8();
    match sel % 8 {
        0..=5 => {
            let m = &mem.mrs[usize::from(sel) % mem.mrs.len()];
            let d = i64::from(r.u16() as i16);
            m.va.wrapping_add(d as u64)
        }
        6 => r.u64() & !7,
        _ => r.u64(),
    }
}

fn rkey_near(r: &mut Reader<'_>, mem: &Mem) -> u32 {
    let sel = r.u8();
    if sel < 240 {
        mem.mrs[usize::from(sel) % mem.mrs.len()].rkey
    } else {
        r.u32()
    }
}

fn len_near(r: &mut Reader<'_>, mtu: u32) -> u32 {
    match r.u8() % 8 {
        0 => 0,
        1 => mtu,
        2 => u32::from(r.u8()),
        3 => mtu * u32::from(r.u8() % 8) + u32::from(r.u8()),
        4 => u32::from(r.u16()),
        5 => mtu * u32::from(r.u8() % 8),
        6 => 1 << 31,
        _ => r.u32(),
    }
}

/// A structured request whose headers follow its opcode (as after parsing).
fn request(r: &mut Reader<'_>, epsn: Psn, mtu: u32, mem: &Mem) -> InRequest {
    let sel = r.u8();
    let op = if sel < 240 {
        RC_REQUESTS[usize::from(sel) % RC_REQUESTS.len()]
    } else {
        r.u8()
    };
    let flags = r.u8();
    let hdrs = lookup(op).map_or(ExtHdrs::NONE, |i| i.hdrs);
    let mut q = InRequest {
        opcode: op,
        psn: psn_near(r, epsn),
        ack_req: flags & 1 != 0,
        solicited: flags & 2 != 0,
        payload_len: len_near(r, mtu),
        ..InRequest::default()
    };
    if lookup(op).is_some_and(|i| !i.payload) {
        q.payload_len = 0;
    }
    if hdrs.contains(ExtHdrs::FETH) {
        // Mostly valid placement and level bits, sometimes any.
        let f = r.u8();
        q.feth = Some(if f < 200 {
            Feth::new(f % 4, (f >> 2) % 2)
        } else {
            Feth(r.u32())
        });
    }
    if hdrs.contains(ExtHdrs::RETH) {
        q.reth = Some(Reth {
            va: va_near(r, mem),
            rkey: rkey_near(r, mem),
            len: len_near(r, mtu),
        });
    }
    if hdrs.contains(ExtHdrs::ATOMIC_ETH) {
        q.atomic = Some(AtomicEth {
            va: va_near(r, mem),
            rkey: rkey_near(r, mem),
            swap_add: r.u64(),
            compare: r.u64(),
        });
    }
    if hdrs.contains(ExtHdrs::IMMDT) {
        q.imm = Some(ImmDt { imm: r.u32() });
    }
    if hdrs.contains(ExtHdrs::IETH) {
        q.ieth = Some(Ieth { rkey: r.u32() });
    }
    q
}

/// Harness state: the glue around one responder.
struct Glue {
    resp: Responder<[ResSlot; 16]>,
    pmtu: PathMtu,
    mem: Mem,
    rq: Rq,
    /// Length of the receive WQE being filled.
    cur_recv: Option<u32>,
    error: bool,
}

/// Check that a reply builds and parses back with the same fields.
pub fn check_reply(d: &RespDesc) {
    let info = lookup(d.opcode).expect("reply with unknown opcode");
    assert_eq!(info.kind, opcode::Kind::Response);
    if let Some(a) = d.aeth {
        assert!(a.msn <= MAX_24);
    }
    let bth = d.bth(0x12_3456, 0xFFFF);
    assert!(bth.psn <= MAX_24);
    let n = d.payload_len() as usize;
    assert_eq!(d.pad, pad_count(n));
    let pkt = build_packet(&bth, &d.ext(), n).expect("reply headers must build");
    let p = parse_packet(&pkt).expect("reply must parse");
    assert_eq!(p.bth.opcode, d.opcode);
    assert_eq!(p.bth.psn, d.psn.get());
    assert_eq!(p.payload_len, n);
    assert_eq!(p.ext.aeth, d.aeth);
}

impl Glue {
    fn apply(&mut self, q: &InRequest, a: &Action) {
        let plen = q.payload_len;
        if a.take_recv {
            assert!(
                self.cur_recv.is_none(),
                "took a receive WQE while one is open"
            );
            let len = self
                .rq
                .q
                .pop_front()
                .expect("took a receive WQE from an empty RQ");
            self.cur_recv = Some(len);
        }
        match a.place {
            Place::None => {}
            Place::Recv { offset } => {
                let len = self
                    .cur_recv
                    .expect("payload for a receive WQE never taken");
                let end = offset.checked_add(plen).expect("receive offset overflow");
                assert!(
                    end <= len,
                    "payload {offset}+{plen} beyond receive buffer {len}"
                );
            }
            Place::Mem { rkey, va } => {
                if plen > 0 {
                    let (grk, gva, glen) = self.mem.write_grant.expect("WRITE without a check");
                    assert_eq!(rkey, grk, "WRITE to another R_Key than checked");
                    let end = va.checked_add(u64::from(plen)).expect("WRITE VA overflow");
                    let gend = gva + u64::from(glen);
                    assert!(va >= gva && end <= gend, "WRITE outside the granted range");
                    assert!(self.mem.allows(rkey, va, plen, ACCESS_REMOTE_WRITE));
                    let m = self.mem.find_mut(rkey).unwrap();
                    let rg = m.range(va, u64::from(plen)).unwrap();
                    m.data[rg].fill(0xA5);
                }
            }
        }
        if let Some(c) = a.recv_done {
            let len = self
                .cur_recv
                .take()
                .expect("receive completion without a WQE");
            if c.status == WcStatus::Success {
                match c.opcode {
                    WcOpcode::Recv => assert!(c.byte_len <= len),
                    WcOpcode::RecvRdmaWithImm => assert!(c.imm.is_some()),
                    o => panic!("receive completion with opcode {o:?}"),
                }
            } else {
                assert!(a.qp_error, "error completion without QP error");
            }
        }
        match a.reply {
            Reply::None => {}
            Reply::Packet(d) => {
                assert!(d.payload.is_none());
                check_reply(&d);
            }
            Reply::Read(s) => {
                let reth = q.reth.expect("READ response without RETH");
                let n = s.remaining();
                let mtu = self.pmtu.bytes();
                let want_n = reth.len.div_ceil(mtu).max(1);
                assert_eq!(n, want_n);
                let mut total = 0u64;
                let mut va = reth.va;
                let mut i = 0u32;
                let mut prev: Option<Position> = None;
                for d in s {
                    let pos = lookup(d.opcode).expect("READ response opcode").position;
                    match prev {
                        None => assert!(pos.is_start()),
                        Some(p) => assert!(!p.is_end() && !pos.is_start()),
                    }
                    prev = Some(pos);
                    assert_eq!(d.psn, q.psn.add(i));
                    let src = d.payload.expect("READ response without payload");
                    assert_eq!((src.rkey, src.va), (reth.rkey, va));
                    assert!(src.len <= mtu);
                    if src.len > 0 {
                        assert!(
                            self.mem
                                .allows(src.rkey, src.va, src.len, ACCESS_REMOTE_READ),
                            "READ response outside readable memory"
                        );
                    }
                    check_reply(&d);
                    va = va.wrapping_add(u64::from(src.len));
                    total += u64::from(src.len);
                    i += 1;
                    assert!(i <= n);
                }
                assert!(prev.is_some_and(|p| p.is_end()));
                assert_eq!(i, n);
                assert_eq!(total, u64::from(reth.len));
            }
        }
        if a.qp_error {
            assert!(self.resp.is_error());
            self.error = true;
            self.cur_recv = None;
        }
        if self.error {
            assert!(self.resp.is_error());
        }
        assert!(self.resp.msn() <= MAX_24);
    }

    fn feed(&mut self, q: &InRequest) {
        let was_error = self.resp.is_error();
        let (epsn, msn) = (self.resp.expected_psn(), self.resp.msn());
        let a = self.resp.on_request(q, &mut self.mem, &mut self.rq);
        if was_error {
            assert_eq!(a.reply, Reply::None);
            assert!(!a.take_recv && a.recv_done.is_none() && a.place == Place::None);
        }
        // The expected PSN moves only for an executed request: by the
        // READ's response count, or by one.
        let (epsn2, msn2) = (self.resp.expected_psn(), self.resp.msn());
        if a.outcome == Outcome::Executed {
            assert_eq!(q.psn, epsn, "executed a request at another PSN");
            let n = match (lookup(q.opcode).map(|i| i.operation), q.reth) {
                (Some(Operation::RdmaReadRequest), Some(r)) => npkts(r.len, self.pmtu),
                _ => 1,
            };
            assert_eq!(epsn2, epsn.add(n));
            assert!(msn2 == msn || msn2 == (msn + 1) & MAX_24);
        } else {
            assert_eq!(epsn2, epsn, "ePSN moved for {:?}", a.outcome);
            assert_eq!(msn2, msn);
        }
        // Never acknowledge a PSN that was not executed: a positive ACK
        // (or atomic ACK) is for a PSN before the new ePSN.
        if let Reply::Packet(d) = a.reply {
            if d.aeth
                .is_some_and(|x| matches!(x.decoded(), Syndrome::Ack { .. }))
            {
                assert!(
                    d.psn.diff(epsn2) < 0,
                    "ACK for PSN {:#x} with ePSN {:#x}",
                    d.psn.get(),
                    epsn2.get()
                );
            }
        }
        self.apply(q, &a);
    }
}

/// The harness.
pub fn run(data: &[u8]) {
    let mut r = Reader::new(data);
    let pmtu = pmtu_from(r.u8());
    let cfg = RespConfig {
        rq_psn: Psn::new(match r.u8() % 3 {
            0 => 0,
            1 => MAX_24 - u32::from(r.u8()),
            _ => r.u32(),
        }),
        pmtu,
        max_dest_rd_atomic: r.u8() % 20,
        min_rnr_timer: r.u8(),
    };
    let mut mrs = Vec::new();
    for (i, default_va) in [0x1000u64, u64::MAX - 0x3FFF, 0x7f00_0000_0000]
        .into_iter()
        .enumerate()
    {
        let len = usize::from(r.u16() % 0x4000) + 8;
        let va = if r.u8() < 200 { default_va } else { r.u64() };
        let va = va.min(u64::MAX - len as u64 + 1);
        mrs.push(Mr {
            rkey: 0x100 * (i as u32 + 1),
            va,
            access: (u32::from(r.u8())
                & (ACCESS_REMOTE_READ | ACCESS_REMOTE_WRITE | ACCESS_REMOTE_ATOMIC))
                | if r.u8() < 128 { ACCESS_FLUSH_GLOBAL } else { 0 },
            data: vec![0; len],
        });
    }
    let mut g = Glue {
        resp: Responder::new(cfg),
        pmtu,
        mem: Mem {
            mrs,
            write_grant: None,
            atomics: 0,
            flushes: 0,
        },
        rq: Rq::default(),
        cur_recv: None,
        error: false,
    };
    let mtu = pmtu.bytes();
    let mut steps = 0;
    while !r.is_empty() && steps < 1000 {
        steps += 1;
        match r.u8() % 8 {
            0 => {
                let pkt = r.chunk(4200);
                if let Ok(p) = parse_packet(pkt) {
                    g.feed(&InRequest::from_parsed(&p, p.payload(pkt)));
                }
            }
            1..=4 => {
                let q = request(&mut r, g.resp.expected_psn(), mtu, &g.mem);
                g.feed(&q);
            }
            5 => {
                let len = match r.u8() % 4 {
                    0 => mtu,
                    1 => u32::from(r.u16()),
                    2 => u32::MAX,
                    _ => r.u32(),
                };
                if g.rq.q.len() < 64 {
                    g.rq.q.push_back(len);
                }
            }
            6 => {
                if r.u8() == 0 {
                    g.rq.q.clear();
                }
            }
            _ => {
                if r.u8() == 0xFF {
                    let taken = g.resp.flush();
                    assert_eq!(taken, g.cur_recv.is_some());
                    g.cur_recv = None;
                    g.error = true;
                }
            }
        }
    }
}
