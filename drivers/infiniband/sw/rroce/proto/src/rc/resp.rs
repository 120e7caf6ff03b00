// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! The RC responder: request validation, placement decisions, ACK/NAK
//! generation, READ response streams and duplicate handling.
//!
//! [`Responder::on_request`] classifies a request by PSN against the
//! expected PSN (ePSN):
//!
//! * **ahead** (a gap): one NAK PSN sequence error carrying the ePSN, then
//!   silence until the ePSN arrives;
//! * **behind** (duplicate): SEND/WRITE are re-acknowledged with `ePSN - 1`
//!   and not re-executed; a READ found in the responder resources (PSN in
//!   range, same R_Key, VA range inside the original) is re-executed from
//!   memory for the requested range; an atomic found there gets its saved
//!   original value back without re-executing.  Unknown duplicates are
//!   dropped;
//! * **expected**: opcode sequence (First, Middle…, Last), length (First and
//!   Middle exactly one PMTU, Last 1..=PMTU, Only ≤ PMTU, the message total
//!   equal to the RETH length, at most 2^31), R_Key/range/permission via
//!   [`MemCheck`], atomic alignment, receive WQE availability (RNR NAK with
//!   `min_rnr_timer` if none; SEND First/Only and the last packet of WRITE
//!   with immediate consume one) and receive buffer length.  Invalid
//!   requests, access and length errors send the matching NAK and put the
//!   QP in the error state.
//!
//! ACKs: after a SEND/WRITE packet with AckReq or at the end of a message,
//! for that packet's PSN (which covers all earlier ones); READ responses and
//! atomic ACKs carry the AETH.  The MSN counts completed messages: +1 at the
//! end of a SEND/WRITE, at the start of a READ and per atomic.  Credits are
//! not implemented: the credit field is always `0x1F`.
//!
//! Responder resources (READ/atomic history for duplicates) live in a ring
//! of as many entries as the responder's [`Store`] holds, of which
//! `max_dest_rd_atomic` (at most that many) are used, oldest overwritten
//! first.  The responder does not NAK requesters that exceed
//! `max_dest_rd_atomic`; such a requester may lose the ability to replay.

use super::super::hdr::{
    pad_count, payload_len_ok, Aeth, Syndrome, AETH_ACK_UNLIMITED, FLUSH_GLOBAL, FLUSH_MR,
    FLUSH_PERSISTENT, FLUSH_RANGE, NAK_INVALID_REQUEST, NAK_PSN_SEQ_ERROR, NAK_REMOTE_ACCESS_ERROR,
    NAK_REMOTE_OPERATIONAL_ERROR,
};
use super::super::opcode::{
    lookup, read_response_opcode, Operation, Position, RC_ACKNOWLEDGE, RC_ATOMIC_ACKNOWLEDGE,
};
use super::super::psn::{npkts, PathMtu, Psn, PSN_MASK};
use super::super::qp::{QpAttrs, ACCESS_REMOTE_ATOMIC, ACCESS_REMOTE_READ, ACCESS_REMOTE_WRITE};
use super::super::wqe::{WcOpcode, WcStatus, MAX_MSG_SIZE, WC_WITH_IMM, WC_WITH_INV};
use super::{imm_to_cqe, InRequest, ReadSrc, RespDesc, Store};

/// Static parameters of the responder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RespConfig {
    /// First expected PSN (`rq_psn`).
    pub rq_psn: Psn,
    /// Path MTU.
    pub pmtu: PathMtu,
    /// Responder resources to keep (`max_dest_rd_atomic`, capped at the
    /// length of the responder's [`Store`]).
    pub max_dest_rd_atomic: u8,
    /// RNR NAK timer code (`min_rnr_timer`).
    pub min_rnr_timer: u8,
}

impl RespConfig {
    /// From the QP attributes (RTR).
    pub fn from_attrs(a: &QpAttrs) -> RespConfig {
        RespConfig {
            rq_psn: Psn::new(a.rq_psn),
            pmtu: a.mtu(),
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            min_rnr_timer: a.min_rnr_timer,
        }
    }
}

/// The remote access a request needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// RDMA READ.
    Read,
    /// RDMA WRITE.
    Write,
    /// Atomic.
    Atomic,
}

impl Access {
    /// The `IB_ACCESS_*` flag (qp.rs constants) the MR and QP must allow.
    pub const fn ib_flag(self) -> u32 {
        match self {
            Access::Read => ACCESS_REMOTE_READ,
            Access::Write => ACCESS_REMOTE_WRITE,
            Access::Atomic => ACCESS_REMOTE_ATOMIC,
        }
    }
}

/// Why a remote access was refused (all give NAK remote access error).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessError {
    /// No MR/MW with this R_Key (or it is invalidated / of another PD).
    InvalidKey,
    /// The range is not inside the region.
    OutOfRange,
    /// The region or the QP does not allow the access.
    NoPermission,
    /// An atomic whose target is not 8-byte aligned although the
    /// requested address was: through a zero-based window bound at an
    /// unaligned offset (the target is what must be aligned, IBA 9.4.5),
    /// or a word the memory holds misaligned.  Answered like any
    /// misaligned atomic: invalid request.
    Misaligned,
}

/// An atomic operation on 8 bytes of remote memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicOp {
    /// If the value equals `compare`, replace it by `swap`.
    CompareSwap {
        /// Compare operand.
        compare: u64,
        /// Swap operand.
        swap: u64,
    },
    /// Add `add` (wrapping).
    FetchAdd {
        /// Addend.
        add: u64,
    },
    /// ATOMIC WRITE: store `value` (native order of the wire bytes) as
    /// one 8-byte unit.  Needs remote *write* access, not atomic access
    /// (IBTA 1.5, as rxe).
    Write {
        /// The 8 bytes, as `u64::from_ne_bytes` of the payload.
        value: u64,
    },
}

impl AtomicOp {
    /// The remote access the operation needs.
    pub const fn access(self) -> Access {
        match self {
            AtomicOp::Write { .. } => Access::Write,
            _ => Access::Atomic,
        }
    }
}

/// Memory checks and atomics, provided by the glue (MR table lookup).
pub trait MemCheck {
    /// Whether the QP's own access flags (`qp_access_flags`) enable
    /// remote `access` at all.  Checked before anything else of a WRITE,
    /// READ, atomic or ATOMIC WRITE, whatever its length: a request the
    /// QP does not enable is an invalid request (`ibv_poll_cq(3)`:
    /// REM_INV_REQ_ERR, "qp_access_flags in remote QP wasn't configured
    /// to support this operation"; rxe's `check_qp_attr_access`), not a
    /// remote access error.  The default enables all.
    fn qp_allows(&self, access: Access) -> bool {
        let _ = access;
        true
    }

    /// Whether `len` bytes at `va` of the region `rkey` may be accessed with
    /// `access` by this QP.  Not called for zero-length READ/WRITE.
    fn check(&mut self, rkey: u32, va: u64, len: u32, access: Access) -> Result<(), AccessError>;

    /// Check `rkey`/`va` for an 8-byte atomic (the VA is already known to be
    /// 8-byte aligned) with the access [`AtomicOp::access`] names, execute
    /// `op` atomically with respect to other atomics on the device, and
    /// return the original value.
    fn atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, AccessError>;

    /// FLUSH: check that the region (or window) `rkey` allows this QP the
    /// placement types `placement` (the access flags
    /// [`flush_access`](super::super::qp::flush_access) names) for `range`
    /// (`(va, len)`; `None`: the
    /// whole region), then make the writes that came before visible (and
    /// persistent) as asked.  The default allows nothing.
    fn flush(
        &mut self,
        rkey: u32,
        range: Option<(u64, u32)>,
        placement: u8,
    ) -> Result<(), AccessError> {
        let _ = (rkey, range, placement);
        Err(AccessError::InvalidKey)
    }

    /// Invalidate the region (or window) with R_Key `rkey` for a SEND with
    /// invalidate: it must exist with exactly this key, belong to the QP's
    /// PD and be invalidatable (see `mr::check_invalidate`).  Called once,
    /// when the last packet of the message is executed.  The default has
    /// nothing to invalidate.
    fn invalidate(&mut self, rkey: u32) -> Result<(), AccessError> {
        let _ = rkey;
        Err(AccessError::InvalidKey)
    }
}

