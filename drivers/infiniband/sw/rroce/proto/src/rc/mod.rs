// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! The Reliable Connected (RC) protocol engine: pure, deterministic decision
//! logic for the requester, the completer and the responder of one QP.
//! Unreliable Connected (UC) QPs use the same requester in its unreliable
//! mode ([`ReqConfig::unreliable`]: UC opcodes, no ACKs, no timers, a WQE
//! completes once sent) and the [`UcResponder`] (no replies, silent
//! message drops on PSN gaps, resynchronisation on the next First/Only).
//!
//! # Division of labour
//!
//! The engine owns *no* memory, packets, timers or locks.  It keeps the
//! per-QP protocol state (PSNs, MSN, per-WQE progress, responder resources,
//! retry budgets) and, for every event the kernel glue feeds it, says what to
//! do.  The glue owns everything else:
//!
//! | event (glue → engine)                          | decision (engine → glue) |
//! |------------------------------------------------|--------------------------|
//! | a decoded send WQE: [`Requester::post`]         | its index (= SQ ring index order) |
//! | "may I send?": [`Requester::next_packet`]       | a [`PacketDesc`]: opcode, PSN, flags, headers, and which bytes of the WQE's message to copy |
//! | a received response: [`Requester::on_response`]| a [`RespVerdict`]: where READ payload / atomic result goes, or why it was ignored |
//! | timer expiry: [`Requester::on_timer`]           | retransmit / give up; [`Requester::next_deadline`] says when to fire next |
//! | "what completed?": [`Requester::poll_completion`]| [`SendCompletion`]s in WQE order, exactly once each |
//! | a received request: [`Responder::on_request`]   | an [`Action`]: where the payload goes, recv WQE to take/complete, reply ([`RespDesc`] or a [`ReadResponder`] stream) |
//!
//! The glue builds headers with `hdr::build_headers` from
//! [`PacketDesc::bth`]/[`PacketDesc::ext`] (or the same on [`RespDesc`]),
//! copies payload bytes (SGE walk, MR lookup), computes the ICRC, transmits,
//! and arms one timer per QP at [`Requester::next_deadline`].  Every method
//! takes the current time in nanoseconds (any monotonic clock) when it may
//! arm or check a timer, so the engine is fully deterministic and runs on
//! the host under a simulated clock (see the `sim` tests).
//!
//! # Conventions
//!
//! * WQE indices are free-running `u32` counters, assigned by
//!   [`Requester::post`] in posting order: the glue pushes WQEs in SQ ring
//!   order so index `n` is SQ entry `n`.
//! * Immediate data: `SendWqe::imm_or_inv` holds the four wire bytes in
//!   memory order; [`imm_from_wqe`] turns it into an [`ImmDt`] and
//!   [`imm_to_cqe`] back into the CQE field.
//! * ACK credits are not implemented (no end-to-end flow control): every
//!   AETH carries the "invalid/unlimited" credit code `0x1F`, as rxe does;
//!   the requester ignores received credit codes.
//! * Nothing here panics on any input; all arithmetic is explicit.

pub mod comp;
pub mod replyq;
pub mod req;
pub mod resp;
pub mod uc;

#[cfg(test)]
mod sim;

pub use comp::{IgnoreReason, RespVerdict, SendCompletion};
pub use replyq::{Pending, Pushed, ReplyQueue};
pub use req::{Backoff, PostError, ReqConfig, ReqCounters, Requester, Slot};
pub use resp::{
    Access, AccessError, Action, AtomicOp, MemCheck, Outcome, Place, ReadResponder, RecvCompletion,
    RecvSource, Reply, ResSlot, RespConfig, RespCounters, Responder,
};
pub use uc::{is_uc_request, UcResponder};

use super::hdr::{Aeth, AtomicAckEth, AtomicEth, Bth, Ext, Feth, Ieth, ImmDt, Parsed, Reth};
use super::opcode::{self, Kind, Transport};
use super::psn::Psn;

