// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Queue pairs (RC, UC, UD): the kernel creates them and hands out an SQ
//! and an RQ ring; the provider is the producer of both.
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
//! context, QP in a state that does not accept it), `ENOMEM` when the queue
//! is full, `EIO` once the ring is broken (the kernel published an
//! impossible consumer index).

use core::ffi::{c_int, c_void};
use core::mem::{offset_of, size_of};
use core::ptr;
use std::sync::{Mutex, MutexGuard, PoisonError};

use core::sync::atomic::{fence, Ordering};
use rroce_proto::abi::{CreateQpCmd, CreateQpResp};
use rroce_proto::ring::{
    Producer, RingError, RingLayout, SharedRegion, CONS_FLAGS_OFFSET, CONS_FLUSHING, CONS_POLLING,
};
use rroce_proto::wqe::{
    decode_recv, decode_send, recv_max_sge, send_caps, write_recv_wqe, write_send_wqe, OpcodeSet,
    RecvLimits, SendLimits, SendOpcode, SendPayload, SendWqe, Sge, BIND_TYPE1, BIND_TYPE2,
    MAX_MSG_SIZE, SEND_FLAGS_ALL, WQE_ALIGN,
};

use crate::ffi::*;
use crate::mapping::RingMap;
use crate::mr::ah_num_of;
use crate::{last_errno, set_errno, warn};

#[path = "qp_ex.rs"]
mod ex;
use ex::Batch;

/// The producer side of an SQ or RQ ring plus scratch space.
pub(crate) struct WorkQueue {
    pub(crate) map: RingMap,
    pub(crate) producer: Producer,
    /// One entry, built and validated here before it is copied.
    staging: Vec<u8>,
    /// SGEs of the request being encoded.
    sges: Vec<Sge>,
    /// Inline data of the request being encoded (SQ only).
    inline: Vec<u8>,
    /// The work-request API's batch (SQ of a QP made with
    /// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` only).
    batch: Batch,
}

impl WorkQueue {
    pub(crate) fn new(map: RingMap, producer: Producer, max_sge: u16, max_inline: u32) -> Self {
        let entry = map.layout().entry_size() as usize;
        Self {
            map,
            producer,
            staging: vec![0; entry],
            sges: Vec::with_capacity(usize::from(max_sge)),
            inline: Vec::with_capacity(max_inline as usize),
            batch: Batch::default(),
        }
    }
}

/// What the QP accepts; fixed at creation.
#[derive(Clone, Copy, Debug)]
struct QpInfo {
    send: SendLimits,
    recv: RecvLimits,
    sq_entries: u32,
    rq_entries: u32,
}

/// Provider QP; libibverbs sees only `vqp` (its `ibv_qp`, and its
/// `ibv_qp_ex` for a QP with the work-request API).
#[repr(C)]
pub(crate) struct RroceQp {
    vqp: VerbsQp,
    info: QpInfo,
    sq: Mutex<Option<WorkQueue>>,
    /// `None` for a QP attached to an SRQ.
    rq: Mutex<Option<WorkQueue>>,
}
const _: () = assert!(offset_of!(RroceQp, vqp) == 0);
const _: () = assert!(offset_of!(VerbsQp, qp_ex) == 0);
const _: () = assert!(offset_of!(IbvQpEx, qp_base) == 0);

/// Maps a ring error of a producer to the errno of a post verb.
pub(crate) fn ring_errno(e: RingError) -> c_int {
    match e {
        RingError::Full => ENOMEM,
        _ => EIO,
    }
}

