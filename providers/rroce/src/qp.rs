// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Queue pairs (RC, UC, UD, XRC): the kernel creates them and hands out
//! an SQ and an RQ ring; the provider is the producer of both.
//!
//! XRC: an XRC_SEND QP (the initiator) has an SQ and no RQ (as a QP with
//! an SRQ); its requests carry the remote XRC SRQ number in the WQE's
//! `remote_qpn` field (`ibv_send_wr.qp_type.xrc.remote_srqn`, or
//! `ibv_wr_set_xrc_srqn`), and it has the opcodes of RC but ATOMIC WRITE
//! and FLUSH.  An XRC_RECV QP (the target, `ibv_create_qp_ex` with an XRC
//! domain, or `ibv_open_qp`) has no queues at all: the kernel creates it
//! without driver data, so nothing is mapped and both post verbs give
//! `EINVAL`; its receives land in the XRC SRQs the senders name.
//!
//! `post_send` checks each work request, encodes it with
//! [`write_send_wqe`] into a private staging entry, validates that entry
//! with the very decoder the kernel uses ([`decode_send`], so nothing the
//! kernel would reject is ever posted), copies it into the next SQ slot and,
//! after the whole list, publishes the producer index and rings the
//! doorbell: one `write()` of a zero-WR `IB_USER_VERBS_CMD_POST_SEND`
//! command on the context's command fd.  `post_recv` does the same on the
//! RQ without any system call.  QPs made by `create_qp_ex` with
//! `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` also offer the `ibv_wr_*` API
//! ([`ex`]), which encodes with the same [`encode_send`] and publishes
//! with the same [`publish_and_ring`].
//!
//! Errors follow libibverbs: the errno value is returned, `*bad_wr` points
//! at the first request not posted, the requests before it are posted.
//! `EINVAL` for an invalid request (opcode not allowed on the QP type, too
//! many SGEs, inline data too long, unknown flags, UD without an AH of this
//! context, XRC_SEND with a remote SRQ number above 24 bits, QP in a state
//! that does not accept it, a QP without that queue), `ENOMEM` when the queue
//! is full, `EIO` once the ring is broken (the kernel published an
//! impossible consumer index).

use core::ffi::c_int;
use core::mem::offset_of;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use core::sync::atomic::{fence, Ordering};
use rroce_proto::abi::CreateQpResp;
use rroce_proto::ring::{
    Producer, RingError, RingLayout, SharedRegion, CONS_FLAGS_OFFSET, CONS_FLUSHING, CONS_POLLING,
};
use rroce_proto::wqe::{
    decode_recv, decode_send, recv_max_sge, send_caps, write_recv_wqe, write_send_wqe, OpcodeSet,
    RecvLimits, SendLimits, SendOpcode, SendPayload, SendWqe, Sge, BIND_TYPE1, BIND_TYPE2,
    MAX_MSG_SIZE, MAX_QPN, SEND_FLAGS_ALL, WQE_ALIGN,
};

use crate::device::warn;
use crate::ffi::alloc::RES_TYPE_QP;
use crate::ffi::*;
use crate::pd::{buffers, RrocePd};
use crate::session::SessionLock;

#[path = "qp_ex.rs"]
pub(crate) mod ex;
use ex::Batch;

/// The producer side of an SQ or RQ ring plus scratch space.
///
/// The scratch space (`staging`, `sges`, `inline`) is allocated once, at
/// creation, from the [`Source`] of the QP's or SRQ's PD: a parent
/// domain's allocator or the heap (see `ffi::alloc`).  The work-request
/// API's batch grows on the heap as the application builds batches.
pub(crate) struct WorkQueue {
    pub(crate) map: RingMap,
    pub(crate) producer: Producer,
    /// One entry, built and validated here before it is copied.
    staging: ProviderBuf<u8>,
    /// SGEs of the request being encoded (capacity: the queue's max_sge).
    sges: BufVec<Sge>,
    /// Inline data of the request being encoded (SQ only; capacity: the
    /// QP's max_inline_data).
    inline: BufVec<u8>,
    /// The work-request API's batch (SQ of a QP made with
    /// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` only).
    batch: Batch,
}

impl WorkQueue {
    /// The queue of ring `map`, its scratch space from `source`: the
    /// allocation's errno (`ENOMEM`, `EINVAL`) if that fails.
    pub(crate) fn new(
        map: RingMap,
        producer: Producer,
        max_sge: u16,
        max_inline: u32,
        source: &Source,
    ) -> Result<Self, c_int> {
        let entry = map.layout().entry_size() as usize;
        Ok(Self {
            map,
            producer,
            staging: ProviderBuf::zeroed(entry, source)?,
            sges: BufVec::with_capacity(usize::from(max_sge), source)?,
            inline: BufVec::with_capacity(max_inline as usize, source)?,
            batch: Batch::default(),
        })
    }
}

/// What the QP accepts; fixed at creation.
#[derive(Clone, Copy, Debug)]
struct QpInfo {
    send: SendLimits,
    recv: RecvLimits,
    sq_entries: u32,
    rq_entries: u32,
    /// An XRC_SEND QP: requests carry a remote XRC SRQ number.
    xrc: bool,
}

impl QpInfo {
    /// Before the rings are attached: accepts nothing.
    const NONE: Self = Self {
        send: SendLimits {
            max_sge: 0,
            max_inline: 0,
            max_msg_size: 0,
            opcodes: OpcodeSet(0),
            ud: false,
        },
        recv: RecvLimits {
            max_sge: 0,
            max_msg_size: 0,
        },
        sq_entries: 0,
        rq_entries: 0,
        xrc: false,
    };
}