/// The receive queue, as the responder sees it.
pub trait RecvSource {
    /// Total buffer length of the receive WQE at the head of the RQ/SRQ, or
    /// `None` if it is empty.  Does not consume it ([`Action::take_recv`]
    /// does).
    fn peek_len(&mut self) -> Option<u32>;
}

/// Where the payload of the request goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// Nowhere (no payload, or the request is not executed).
    None,
    /// Into the current receive WQE at message offset `offset`.
    Recv {
        /// Offset in the receive buffer.
        offset: u32,
    },
    /// Into memory region `rkey` at `va` (checked already).
    Mem {
        /// R_Key.
        rkey: u32,
        /// Virtual address of the first payload byte.
        va: u64,
    },
}

/// A receive completion to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvCompletion {
    /// Status.
    pub status: WcStatus,
    /// `Recv` or `RecvRdmaWithImm`.
    pub opcode: WcOpcode,
    /// Bytes received (the WRITE length for WRITE with immediate).
    pub byte_len: u32,
    /// Immediate data in CQE format (see `imm_to_cqe`).
    pub imm: Option<u32>,
    /// R_Key invalidated by a SEND with invalidate (already done through
    /// [`MemCheck::invalidate`]); for the CQE.
    pub invalidate: Option<u32>,
    /// The message had SE set (solicited event).
    pub solicited: bool,
}

impl RecvCompletion {
    /// The CQE `wc_flags`.
    pub fn wc_flags(&self) -> u8 {
        let mut f = 0;
        if self.imm.is_some() {
            f |= WC_WITH_IMM;
        }
        if self.invalidate.is_some() {
            f |= WC_WITH_INV;
        }
        f
    }

    /// The CQE `imm_or_inv` field.
    pub fn imm_or_inv(&self) -> u32 {
        self.imm.or(self.invalidate).unwrap_or(0)
    }
}

/// What to send back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Nothing.
    None,
    /// One packet (ACK, NAK, atomic ACK).
    Packet(RespDesc),
    /// A READ response stream.
    Read(ReadResponder),
}

/// How a request was classified (one counter each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Outcome {
    /// Executed at the expected PSN.
    Executed = 0,
    /// Duplicate SEND/WRITE: re-ACKed.
    Duplicate = 1,
    /// Duplicate READ: re-executed.
    DuplicateRead = 2,
    /// Duplicate atomic: saved result replayed.
    DuplicateAtomic = 3,
    /// Duplicate READ/atomic with no matching resource: dropped.
    DuplicateUnknown = 4,
    /// PSN ahead: NAK sequence error sent.
    SeqNak = 5,
    /// PSN ahead after the NAK: dropped.
    OutOfSequence = 6,
    /// No receive WQE: RNR NAK sent.
    RnrNak = 7,
    /// Invalid request (opcode sequence, length, header, alignment): NAK,
    /// QP error.
    InvalidRequest = 8,
    /// Remote access error: NAK, QP error (UC: the message is dropped).
    AccessError = 9,
    /// Receive buffer too short: NAK invalid request (none on UC), QP
    /// error.
    LengthError = 10,
    /// The QP is in the error state: dropped.
    QpError = 11,
    /// Not an RC request opcode: dropped.
    NotRequest = 12,
    /// UC: a PSN gap, or a Middle/Last packet without its First: the
    /// message in progress is dropped silently.
    SeqDrop = 13,
    /// UC: no receive WQE, or a malformed packet: the message is dropped
    /// silently.
    MsgDrop = 14,
}

impl Outcome {
    /// Number of variants.
    pub const COUNT: usize = 15;

    /// Index in `0..COUNT`.
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// The responder's decision for one request.
///
/// The glue applies it in field order: if `take_recv`, pop the head of the
/// RQ as the current receive WQE; copy the payload according to `place`;
/// if `recv_done`, complete the current receive WQE (invalidate first if
/// asked); transmit `reply`; if `qp_error`, move the QP to ERR and flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Action {
    /// Classification.
    pub outcome: Outcome,
    /// Pop the RQ head as the current receive WQE.
    pub take_recv: bool,
    /// Where the payload goes.
    pub place: Place,
    /// Complete the current receive WQE.
    pub recv_done: Option<RecvCompletion>,
    /// Response to send.
    pub reply: Reply,
    /// Move the QP to the error state.
    pub qp_error: bool,
}

impl Action {
    pub(super) const fn drop(outcome: Outcome) -> Action {
        Action {
            outcome,
            take_recv: false,
            place: Place::None,
            recv_done: None,
            reply: Reply::None,
            qp_error: false,
        }
    }
}

/// Responder counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RespCounters {
    /// Requests by [`Outcome`] index.
    pub by_outcome: [u64; Outcome::COUNT],
    /// ACKs sent (not counting READ responses and atomic ACKs).
    pub acks: u64,
    /// NAKs sent (all kinds).
    pub naks: u64,
    /// READ response packets announced.
    pub read_responses: u64,
}

impl RespCounters {
    /// The count for `o`.
    pub fn get(&self, o: Outcome) -> u64 {
        self.by_outcome.get(o.index()).copied().unwrap_or(0)
    }
}

/// A stream of READ response packets (First/Middle/Last or Only) for `len`
/// bytes at `va`, starting at a PSN.  The glue pulls packets as it can send
/// them and may keep the iterator across send-queue stalls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadResponder {
    psn: Psn,
    rkey: u32,
    va: u64,
    left: u32,
    pmtu: PathMtu,
    msn: u32,
    idx: u32,
    n: u32,
}

impl ReadResponder {
    /// Responses for a READ of `len` bytes at `va` whose first response PSN
    /// is `psn`, with `msn` in the AETHs.
    pub fn new(psn: Psn, rkey: u32, va: u64, len: u32, pmtu: PathMtu, msn: u32) -> Self {
        ReadResponder {
            psn,
            rkey,
            va,
            left: len,
            pmtu,
            msn: msn & PSN_MASK,
            idx: 0,
            n: npkts(len, pmtu),
        }
    }

    /// Packets left.
    pub fn remaining(&self) -> u32 {
        self.n.saturating_sub(self.idx)
    }

    /// The PSN of the next response (one past the last once exhausted).
    pub fn next_psn(&self) -> Psn {
        self.psn.add(self.idx)
    }

    /// Where the READ ends: the PSN after its last response, the address
    /// after its last byte, and its R_Key.  A replay of the same READ (a
    /// duplicate request for its tail) ends at the same place.
    fn end(&self) -> (Psn, u64, u32) {
        (
            self.psn.add(self.n),
            self.va.wrapping_add(u64::from(self.left)),
            self.rkey,
        )
    }

    /// Takes in `replay`, the stream answering a duplicate request for the
    /// tail of this READ (the requester went back to `replay`'s first PSN,
    /// so it holds every response before it): if this stream already went
    /// past that PSN it restarts there as `replay`; if it has not reached it
    /// yet, it goes on unchanged and will send it.  Either way one stream
    /// answers the READ, where a second one would send its tail twice.
    /// Returns `false` (nothing changed) if `replay` is another READ.
    pub fn absorb(&mut self, replay: &ReadResponder) -> bool {
        if replay.idx != 0 || self.end() != replay.end() {
            return false;
        }
        // How far the replay's first PSN is behind this stream's next one
        // (wrapped, hence larger than the replay, if it is ahead of it).
        if self.next_psn().distance_from(replay.psn) <= replay.n {
            *self = *replay;
        }
        true
    }
}

impl Iterator for ReadResponder {
    type Item = RespDesc;

    fn next(&mut self) -> Option<RespDesc> {
        if self.idx >= self.n {
            return None;
        }
        let pos = super::super::opcode::position_of(self.idx, self.n);
        let len = self.left.min(self.pmtu.bytes());
        let d = RespDesc {
            opcode: read_response_opcode(pos),
            psn: self.psn.add(self.idx),
            aeth: (pos != Position::Middle).then_some(Aeth {
                syndrome: AETH_ACK_UNLIMITED,
                msn: self.msn,
            }),
            atomic_orig: None,
            payload: Some(ReadSrc {
                rkey: self.rkey,
                va: self.va,
                len,
            }),
            pad: pad_count(len as usize),
        };
        self.va = self.va.wrapping_add(u64::from(len));
        self.left = self.left.saturating_sub(len);
        self.idx = self.idx.wrapping_add(1);
        Some(d)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = usize::try_from(self.remaining()).unwrap_or(usize::MAX);
        (n, Some(n))
    }
}