/// Storage that grows with a queue depth, for the engines of one QP (the
/// requester's WQE slots, the responder's resources): an array on the
/// host, a vmalloc'ed vector in the kernel.  Its length is the capacity.
pub trait Store<T> {
    /// The items.
    fn items(&self) -> &[T];
    /// The items, mutably.
    fn items_mut(&mut self) -> &mut [T];
}

impl<T, const N: usize> Store<T> for [T; N] {
    fn items(&self) -> &[T] {
        self
    }
    fn items_mut(&mut self) -> &mut [T] {
        self
    }
}

/// A request packet to transmit, as decided by [`Requester::next_packet`].
///
/// Build it with `hdr::build_headers(buf, &d.bth(qpn, pkey), &d.ext())`,
/// then append `payload` bytes of the WQE's message (if any) and `pad` zero
/// bytes, then the ICRC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketDesc {
    /// Index of the WQE this packet belongs to.
    pub wqe: u32,
    /// The BTH opcode.
    pub opcode: u8,
    /// The PSN.
    pub psn: Psn,
    /// BTH AckReq.
    pub ack_req: bool,
    /// BTH SE (solicited event).
    pub solicited: bool,
    /// BTH PadCnt.
    pub pad: u8,
    /// `(offset in the message, length)` of the payload to copy from the
    /// WQE's SGEs / inline data; `None` for opcodes without payload.
    pub payload: Option<(u32, u32)>,
    /// RETH (WRITE First/Only, READ request, ATOMIC WRITE, FLUSH).
    pub reth: Option<Reth>,
    /// FETH (FLUSH).
    pub feth: Option<Feth>,
    /// Immediate data (last packet of `*_WITH_IMM`).
    pub imm: Option<ImmDt>,
    /// IETH (last packet of SEND with invalidate).
    pub ieth: Option<Ieth>,
    /// AtomicETH (CmpSwap, FetchAdd).
    pub atomic: Option<AtomicEth>,
    /// This PSN was sent before (go-back-N retransmission).
    pub retransmit: bool,
}

impl PacketDesc {
    /// The BTH for destination QP `dest_qpn` and partition key `pkey`.
    pub fn bth(&self, dest_qpn: u32, pkey: u16) -> Bth {
        Bth {
            opcode: self.opcode,
            se: self.solicited,
            pad: self.pad,
            pkey,
            dest_qpn,
            ack_req: self.ack_req,
            psn: self.psn.get(),
            ..Bth::default()
        }
    }

    /// The extension headers.
    pub fn ext(&self) -> Ext {
        Ext {
            feth: self.feth,
            reth: self.reth,
            atomic_eth: self.atomic,
            immdt: self.imm,
            ieth: self.ieth,
            ..Ext::default()
        }
    }

    /// Payload length in bytes (0 without payload).
    pub fn payload_len(&self) -> u32 {
        self.payload.map_or(0, |(_, l)| l)
    }
}

/// Where the payload of a READ response comes from: `len` bytes at `va` of
/// the MR with `rkey` (already checked by [`MemCheck::check`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadSrc {
    /// The R_Key of the request.
    pub rkey: u32,
    /// Virtual address of the first byte.
    pub va: u64,
    /// Number of bytes.
    pub len: u32,
}

/// A response packet to transmit (ACK, NAK, atomic ACK, READ response).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RespDesc {
    /// The BTH opcode.
    pub opcode: u8,
    /// The PSN.
    pub psn: Psn,
    /// AETH (all but READ response Middle).
    pub aeth: Option<Aeth>,
    /// Original value for the ATOMIC Acknowledge.
    pub atomic_orig: Option<u64>,
    /// READ response payload source.
    pub payload: Option<ReadSrc>,
    /// BTH PadCnt.
    pub pad: u8,
}

impl RespDesc {
    /// The BTH for destination QP `dest_qpn` and partition key `pkey`.
    pub fn bth(&self, dest_qpn: u32, pkey: u16) -> Bth {
        Bth {
            opcode: self.opcode,
            pad: self.pad,
            pkey,
            dest_qpn,
            psn: self.psn.get(),
            ..Bth::default()
        }
    }

    /// The extension headers.
    pub fn ext(&self) -> Ext {
        Ext {
            aeth: self.aeth,
            atomic_ack_eth: self.atomic_orig.map(|orig| AtomicAckEth { orig }),
            ..Ext::default()
        }
    }