/// Provider QP; libibverbs sees only `vqp` (its `ibv_qp`, and its
/// `ibv_qp_ex` for a QP with the work-request API).
#[repr(C)]
pub(crate) struct RroceQp {
    vqp: Opaque<VerbsQp>,
    info: QpInfo,
    /// `None` for an XRC_RECV QP (and an opened one): no queues.
    sq: Mutex<Option<WorkQueue>>,
    /// `None` for a QP attached to an SRQ and for XRC QPs.
    rq: Mutex<Option<WorkQueue>>,
    /// Held from `ibv_wr_start` to `ibv_wr_complete`/`ibv_wr_abort`, and
    /// by `post_send` meanwhile: the batch being built uses the SQ's
    /// scratch buffers (see [`crate::session`]).
    pub(crate) session: SessionLock,
    /// The parent domain the QP was created on (`None`: a protection
    /// domain), held while the QP lives; dropped after the queues, whose
    /// buffers its allocator may have provided.
    domain: Option<Arc<RrocePd>>,
}
const _: () = assert!(offset_of!(RroceQp, vqp) == 0);

/// Where a QP's doorbell rings: the context's command fd and the QP's
/// uverbs handle.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Doorbell {
    pub(crate) cmd_fd: c_int,
    pub(crate) handle: u32,
}

/// Why a post verb failed: the errno value and the index in the list of
/// the first request not posted (`None`: all were posted, but the
/// doorbell failed).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct PostError {
    pub(crate) bad: Option<usize>,
    pub(crate) err: c_int,
}

impl PostError {
    const fn at(i: usize, err: c_int) -> Self {
        Self { bad: Some(i), err }
    }
}

/// A window as a BIND_MW request names it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MwView {
    /// The window belongs to the QP's context.
    pub(crate) same_context: bool,
    pub(crate) rkey: u32,
    pub(crate) mw_type: c_int,
}

/// A region as a bind names it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MrView {
    /// The region belongs to the QP's context.
    pub(crate) same_context: bool,
    pub(crate) lkey: u32,
}

/// A BIND_MW request (`wr.bind_mw` of `ibv_send_wr`, `ibv_bind_mw`'s
/// `ibv_mw_bind` or `wr_bind_mw`'s arguments): the window (`None`: NULL),
/// the new key and the `ibv_mw_bind_info` (`mr` `None`: NULL).
#[derive(Clone, Copy, Debug)]
pub(crate) struct BindRequest {
    pub(crate) mw: Option<MwView>,
    pub(crate) rkey: u32,
    pub(crate) mr: Option<MrView>,
    pub(crate) addr: u64,
    pub(crate) length: u64,
    pub(crate) access: u32,
}

/// The destination of a UD request: the AH's number if it is an AH of the
/// QP's context (`None` otherwise, or for NULL), the remote QPN and Q_Key.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UdAddr {
    pub(crate) ah: Option<u32>,
    pub(crate) remote_qpn: u32,
    pub(crate) remote_qkey: u32,
}

/// One `ibv_send_wr` as `post_send` sees it, its pointers resolved.
pub(crate) struct SendRequest<'a> {
    pub(crate) wr_id: u64,
    pub(crate) opcode: c_int,
    pub(crate) send_flags: u32,
    pub(crate) imm_data_or_inv: u32,
    /// `wr.rdma`/`wr.atomic` for the opcodes that have them, else 0; for
    /// ATOMIC_WRITE (`wr.rdma`) `compare_add` holds the 8 bytes its one
    /// SGE points to, and `sges` is empty.
    pub(crate) remote_addr: u64,
    pub(crate) rkey: u32,
    pub(crate) compare_add: u64,
    pub(crate) swap: u64,
    /// `wr.ud`, on a UD QP.
    pub(crate) ud: Option<UdAddr>,
    /// `qp_type.xrc.remote_srqn`, on an XRC_SEND QP.
    pub(crate) xrc_srqn: Option<u32>,
    /// `bind_mw`, for a BIND_MW request.
    pub(crate) bind: Option<BindRequest>,
    /// The SGEs, or why they cannot be read (too many, a NULL list).
    pub(crate) sges: Result<&'a [IbvSge], c_int>,
    /// With `IBV_SEND_INLINE`: the data, or why it cannot be inline.
    pub(crate) inline: Option<Result<InlineData<'a>, c_int>>,
}

/// One `ibv_recv_wr`, its SGEs resolved.
pub(crate) struct RecvRequest<'a> {
    pub(crate) wr_id: u64,
    pub(crate) sges: Result<&'a [IbvSge], c_int>,
}

/// A QP's ring has not been attached (never the case for a created QP).
const NO_RING: c_int = EINVAL;