/// The message being received.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ctx {
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

/// A responder resource: a READ or atomic, kept for duplicates (opaque;
/// the responder's [`Store`]: a QP with 128 resources would not fit a
/// kernel stack frame).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResSlot(Res);

impl ResSlot {
    /// An unused resource, to fill a [`Store`] with.
    pub const EMPTY: ResSlot = ResSlot(Res::Empty);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Res {
    Empty,
    Read {
        first: Psn,
        n: u32,
        rkey: u32,
        va: u64,
        len: u32,
    },
    Atomic {
        psn: Psn,
        rkey: u32,
        va: u64,
        orig: u64,
    },
}

/// The responder of one RC QP with room for as many responder resources
/// as `S` has slots.
#[derive(Clone, Debug)]
pub struct Responder<S: Store<ResSlot>> {
    cfg: RespConfig,
    epsn: Psn,
    msn: u32,
    nak_sent: bool,
    /// PSN of the last out-of-sequence request seen after the NAK.
    last_ooo: Psn,
    ctx: Ctx,
    res: S,
    res_next: usize,
    error: bool,
    counters: RespCounters,
}

impl<const N: usize> Responder<[ResSlot; N]> {
    /// A responder in RTR with `cfg` and `N` inline resource slots.
    pub fn new(cfg: RespConfig) -> Self {
        Self::with_store(cfg, [ResSlot::EMPTY; N])
    }
}

impl<S: Store<ResSlot>> Responder<S> {
    /// New `min_rnr_timer` and `max_dest_rd_atomic` from a `modify_qp` in
    /// RTS or SQD: the next RNR NAK carries the new timer, and the new
    /// number of READ/atomic resources is kept from now on.
    pub fn set_timing(&mut self, min_rnr_timer: u8, max_dest_rd_atomic: u8) {
        self.cfg.min_rnr_timer = min_rnr_timer;
        self.cfg.max_dest_rd_atomic = max_dest_rd_atomic;
    }

    /// A responder in RTR with `cfg` and the resource storage `res`
    /// (emptied here; its length is the most resources it keeps).
    pub fn with_store(cfg: RespConfig, mut res: S) -> Self {
        res.items_mut().fill(ResSlot::EMPTY);
        Responder {
            cfg,
            epsn: cfg.rq_psn,
            msn: 0,
            nak_sent: false,
            last_ooo: Psn::ZERO,
            ctx: Ctx::None,
            res,
            res_next: 0,
            error: false,
            counters: RespCounters::default(),
        }
    }

    /// The resource storage back, for the next [`Responder::with_store`].
    pub fn into_store(self) -> S {
        self.res
    }

    /// The expected PSN.
    pub fn expected_psn(&self) -> Psn {
        self.epsn
    }

    /// The MSN.
    pub fn msn(&self) -> u32 {
        self.msn
    }

    /// The counters.
    pub fn counters(&self) -> &RespCounters {
        &self.counters
    }

    /// Whether the receive side is in the error state.
    pub fn is_error(&self) -> bool {
        self.error
    }

    /// Enter the error state (`modify_qp` to ERR): every request is dropped.
    /// Returns `true` if a receive WQE was taken and is not completed (the
    /// glue flushes it with the rest of the RQ).
    pub fn flush(&mut self) -> bool {
        self.error = true;
        let taken = matches!(self.ctx, Ctx::Send { .. });
        self.ctx = Ctx::None;
        taken
    }

    /// Decide what to do with request `pkt` (already checked for ICRC,
    /// destination QP and P_Key).  `mem` checks R_Keys and runs atomics,
    /// `rq` reports receive WQE availability.  See [`Action`].
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
        match a.reply {
            Reply::Packet(d)
                if d.opcode == RC_ACKNOWLEDGE
                    || (d.opcode == read_response_opcode(Position::Only)
                        && d.payload.is_none()) =>
            {
                if d.aeth
                    .is_some_and(|x| matches!(x.decoded(), Syndrome::Ack { .. }))
                {
                    self.counters.acks = self.counters.acks.wrapping_add(1);
                } else {
                    self.counters.naks = self.counters.naks.wrapping_add(1);
                }
            }
            Reply::Read(r) => {
                self.counters.read_responses = self
                    .counters
                    .read_responses
                    .wrapping_add(u64::from(r.remaining()));
            }
            _ => {}
        }
        a
    }

    /// The glue could not place the payload of request `psn` that
    /// [`Self::on_request`] accepted: the receive WQE's SGEs do not describe
    /// memory this QP may write (they are checked only at placement), or
    /// the target MR went away between the R_Key check and the copy.  The
    /// requester must not get the ACK that `on_request` may have chosen:
    /// this returns the action that replaces its reply, a class C error
    /// (QP to ERR) with a NAK for `psn` -- remote operational error for a
    /// receive buffer (`into_recv`), remote access error for an R_Key
    /// target -- whose MSN is `msn_before` (the value of [`Self::msn`]
    /// before the request: the message did not complete).  A receive WQE
    /// in use completes with `LOC_PROT_ERR` (`recv_done`).
    pub fn placement_failed(&mut self, psn: Psn, msn_before: u32, into_recv: bool) -> Action {
        self.msn = msn_before & PSN_MASK;
        if into_recv {
            self.ctx = Ctx::Send {
                recv_len: 0,
                offset: 0,
            };
        }
        let code = if into_recv {
            NAK_REMOTE_OPERATIONAL_ERROR
        } else {
            NAK_REMOTE_ACCESS_ERROR
        };
        self.counters.naks = self.counters.naks.wrapping_add(1);
        if !into_recv {
            // The request counted as executed; it is a remote access
            // error after all (memory that could not be written: an
            // on-demand page that cannot be faulted in).
            if let Some(c) = self
                .counters
                .by_outcome
                .get_mut(Outcome::AccessError.index())
            {
                *c = c.wrapping_add(1);
            }
        }
        self.fatal(psn, code, Outcome::AccessError, WcStatus::LocProtErr)
    }

    /// The data of READ response `psn` (of a READ that
    /// [`Self::on_request`] accepted) cannot be read any more: its region
    /// went away, or an on-demand page of it cannot be faulted in.  The
    /// rest of the stream is not sent; this returns the NAK (remote access
    /// error) for `psn` that replaces it, and the QP enters the error state
    /// (class C, as for an R_Key refused at the request).
    pub fn read_failed(&mut self, psn: Psn) -> RespDesc {
        self.counters.naks = self.counters.naks.wrapping_add(1);
        if let Some(c) = self
            .counters
            .by_outcome
            .get_mut(Outcome::AccessError.index())
        {
            *c = c.wrapping_add(1);
        }
        let a = self.fatal(
            psn,
            NAK_REMOTE_ACCESS_ERROR,
            Outcome::AccessError,
            WcStatus::LocProtErr,
        );
        match a.reply {
            Reply::Packet(d) => d,
            _ => self.ack_pkt(
                psn,
                Syndrome::Nak {
                    code: NAK_REMOTE_ACCESS_ERROR,
                },
            ),
        }
    }

    fn aeth(&self, s: Syndrome) -> Aeth {
        Aeth {
            syndrome: s.encode(),
            msn: self.msn & PSN_MASK,
        }
    }

    fn ack(&self, psn: Psn) -> RespDesc {
        self.ack_pkt(
            psn,
            Syndrome::Ack {
                credits: AETH_ACK_UNLIMITED,
            },
        )
    }

    fn ack_pkt(&self, psn: Psn, s: Syndrome) -> RespDesc {
        RespDesc {
            opcode: RC_ACKNOWLEDGE,
            psn,
            aeth: Some(self.aeth(s)),
            atomic_orig: None,
            payload: None,
            pad: 0,
        }
    }