    /// Payload length in bytes.
    pub fn payload_len(&self) -> u32 {
        self.payload.map_or(0, |p| p.len)
    }
}

/// A received RC request, as the responder needs it.  The glue fills it from
/// `hdr::parse_packet` with [`InRequest::from_parsed`] after checking the
/// ICRC, the destination QP and the P_Key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InRequest {
    /// The BTH opcode.
    pub opcode: u8,
    /// The PSN.
    pub psn: Psn,
    /// BTH AckReq.
    pub ack_req: bool,
    /// BTH SE.
    pub solicited: bool,
    /// Payload length without pad.
    pub payload_len: u32,
    /// RETH.
    pub reth: Option<Reth>,
    /// FETH (FLUSH).
    pub feth: Option<Feth>,
    /// ImmDt.
    pub imm: Option<ImmDt>,
    /// IETH.
    pub ieth: Option<Ieth>,
    /// AtomicETH.
    pub atomic: Option<AtomicEth>,
    /// The 8 payload bytes of an ATOMIC WRITE (read as a native `u64`, so
    /// that `to_ne_bytes` gives them back in wire order); `None` for other
    /// opcodes or another payload length.
    pub atomic_write: Option<u64>,
}

impl InRequest {
    /// From a packet parsed as `p` whose payload is `payload`
    /// (`p.payload(pkt)`).
    pub fn from_parsed(p: &Parsed, payload: &[u8]) -> InRequest {
        let atomic_write = <&[u8; 8]>::try_from(payload)
            .ok()
            .filter(|_| p.info.operation == opcode::Operation::AtomicWrite)
            .map(|b| u64::from_ne_bytes(*b));
        InRequest {
            opcode: p.bth.opcode,
            psn: Psn::new(p.bth.psn),
            ack_req: p.bth.ack_req,
            solicited: p.bth.se,
            payload_len: u32::try_from(p.payload_len).unwrap_or(u32::MAX),
            reth: p.ext.reth,
            feth: p.ext.feth,
            imm: p.ext.immdt,
            ieth: p.ext.ieth,
            atomic: p.ext.atomic_eth,
            atomic_write,
        }
    }
}

/// A received RC response, as the completer needs it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InResponse {
    /// The BTH opcode.
    pub opcode: u8,
    /// The PSN.
    pub psn: Psn,
    /// AETH.
    pub aeth: Option<Aeth>,
    /// AtomicAckETH original value.
    pub atomic_orig: Option<u64>,
    /// Payload length without pad.
    pub payload_len: u32,
}

impl InResponse {
    /// From a parsed packet.
    pub fn from_parsed(p: &Parsed) -> InResponse {
        InResponse {
            opcode: p.bth.opcode,
            psn: Psn::new(p.bth.psn),
            aeth: p.ext.aeth,
            atomic_orig: p.ext.atomic_ack_eth.map(|a| a.orig),
            payload_len: u32::try_from(p.payload_len).unwrap_or(u32::MAX),
        }
    }
}

/// Whether `opcode` is an RC request (the responder's input).
pub fn is_rc_request(opcode: u8) -> bool {
    opcode::lookup(opcode).is_some_and(|i| i.transport == Transport::Rc && i.kind == Kind::Request)
}

/// Whether `opcode` is an RC response (the completer's input).
pub fn is_rc_response(opcode: u8) -> bool {
    opcode::lookup(opcode).is_some_and(|i| i.transport == Transport::Rc && i.kind == Kind::Response)
}

/// The immediate data of a WQE (`imm_or_inv` holds the wire bytes in
/// memory order) as an [`ImmDt`].
pub const fn imm_from_wqe(imm_or_inv: u32) -> ImmDt {
    ImmDt {
        imm: u32::from_be_bytes(imm_or_inv.to_ne_bytes()),
    }
}

/// The CQE `imm_or_inv` field (wire bytes in memory order) for `imm`.
pub const fn imm_to_cqe(imm: ImmDt) -> u32 {
    u32::from_ne_bytes(imm.imm.to_be_bytes())
}