/// Opcodes allowed on a QP type, `None` for types the provider lacks.
fn opcodes_for(qp_type: c_int) -> Option<OpcodeSet> {
    match qp_type {
        IBV_QPT_RC => Some(OpcodeSet::RC),
        IBV_QPT_UC => Some(OpcodeSet::UC),
        IBV_QPT_UD => Some(OpcodeSet::UD),
        _ => None,
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
    let rq_layout = if has_srq {
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
            max_sge: if has_srq { 0 } else { max_recv_sge },
            max_msg_size: MAX_MSG_SIZE,
        },
        sq_entries: drv.sq_entries,
        rq_entries: if has_srq { 0 } else { drv.rq_entries },
    };

    let attach = |offset: u64, bytes: u32, layout: RingLayout| {
        let map = RingMap::map(cmd_fd, offset, bytes, layout)
            .map_err(|e| (e, "mapping a ring failed"))?;
        let producer = Producer::attach(layout, &map.region())
            .map_err(|_| proto("ring header is inconsistent"))?;
        Ok::<_, (c_int, &'static str)>((map, producer))
    };
    let (map, producer) = attach(drv.sq_offset, drv.sq_bytes, sq_layout)?;
    let sq = WorkQueue::new(map, producer, max_send_sge, drv.max_inline);
    let rq = match rq_layout {
        Some(l) => {
            let (map, producer) = attach(drv.rq_offset, drv.rq_bytes, l)?;
            Some(WorkQueue::new(map, producer, max_recv_sge, 0))
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

/// Creates a QP: allocates the provider QP, lets `create` send the
/// CREATE_QP command (with rroce's driver data in `cmd`/`resp`), checks
/// the response and maps the rings.  On success `(*qp).info` and the rings
/// are set; on failure the kernel QP (if any) is destroyed again and the
/// errno value is returned.
///
/// # Safety
///
/// `pd` must be a live PD of ours; `create` must create the kernel QP for
/// the given `ibv_qp`/`verbs_qp` (it stays at its address for the QP's
/// life: it is the kernel's user_handle) or fail.
unsafe fn create_qp_common(
    pd: *mut IbvPd,
    requested: &IbvQpCap,
    qp_type: c_int,
    has_srq: bool,
    create: impl FnOnce(*mut VerbsQp, &mut RroceCreateQpCmd, &mut RroceCreateQpResp) -> c_int,
) -> Result<*mut RroceQp, c_int> {
    if opcodes_for(qp_type).is_none() {
        return Err(EOPNOTSUPP);
    }
    let qp = Box::into_raw(Box::new(RroceQp {
        // SAFETY: VerbsQp consists of pointers, integers, byte blobs and
        // optional function pointers, for all of which zero is valid (and
        // `comp_mask` 0 means "no qp_ex"); libibverbs initialises the
        // ibv_qp part.
        vqp: unsafe { core::mem::zeroed() },
        info: QpInfo {
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
        },
        sq: Mutex::new(None),
        rq: Mutex::new(None),
    }));
    // SAFETY: `qp` is a fresh allocation owned here.
    let vqp = unsafe { &raw mut (*qp).vqp };
    let ibqp = vqp.cast::<IbvQp>();

    let mut cmd = RroceCreateQpCmd::default();
    debug_assert!(cmd.drv == CreateQpCmd::default());
    let mut resp = RroceCreateQpResp::default();
    let ret = create(vqp, &mut cmd, &mut resp);
    if ret != 0 {
        // SAFETY: never handed out.
        drop(unsafe { Box::from_raw(qp) });
        return Err(crate::errno_of(ret));
    }

    // SAFETY: `pd` is valid and belongs to a live context.
    let cmd_fd = unsafe { (*(*pd).context).cmd_fd };
    // libibverbs sets `qp_num` on both the write and the ioctl path (the
    // core part of `resp` is only written on the former).
    // SAFETY: `ibqp` was filled by the create command.
    let core_qpn = unsafe { (*ibqp).qp_num };
    let mapped = if resp.drv.qpn == core_qpn {
        map_qp_rings(cmd_fd, &resp.drv, requested, qp_type, has_srq)
    } else {
        Err((EPROTO, "QP numbers of core and driver response differ"))
    };
    match mapped {
        Ok((info, sq, rq)) => {
            // SAFETY: still exclusively owned.
            unsafe {
                (*qp).info = info;
                *(*qp).sq.get_mut().unwrap_or_else(PoisonError::into_inner) = Some(sq);
                *(*qp).rq.get_mut().unwrap_or_else(PoisonError::into_inner) = rq;
            }
            Ok(qp)
        }
        Err((err, why)) => {
            warn(format_args!("create_qp: {why} (qpn {})", resp.drv.qpn));
            // SAFETY: the kernel QP exists and nobody else knows `ibqp`.
            let _ = unsafe { ibv_cmd_destroy_qp(ibqp) };
            // SAFETY: never handed out.
            drop(unsafe { Box::from_raw(qp) });
            Err(err)
        }
    }
}

/// `verbs_context_ops::create_qp`: NULL with errno set on failure
/// (`EOPNOTSUPP` for QP types other than RC/UC/UD, `EPROTO` if the
/// kernel's response breaks the rroce ABI).  On success `attr->cap` holds
/// the capacities the QP really has.
///
/// # Safety
///
/// Called by libibverbs with a PD of ours and a valid `attr`.
pub(crate) unsafe extern "C" fn rroce_create_qp(
    pd: *mut IbvPd,
    attr: *mut IbvQpInitAttr,
) -> *mut IbvQp {
    if pd.is_null() || attr.is_null() {
        set_errno(EINVAL);
        return ptr::null_mut();
    }
    // SAFETY: `attr` is valid per the contract.
    let (qp_type, requested, has_srq) =
        unsafe { ((*attr).qp_type, (*attr).cap, !(*attr).srq.is_null()) };
    let create = |vqp: *mut VerbsQp, cmd: &mut RroceCreateQpCmd, resp: &mut RroceCreateQpResp| {
        // SAFETY: `pd` and `attr` are valid per the contract; `vqp` is the
        // new QP; `cmd`/`resp` are live buffers of the sizes passed.
        unsafe {
            ibv_cmd_create_qp(
                pd,
                vqp.cast::<IbvQp>(),
                attr,
                &raw mut cmd.core,
                size_of::<RroceCreateQpCmd>(),
                &raw mut resp.core,
                size_of::<RroceCreateQpResp>(),
            )
        }
    };
    // SAFETY: `pd` is ours; `create` makes the kernel QP for `vqp`.
    match unsafe { create_qp_common(pd, &requested, qp_type, has_srq, create) } {
        Ok(qp) => {
            // SAFETY: `qp` is ours and live, `attr` valid.
            unsafe {
                (*attr).cap = real_caps(&(*qp).info, &(*attr).cap);
                &raw mut (*qp).vqp.qp_ex.qp_base
            }
        }
        Err(e) => {
            set_errno(e);
            ptr::null_mut()
        }
    }
}

/// `ibv_qp_init_attr_ex.comp_mask` bits `create_qp_ex` understands.
const QP_INIT_ATTR_SUPPORTED: u32 =
    IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;

/// Checks the attributes of `ibv_create_qp_ex`: `EOPNOTSUPP` for what
/// rroce lacks (XRC, TSO, RSS, creation flags, send operations the QP type
/// does not have), `EINVAL` without a PD.
fn check_qp_init_attr_ex(a: &IbvQpInitAttrEx) -> Result<(), c_int> {
    if a.comp_mask & !QP_INIT_ATTR_SUPPORTED != 0 {
        return Err(EOPNOTSUPP);
    }
    if a.comp_mask & IBV_QP_INIT_ATTR_PD == 0 || a.pd.is_null() {
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

/// `verbs_context_ops::create_qp_ex` (`ibv_create_qp_ex` with more than
/// `IBV_QP_INIT_ATTR_PD`): like [`rroce_create_qp`]; with
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` the QP also gets the work-request API
/// (`ibv_qp_to_qp_ex()`, `ibv_wr_*`) for the requested operations.
///
/// # Safety
///
/// Called by libibverbs with a context of ours and a valid `attr`.
pub(crate) unsafe extern "C" fn rroce_create_qp_ex(
    context: *mut IbvContext,
    attr: *mut IbvQpInitAttrEx,
) -> *mut IbvQp {
    if context.is_null() || attr.is_null() {
        set_errno(EINVAL);
        return ptr::null_mut();
    }
    // SAFETY: `attr` is valid per the contract; the struct is plain data.
    let a = unsafe { *attr };
    if let Err(e) = check_qp_init_attr_ex(&a) {
        set_errno(e);
        return ptr::null_mut();
    }
    // ibv_cmd_create_qp_ex takes only PD/XRCD/SEND_OPS_FLAGS; creation
    // flags are known to be 0 here.
    let mut cmd_attr = a;
    cmd_attr.comp_mask &= IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    let create = |vqp: *mut VerbsQp, cmd: &mut RroceCreateQpCmd, resp: &mut RroceCreateQpResp| {
        // SAFETY: `context` is ours, `cmd_attr` a valid local copy of the
        // caller's attributes; `vqp` is the new QP; `cmd`/`resp` are live
        // buffers of the sizes passed.
        unsafe {
            ibv_cmd_create_qp_ex(
                context,
                vqp,
                &mut cmd_attr,
                &raw mut cmd.core,
                size_of::<RroceCreateQpCmd>(),
                &raw mut resp.core,
                size_of::<RroceCreateQpResp>(),
            )
        }
    };
    // SAFETY: `a.pd` is a PD of this context per the verbs API; `create`
    // makes the kernel QP for `vqp`.
    let qp = match unsafe { create_qp_common(a.pd, &a.cap, a.qp_type, !a.srq.is_null(), create) } {
        Ok(qp) => qp,
        Err(e) => {
            set_errno(e);
            return ptr::null_mut();
        }
    };
    // SAFETY: `qp` is ours, live and not yet handed out; `attr` is valid.
    unsafe {
        (*attr).cap = real_caps(&(*qp).info, &cmd_attr.cap);
        if a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 {
            ex::install(&mut (*qp).vqp, a.send_ops_flags);
        }
        &raw mut (*qp).vqp.qp_ex.qp_base
    }
}

/// `verbs_context_ops::modify_qp` (a MODIFY_QP command).
///
/// # Safety
///
/// Called by libibverbs with a live QP of ours and a valid `attr`.
pub(crate) unsafe extern "C" fn rroce_modify_qp(
    qp: *mut IbvQp,
    attr: *mut IbvQpAttr,
    attr_mask: c_int,
) -> c_int {
    if qp.is_null() || attr.is_null() {
        return EINVAL;
    }
    let mut cmd = IbvModifyQp::default();
    // SAFETY: pointers valid per the contract; `cmd` is a live local of the
    // size passed.
    let ret = unsafe { ibv_cmd_modify_qp(qp, attr, attr_mask, &mut cmd, size_of::<IbvModifyQp>()) };
    // SAFETY: `attr` is a `struct ibv_qp_attr`, whose `qp_state` (an
    // enum) is at QP_ATTR_STATE_OFFSET, checked against the C header.
    let state = unsafe { attr.byte_add(QP_ATTR_STATE_OFFSET).cast::<c_int>().read() };
    if ret == 0 && attr_mask & IBV_QP_STATE != 0 && state == IBV_QPS_RESET {
        // SAFETY: `qp` is live; its CQs are ours and outlive it.
        unsafe {
            let (scq, rcq, qpn) = ((*qp).send_cq, (*qp).recv_cq, (*qp).qp_num);
            crate::cq::purge_qp(scq, qpn);
            if rcq != scq {
                crate::cq::purge_qp(rcq, qpn);
            }
        }
    }
    ret
}

/// `verbs_context_ops::query_qp` (a QUERY_QP command); the capacities are
/// reported as the provider enforces them.
///
/// # Safety
///
/// Called by libibverbs with a live QP of ours, valid `attr`/`init_attr`.
pub(crate) unsafe extern "C" fn rroce_query_qp(
    qp: *mut IbvQp,
    attr: *mut IbvQpAttr,
    attr_mask: c_int,
    init_attr: *mut IbvQpInitAttr,
) -> c_int {
    if qp.is_null() || attr.is_null() || init_attr.is_null() {
        return EINVAL;
    }
    let mut cmd = IbvQueryQp::default();
    // SAFETY: pointers valid per the contract; `cmd` is a live local.
    let ret = unsafe {
        ibv_cmd_query_qp(
            qp,
            attr,
            attr_mask,
            init_attr,
            &mut cmd,
            size_of::<IbvQueryQp>(),
        )
    };
    if ret != 0 {
        return ret;
    }
    // SAFETY: `qp` is ours, `info` is immutable after creation; `attr` is
    // a `struct ibv_qp_attr`, whose `cap` lies at QP_ATTR_CAP_OFFSET
    // (checked against the C header) and is 4-byte aligned.
    unsafe {
        let info = (*qp.cast::<RroceQp>()).info;
        let caps = real_caps(&info, &(*init_attr).cap);
        (*init_attr).cap = caps;
        attr.byte_add(QP_ATTR_CAP_OFFSET)
            .cast::<IbvQpCap>()
            .write(caps);
    }
    0
}

/// `verbs_context_ops::destroy_qp`: 0 or an errno value.
///
/// # Safety
///
/// `qp` must be NULL or a QP of ours that is not used once this returns 0.
pub(crate) unsafe extern "C" fn rroce_destroy_qp(qp: *mut IbvQp) -> c_int {
    if qp.is_null() {
        return EINVAL;
    }
    // SAFETY: `qp` is a live QP of ours.
    let ret = unsafe { ibv_cmd_destroy_qp(qp) };
    if ret != 0 {
        return ret;
    }
    // SAFETY: the kernel object is gone and the caller gives up `qp`, which
    // came from Box::into_raw in rroce_create_qp; dropping unmaps the rings.
    drop(unsafe { Box::from_raw(qp.cast::<RroceQp>()) });
    0
}

/// The doorbell: a legacy POST_SEND command with no work requests, which
/// tells the kernel that the SQ of `qp_handle` has new WQEs.
///
/// The 32 bytes written are `ib_uverbs_cmd_hdr { command = 28, in_words =
/// 8, out_words = 1 }` followed by `ib_uverbs_post_send { response =
/// &resp, qp_handle, wr_count = 0, sge_count = 0, wqe_size = 128 }`.
pub(crate) fn doorbell_cmd(qp_handle: u32, resp: *mut IbUverbsPostSendResp) -> IbvPostSend {
    IbvPostSend {
        hdr: IbUverbsCmdHdr {
            command: IB_USER_VERBS_CMD_POST_SEND,
            in_words: (size_of::<IbvPostSend>() / 4) as u16,
            out_words: (size_of::<IbUverbsPostSendResp>() / 4) as u16,
        },
        response: resp.addr() as u64,
        qp_handle,
        wr_count: 0,
        sge_count: 0,
        wqe_size: size_of::<IbvSendWr>() as u32,
    }
}

/// Writes the doorbell of `qp_handle` to `cmd_fd`; 0 or an errno value.
fn ring_doorbell(cmd_fd: c_int, qp_handle: u32) -> c_int {
    let mut resp = IbUverbsPostSendResp::default();
    let cmd = doorbell_cmd(qp_handle, &raw mut resp);
    // SAFETY: `cmd` is a live local of the size passed; the kernel writes
    // at most `out_words * 4` bytes to `resp`, which outlives the call.
    let n = unsafe {
        write(
            cmd_fd,
            (&raw const cmd).cast::<c_void>(),
            size_of::<IbvPostSend>(),
        )
    };
    match usize::try_from(n) {
        Ok(len) if len == size_of::<IbvPostSend>() => 0,
        Ok(_) => EIO,
        Err(_) => last_errno(),
    }
}

/// Collects the SGEs of a work request into `out`.
///
/// # Safety
///
/// `sg_list` must point to `num_sge` valid `ibv_sge`s when `num_sge > 0`.
unsafe fn gather_sges(
    sg_list: *const IbvSge,
    num_sge: c_int,
    max: u16,
    out: &mut Vec<Sge>,
) -> Result<(), c_int> {
    out.clear();
    let n = usize::try_from(num_sge).map_err(|_| EINVAL)?;
    if n > usize::from(max) || (n > 0 && sg_list.is_null()) {
        return Err(EINVAL);
    }
    if n == 0 {
        return Ok(());
    }
    // SAFETY: per the contract (the verbs API's), `sg_list` holds `n` SGEs.
    let list = unsafe { core::slice::from_raw_parts(sg_list, n) };
    out.extend(list.iter().map(|s| Sge {
        addr: s.addr,
        length: s.length,
        lkey: s.lkey,
    }));
    Ok(())
}

/// Copies the data the SGEs point at into `out` (inline sends).
///
/// # Safety
///
/// Each SGE must describe readable memory of the application, as the verbs
/// API requires for `IBV_SEND_INLINE`.
unsafe fn gather_inline(sges: &[Sge], max: u32, out: &mut Vec<u8>) -> Result<(), c_int> {
    out.clear();
    let mut total: u64 = 0;
    for s in sges {
        total += u64::from(s.length);
        if total > u64::from(max) {
            return Err(EINVAL);
        }
    }
    for s in sges.iter().filter(|s| s.length > 0) {
        let addr = usize::try_from(s.addr).map_err(|_| EINVAL)?;
        if addr == 0 {
            return Err(EINVAL);
        }
        // SAFETY: per the contract the application's buffer is readable.
        let data = unsafe {
            core::slice::from_raw_parts(ptr::with_exposed_provenance::<u8>(addr), s.length as usize)
        };
        out.extend_from_slice(data);
    }
    Ok(())
}

/// The opcode of a request if the QP accepts it with `send_flags`.
fn check_send(info: &QpInfo, opcode: c_int, send_flags: u32) -> Result<SendOpcode, c_int> {
    let op = u8::try_from(opcode)
        .ok()
        .and_then(SendOpcode::from_u8)
        .ok_or(EINVAL)?;
    if !info.send.opcodes.contains(op) {
        return Err(EINVAL);
    }
    if send_flags & !u32::from(SEND_FLAGS_ALL) != 0 {
        return Err(EINVAL);
    }
    Ok(op)
}

/// Fills the BIND_MW fields of `hdr` (see `proto::wqe`): binding `mw` of
/// `ctx` under the new key `rkey` as `info` says.  The window's type goes
/// along (a type-1 window bound through `post_send` is bound as
/// `ibv_bind_mw` would); a zero-length type-1 bind without a region
/// unbinds.  The kernel checks the rest and completes a bad bind with
/// `IBV_WC_MW_BIND_ERR`.
///
/// # Safety
///
/// `mw` must be NULL or a live window; `info.mr` NULL or a live region.
pub(crate) unsafe fn encode_bind(
    hdr: &mut SendWqe,
    ctx: *mut IbvContext,
    mw: *mut IbvMw,
    rkey: u32,
    info: &IbvMwBindInfo,
) -> Result<(), c_int> {
    if mw.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: a live window per the contract.
    let (mw_ctx, mw_rkey, mw_type) = unsafe { ((*mw).context, (*mw).rkey, (*mw).mw_type) };
    let ty = match mw_type {
        IBV_MW_TYPE_1 => BIND_TYPE1,
        IBV_MW_TYPE_2 => BIND_TYPE2,
        _ => return Err(EINVAL),
    };
    if mw_ctx != ctx {
        return Err(EINVAL);
    }
    let lkey = if info.mr.is_null() {
        if ty != BIND_TYPE1 || info.length != 0 {
            return Err(EINVAL);
        }
        0
    } else {
        // SAFETY: a live region per the contract.
        let (mr_ctx, lkey) = unsafe { ((*info.mr).context, (*info.mr).lkey) };
        if mr_ctx != ctx {
            return Err(EINVAL);
        }
        lkey
    };
    hdr.imm_or_inv = mw_rkey;
    hdr.rkey = rkey;
    hdr.remote_addr = info.addr;
    hdr.compare_add = info.length;
    hdr.remote_qpn = lkey;
    hdr.remote_qkey = info.mw_access_flags;
    hdr.ah = ty;
    Ok(())
}

/// `verbs_context_ops::bind_mw` (`ibv_bind_mw`, type-1 windows; libibverbs
/// checked the type and the PDs): posts a BIND_MW WQE under the next key
/// (`ibv_inc_rkey`) and, once posted, gives the window that key.  0 or an
/// errno value; the bind's outcome is its completion.
///
/// # Safety
///
/// Called by libibverbs with live objects of ours.
pub(crate) unsafe extern "C" fn rroce_bind_mw(
    qp: *mut IbvQp,
    mw: *mut IbvMw,
    bind: *mut IbvMwBind,
) -> c_int {
    if qp.is_null() || mw.is_null() || bind.is_null() {
        return EINVAL;
    }
    // SAFETY: live per the contract.
    let (b, old) = unsafe { (&*bind, (*mw).rkey) };
    let new = (old & !0xff) | (old.wrapping_add(1) & 0xff);
    // SAFETY: pointers and integers, all valid as zero.
    let mut wr: IbvSendWr = unsafe { core::mem::zeroed() };
    wr.wr_id = b.wr_id;
    wr.opcode = SendOpcode::BindMw as c_int;
    wr.send_flags = b.send_flags;
    wr.bind_mw_or_tso.bind_mw = IbvSendWrBindMw {
        mw,
        rkey: new,
        bind_info: b.bind_info,
    };
    let mut bad: *mut IbvSendWr = ptr::null_mut();
    // SAFETY: a valid one-element list; `qp` is ours.
    let ret = unsafe { rroce_post_send(qp, &mut wr, &mut bad) };
    if ret == 0 {
        // SAFETY: live per the contract; the application owns the window.
        unsafe { (*mw).rkey = new };
    }
    ret
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
///
/// # Safety
///
/// `wr` must be a valid work request per the verbs API; `ctx` is the QP's
/// context.
unsafe fn post_one_send(
    info: &QpInfo,
    sq: &mut WorkQueue,
    ctx: *mut IbvContext,
    wr: &IbvSendWr,
) -> Result<(), c_int> {
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
            // SAFETY: `wr.rdma` is the active member for these opcodes; all
            // members are plain data, so reading any is defined anyway.
            let r = unsafe { wr.wr.rdma };
            hdr.remote_addr = r.remote_addr;
            hdr.rkey = r.rkey;
        }
        SendOpcode::AtomicCmpAndSwp | SendOpcode::AtomicFetchAndAdd => {
            // SAFETY: as above, `wr.atomic`.
            let a = unsafe { wr.wr.atomic };
            hdr.remote_addr = a.remote_addr;
            hdr.compare_add = a.compare_add;
            hdr.swap = a.swap;
            hdr.rkey = a.rkey;
        }
        SendOpcode::BindMw => {
            // SAFETY: as above, `bind_mw` of the second union.
            let b = unsafe { wr.bind_mw_or_tso.bind_mw };
            // SAFETY: the verbs API requires a live window (and a NULL or
            // live region) in a BIND_MW request.
            unsafe { encode_bind(&mut hdr, ctx, b.mw, b.rkey, &b.bind_info)? };
        }
        _ => {}
    }
    if info.send.ud {
        // SAFETY: as above, `wr.ud`.
        let ud = unsafe { wr.wr.ud };
        // SAFETY: a non-NULL AH is a live AH of some context per the verbs
        // API; `ah_num_of` only accepts ones of `ctx`.
        hdr.ah = unsafe { ah_num_of(ud.ah, ctx) }.ok_or(EINVAL)?;
        hdr.remote_qpn = ud.remote_qpn;
        hdr.remote_qkey = ud.remote_qkey;
    }

    // SAFETY: the verbs API requires `sg_list` to hold `num_sge` SGEs.
    unsafe { gather_sges(wr.sg_list, wr.num_sge, info.send.max_sge, &mut sq.sges)? };
    let payload = if wr.send_flags & IBV_SEND_INLINE != 0 && op.allows_inline() {
        // SAFETY: inline sends read the application's buffers.
        unsafe { gather_inline(&sq.sges, info.send.max_inline, &mut sq.inline)? };
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
    cmd_fd: c_int,
    handle: u32,
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
    match ring_doorbell(cmd_fd, handle) {
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

/// Reads `(*qp).state`, which libibverbs updates on modify/query.
///
/// # Safety
///
/// `qp` must be a live QP.
unsafe fn qp_state(qp: *mut IbvQp) -> c_int {
    // SAFETY: per the contract; a volatile read because libibverbs writes
    // the field outside our control.
    unsafe { (&raw const (*qp).state).read_volatile() }
}

/// `verbs_context_ops::post_send`: 0 or an errno value (see the module
/// documentation); rings the doorbell once if anything was posted.
///
/// # Safety
///
/// `qp` must be a live QP of ours, `wr` NULL or a valid list of work
/// requests, `bad_wr` NULL or writable.
pub(crate) unsafe extern "C" fn rroce_post_send(
    qp: *mut IbvQp,
    wr: *mut IbvSendWr,
    bad_wr: *mut *mut IbvSendWr,
) -> c_int {
    if qp.is_null() || bad_wr.is_null() {
        return EINVAL;
    }
    // SAFETY: `bad_wr` is writable.
    unsafe { *bad_wr = ptr::null_mut() };
    // SAFETY: `qp` is live; states below RTS do not accept sends.
    if unsafe { qp_state(qp) } < IBV_QPS_RTS {
        // SAFETY: as above.
        unsafe { *bad_wr = wr };
        return EINVAL;
    }
    // SAFETY: `qp` is ours; only the immutable `info` and the `sq` lock are
    // borrowed, and the handle and context never change.
    let (info, lock, ctx, handle) = unsafe {
        let r = qp.cast::<RroceQp>();
        ((*r).info, &(*r).sq, (*qp).context, (*qp).handle)
    };
    let mut guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(sq) = guard.as_mut() else {
        // SAFETY: as above.
        unsafe { *bad_wr = wr };
        return EINVAL;
    };

    let mut ret = 0;
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: `cur` is an element of the caller's valid list.
        let w = unsafe { &*cur };
        // SAFETY: `w` is a valid work request, `ctx` the QP's context.
        if let Err(e) = unsafe { post_one_send(&info, sq, ctx, w) } {
            // SAFETY: as above.
            unsafe { *bad_wr = cur };
            ret = e;
            break;
        }
        cur = w.next;
    }
    // SAFETY: `ctx` is the QP's live context.
    let cmd_fd = unsafe { (*ctx).cmd_fd };
    match publish_and_ring(guard, cmd_fd, handle) {
        Ok(()) => ret,
        Err(RingFailure::Unpublished(e)) => {
            // Nothing of this call reached the kernel.
            // SAFETY: as above.
            unsafe { *bad_wr = wr };
            e
        }
        Err(RingFailure::Doorbell(e)) => {
            if ret != 0 {
                ret
            } else {
                e
            }
        }
    }
}

/// Encodes one receive work request into the next RQ/SRQ slot
/// (unpublished).
///
/// # Safety
///
/// `wr` must be a valid work request per the verbs API.
pub(crate) unsafe fn post_one_recv(
    lim: &RecvLimits,
    rq: &mut WorkQueue,
    wr: &IbvRecvWr,
) -> Result<(), c_int> {
    // SAFETY: the verbs API requires `sg_list` to hold `num_sge` SGEs.
    unsafe { gather_sges(wr.sg_list, wr.num_sge, lim.max_sge, &mut rq.sges)? };
    let region = rq.map.region();
    if rq.producer.is_full(&region).map_err(ring_errno)? {
        return Err(ENOMEM);
    }
    let len = write_recv_wqe(&mut rq.staging, wr.wr_id, &rq.sges).map_err(|_| EINVAL)?;
    decode_recv(&rq.staging, lim).map_err(|_| EINVAL)?;
    let bytes = rq.staging.get(..len).ok_or(EINVAL)?;
    rq.producer.write_next(&region, bytes).map_err(ring_errno)
}

/// `verbs_context_ops::post_recv`: 0 or an errno value (see the module
/// documentation); no system call.
///
/// # Safety
///
/// As for [`rroce_post_send`].
pub(crate) unsafe extern "C" fn rroce_post_recv(
    qp: *mut IbvQp,
    wr: *mut IbvRecvWr,
    bad_wr: *mut *mut IbvRecvWr,
) -> c_int {
    if qp.is_null() || bad_wr.is_null() {
        return EINVAL;
    }
    // SAFETY: `bad_wr` is writable.
    unsafe { *bad_wr = ptr::null_mut() };
    // SAFETY: `qp` is live; a QP in RESET accepts no receives.
    if unsafe { qp_state(qp) } == IBV_QPS_RESET {
        // SAFETY: as above.
        unsafe { *bad_wr = wr };
        return EINVAL;
    }
    // SAFETY: as in rroce_post_send.
    let (info, lock, ctx, handle) = unsafe {
        let r = qp.cast::<RroceQp>();
        ((*r).info, &(*r).rq, (*qp).context, (*qp).handle)
    };
    let mut guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(rq) = guard.as_mut() else {
        // A QP with an SRQ has no RQ to post to.
        // SAFETY: as above.
        unsafe { *bad_wr = wr };
        return EINVAL;
    };
    let before = rq.producer.index();
    // SAFETY: per this function's contract.
    let ret = unsafe { post_recv_list(&info.recv, rq, wr, bad_wr) };
    if rq.producer.index() == before || rq.producer.pending() != 0 {
        return ret;
    }
    // Something was published: a QP in the error state flushes new
    // receives only on the doorbell.
    let flushing = consumer_hint(rq) & CONS_FLUSHING != 0;
    drop(guard);
    if !flushing {
        return ret;
    }
    // SAFETY: `ctx` is the QP's live context.
    let e = ring_doorbell(unsafe { (*ctx).cmd_fd }, handle);
    // EINVAL: the QP was reset meanwhile, which discards the receives.
    if ret == 0 && e != EINVAL {
        e
    } else {
        ret
    }
}

/// Writes the receive work requests of list `wr` into `rq` (a QP's RQ or
/// an SRQ, locked by the caller) and publishes them; on an error
/// `*bad_wr` is the first request not posted.
///
/// # Safety
///
/// `wr` must be NULL or a valid list of work requests and `bad_wr`
/// writable.
pub(crate) unsafe fn post_recv_list(
    lim: &RecvLimits,
    rq: &mut WorkQueue,
    wr: *mut IbvRecvWr,
    bad_wr: *mut *mut IbvRecvWr,
) -> c_int {
    let mut ret = 0;
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: `cur` is an element of the caller's valid list.
        let w = unsafe { &*cur };
        // SAFETY: `w` is a valid work request.
        if let Err(e) = unsafe { post_one_recv(lim, rq, w) } {
            // SAFETY: `bad_wr` is writable.
            unsafe { *bad_wr = cur };
            ret = e;
            break;
        }
        cur = w.next;
    }
    if rq.producer.pending() > 0 {
        let region = rq.map.region();
        if let Err(e) = rq.producer.publish(&region) {
            // SAFETY: as above.
            unsafe { *bad_wr = wr };
            return ring_errno(e);
        }
    }
    ret
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doorbell_bytes() {
        let resp = 0x1122_3344_5566_7788usize as *mut IbUverbsPostSendResp;
        let cmd = doorbell_cmd(0xabcd, resp);
        // SAFETY: IbvPostSend is 32 bytes of plain integers, no padding.
        let bytes: [u8; 32] = unsafe { core::mem::transmute(cmd) };
        let mut want = Vec::new();
        want.extend_from_slice(&28u32.to_ne_bytes());
        want.extend_from_slice(&8u16.to_ne_bytes());
        want.extend_from_slice(&1u16.to_ne_bytes());
        want.extend_from_slice(&0x1122_3344_5566_7788u64.to_ne_bytes());
        want.extend_from_slice(&0xabcdu32.to_ne_bytes());
        want.extend_from_slice(&0u32.to_ne_bytes());
        want.extend_from_slice(&0u32.to_ne_bytes());
        want.extend_from_slice(&128u32.to_ne_bytes());
        assert_eq!(bytes.to_vec(), want);
    }

    #[test]
    fn opcode_sets_and_errnos() {
        assert_eq!(opcodes_for(IBV_QPT_RC), Some(OpcodeSet::RC));
        assert_eq!(opcodes_for(IBV_QPT_UC), Some(OpcodeSet::UC));
        assert_eq!(opcodes_for(IBV_QPT_UD), Some(OpcodeSet::UD));
        assert_eq!(opcodes_for(8), None);
        assert_eq!(ring_errno(RingError::Full), ENOMEM);
        assert_eq!(ring_errno(RingError::InvalidIndex), EIO);
    }

    #[test]
    fn inline_gather_limits() {
        let data = *b"hello, world";
        let sges = [
            Sge {
                addr: data.as_ptr().addr() as u64,
                length: 5,
                lkey: 1,
            },
            Sge {
                addr: data[7..].as_ptr().addr() as u64,
                length: 5,
                lkey: 1,
            },
        ];
        let mut out = Vec::new();
        // SAFETY: both SGEs point into `data`.
        unsafe { gather_inline(&sges, 10, &mut out) }.unwrap();
        assert_eq!(out, b"helloworld");
        // SAFETY: as above (rejected before reading).
        assert_eq!(unsafe { gather_inline(&sges, 9, &mut out) }, Err(EINVAL));
        let null = [Sge {
            addr: 0,
            length: 1,
            lkey: 0,
        }];
        // SAFETY: a NULL address is rejected, not read.
        assert_eq!(unsafe { gather_inline(&null, 9, &mut out) }, Err(EINVAL));
    }
}