fn lock(m: &Mutex<Option<WorkQueue>>) -> MutexGuard<'_, Option<WorkQueue>> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl RroceQp {
    /// A QP without rings yet, its C part zeroed (`comp_mask` 0: no
    /// `qp_ex` until [`RroceQp::vqp`]'s owner installs one), on parent
    /// domain `domain` (`None`: a protection domain).
    pub(crate) fn new(domain: Option<Arc<RrocePd>>) -> Self {
        Self {
            vqp: Opaque::zeroed(),
            info: QpInfo::NONE,
            sq: Mutex::new(None),
            rq: Mutex::new(None),
            session: SessionLock::new(),
            domain,
        }
    }

    /// The C part (the kernel's user_handle for this QP: it must not move).
    pub(crate) fn vqp(&self) -> *mut VerbsQp {
        self.vqp.get()
    }

    /// Takes the rings the kernel made for this QP (CREATE_QP succeeded
    /// with `drv`; the core reported QP number `core_qpn`), checked
    /// against what was requested.  `EPROTO` if the answer breaks the
    /// rroce ABI, or mmap's errno; a warning says why.  An XRC_RECV QP
    /// takes nothing: it has no rings, and the kernel wrote no `drv`.
    pub(crate) fn attach(
        &mut self,
        cmd_fd: c_int,
        drv: &CreateQpResp,
        core_qpn: u32,
        requested: &IbvQpCap,
        qp_type: c_int,
        has_srq: bool,
    ) -> Result<(), c_int> {
        if qp_type == IBV_QPT_XRC_RECV {
            return Ok(());
        }
        // libibverbs sets `qp_num` on both the write and the ioctl path (the
        // core part of the response is only written on the former).
        let source = buffers(self.domain.as_deref(), RES_TYPE_QP);
        let mapped = if drv.qpn == core_qpn {
            map_qp_rings(cmd_fd, drv, requested, qp_type, has_srq, &source)
        } else {
            Err((EPROTO, "QP numbers of core and driver response differ"))
        };
        match mapped {
            Ok((info, sq, rq)) => {
                self.info = info;
                *self.sq.get_mut().unwrap_or_else(PoisonError::into_inner) = Some(sq);
                *self.rq.get_mut().unwrap_or_else(PoisonError::into_inner) = rq;
                Ok(())
            }
            Err((err, why)) => {
                warn(format_args!("create_qp: {why} (qpn {})", drv.qpn));
                Err(err)
            }
        }
    }

    /// The capacities the QP really has, as verbs reports them (`kernel`:
    /// what the kernel reported, used for an RQ the QP does not have).
    pub(crate) fn caps(&self, kernel: &IbvQpCap) -> IbvQpCap {
        real_caps(&self.info, kernel)
    }

    /// The most SGEs a send request may have.
    pub(crate) fn max_send_sge(&self) -> u16 {
        self.info.send.max_sge
    }

    /// The most bytes a send request may carry inline.
    pub(crate) fn max_inline(&self) -> u32 {
        self.info.send.max_inline
    }

    /// The most SGEs a receive request may have (0 with an SRQ).
    pub(crate) fn max_recv_sge(&self) -> u16 {
        self.info.recv.max_sge
    }

    /// A UD QP (send requests carry an address).
    pub(crate) fn is_ud(&self) -> bool {
        self.info.send.ud
    }

    /// An XRC_SEND QP (send requests carry a remote XRC SRQ number).
    pub(crate) fn is_xrc(&self) -> bool {
        self.info.xrc
    }

    /// `ibv_post_send` of `wrs` in QP state `state`: all requests before
    /// the first bad one are posted and published, then the doorbell rings
    /// once (see the module documentation).
    pub(crate) fn post_send<'a>(
        &self,
        state: c_int,
        db: Doorbell,
        wrs: impl IntoIterator<Item = SendRequest<'a>>,
    ) -> Result<(), PostError> {
        // States below RTS do not accept sends.
        if state < IBV_QPS_RTS {
            return Err(PostError::at(0, EINVAL));
        }
        let _session = self.session.scope();
        let mut guard = lock(&self.sq);
        let Some(sq) = guard.as_mut() else {
            return Err(PostError::at(0, NO_RING));
        };
        let mut ret = Ok(());
        for (i, wr) in wrs.into_iter().enumerate() {
            if let Err(e) = post_one_send(&self.info, sq, &wr) {
                ret = Err(PostError::at(i, e));
                break;
            }
        }
        match publish_and_ring(guard, db) {
            Ok(()) => ret,
            // Nothing of this call reached the kernel.
            Err(RingFailure::Unpublished(e)) => Err(PostError::at(0, e)),
            Err(RingFailure::Doorbell(e)) => ret.and(Err(PostError { bad: None, err: e })),
        }
    }

    /// `ibv_post_recv` of `wrs` in QP state `state`; no system call unless
    /// the QP is flushing (in the error state, new receives are flushed
    /// only on the doorbell).
    pub(crate) fn post_recv<'a>(
        &self,
        state: c_int,
        db: Doorbell,
        wrs: impl IntoIterator<Item = RecvRequest<'a>>,
    ) -> Result<(), PostError> {
        // A QP in RESET accepts no receives.
        if state == IBV_QPS_RESET {
            return Err(PostError::at(0, EINVAL));
        }
        let mut guard = lock(&self.rq);
        // A QP with an SRQ has no RQ to post to.
        let Some(rq) = guard.as_mut() else {
            return Err(PostError::at(0, EINVAL));
        };
        let before = rq.producer.index();
        let ret = post_recv_list(&self.info.recv, rq, wrs);
        if rq.producer.index() == before || rq.producer.pending() != 0 {
            return ret;
        }
        let flushing = consumer_hint(rq) & CONS_FLUSHING != 0;
        drop(guard);
        if !flushing {
            return ret;
        }
        let e = ring_doorbell(db.cmd_fd, db.handle);
        // EINVAL: the QP was reset meanwhile, which discards the receives.
        if ret.is_ok() && e != 0 && e != EINVAL {
            Err(PostError { bad: None, err: e })
        } else {
            ret
        }
    }
}

/// The key `ibv_bind_mw` gives a window next (`ibv_inc_rkey`): the low
/// byte counts up, the rest stays.
pub(crate) fn next_mw_rkey(old: u32) -> u32 {
    (old & !0xff) | (old.wrapping_add(1) & 0xff)
}

/// `EOPNOTSUPP` for QP types the provider lacks.
pub(crate) fn check_qp_type(qp_type: c_int) -> Result<(), c_int> {
    opcodes_for(qp_type).map(|_| ()).ok_or(EOPNOTSUPP)
}