    /// A class C error: NAK `code` for `psn` and enter the error state.
    fn fatal(&mut self, psn: Psn, code: u8, outcome: Outcome, status: WcStatus) -> Action {
        let recv_done = matches!(self.ctx, Ctx::Send { .. }).then_some(RecvCompletion {
            status,
            opcode: WcOpcode::Recv,
            byte_len: 0,
            imm: None,
            invalidate: None,
            solicited: false,
        });
        let nak = self.ack_pkt(psn, Syndrome::Nak { code });
        self.error = true;
        self.ctx = Ctx::None;
        Action {
            outcome,
            take_recv: false,
            place: Place::None,
            recv_done,
            reply: Reply::Packet(nak),
            qp_error: true,
        }
    }

    fn invalid(&mut self, psn: Psn) -> Action {
        self.fatal(
            psn,
            NAK_INVALID_REQUEST,
            Outcome::InvalidRequest,
            WcStatus::WrFlushErr,
        )
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
        let Some(info) = lookup(pkt.opcode).filter(|_| super::is_rc_request(pkt.opcode)) else {
            return Action::drop(Outcome::NotRequest);
        };
        let d = pkt.psn.diff(self.epsn);
        if d > 0 {
            // One NAK per sequence error; but a PSN at or below the last
            // out-of-sequence one means the requester went back and lost
            // (part of) its retransmission: NAK again.
            let restarted = pkt.psn.diff(self.last_ooo) <= 0;
            self.last_ooo = pkt.psn;
            if self.nak_sent && !restarted {
                return Action::drop(Outcome::OutOfSequence);
            }
            self.nak_sent = true;
            let mut a = Action::drop(Outcome::SeqNak);
            a.reply = Reply::Packet(self.ack_pkt(
                self.epsn,
                Syndrome::Nak {
                    code: NAK_PSN_SEQ_ERROR,
                },
            ));
            return a;
        }
        if d < 0 {
            return self.duplicate(pkt, info.operation, mem);
        }
        self.nak_sent = false;
        let pos = info.position;
        // Opcode sequence.
        let seq_ok = match self.ctx {
            Ctx::None => pos.is_start(),
            Ctx::Send { .. } => info.operation == Operation::Send && !pos.is_start(),
            Ctx::Write { .. } => info.operation == Operation::RdmaWrite && !pos.is_start(),
        };
        if !seq_ok {
            return self.invalid(pkt.psn);
        }
        let mtu = self.cfg.pmtu.bytes();
        match info.operation {
            Operation::Send | Operation::RdmaWrite => {
                if !payload_len_ok(pos, pkt.payload_len as usize, mtu as usize) {
                    return self.invalid(pkt.psn);
                }
                if info.operation == Operation::Send {
                    self.send(pkt, pos, info.imm, info.inv, mem, rq)
                } else {
                    self.write(pkt, pos, info.imm, mem, rq)
                }
            }
            Operation::RdmaReadRequest => self.read(pkt, mem),
            Operation::CompareSwap | Operation::FetchAdd => self.atomic(pkt, mem),
            Operation::AtomicWrite => self.atomic_write(pkt, mem),
            Operation::Flush => self.remote_flush(pkt, mem),
            _ => self.invalid(pkt.psn),
        }
    }

    fn send<M: MemCheck, Q: RecvSource>(
        &mut self,
        pkt: &InRequest,
        pos: Position,
        imm: bool,
        inv: bool,
        mem: &mut M,
        rq: &mut Q,
    ) -> Action {
        let mut take_recv = false;
        let (recv_len, offset) = match self.ctx {
            Ctx::Send { recv_len, offset } => (recv_len, offset),
            _ => {
                let Some(l) = rq.peek_len() else {
                    return self.rnr(pkt.psn);
                };
                take_recv = true;
                (l, 0)
            }
        };
        let Some(end) = offset
            .checked_add(pkt.payload_len)
            .filter(|&e| e <= recv_len && e <= MAX_MSG_SIZE)
        else {
            // The receive WQE (taken now or earlier) completes in error.
            self.ctx = Ctx::Send { recv_len, offset };
            let mut a = self.fatal(
                pkt.psn,
                NAK_INVALID_REQUEST,
                Outcome::LengthError,
                WcStatus::LocLenErr,
            );
            a.take_recv = take_recv;
            return a;
        };
        if (imm && pkt.imm.is_none()) || (inv && pkt.ieth.is_none()) {
            return self.invalid(pkt.psn);
        }
        if let Some(ieth) = pkt.ieth.filter(|_| inv && pos.is_end()) {
            if mem.invalidate(ieth.rkey).is_err() {
                // The R_Key cannot be invalidated: NAK remote access error
                // (as for any R_Key violation); the receive WQE completes
                // with remote invalid request (as rxe's class J).
                self.ctx = Ctx::Send { recv_len, offset };
                let mut a = self.fatal(
                    pkt.psn,
                    NAK_REMOTE_ACCESS_ERROR,
                    Outcome::AccessError,
                    WcStatus::RemInvReqErr,
                );
                a.take_recv = take_recv;
                return a;
            }
        }
        self.epsn = self.epsn.next();
        let mut a = Action::drop(Outcome::Executed);
        a.take_recv = take_recv;
        a.place = Place::Recv { offset };
        if pos.is_end() {
            self.ctx = Ctx::None;
            self.msn = self.msn.wrapping_add(1) & PSN_MASK;
            a.recv_done = Some(RecvCompletion {
                status: WcStatus::Success,
                opcode: WcOpcode::Recv,
                byte_len: end,
                imm: pkt.imm.map(imm_to_cqe),
                invalidate: pkt.ieth.map(|i| i.rkey),
                solicited: pkt.solicited,
            });
        } else {
            self.ctx = Ctx::Send {
                recv_len,
                offset: end,
            };
        }
        if pkt.ack_req || pos.is_end() {
            a.reply = Reply::Packet(self.ack(pkt.psn));
        }
        a
    }

    /// An RNR NAK for `psn` whose AETH carries `msn`, for the glue's own
    /// "resource not ready": a request it cannot take yet (a page of an
    /// on-demand paging region being faulted in).  The requester waits
    /// for the timer and sends again from `psn`; the responder's state does
    /// not change.  The timer is `min_rnr_timer` (the least the responder
    /// may ask, IBA 9.7.5.2.8) or at least `at_least` (an RNR timer code,
    /// 1..=31 in increasing order; code 0, 655 ms, is the longest).
    pub fn rnr_nak(&self, psn: Psn, msn: u32, at_least: u8) -> RespDesc {
        let min = self.cfg.min_rnr_timer & 0x1F;
        let timer = if min == 0 {
            0
        } else {
            min.max(at_least & 0x1F)
        };
        let mut d = self.ack_pkt(psn, Syndrome::RnrNak { timer });
        if let Some(a) = d.aeth.as_mut() {
            a.msn = msn & PSN_MASK;
        }
        d
    }

    fn rnr(&mut self, psn: Psn) -> Action {
        let mut a = Action::drop(Outcome::RnrNak);
        a.reply = Reply::Packet(self.ack_pkt(
            psn,
            Syndrome::RnrNak {
                timer: self.cfg.min_rnr_timer,
            },
        ));
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
        let (rkey, va, offset, total) = match self.ctx {
            Ctx::Write {
                rkey,
                va,
                offset,
                total,
            } => (rkey, va, offset, total),
            _ => {
                let Some(reth) = pkt.reth.filter(|_| mem.qp_allows(Access::Write)) else {
                    return self.invalid(pkt.psn);
                };
                let mtu = self.cfg.pmtu.bytes();
                let len_ok = reth.len <= MAX_MSG_SIZE
                    && match pos {
                        Position::Only => reth.len == pkt.payload_len,
                        _ => reth.len > mtu,
                    };
                if !len_ok {
                    return self.invalid(pkt.psn);
                }
                if reth.len > 0 {
                    if let Err(_e) = mem.check(reth.rkey, reth.va, reth.len, Access::Write) {
                        return self.fatal(
                            pkt.psn,
                            NAK_REMOTE_ACCESS_ERROR,
                            Outcome::AccessError,
                            WcStatus::WrFlushErr,
                        );
                    }
                }
                (reth.rkey, reth.va, 0, reth.len)
            }
        };
        let left = total.saturating_sub(offset);
        if pkt.payload_len > left || (pos.is_end() && pkt.payload_len != left) {
            return self.invalid(pkt.psn);
        }
        if imm && pkt.imm.is_none() {
            return self.invalid(pkt.psn);
        }
        let mut a = Action::drop(Outcome::Executed);
        if pos.is_end() && imm {
            if rq.peek_len().is_none() {
                // Keep the context: the requester resends this packet.
                return self.rnr(pkt.psn);
            }
            a.take_recv = true;
            a.recv_done = Some(RecvCompletion {
                status: WcStatus::Success,
                opcode: WcOpcode::RecvRdmaWithImm,
                byte_len: total,
                imm: pkt.imm.map(imm_to_cqe),
                invalidate: None,
                solicited: pkt.solicited,
            });
        }
        self.epsn = self.epsn.next();
        a.place = Place::Mem {
            rkey,
            va: va.wrapping_add(u64::from(offset)),
        };
        if pos.is_end() {
            self.ctx = Ctx::None;
            self.msn = self.msn.wrapping_add(1) & PSN_MASK;
        } else {
            self.ctx = Ctx::Write {
                rkey,
                va,
                offset: offset.wrapping_add(pkt.payload_len),
                total,
            };
        }
        if pkt.ack_req || pos.is_end() {
            a.reply = Reply::Packet(self.ack(pkt.psn));
        }
        a
    }

    /// Whether a READ, atomic or ATOMIC WRITE may be served at all: the
    /// QP enables `access`, and it has responder resources
    /// (`max_dest_rd_atomic` > 0: with none, such a request is an invalid
    /// request, IBA 9.4.4 / rxe's `check_resource`; until 2026-12-07 one
    /// was served anyway).
    fn serves_rd_atomic<M: MemCheck>(&self, mem: &M, access: Access) -> bool {
        self.cfg.max_dest_rd_atomic > 0 && mem.qp_allows(access)
    }

    fn push_res(&mut self, r: Res) {
        let cap = usize::from(self.cfg.max_dest_rd_atomic).clamp(1, self.res.items().len().max(1));
        if let Some(slot) = self.res.items_mut().get_mut(self.res_next) {
            *slot = ResSlot(r);
        }
        self.res_next = self.res_next.wrapping_add(1);
        if self.res_next >= cap {
            self.res_next = 0;
        }
    }

    fn read<M: MemCheck>(&mut self, pkt: &InRequest, mem: &mut M) -> Action {
        let Some(reth) = pkt.reth.filter(|r| r.len <= MAX_MSG_SIZE) else {
            return self.invalid(pkt.psn);
        };
        if !self.serves_rd_atomic(mem, Access::Read) {
            return self.invalid(pkt.psn);
        }
        if reth.len > 0
            && mem
                .check(reth.rkey, reth.va, reth.len, Access::Read)
                .is_err()
        {
            return self.fatal(
                pkt.psn,
                NAK_REMOTE_ACCESS_ERROR,
                Outcome::AccessError,
                WcStatus::WrFlushErr,
            );
        }
        let n = npkts(reth.len, self.cfg.pmtu);
        self.push_res(Res::Read {
            first: pkt.psn,
            n,
            rkey: reth.rkey,
            va: reth.va,
            len: reth.len,
        });
        self.epsn = self.epsn.add(n);
        self.msn = self.msn.wrapping_add(1) & PSN_MASK;
        let mut a = Action::drop(Outcome::Executed);
        a.reply = Reply::Read(ReadResponder::new(
            pkt.psn,
            reth.rkey,
            reth.va,
            reth.len,
            self.cfg.pmtu,
            self.msn,
        ));
        a
    }

    fn atomic_ack(&self, psn: Psn, orig: u64) -> RespDesc {
        RespDesc {
            opcode: RC_ATOMIC_ACKNOWLEDGE,
            psn,
            aeth: Some(self.aeth(Syndrome::Ack {
                credits: AETH_ACK_UNLIMITED,
            })),
            atomic_orig: Some(orig),
            payload: None,
            pad: 0,
        }
    }

    fn atomic<M: MemCheck>(&mut self, pkt: &InRequest, mem: &mut M) -> Action {
        let Some(ae) = pkt.atomic.filter(|a| a.va & 7 == 0) else {
            return self.invalid(pkt.psn);
        };
        if !self.serves_rd_atomic(mem, Access::Atomic) {
            return self.invalid(pkt.psn);
        }
        let op = match lookup(pkt.opcode).map(|i| i.operation) {
            Some(Operation::CompareSwap) => AtomicOp::CompareSwap {
                compare: ae.compare,
                swap: ae.swap_add,
            },
            _ => AtomicOp::FetchAdd { add: ae.swap_add },
        };
        let orig = match mem.atomic(ae.rkey, ae.va, op) {
            Ok(v) => v,
            Err(e) => return self.atomic_refused(pkt.psn, e),
        };
        self.push_res(Res::Atomic {
            psn: pkt.psn,
            rkey: ae.rkey,
            va: ae.va,
            orig,
        });
        self.epsn = self.epsn.next();
        self.msn = self.msn.wrapping_add(1) & PSN_MASK;
        let mut a = Action::drop(Outcome::Executed);
        a.reply = Reply::Packet(self.atomic_ack(pkt.psn, orig));
        a
    }

    /// An atomic (or ATOMIC WRITE) the memory refused: a misaligned target
    /// is an invalid request, anything else a remote access error.
    fn atomic_refused(&mut self, psn: Psn, e: AccessError) -> Action {
        if e == AccessError::Misaligned {
            return self.invalid(psn);
        }
        self.fatal(
            psn,
            NAK_REMOTE_ACCESS_ERROR,
            Outcome::AccessError,
            WcStatus::WrFlushErr,
        )
    }

    /// ATOMIC WRITE: 8 bytes at an 8-byte aligned VA, written as one unit
    /// (an atomic store); answered by an empty READ response.
    /// It keeps no responder resource: a duplicate gets the same empty
    /// response again and is not re-executed (a later write to the same
    /// word is not undone).
    fn atomic_write<M: MemCheck>(&mut self, pkt: &InRequest, mem: &mut M) -> Action {
        let (Some(reth), Some(value)) = (pkt.reth, pkt.atomic_write) else {
            return self.invalid(pkt.psn);
        };
        if reth.len != 8 || reth.va & 7 != 0 || !self.serves_rd_atomic(mem, Access::Write) {
            return self.invalid(pkt.psn);
        }
        if let Err(e) = mem.atomic(reth.rkey, reth.va, AtomicOp::Write { value }) {
            return self.atomic_refused(pkt.psn, e);
        }
        self.executed_empty(pkt.psn)
    }

    /// FLUSH: the placement types of the FETH (global visibility; a
    /// persistence request is checked against the region's access like
    /// any other) for the RETH's range, or for the whole region of its
    /// R_Key; answered by an empty READ response.  Like ATOMIC WRITE it
    /// keeps no responder resource: a duplicate is answered again (and
    /// not executed again: a later FLUSH covers the same writes).
    fn remote_flush<M: MemCheck>(&mut self, pkt: &InRequest, mem: &mut M) -> Action {
        let (Some(feth), Some(reth)) = (pkt.feth, pkt.reth) else {
            return self.invalid(pkt.psn);
        };
        let placement = feth.placement();
        let known = FLUSH_GLOBAL | FLUSH_PERSISTENT;
        if placement == 0 || placement & !known != 0 || feth.level() > FLUSH_MR {
            return self.invalid(pkt.psn);
        }
        if pkt.payload_len != 0 {
            return self.invalid(pkt.psn);
        }
        let range = (feth.level() == FLUSH_RANGE).then_some((reth.va, reth.len));
        if let Err(e) = mem.flush(reth.rkey, range, placement) {
            return self.atomic_refused(pkt.psn, e);
        }
        self.executed_empty(pkt.psn)
    }