/// Maps a ring error of a producer to the errno of a post verb.
pub(crate) fn ring_errno(e: RingError) -> c_int {
    match e {
        RingError::Full => ENOMEM,
        _ => EIO,
    }
}

/// Opcodes allowed on a QP type (none on an XRC_RECV QP, which has no
/// SQ), `None` for types the provider lacks.
pub(crate) fn opcodes_for(qp_type: c_int) -> Option<OpcodeSet> {
    match qp_type {
        IBV_QPT_RC => Some(OpcodeSet::RC),
        IBV_QPT_UC => Some(OpcodeSet::UC),
        IBV_QPT_UD => Some(OpcodeSet::UD),
        IBV_QPT_XRC_SEND => Some(OpcodeSet::XRC),
        IBV_QPT_XRC_RECV => Some(OpcodeSet(0)),
        _ => None,
    }
}

/// Puts the remote XRC SRQ number `srqn` (`None`: not given) of a request
/// into `hdr` (its `remote_qpn`) on an XRC_SEND QP: `EINVAL` if it is
/// missing or above 24 bits.  Local operations (LOCAL_INV, BIND_MW, whose
/// `remote_qpn` is the region's lkey) reach no SRQ and take none.
fn set_xrc_srqn(info: &QpInfo, hdr: &mut SendWqe, srqn: Option<u32>) -> Result<(), c_int> {
    if !info.xrc || hdr.opcode.is_local() {
        return Ok(());
    }
    match srqn {
        Some(n) if n <= MAX_QPN => {
            hdr.remote_qpn = n;
            Ok(())
        }
        _ => Err(EINVAL),
    }
}

/// Validates one ring of a `CreateQpResp`; returns its layout.
pub(crate) fn check_ring(
    entries: u32,
    entry_size: u32,
    bytes: u32,
) -> Result<RingLayout, &'static str> {
    let l =
        RingLayout::from_resp(entries, entry_size, bytes).map_err(|_| "invalid ring geometry")?;
    if !entry_size.is_multiple_of(WQE_ALIGN) {
        return Err("ring entry size not a multiple of 64");
    }
    Ok(l)
}