    /// An ATOMIC WRITE or FLUSH at `psn` was executed: the PSN and MSN
    /// move on, the answer is an empty READ response.
    fn executed_empty(&mut self, psn: Psn) -> Action {
        self.epsn = self.epsn.next();
        self.msn = self.msn.wrapping_add(1) & PSN_MASK;
        let mut a = Action::drop(Outcome::Executed);
        a.reply = Reply::Packet(self.empty_read_response(psn));
        a
    }

    /// The response to an ATOMIC WRITE or a FLUSH: an RDMA READ Response
    /// Only without payload, its AETH an ACK (IBTA 1.5, as rdma_rxe
    /// answers; a requester also takes a plain ACK that covers it).
    fn empty_read_response(&self, psn: Psn) -> RespDesc {
        RespDesc {
            opcode: read_response_opcode(Position::Only),
            psn,
            aeth: Some(self.aeth(Syndrome::Ack {
                credits: AETH_ACK_UNLIMITED,
            })),
            atomic_orig: None,
            payload: None,
            pad: 0,
        }
    }

    fn duplicate<M: MemCheck>(&mut self, pkt: &InRequest, op: Operation, mem: &mut M) -> Action {
        match op {
            Operation::RdmaReadRequest => {
                let Some(reth) = pkt.reth else {
                    return Action::drop(Outcome::DuplicateUnknown);
                };
                let found = self.res.items().iter().any(|r| match r.0 {
                    Res::Read {
                        first,
                        n,
                        rkey,
                        va,
                        len,
                    } => {
                        let end = va.wrapping_add(u64::from(len));
                        let req_end = reth.va.checked_add(u64::from(reth.len));
                        pkt.psn.distance_from(first) < n
                            && rkey == reth.rkey
                            && reth.va >= va
                            && req_end.is_some_and(|e| e <= end)
                    }
                    _ => false,
                });
                let still_ok = reth.len == 0
                    || mem
                        .check(reth.rkey, reth.va, reth.len, Access::Read)
                        .is_ok();
                if !found || !still_ok {
                    return Action::drop(Outcome::DuplicateUnknown);
                }
                let mut a = Action::drop(Outcome::DuplicateRead);
                a.reply = Reply::Read(ReadResponder::new(
                    pkt.psn,
                    reth.rkey,
                    reth.va,
                    reth.len,
                    self.cfg.pmtu,
                    self.msn,
                ));
                a
            }
            Operation::CompareSwap | Operation::FetchAdd => {
                let Some(ae) = pkt.atomic else {
                    return Action::drop(Outcome::DuplicateUnknown);
                };
                let orig = self.res.items().iter().find_map(|r| match r.0 {
                    Res::Atomic {
                        psn,
                        rkey,
                        va,
                        orig,
                    } if psn == pkt.psn && rkey == ae.rkey && va == ae.va => Some(orig),
                    _ => None,
                });
                match orig {
                    Some(o) => {
                        let mut a = Action::drop(Outcome::DuplicateAtomic);
                        a.reply = Reply::Packet(self.atomic_ack(pkt.psn, o));
                        a
                    }
                    None => Action::drop(Outcome::DuplicateUnknown),
                }
            }
            Operation::AtomicWrite | Operation::Flush => {
                let mut a = Action::drop(Outcome::Duplicate);
                a.reply = Reply::Packet(self.empty_read_response(pkt.psn));
                a
            }
            _ => {
                let mut a = Action::drop(Outcome::Duplicate);
                a.reply = Reply::Packet(self.ack(self.epsn.prev()));
                a
            }
        }
    }
}

#[cfg(test)]
mod placement_tests {
    use super::super::super::hdr::{Reth, NAK_REMOTE_OPERATIONAL_ERROR};
    use super::super::super::opcode::{RC_RDMA_WRITE_ONLY, RC_SEND_ONLY};
    use super::*;

    struct Mem;
    impl MemCheck for Mem {
        fn check(&mut self, _: u32, _: u64, _: u32, _: Access) -> Result<(), AccessError> {
            Ok(())
        }
        fn atomic(&mut self, _: u32, _: u64, _: AtomicOp) -> Result<u64, AccessError> {
            Err(AccessError::InvalidKey)
        }
    }
    struct Rq;
    impl RecvSource for Rq {
        fn peek_len(&mut self) -> Option<u32> {
            Some(4096)
        }
    }

    /// Memory whose atomics land at an unaligned address (a zero-based
    /// window bound at an odd offset).
    struct UnalignedTarget;
    impl MemCheck for UnalignedTarget {
        fn check(&mut self, _: u32, _: u64, _: u32, _: Access) -> Result<(), AccessError> {
            Ok(())
        }
        fn atomic(&mut self, _: u32, _: u64, _: AtomicOp) -> Result<u64, AccessError> {
            Err(AccessError::Misaligned)
        }
    }

    #[test]
    fn atomic_on_unaligned_target_is_invalid_request() {
        use super::super::super::hdr::{AtomicEth, NAK_INVALID_REQUEST};
        use super::super::super::opcode::RC_FETCH_ADD;
        let mut r = responder();
        let pkt = InRequest {
            opcode: RC_FETCH_ADD,
            psn: Psn::new(10),
            atomic: Some(AtomicEth {
                va: 0,
                rkey: 7,
                swap_add: 1,
                compare: 0,
            }),
            ..InRequest::default()
        };
        let a = r.on_request(&pkt, &mut UnalignedTarget, &mut Rq);
        assert_eq!(nak_of(&a), (Psn::new(10), NAK_INVALID_REQUEST, 0));
        assert!(a.qp_error);
        assert_eq!(a.outcome, Outcome::InvalidRequest);
    }

    /// Memory of a QP whose access flags enable nothing remote.
    struct NoQpAccess;
    impl MemCheck for NoQpAccess {
        fn qp_allows(&self, _: Access) -> bool {
            false
        }
        fn check(&mut self, _: u32, _: u64, _: u32, _: Access) -> Result<(), AccessError> {
            Ok(())
        }
        fn atomic(&mut self, _: u32, _: u64, _: AtomicOp) -> Result<u64, AccessError> {
            Ok(0)
        }
    }

    fn request(opcode: u8, len: u32) -> InRequest {
        use super::super::super::hdr::AtomicEth;
        let atomic = matches!(
            lookup(opcode).map(|i| i.operation),
            Some(Operation::FetchAdd)
        );
        InRequest {
            opcode,
            psn: Psn::new(10),
            payload_len: if atomic || opcode == super::super::super::opcode::RC_RDMA_READ_REQUEST {
                0
            } else {
                len
            },
            reth: (!atomic).then_some(Reth {
                va: 0x1000,
                rkey: 7,
                len,
            }),
            atomic: atomic.then_some(AtomicEth {
                va: 0x1000,
                rkey: 7,
                swap_add: 1,
                compare: 0,
            }),
            imm: (opcode == super::super::super::opcode::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE)
                .then_some(super::super::super::hdr::ImmDt { imm: 5 }),
            ..InRequest::default()
        }
    }

    /// A WRITE (of any length, 0 too), READ or atomic the QP's access
    /// flags do not enable is an invalid request, not a remote access
    /// error (rxe's check_qp_attr_access; ibv_poll_cq(3)): until
    /// 2026-12-07 the non-empty ones were NAKed "remote access" and the
    /// empty ones executed.
    #[test]
    fn qp_access_flags_refuse_as_invalid_request() {
        use super::super::super::hdr::NAK_INVALID_REQUEST;
        use super::super::super::opcode::{
            RC_FETCH_ADD, RC_RDMA_READ_REQUEST, RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
        };
        for (op, len) in [
            (RC_RDMA_WRITE_ONLY, 64),
            (RC_RDMA_WRITE_ONLY, 0),
            (RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, 0),
            (RC_RDMA_READ_REQUEST, 64),
            (RC_RDMA_READ_REQUEST, 0),
            (RC_FETCH_ADD, 8),
        ] {
            let mut r = responder();
            let a = r.on_request(&request(op, len), &mut NoQpAccess, &mut Rq);
            assert_eq!(
                nak_of(&a),
                (Psn::new(10), NAK_INVALID_REQUEST, 0),
                "opcode {op:#x} len {len}"
            );
            assert!(
                a.qp_error && !a.take_recv && a.outcome == Outcome::InvalidRequest,
                "{a:?}"
            );
            // The same with the flags set is executed.
            let mut r = responder();
            let a = r.on_request(&request(op, len), &mut Mem, &mut Rq);
            assert!(
                !a.qp_error || op == RC_FETCH_ADD,
                "opcode {op:#x} len {len}: {a:?}"
            );
        }
    }