/// The rings and limits of a new QP from the kernel's response, checked
/// against what was requested (`req`).
fn map_qp_rings(
    cmd_fd: c_int,
    drv: &CreateQpResp,
    req: &IbvQpCap,
    qp_type: c_int,
    has_srq: bool,
    source: &Source,
) -> Result<(QpInfo, WorkQueue, Option<WorkQueue>), (c_int, &'static str)> {
    let proto = |why| (EPROTO, why);
    let opcodes = opcodes_for(qp_type).ok_or(proto("unsupported QP type"))?;
    let sq_layout = check_ring(drv.sq_entries, drv.sq_entry_size, drv.sq_bytes).map_err(proto)?;
    let (fit_sge, fit_inline) = send_caps(drv.sq_entry_size);
    let max_send_sge = u16::try_from(drv.max_send_sge).map_err(|_| proto("max_send_sge"))?;
    if max_send_sge > fit_sge || drv.max_inline > fit_inline {
        return Err(proto("SQ capacities do not fit the SQ entries"));
    }
    if drv.sq_entries < req.max_send_wr
        || drv.max_send_sge < req.max_send_sge
        || drv.max_inline < req.max_inline_data
    {
        return Err(proto("SQ smaller than requested"));
    }
    let max_recv_sge = u16::try_from(drv.max_recv_sge).map_err(|_| proto("max_recv_sge"))?;
    // An XRC_SEND QP has no RQ, like a QP with an SRQ.
    let no_rq = has_srq || qp_type == IBV_QPT_XRC_SEND;
    let rq_layout = if no_rq {
        None
    } else {
        if drv.rq_entries == 0 {
            return Err(proto("no RQ for a QP without SRQ"));
        }
        let l = check_ring(drv.rq_entries, drv.rq_entry_size, drv.rq_bytes).map_err(proto)?;
        if max_recv_sge > recv_max_sge(drv.rq_entry_size) {
            return Err(proto("RQ capacities do not fit the RQ entries"));
        }
        if drv.rq_entries < req.max_recv_wr || drv.max_recv_sge < req.max_recv_sge {
            return Err(proto("RQ smaller than requested"));
        }
        Some(l)
    };

    let info = QpInfo {
        send: SendLimits {
            max_sge: max_send_sge,
            max_inline: drv.max_inline,
            max_msg_size: MAX_MSG_SIZE,
            opcodes,
            ud: qp_type == IBV_QPT_UD,
        },
        recv: RecvLimits {
            max_sge: if no_rq { 0 } else { max_recv_sge },
            max_msg_size: MAX_MSG_SIZE,
        },
        sq_entries: drv.sq_entries,
        rq_entries: if no_rq { 0 } else { drv.rq_entries },
        xrc: qp_type == IBV_QPT_XRC_SEND,
    };

    let attach = |offset: u64, bytes: u32, layout: RingLayout| {
        let map = RingMap::map(cmd_fd, offset, bytes, layout)
            .map_err(|e| (e, "mapping a ring failed"))?;
        let producer = Producer::attach(layout, &map.region())
            .map_err(|_| proto("ring header is inconsistent"))?;
        Ok::<_, (c_int, &'static str)>((map, producer))
    };
    let buffers = |e| (e, "allocating the queue buffers failed");
    let (map, producer) = attach(drv.sq_offset, drv.sq_bytes, sq_layout)?;
    let sq =
        WorkQueue::new(map, producer, max_send_sge, drv.max_inline, source).map_err(buffers)?;
    let rq = match rq_layout {
        Some(l) => {
            let (map, producer) = attach(drv.rq_offset, drv.rq_bytes, l)?;
            Some(WorkQueue::new(map, producer, max_recv_sge, 0, source).map_err(buffers)?)
        }
        None => None,
    };
    Ok((info, sq, rq))
}

/// The capacities the QP really has, as verbs reports them.
fn real_caps(info: &QpInfo, kernel: &IbvQpCap) -> IbvQpCap {
    IbvQpCap {
        max_send_wr: info.sq_entries,
        max_recv_wr: if info.rq_entries == 0 {
            kernel.max_recv_wr
        } else {
            info.rq_entries
        },
        max_send_sge: u32::from(info.send.max_sge),
        max_recv_sge: if info.rq_entries == 0 {
            kernel.max_recv_sge
        } else {
            u32::from(info.recv.max_sge)
        },
        max_inline_data: info.send.max_inline,
    }
}

/// `ibv_qp_init_attr_ex.comp_mask` bits `create_qp_ex` understands.
const QP_INIT_ATTR_SUPPORTED: u32 = IBV_QP_INIT_ATTR_PD
    | IBV_QP_INIT_ATTR_XRCD
    | IBV_QP_INIT_ATTR_CREATE_FLAGS
    | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;

/// Checks the attributes of `ibv_create_qp_ex`: `EOPNOTSUPP` for what
/// rroce lacks (TSO, RSS, creation flags, send operations the QP type
/// does not have), `EINVAL` without a PD (without an XRC domain for an
/// XRC_RECV QP, which needs no PD).
pub(crate) fn check_qp_init_attr_ex(a: &IbvQpInitAttrEx) -> Result<(), c_int> {
    if a.comp_mask & !QP_INIT_ATTR_SUPPORTED != 0 {
        return Err(EOPNOTSUPP);
    }
    let (bit, missing) = if a.qp_type == IBV_QPT_XRC_RECV {
        (IBV_QP_INIT_ATTR_XRCD, a.xrcd.is_null())
    } else {
        (IBV_QP_INIT_ATTR_PD, a.pd.is_null())
    };
    if a.comp_mask & bit == 0 || missing {
        return Err(EINVAL);
    }
    if a.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS != 0 && a.create_flags != 0 {
        return Err(EOPNOTSUPP);
    }
    let Some(opcodes) = opcodes_for(a.qp_type) else {
        return Err(EOPNOTSUPP);
    };
    if a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0
        && a.send_ops_flags & !ex::send_ops_supported(opcodes) != 0
    {
        return Err(EOPNOTSUPP);
    }
    Ok(())
}

/// `ibv_qp_open_attr.comp_mask` bits `open_qp` understands.
const QP_OPEN_ATTR_SUPPORTED: u32 =
    IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_CONTEXT | IBV_QP_OPEN_ATTR_TYPE;

/// Checks the attributes of `ibv_open_qp`: `EOPNOTSUPP` for unknown bits,
/// `EINVAL` without the QP number, the XRC domain or the type, or for a
/// type other than XRC_RECV (the only QPs that can be opened).
pub(crate) fn check_qp_open_attr(a: &IbvQpOpenAttr) -> Result<(), c_int> {
    if a.comp_mask & !QP_OPEN_ATTR_SUPPORTED != 0 {
        return Err(EOPNOTSUPP);
    }
    let needed = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
    if a.comp_mask & needed != needed || a.xrcd.is_null() || a.qp_type != IBV_QPT_XRC_RECV {
        return Err(EINVAL);
    }
    Ok(())
}

/// The opcode of a request if the QP accepts it with `send_flags`.
fn check_send(info: &QpInfo, opcode: c_int, send_flags: u32) -> Result<SendOpcode, c_int> {
    let op = u8::try_from(opcode)
        .ok()
        .and_then(SendOpcode::from_u8)
        .ok_or(EINVAL)?;
    // FLUSH's placement type, selectivity level and length have no place
    // in an ibv_send_wr (rdma-core posts it only through ibv_wr_flush,
    // which libibverbs 44's ibv_qp_ex lacks).
    if !info.send.opcodes.contains(op) || op == SendOpcode::Flush {
        return Err(EINVAL);
    }
    if send_flags & !u32::from(SEND_FLAGS_ALL) != 0 {
        return Err(EINVAL);
    }
    Ok(op)
}

/// Fills the BIND_MW fields of `hdr` (see `proto::wqe`) for `b`.  The
/// window's type goes along (a type-1 window bound through `post_send` is
/// bound as `ibv_bind_mw` would); a zero-length type-1 bind without a
/// region unbinds.  The kernel checks the rest and completes a bad bind
/// with `IBV_WC_MW_BIND_ERR`.
pub(crate) fn encode_bind(hdr: &mut SendWqe, b: &BindRequest) -> Result<(), c_int> {
    let mw = b.mw.ok_or(EINVAL)?;
    let ty = match mw.mw_type {
        IBV_MW_TYPE_1 => BIND_TYPE1,
        IBV_MW_TYPE_2 => BIND_TYPE2,
        _ => return Err(EINVAL),
    };
    if !mw.same_context {
        return Err(EINVAL);
    }
    let lkey = match b.mr {
        None => {
            if ty != BIND_TYPE1 || b.length != 0 {
                return Err(EINVAL);
            }
            0
        }
        Some(mr) if mr.same_context => mr.lkey,
        Some(_) => return Err(EINVAL),
    };
    hdr.imm_or_inv = mw.rkey;
    hdr.rkey = b.rkey;
    hdr.remote_addr = b.addr;
    hdr.compare_add = b.length;
    hdr.remote_qpn = lkey;
    hdr.remote_qkey = b.access;
    hdr.ah = ty;
    Ok(())
}

/// Copies the SGEs of a request into `out`, at most `max` of them (and
/// no more than `out` holds).
fn gather_sges(list: &[IbvSge], max: u16, out: &mut BufVec<Sge>) -> Result<(), c_int> {
    out.clear();
    if list.len() > usize::from(max) {
        return Err(EINVAL);
    }
    list.iter().try_for_each(|s| {
        out.push(Sge {
            addr: s.addr,
            length: s.length,
            lkey: s.lkey,
        })
    })
}

/// Encodes a send WQE into `staging` and checks it with the kernel's own
/// decoder (nothing the kernel would reject is ever posted); returns its
/// length.  The one encoder of both `post_send` and the work-request API.
fn encode_send(
    info: &QpInfo,
    staging: &mut [u8],
    hdr: &SendWqe,
    payload: SendPayload<'_>,
) -> Result<usize, c_int> {
    let len = write_send_wqe(staging, hdr, payload).map_err(|_| EINVAL)?;
    decode_send(staging, &info.send).map_err(|_| EINVAL)?;
    Ok(len)
}

/// Encodes one send work request into the next SQ slot (unpublished).
fn post_one_send(info: &QpInfo, sq: &mut WorkQueue, wr: &SendRequest<'_>) -> Result<(), c_int> {
    let op = check_send(info, wr.opcode, wr.send_flags)?;
    let region = sq.map.region();
    if sq.producer.is_full(&region).map_err(ring_errno)? {
        return Err(ENOMEM);
    }

    let mut hdr = SendWqe::new(wr.wr_id, op);
    hdr.flags = (wr.send_flags & u32::from(SEND_FLAGS_ALL)) as u8;
    if op.has_imm() || op.has_inv() {
        hdr.imm_or_inv = wr.imm_data_or_inv;
    }
    match op {
        SendOpcode::RdmaWrite | SendOpcode::RdmaWriteWithImm | SendOpcode::RdmaRead => {
            hdr.remote_addr = wr.remote_addr;
            hdr.rkey = wr.rkey;
        }
        SendOpcode::AtomicCmpAndSwp | SendOpcode::AtomicFetchAndAdd => {
            hdr.remote_addr = wr.remote_addr;
            hdr.compare_add = wr.compare_add;
            hdr.swap = wr.swap;
            hdr.rkey = wr.rkey;
        }
        SendOpcode::AtomicWrite => {
            // The 8 bytes were read from the request's one SGE; the WQE
            // carries them and no SGE.
            hdr.remote_addr = wr.remote_addr;
            hdr.rkey = wr.rkey;
            hdr.compare_add = wr.compare_add;
        }
        SendOpcode::BindMw => encode_bind(&mut hdr, wr.bind.as_ref().ok_or(EINVAL)?)?,
        _ => {}
    }
    if info.send.ud {
        let ud = wr.ud.ok_or(EINVAL)?;
        hdr.ah = ud.ah.ok_or(EINVAL)?;
        hdr.remote_qpn = ud.remote_qpn;
        hdr.remote_qkey = ud.remote_qkey;
    }
    set_xrc_srqn(info, &mut hdr, wr.xrc_srqn)?;

    gather_sges(wr.sges?, info.send.max_sge, &mut sq.sges)?;
    let payload = if wr.send_flags & IBV_SEND_INLINE != 0 && op.allows_inline() {
        let data = wr.inline.ok_or(EINVAL)??;
        if data.len() > info.send.max_inline as usize {
            return Err(EINVAL);
        }
        data.copy_into(&mut sq.inline)?;
        SendPayload::Inline(&sq.inline)
    } else {
        SendPayload::Sges(&sq.sges)
    };
    let len = encode_send(info, &mut sq.staging, &hdr, payload)?;
    let bytes = sq.staging.get(..len).ok_or(EINVAL)?;
    sq.producer.write_next(&region, bytes).map_err(ring_errno)
}

/// Why [`publish_and_ring`] failed.
#[derive(Debug, PartialEq, Eq)]
enum RingFailure {
    /// The producer index could not be published: nothing reached the
    /// kernel.
    Unpublished(c_int),
    /// The WQEs are published, but the doorbell `write()` failed.
    Doorbell(c_int),
}

/// Publishes the WQEs written to the SQ and, unless the kernel is taking
/// new WQEs by itself, rings the doorbell.  Takes the SQ lock's guard and
/// drops it before the system call.
///
/// Doorbell suppression (proto::ring): after the index store, a full
/// fence, then the kernel's hint.  While it has sends in flight it takes
/// new WQEs by itself and the system call can be skipped.
fn publish_and_ring(
    mut guard: MutexGuard<'_, Option<WorkQueue>>,
    db: Doorbell,
) -> Result<(), RingFailure> {
    let Some(sq) = guard.as_mut() else {
        return Ok(());
    };
    if sq.producer.pending() == 0 {
        return Ok(());
    }
    let region = sq.map.region();
    sq.producer
        .publish(&region)
        .map_err(|e| RingFailure::Unpublished(ring_errno(e)))?;
    let polling = consumer_hint(sq) & CONS_POLLING != 0;
    drop(guard);
    if polling {
        return Ok(());
    }
    match ring_doorbell(db.cmd_fd, db.handle) {
        0 => Ok(()),
        e => Err(RingFailure::Doorbell(e)),
    }
}

/// The consumer's flags word of `wq`'s ring, read after a full fence that
/// orders it behind the producer index just published: the producer's half
/// of the Dekker handshake of `proto::ring` (CONS_POLLING, CONS_FLUSHING).
fn consumer_hint(wq: &WorkQueue) -> u32 {
    fence(Ordering::SeqCst);
    wq.map
        .region()
        .load_u32_acquire(CONS_FLAGS_OFFSET)
        .unwrap_or(0)
}

/// Encodes one receive work request into the next RQ/SRQ slot
/// (unpublished).
fn post_one_recv(lim: &RecvLimits, rq: &mut WorkQueue, wr: &RecvRequest<'_>) -> Result<(), c_int> {
    gather_sges(wr.sges?, lim.max_sge, &mut rq.sges)?;
    let region = rq.map.region();
    if rq.producer.is_full(&region).map_err(ring_errno)? {
        return Err(ENOMEM);
    }
    let len = write_recv_wqe(&mut rq.staging, wr.wr_id, &rq.sges).map_err(|_| EINVAL)?;
    decode_recv(&rq.staging, lim).map_err(|_| EINVAL)?;
    let bytes = rq.staging.get(..len).ok_or(EINVAL)?;
    rq.producer.write_next(&region, bytes).map_err(ring_errno)
}

/// Writes the receive work requests `wrs` into `rq` (a QP's RQ or an SRQ,
/// locked by the caller) up to the first bad one, and publishes them.
pub(crate) fn post_recv_list<'a>(
    lim: &RecvLimits,
    rq: &mut WorkQueue,
    wrs: impl IntoIterator<Item = RecvRequest<'a>>,
) -> Result<(), PostError> {
    let mut ret = Ok(());
    for (i, wr) in wrs.into_iter().enumerate() {
        if let Err(e) = post_one_recv(lim, rq, &wr) {
            ret = Err(PostError::at(i, e));
            break;
        }
    }
    if rq.producer.pending() > 0 {
        let region = rq.map.region();
        if let Err(e) = rq.producer.publish(&region) {
            return Err(PostError::at(0, ring_errno(e)));
        }
    }
    ret
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcode_sets_and_errnos() {
        assert_eq!(opcodes_for(IBV_QPT_RC), Some(OpcodeSet::RC));
        assert_eq!(opcodes_for(IBV_QPT_UC), Some(OpcodeSet::UC));
        assert_eq!(opcodes_for(IBV_QPT_UD), Some(OpcodeSet::UD));
        assert_eq!(opcodes_for(IBV_QPT_XRC_RECV), Some(OpcodeSet(0)));
        assert_eq!(opcodes_for(8), None);
        // XRC_SEND: RC but ATOMIC WRITE and FLUSH.
        let xrc = opcodes_for(IBV_QPT_XRC_SEND).unwrap();
        for op in SendOpcode::ALL {
            let rc_only = matches!(op, SendOpcode::AtomicWrite | SendOpcode::Flush);
            assert_eq!(xrc.contains(op), !rc_only, "{op:?}");
        }
        assert_eq!(ring_errno(RingError::Full), ENOMEM);
        assert_eq!(ring_errno(RingError::InvalidIndex), EIO);
    }

    fn bind(mw_type: c_int, mr: Option<MrView>, length: u64) -> BindRequest {
        BindRequest {
            mw: Some(MwView {
                same_context: true,
                rkey: 0x100,
                mw_type,
            }),
            rkey: 0x101,
            mr,
            addr: 0x1000,
            length,
            access: 2,
        }
    }

    #[test]
    fn bind_fields_and_refusals() {
        let mr = Some(MrView {
            same_context: true,
            lkey: 7,
        });
        let mut h = SendWqe::new(1, SendOpcode::BindMw);
        encode_bind(&mut h, &bind(IBV_MW_TYPE_2, mr, 64)).unwrap();
        assert_eq!(
            (
                h.imm_or_inv,
                h.rkey,
                h.remote_addr,
                h.compare_add,
                h.remote_qpn,
                h.remote_qkey,
                h.ah
            ),
            (0x100, 0x101, 0x1000, 64, 7, 2, BIND_TYPE2)
        );
        // A type-1 unbind: no region, no length.
        encode_bind(&mut h, &bind(IBV_MW_TYPE_1, None, 0)).unwrap();
        assert_eq!((h.remote_qpn, h.ah), (0, BIND_TYPE1));
        for b in [
            bind(IBV_MW_TYPE_1, None, 1),
            bind(IBV_MW_TYPE_2, None, 0),
            bind(3, mr, 64),
            bind(
                IBV_MW_TYPE_2,
                Some(MrView {
                    same_context: false,
                    lkey: 7,
                }),
                64,
            ),
            BindRequest {
                mw: None,
                ..bind(IBV_MW_TYPE_2, mr, 64)
            },
            BindRequest {
                mw: Some(MwView {
                    same_context: false,
                    rkey: 0,
                    mw_type: IBV_MW_TYPE_2,
                }),
                ..bind(IBV_MW_TYPE_2, mr, 64)
            },
        ] {
            assert_eq!(encode_bind(&mut h, &b), Err(EINVAL), "{b:?}");
        }
    }

    #[test]
    fn xrc_srqn_goes_to_remote_qpn() {
        let xrc = QpInfo {
            xrc: true,
            ..QpInfo::NONE
        };
        let mut h = SendWqe::new(1, SendOpcode::Send);
        set_xrc_srqn(&xrc, &mut h, Some(0x00AB_CDEF)).unwrap();
        assert_eq!(h.remote_qpn, 0x00AB_CDEF);
        assert_eq!(set_xrc_srqn(&xrc, &mut h, None), Err(EINVAL));
        assert_eq!(set_xrc_srqn(&xrc, &mut h, Some(MAX_QPN + 1)), Err(EINVAL));
        // A bind keeps its lkey; a QP that is not XRC ignores the number.
        let mut b = SendWqe::new(1, SendOpcode::BindMw);
        b.remote_qpn = 7;
        set_xrc_srqn(&xrc, &mut b, None).unwrap();
        let mut s = SendWqe::new(1, SendOpcode::Send);
        set_xrc_srqn(&QpInfo::NONE, &mut s, Some(5)).unwrap();
        assert_eq!((b.remote_qpn, s.remote_qpn), (7, 0));
    }

    fn init_attr(qp_type: c_int, comp_mask: u32) -> IbvQpInitAttrEx {
        IbvQpInitAttrEx {
            qp_context: core::ptr::null_mut(),
            send_cq: core::ptr::null_mut(),
            recv_cq: core::ptr::null_mut(),
            srq: core::ptr::null_mut(),
            cap: IbvQpCap::default(),
            qp_type,
            sq_sig_all: 0,
            comp_mask,
            pd: core::ptr::NonNull::dangling().as_ptr(),
            xrcd: core::ptr::NonNull::dangling().as_ptr(),
            create_flags: 0,
            max_tso_header: 0,
            rwq_ind_tbl: core::ptr::null_mut(),
            rx_hash_conf: [0; 3],
            source_qpn: 0,
            send_ops_flags: 0,
        }
    }

    #[test]
    fn xrc_init_and_open_attrs() {
        let pd = IBV_QP_INIT_ATTR_PD;
        let xrcd = IBV_QP_INIT_ATTR_XRCD;
        let ops = IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
        assert_eq!(
            check_qp_init_attr_ex(&init_attr(IBV_QPT_XRC_SEND, pd)),
            Ok(())
        );
        assert_eq!(
            check_qp_init_attr_ex(&init_attr(IBV_QPT_XRC_RECV, xrcd)),
            Ok(())
        );
        assert_eq!(
            check_qp_init_attr_ex(&init_attr(IBV_QPT_XRC_RECV, pd)),
            Err(EINVAL)
        );
        assert_eq!(
            check_qp_init_attr_ex(&init_attr(IBV_QPT_XRC_SEND, xrcd)),
            Err(EINVAL)
        );
        let no_xrcd = IbvQpInitAttrEx {
            xrcd: core::ptr::null_mut(),
            ..init_attr(IBV_QPT_XRC_RECV, xrcd)
        };
        assert_eq!(check_qp_init_attr_ex(&no_xrcd), Err(EINVAL));
        // The work-request API: RC's operations but ATOMIC WRITE; none on
        // the target.
        let with_ops = |t, flags| IbvQpInitAttrEx {
            send_ops_flags: flags,
            ..init_attr(t, pd | xrcd | ops)
        };
        let xrc_ops = ex::send_ops_supported(OpcodeSet::XRC);
        assert_eq!(xrc_ops & IBV_QP_EX_WITH_ATOMIC_WRITE, 0);
        assert_ne!(xrc_ops & IBV_QP_EX_WITH_RDMA_READ, 0);
        assert_eq!(
            check_qp_init_attr_ex(&with_ops(IBV_QPT_XRC_SEND, xrc_ops)),
            Ok(())
        );
        assert_eq!(
            check_qp_init_attr_ex(&with_ops(IBV_QPT_XRC_SEND, IBV_QP_EX_WITH_ATOMIC_WRITE)),
            Err(EOPNOTSUPP)
        );
        assert_eq!(
            check_qp_init_attr_ex(&with_ops(IBV_QPT_XRC_RECV, IBV_QP_EX_WITH_SEND)),
            Err(EOPNOTSUPP)
        );

        let all = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
        let open = |comp_mask, qp_type| IbvQpOpenAttr {
            comp_mask,
            qp_num: 1,
            xrcd: core::ptr::NonNull::dangling().as_ptr(),
            qp_context: core::ptr::null_mut(),
            qp_type,
        };
        assert_eq!(check_qp_open_attr(&open(all, IBV_QPT_XRC_RECV)), Ok(()));
        assert_eq!(
            check_qp_open_attr(&open(all | IBV_QP_OPEN_ATTR_CONTEXT, IBV_QPT_XRC_RECV)),
            Ok(())
        );
        assert_eq!(check_qp_open_attr(&open(all, IBV_QPT_RC)), Err(EINVAL));
        assert_eq!(
            check_qp_open_attr(&open(all & !IBV_QP_OPEN_ATTR_NUM, IBV_QPT_XRC_RECV)),
            Err(EINVAL)
        );
        assert_eq!(
            check_qp_open_attr(&open(all | 1 << 4, IBV_QPT_XRC_RECV)),
            Err(EOPNOTSUPP)
        );
    }

    #[test]
    fn mw_keys_count_in_the_low_byte() {
        assert_eq!(next_mw_rkey(0x1234_56ff), 0x1234_5600);
        assert_eq!(next_mw_rkey(0x1234_5601), 0x1234_5602);
    }

    #[test]
    fn sge_count_is_limited() {
        let mut out = BufVec::with_capacity(2, &Source::Heap).unwrap();
        let two = [IbvSge::default(); 2];
        assert_eq!(gather_sges(&two, 1, &mut out), Err(EINVAL));
        gather_sges(&two, 2, &mut out).unwrap();
        assert_eq!(out.len(), 2);
        // Never more than the buffer holds, whatever `max` says.
        let mut one = BufVec::with_capacity(1, &Source::Heap).unwrap();
        assert_eq!(gather_sges(&two, 2, &mut one), Err(EINVAL));
    }
}