    fn no_resources() -> Responder<[ResSlot; 4]> {
        Responder::new(RespConfig {
            rq_psn: Psn::new(10),
            pmtu: PathMtu::Mtu1024,
            max_dest_rd_atomic: 0,
            min_rnr_timer: 1,
        })
    }

    /// With no responder resources (max_dest_rd_atomic 0), READs and
    /// atomics are invalid requests (IBA 9.4.4; rxe's check_resource);
    /// until 2026-12-07 they were served.
    #[test]
    fn no_responder_resources_refuse_reads_and_atomics() {
        use super::super::super::hdr::NAK_INVALID_REQUEST;
        use super::super::super::opcode::{RC_FETCH_ADD, RC_RDMA_READ_REQUEST};
        for op in [RC_RDMA_READ_REQUEST, RC_FETCH_ADD] {
            let mut r = no_resources();
            let a = r.on_request(&request(op, 8), &mut Mem, &mut Rq);
            assert_eq!(
                nak_of(&a),
                (Psn::new(10), NAK_INVALID_REQUEST, 0),
                "opcode {op:#x}"
            );
            assert!(a.qp_error);
        }
        // A WRITE needs no resources.
        let mut r = no_resources();
        let a = r.on_request(&request(RC_RDMA_WRITE_ONLY, 64), &mut Mem, &mut Rq);
        assert!(!a.qp_error, "{a:?}");
    }

    /// One 8-byte word, at VA 0x1000 of R_Key 7, for ATOMIC WRITE.
    struct Word(u64, Option<Access>);
    impl MemCheck for Word {
        fn check(&mut self, _: u32, _: u64, _: u32, _: Access) -> Result<(), AccessError> {
            Ok(())
        }
        fn atomic(&mut self, rkey: u32, va: u64, op: AtomicOp) -> Result<u64, AccessError> {
            self.1 = Some(op.access());
            if rkey != 7 || va != 0x1000 {
                return Err(AccessError::InvalidKey);
            }
            let old = self.0;
            if let AtomicOp::Write { value } = op {
                self.0 = value;
            }
            Ok(old)
        }
    }

    #[test]
    fn atomic_write() {
        use super::super::super::hdr::{NAK_INVALID_REQUEST, NAK_REMOTE_ACCESS_ERROR};
        use super::super::super::opcode::{RC_ATOMIC_WRITE, RC_RDMA_READ_RESPONSE_ONLY};
        let pkt = InRequest {
            opcode: RC_ATOMIC_WRITE,
            psn: Psn::new(10),
            payload_len: 8,
            reth: Some(Reth {
                va: 0x1000,
                rkey: 7,
                len: 8,
            }),
            atomic_write: Some(0x1122_3344_5566_7788),
            ..InRequest::default()
        };
        let mut r = responder();
        let mut m = Word(5, None);
        let a = r.on_request(&pkt, &mut m, &mut Rq);
        assert_eq!(a.outcome, Outcome::Executed);
        assert_eq!((m.0, m.1), (0x1122_3344_5566_7788, Some(Access::Write)));
        let Reply::Packet(d) = a.reply else {
            panic!("{a:?}")
        };
        // an empty READ response (IBTA 1.5, as rdma_rxe)
        assert_eq!(
            (d.opcode, d.psn, d.payload, d.pad),
            (RC_RDMA_READ_RESPONSE_ONLY, Psn::new(10), None, 0)
        );
        assert!(matches!(d.aeth.unwrap().decoded(), Syndrome::Ack { .. }));
        assert_eq!(r.counters().acks, 1);
        assert_eq!(
            (a.place, a.take_recv, a.recv_done),
            (Place::None, false, None)
        );
        assert_eq!((r.expected_psn(), r.msn()), (Psn::new(11), 1));
        // A duplicate is re-ACKed, not executed again.
        m.0 = 9;
        let a = r.on_request(&pkt, &mut m, &mut Rq);
        assert_eq!((a.outcome, m.0), (Outcome::Duplicate, 9));
        assert!(matches!(a.reply, Reply::Packet(d)
            if d.opcode == RC_RDMA_READ_RESPONSE_ONLY && d.psn == pkt.psn));
        // Misaligned, wrong length, no payload: invalid request.
        for bad in [
            InRequest {
                psn: Psn::new(11),
                reth: Some(Reth {
                    va: 0x1004,
                    rkey: 7,
                    len: 8,
                }),
                ..pkt
            },
            InRequest {
                psn: Psn::new(11),
                reth: Some(Reth {
                    va: 0x1000,
                    rkey: 7,
                    len: 16,
                }),
                ..pkt
            },
            InRequest {
                psn: Psn::new(11),
                atomic_write: None,
                ..pkt
            },
            InRequest {
                psn: Psn::new(11),
                reth: None,
                ..pkt
            },
        ] {
            let mut r = responder();
            r.epsn = Psn::new(11);
            let a = r.on_request(&bad, &mut Word(0, None), &mut Rq);
            assert_eq!(nak_of(&a).1, NAK_INVALID_REQUEST, "{bad:?}");
            assert!(a.qp_error);
        }
        // A bad R_Key: remote access error.
        let mut r = responder();
        let k = InRequest {
            reth: Some(Reth {
                va: 0x1000,
                rkey: 8,
                len: 8,
            }),
            ..pkt
        };
        let a = r.on_request(&k, &mut Word(0, None), &mut Rq);
        assert_eq!(nak_of(&a).1, NAK_REMOTE_ACCESS_ERROR);
        // A target that turns out unaligned (zero-based window): invalid.
        let a = responder().on_request(&pkt, &mut UnalignedTarget, &mut Rq);
        assert_eq!(nak_of(&a).1, NAK_INVALID_REQUEST);
    }

    fn responder() -> Responder<[ResSlot; 4]> {
        Responder::new(RespConfig {
            rq_psn: Psn::new(10),
            pmtu: PathMtu::Mtu1024,
            max_dest_rd_atomic: 4,
            min_rnr_timer: 1,
        })
    }

    #[test]
    fn reused_resource_store_forgets() {
        use super::super::super::opcode::RC_RDMA_READ_REQUEST;
        let read = InRequest {
            opcode: RC_RDMA_READ_REQUEST,
            psn: Psn::new(10),
            reth: Some(Reth {
                va: 0x1000,
                rkey: 7,
                len: 64,
            }),
            ..InRequest::default()
        };
        let mut r = responder();
        assert_eq!(
            r.on_request(&read, &mut Mem, &mut Rq).outcome,
            Outcome::Executed
        );
        let dup = r.on_request(&read, &mut Mem, &mut Rq);
        assert_eq!(dup.outcome, Outcome::DuplicateRead);
        // The QP is reset and brought to RTR again with the same storage:
        // the old READ must not be replayed (it named memory of the old
        // connection).
        let cfg = r.cfg;
        let mut r = Responder::with_store(
            RespConfig {
                rq_psn: Psn::new(20),
                ..cfg
            },
            r.into_store(),
        );
        let dup = r.on_request(&read, &mut Mem, &mut Rq);
        assert_eq!(dup.outcome, Outcome::DuplicateUnknown);
    }

    /// A region of 4 KiB at VA 0x1000 with R_Key 7 that grants FLUSH with
    /// the placement types in `.0`; counts the FLUSHes executed.
    struct FlushMem(u8, usize, Option<Option<(u64, u32)>>);
    impl MemCheck for FlushMem {
        fn check(&mut self, _: u32, _: u64, _: u32, _: Access) -> Result<(), AccessError> {
            Ok(())
        }
        fn atomic(&mut self, _: u32, _: u64, _: AtomicOp) -> Result<u64, AccessError> {
            Ok(0)
        }
        fn flush(
            &mut self,
            rkey: u32,
            range: Option<(u64, u32)>,
            placement: u8,
        ) -> Result<(), AccessError> {
            if rkey != 7 {
                return Err(AccessError::InvalidKey);
            }
            if placement & !self.0 != 0 {
                return Err(AccessError::NoPermission);
            }
            if let Some((va, len)) = range {
                if va < 0x1000 || va + u64::from(len) > 0x2000 {
                    return Err(AccessError::OutOfRange);
                }
            }
            self.1 += 1;
            self.2 = Some(range);
            Ok(())
        }
    }

    #[test]
    fn flush() {
        use super::super::super::hdr::{Feth, NAK_INVALID_REQUEST, NAK_REMOTE_ACCESS_ERROR};
        use super::super::super::opcode::{RC_FLUSH, RC_RDMA_READ_RESPONSE_ONLY};
        let pkt = InRequest {
            opcode: RC_FLUSH,
            psn: Psn::new(10),
            ack_req: true,
            feth: Some(Feth::new(FLUSH_GLOBAL, FLUSH_RANGE)),
            reth: Some(Reth {
                va: 0x1800,
                rkey: 7,
                len: 0x100,
            }),
            ..InRequest::default()
        };
        let mut r = responder();
        let mut m = FlushMem(FLUSH_GLOBAL, 0, None);
        let a = r.on_request(&pkt, &mut m, &mut Rq);
        assert_eq!(a.outcome, Outcome::Executed);
        assert_eq!((m.1, m.2), (1, Some(Some((0x1800, 0x100)))));
        let Reply::Packet(d) = a.reply else {
            panic!("{a:?}")
        };
        // an empty READ response Only with an ACK (IBTA 1.5, as rdma_rxe)
        assert_eq!(
            (d.opcode, d.psn, d.payload, d.pad),
            (RC_RDMA_READ_RESPONSE_ONLY, Psn::new(10), None, 0)
        );
        assert!(matches!(d.aeth.unwrap().decoded(), Syndrome::Ack { .. }));
        assert_eq!((r.expected_psn(), r.msn()), (Psn::new(11), 1));
        assert_eq!((a.place, a.take_recv), (Place::None, false));
        // A duplicate is answered again, not executed again.
        let a = r.on_request(&pkt, &mut m, &mut Rq);
        assert_eq!((a.outcome, m.1), (Outcome::Duplicate, 1));
        assert!(matches!(a.reply, Reply::Packet(d)
            if d.opcode == RC_RDMA_READ_RESPONSE_ONLY && d.psn == pkt.psn));
        // The whole region: no range is checked, whatever the RETH says.
        let whole = InRequest {
            psn: Psn::new(11),
            feth: Some(Feth::new(FLUSH_GLOBAL, FLUSH_MR)),
            reth: Some(Reth {
                va: 0,
                rkey: 7,
                len: 0,
            }),
            ..pkt
        };
        let a = r.on_request(&whole, &mut m, &mut Rq);
        assert_eq!((a.outcome, m.1, m.2), (Outcome::Executed, 2, Some(None)));
        // Malformed: no FETH, no RETH, no or unknown placement bits, an
        // unknown selectivity level, a payload: invalid request.
        for bad in [
            InRequest { feth: None, ..pkt },
            InRequest { reth: None, ..pkt },
            InRequest {
                feth: Some(Feth::new(0, FLUSH_RANGE)),
                ..pkt
            },
            InRequest {
                feth: Some(Feth::new(FLUSH_GLOBAL | 4, FLUSH_RANGE)),
                ..pkt
            },
            InRequest {
                feth: Some(Feth::new(FLUSH_GLOBAL, 2)),
                ..pkt
            },
            InRequest {
                payload_len: 4,
                ..pkt
            },
        ] {
            let mut m = FlushMem(FLUSH_GLOBAL, 0, None);
            let a = responder().on_request(&bad, &mut m, &mut Rq);
            assert_eq!(nak_of(&a).1, NAK_INVALID_REQUEST, "{bad:?}");
            assert!(a.qp_error);
            assert_eq!(m.1, 0);
        }
        // Refused by the region: a bad key, a range outside it, a
        // placement type it does not grant (persistence): remote access.
        for (bad, grants) in [
            (
                InRequest {
                    reth: Some(Reth {
                        va: 0x1800,
                        rkey: 8,
                        len: 1,
                    }),
                    ..pkt
                },
                FLUSH_GLOBAL,
            ),
            (
                InRequest {
                    reth: Some(Reth {
                        va: 0x1F00,
                        rkey: 7,
                        len: 0x200,
                    }),
                    ..pkt
                },
                FLUSH_GLOBAL,
            ),
            (
                InRequest {
                    feth: Some(Feth::new(FLUSH_PERSISTENT, FLUSH_RANGE)),
                    ..pkt
                },
                FLUSH_GLOBAL,
            ),
        ] {
            let mut m = FlushMem(grants, 0, None);
            let a = responder().on_request(&bad, &mut m, &mut Rq);
            assert_eq!(nak_of(&a).1, NAK_REMOTE_ACCESS_ERROR, "{bad:?}");
            assert!(a.qp_error);
            assert_eq!(m.1, 0);
        }
    }

    fn nak_of(a: &Action) -> (Psn, u8, u32) {
        let Reply::Packet(d) = a.reply else {
            panic!("no packet: {a:?}")
        };
        let aeth = d.aeth.unwrap();
        let Syndrome::Nak { code } = aeth.decoded() else {
            panic!("not a NAK: {aeth:?}")
        };
        (d.psn, code, aeth.msn)
    }

    #[test]
    fn send_placement_failure_naks_instead_of_acking() {
        let mut r = responder();
        let pkt = InRequest {
            opcode: RC_SEND_ONLY,
            psn: Psn::new(10),
            payload_len: 100,
            ..InRequest::default()
        };
        let msn = r.msn();
        let a = r.on_request(&pkt, &mut Mem, &mut Rq);
        assert!(a.take_recv && matches!(a.place, Place::Recv { offset: 0 }));
        assert!(
            matches!(a.reply, Reply::Packet(d) if matches!(d.aeth.unwrap().decoded(), Syndrome::Ack { .. }))
        );
        let f = r.placement_failed(pkt.psn, msn, true);
        assert_eq!(
            nak_of(&f),
            (Psn::new(10), NAK_REMOTE_OPERATIONAL_ERROR, msn)
        );
        assert!(f.qp_error);
        assert_eq!(f.recv_done.map(|c| c.status), Some(WcStatus::LocProtErr));
        assert!(r.is_error());
        // everything after is dropped
        let next = InRequest {
            psn: Psn::new(11),
            ..pkt
        };
        assert_eq!(
            r.on_request(&next, &mut Mem, &mut Rq).outcome,
            Outcome::QpError
        );
    }

    #[test]
    fn write_placement_failure_naks_remote_access() {
        let mut r = responder();
        let pkt = InRequest {
            opcode: RC_RDMA_WRITE_ONLY,
            psn: Psn::new(10),
            payload_len: 64,
            reth: Some(Reth {
                va: 0x1000,
                rkey: 7,
                len: 64,
            }),
            ..InRequest::default()
        };
        let msn = r.msn();
        let a = r.on_request(&pkt, &mut Mem, &mut Rq);
        assert!(matches!(
            a.place,
            Place::Mem {
                rkey: 7,
                va: 0x1000
            }
        ));
        let rnr = r.rnr_nak(Psn::new(10), msn, 18);
        assert_eq!(rnr.opcode, RC_ACKNOWLEDGE);
        assert_eq!(rnr.psn, Psn::new(10));
        assert_eq!(rnr.aeth.map(|a| a.msn), Some(msn));
        assert!(matches!(
            rnr.aeth.map(|a| Syndrome::decode(a.syndrome)),
            Some(Syndrome::RnrNak { .. })
        ));
        let before = r.counters().get(Outcome::AccessError);
        let f = r.placement_failed(pkt.psn, msn, false);
        assert_eq!(nak_of(&f), (Psn::new(10), NAK_REMOTE_ACCESS_ERROR, msn));
        assert!(f.qp_error && f.recv_done.is_none());
        // Counted as the access error it is (`access_naks_sent`).
        assert_eq!(r.counters().get(Outcome::AccessError), before + 1);
    }
}
