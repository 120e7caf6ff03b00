// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Entry points of queue pairs (`crate::qp` has the logic): creation,
//! modify/query/destroy, and the post verbs, whose work-request lists are
//! turned into [`SendRequest`]/[`RecvRequest`] views here.

use core::ffi::c_int;
use core::mem::size_of;
use core::ptr;

use rroce_proto::wqe::SendOpcode;

use super::cq::cq_of;
use super::mr::ah_num_of;
use super::pd::{check_context, check_pd_context, domain_of};
use crate::device::errno_of;
use crate::ffi::user::sge_list;
use crate::ffi::*;
use crate::qp::{
    check_qp_init_attr_ex, check_qp_open_attr, check_qp_type, next_mw_rkey, BindRequest, Doorbell,
    MrView, MwView, PostError, RecvRequest, RroceQp, SendRequest, UdAddr,
};

/// The provider QP of `qp`.
///
/// # Safety
///
/// `qp` must be a live QP made by [`create_qp`], [`create_qp_ex`] or
/// [`open_qp`] (the
/// `ibv_qp` at the start of its `ibv_qp_ex`); the reference must not
/// outlive it.
pub(super) unsafe fn qp_of<'a>(qp: *mut IbvQp) -> &'a RroceQp {
    // SAFETY: per the contract `qp` is the `vqp` field, at offset 0, of a
    // live `RroceQp` (`verbs_qp`, `ibv_qp_ex` and `ibv_qp` all begin
    // there); the C part is an `Opaque`, so the shared reference does not
    // conflict with libibverbs writing it.
    unsafe { &*qp.cast::<RroceQp>() }
}

/// Reads `(*qp).state`, which libibverbs updates on modify/query.
///
/// # Safety
///
/// `qp` must be a live QP.
pub(super) unsafe fn qp_state(qp: *mut IbvQp) -> c_int {
    // SAFETY: per the contract; a volatile read because libibverbs writes
    // the field outside our control.
    unsafe { (&raw const (*qp).state).read_volatile() }
}

/// The doorbell of `qp`: its context's command fd and its handle, which
/// never change.
///
/// # Safety
///
/// `qp` must be a live QP of ours.
pub(super) unsafe fn doorbell_of(qp: *mut IbvQp) -> Doorbell {
    // SAFETY: per the contract; the context outlives its QPs.
    unsafe {
        Doorbell {
            cmd_fd: (*(*qp).context).cmd_fd,
            handle: (*qp).handle,
        }
    }
}

/// The view of a BIND_MW request for a QP of context `ctx`: window `mw`
/// (NULL or live), new key `rkey`, and `info` (its region NULL or live).
///
/// # Safety
///
/// `mw` must be NULL or a live window, `info.mr` NULL or a live region.
pub(super) unsafe fn bind_request(
    ctx: *mut IbvContext,
    mw: *mut IbvMw,
    rkey: u32,
    info: &IbvMwBindInfo,
) -> BindRequest {
    // The window and the region belong to the application, which may change
    // them (bind_mw, rereg_mr) from other threads: their fields are read
    // through raw places, no reference to them is formed.
    let mw = (!mw.is_null()).then(|| {
        // SAFETY: a non-NULL window is live per the contract.
        unsafe {
            MwView {
                same_context: (&raw const (*mw).context).read() == ctx,
                rkey: (&raw const (*mw).rkey).read(),
                mw_type: (&raw const (*mw).mw_type).read(),
            }
        }
    });
    let mr = (!info.mr.is_null()).then(|| {
        // SAFETY: a non-NULL region is live per the contract.
        unsafe {
            MrView {
                same_context: (&raw const (*info.mr).context).read() == ctx,
                lkey: (&raw const (*info.mr).lkey).read(),
            }
        }
    });
    BindRequest {
        mw,
        rkey,
        mr,
        addr: info.addr,
        length: info.length,
        access: info.mw_access_flags,
    }
}

/// The `ibv_send_wr` list of a `post_send` call, as [`SendRequest`]s.
///
/// Each request is read when the iterator reaches it, so nothing after
/// the first bad request is touched; within a request, its AH, window and
/// region are looked at before `crate::qp` checks the opcode and the room
/// in the SQ (the verbs API requires them to be live in any request).
///
/// # Invariants
///
/// `cur` is NULL or a valid work request of the caller's list, whose
/// memory (SGEs, inline buffers, AHs, windows, regions) stays valid for
/// `'a`; `ctx` is the QP's context.
struct SendChain<'a> {
    cur: *const IbvSendWr,
    ctx: *mut IbvContext,
    max_sge: u16,
    max_inline: u32,
    ud: bool,
    xrc: bool,
    _list: core::marker::PhantomData<&'a IbvSendWr>,
}

impl<'a> SendChain<'a> {
    /// # Safety
    ///
    /// `wr` must be NULL or a valid list of work requests per the verbs
    /// API, valid for `'a`, for a QP of context `ctx` with these limits.
    unsafe fn new(wr: *const IbvSendWr, ctx: *mut IbvContext, qp: &RroceQp) -> Self {
        // INVARIANT: per the contract.
        Self {
            cur: wr,
            ctx,
            max_sge: qp.max_send_sge(),
            max_inline: qp.max_inline(),
            ud: qp.is_ud(),
            xrc: qp.is_xrc(),
            _list: core::marker::PhantomData,
        }
    }
}

impl<'a> Iterator for SendChain<'a> {
    type Item = SendRequest<'a>;

    fn next(&mut self) -> Option<SendRequest<'a>> {
        // SAFETY: by the type invariant `cur` is NULL or valid for `'a`.
        let wr: &'a IbvSendWr = unsafe { self.cur.as_ref() }?;
        self.cur = wr.next;
        let op = u8::try_from(wr.opcode).ok().and_then(SendOpcode::from_u8);
        let mut r = SendRequest {
            wr_id: wr.wr_id,
            opcode: wr.opcode,
            send_flags: wr.send_flags,
            // Only for the opcodes that have it: the application may leave it
            // uninitialised otherwise.
            imm_data_or_inv: if op.is_some_and(|o| o.has_imm() || o.has_inv()) {
                wr.imm_data_or_inv
            } else {
                0
            },
            remote_addr: 0,
            rkey: 0,
            compare_add: 0,
            swap: 0,
            ud: None,
            xrc_srqn: self.xrc.then_some(wr.xrc_remote_srqn),
            bind: None,
            // SAFETY: the verbs API requires `sg_list` to hold `num_sge`
            // SGEs (type invariant); the count is checked first.
            sges: unsafe { sge_list(wr.sg_list, wr.num_sge, self.max_sge) },
            inline: None,
        };
        // Only the union member of the opcode is read: the others may be
        // uninitialised memory of the application.
        match op {
            Some(SendOpcode::RdmaWrite | SendOpcode::RdmaWriteWithImm | SendOpcode::RdmaRead) => {
                // SAFETY: `wr.rdma` is the member for these opcodes.
                let rdma = unsafe { wr.wr.rdma };
                r.remote_addr = rdma.remote_addr;
                r.rkey = rdma.rkey;
            }
            Some(SendOpcode::AtomicCmpAndSwp | SendOpcode::AtomicFetchAndAdd) => {
                // SAFETY: `wr.atomic` is the member for these opcodes.
                let a = unsafe { wr.wr.atomic };
                r.remote_addr = a.remote_addr;
                r.rkey = a.rkey;
                r.compare_add = a.compare_add;
                r.swap = a.swap;
            }
            Some(SendOpcode::AtomicWrite) => {
                // SAFETY: `wr.rdma` is the member for this opcode.
                let rdma = unsafe { wr.wr.rdma };
                r.remote_addr = rdma.remote_addr;
                r.rkey = rdma.rkey;
                // The 8 bytes to write: what the one SGE of 8 bytes points
                // to (as rdma-core's providers read it), copied now.
                r.sges = r.sges.and_then(|s| match s {
                    [sge] if sge.length == 8 && sge.addr != 0 => {
                        // SAFETY: the verbs API requires the SGE of a
                        // posted request to describe readable memory of
                        // the caller; no alignment is promised.
                        let v = unsafe { (sge.addr as usize as *const [u8; 8]).read_unaligned() };
                        r.compare_add = u64::from_ne_bytes(v);
                        Ok(&[][..])
                    }
                    _ => Err(EINVAL),
                });
            }
            Some(SendOpcode::BindMw) => {
                // SAFETY: `bind_mw` is the member for this opcode.
                let b = unsafe { wr.bind_mw_or_tso.bind_mw };
                // SAFETY: the verbs API requires a live window (and a NULL
                // or live region) in a BIND_MW request.
                r.bind = Some(unsafe { bind_request(self.ctx, b.mw, b.rkey, &b.bind_info) });
            }
            _ => {}
        }
        if self.ud {
            // SAFETY: `wr.ud` is the member of every request on a UD QP.
            let ud = unsafe { wr.wr.ud };
            r.ud = Some(UdAddr {
                // SAFETY: a non-NULL AH is a live AH per the verbs API.
                ah: unsafe { ah_num_of(ud.ah, self.ctx) },
                remote_qpn: ud.remote_qpn,
                remote_qkey: ud.remote_qkey,
            });
        }
        if wr.send_flags & IBV_SEND_INLINE != 0 && op.is_some_and(SendOpcode::allows_inline) {
            r.inline = Some(r.sges.and_then(|s| {
                // SAFETY: the buffers of an inline request of an opcode that
                // carries data are readable while the call runs (the verbs
                // API; type invariant).
                unsafe { InlineData::from_sges(s, self.max_inline) }
            }));
        }
        Some(r)
    }
}

/// The `ibv_recv_wr` list of a `post_recv`/`post_srq_recv` call.
///
/// # Invariants
///
/// `cur` is NULL or a valid work request of the caller's list, whose SGE
/// lists stay valid for `'a`.
pub(super) struct RecvChain<'a> {
    cur: *const IbvRecvWr,
    max_sge: u16,
    _list: core::marker::PhantomData<&'a IbvRecvWr>,
}

impl RecvChain<'_> {
    /// # Safety
    ///
    /// `wr` must be NULL or a valid list of work requests per the verbs
    /// API, valid for `'a`.
    pub(super) unsafe fn new(wr: *const IbvRecvWr, max_sge: u16) -> Self {
        // INVARIANT: per the contract.
        Self {
            cur: wr,
            max_sge,
            _list: core::marker::PhantomData,
        }
    }
}

impl<'a> Iterator for RecvChain<'a> {
    type Item = RecvRequest<'a>;

    fn next(&mut self) -> Option<RecvRequest<'a>> {
        // SAFETY: by the type invariant `cur` is NULL or valid for `'a`.
        let wr: &'a IbvRecvWr = unsafe { self.cur.as_ref() }?;
        self.cur = wr.next;
        Some(RecvRequest {
            wr_id: wr.wr_id,
            // SAFETY: the verbs API requires `sg_list` to hold `num_sge`
            // SGEs; the count is checked first.
            sges: unsafe { sge_list(wr.sg_list, wr.num_sge, self.max_sge) },
        })
    }
}

/// Stores in `*bad_wr` the request of list `wr` that `e` names (not past
/// the list's end, whatever the index says) and returns the errno value.
///
/// # Safety
///
/// `bad_wr` must be writable and `wr` NULL or a valid list.
pub(super) unsafe fn report<T: Linked>(wr: *mut T, bad_wr: *mut *mut T, e: &PostError) -> c_int {
    if let Some(i) = e.bad {
        let mut cur = wr;
        for _ in 0..i {
            if cur.is_null() {
                break;
            }
            // SAFETY: `cur` is a non-NULL element of the valid list.
            cur = unsafe { T::next(cur) };
        }
        // SAFETY: `bad_wr` is writable.
        unsafe { *bad_wr = cur };
    }
    e.err
}

/// A C work-request list.
pub(super) trait Linked {
    /// # Safety
    ///
    /// `wr` must be a valid work request.
    unsafe fn next(wr: *mut Self) -> *mut Self;
}

impl Linked for IbvSendWr {
    unsafe fn next(wr: *mut Self) -> *mut Self {
        // SAFETY: per the contract.
        unsafe { (*wr).next }
    }
}

impl Linked for IbvRecvWr {
    unsafe fn next(wr: *mut Self) -> *mut Self {
        // SAFETY: per the contract.
        unsafe { (*wr).next }
    }
}

/// Creates a QP of `context`: `create` sends CREATE_QP for the new QP's
/// `verbs_qp` (with rroce's driver data in `cmd`/`resp`); then the
/// response is checked and the rings mapped.  The QP, or an errno value
/// (the kernel QP, if any, destroyed again).
///
/// `pd` is the QP's PD, NULL for an XRC_RECV QP (whose domain is an XRC
/// domain).  A QP made on a parent domain holds it (`EBUSY` for its
/// dealloc) and takes its buffers from the parent domain's allocator, if
/// any.
///
/// # Safety
///
/// `context` must be a context of ours and `pd` NULL or a live PD of it;
/// `create` must create the kernel QP for the pointer it is given or
/// fail.
unsafe fn create_common(
    context: *mut IbvContext,
    pd: *mut IbvPd,
    requested: &IbvQpCap,
    qp_type: c_int,
    has_srq: bool,
    create: impl FnOnce(*mut VerbsQp, &mut RroceCreateQpCmd, &mut RroceCreateQpResp) -> c_int,
) -> Result<*mut RroceQp, c_int> {
    check_qp_type(qp_type)?;
    // SAFETY: `pd` is NULL or a live PD of ours.
    let domain = (!pd.is_null()).then(|| unsafe { domain_of(pd) }).flatten();
    let mut qp = Box::new(RroceQp::new(domain));
    // The box's contents stay at this address until it is freed: the
    // kernel's user_handle for the QP.
    let vqp = qp.vqp();
    let mut cmd = RroceCreateQpCmd::default();
    let mut resp = RroceCreateQpResp::default();
    let ret = create(vqp, &mut cmd, &mut resp);
    if ret != 0 {
        return Err(errno_of(ret));
    }
    // SAFETY: `context` is live; `vqp` was filled by the create command.
    let (cmd_fd, core_qpn) = unsafe { ((*context).cmd_fd, (*vqp).qp_ex.qp_base.qp_num) };
    match qp.attach(cmd_fd, &resp.drv, core_qpn, requested, qp_type, has_srq) {
        Ok(()) => Ok(Box::into_raw(qp)),
        Err(err) => {
            // SAFETY: the kernel QP exists and nobody else knows the QP.
            let _ = unsafe { ibv_cmd_destroy_qp(qp.vqp().cast::<IbvQp>()) };
            Err(err)
        }
    }
}

/// `verbs_context_ops::create_qp`: NULL with errno set on failure
/// (`EOPNOTSUPP` for QP types other than RC/UC/UD/XRC_SEND, `EPROTO` if the
/// kernel's response breaks the rroce ABI).  On success `attr->cap` holds
/// the capacities the QP really has.
///
/// # Safety
///
/// Called by libibverbs with a PD of ours and a valid `attr`.
pub(super) unsafe extern "C" fn create_qp(pd: *mut IbvPd, attr: *mut IbvQpInitAttr) -> *mut IbvQp {
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
    // SAFETY: `pd` is ours, so is its context; `create` makes the kernel
    // QP for `vqp`.
    match unsafe { create_common((*pd).context, pd, &requested, qp_type, has_srq, create) } {
        Ok(qp) => {
            // SAFETY: `qp` is ours and live, `attr` valid.
            unsafe {
                (*attr).cap = (*qp).caps(&(*attr).cap);
            }
            // `vqp` (with its `ibv_qp`) is at offset 0: the pointer keeps
            // the provenance of the whole allocation, which `qp_of` and
            // `destroy_qp` need.
            qp.cast::<IbvQp>()
        }
        Err(e) => {
            set_errno(e);
            ptr::null_mut()
        }
    }
}

/// `verbs_context_ops::create_qp_ex` (`ibv_create_qp_ex` with more than
/// `IBV_QP_INIT_ATTR_PD`): like [`create_qp`], and XRC_RECV QPs (with
/// `IBV_QP_INIT_ATTR_XRCD`, no PD, no queues: see `crate::qp`); with
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` the QP also gets the work-request API
/// (`ibv_qp_to_qp_ex()`, `ibv_wr_*`) for the requested operations.
///
/// # Safety
///
/// Called by libibverbs with a context of ours and a valid `attr`.
pub(super) unsafe extern "C" fn create_qp_ex(
    context: *mut IbvContext,
    attr: *mut IbvQpInitAttrEx,
) -> *mut IbvQp {
    if context.is_null() || attr.is_null() {
        set_errno(EINVAL);
        return ptr::null_mut();
    }
    // SAFETY: `attr` is valid per the contract; the struct is plain data.
    let a = unsafe { *attr };
    // The domain of an XRC_RECV QP is its XRC domain, its PD is not used.
    let pd = if a.qp_type == IBV_QPT_XRC_RECV {
        ptr::null_mut()
    } else {
        a.pd
    };
    let checked = check_qp_init_attr_ex(&a).and_then(|()| {
        // SAFETY: per the verbs API (and the checked `comp_mask`), `a.pd`
        // and `a.xrcd` are NULL or live.
        unsafe {
            if pd.is_null() {
                check_context(a.xrcd, context)
            } else {
                check_pd_context(pd, context)
            }
        }
    });
    if let Err(e) = checked {
        set_errno(e);
        return ptr::null_mut();
    }
    // ibv_cmd_create_qp_ex takes only PD/XRCD/SEND_OPS_FLAGS; creation
    // flags are known to be 0 here.
    let mut cmd_attr = a;
    cmd_attr.comp_mask &=
        IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
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
    // SAFETY: `context` is ours, `pd` NULL or a PD of it (checked); `create`
    // makes the kernel QP for `vqp`.
    let created =
        unsafe { create_common(context, pd, &a.cap, a.qp_type, !a.srq.is_null(), create) };
    let qp = match created {
        Ok(qp) => qp,
        Err(e) => {
            set_errno(e);
            return ptr::null_mut();
        }
    };
    // SAFETY: `qp` is ours, live and not yet handed out (so nobody else
    // accesses its C part); `attr` is valid.
    unsafe {
        (*attr).cap = (*qp).caps(&cmd_attr.cap);
        if a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0 {
            super::wr::install(&mut *qp.cast::<VerbsQp>(), a.send_ops_flags);
        }
    }
    // As in create_qp: offset 0, provenance of the whole allocation.
    qp.cast::<IbvQp>()
}

/// `verbs_context_ops::open_qp` (`ibv_open_qp`): a new handle to the
/// XRC_RECV QP `attr->qp_num` of the XRC domain `attr->xrcd` (an OPEN_QP
/// command, no driver data).  Like an XRC_RECV QP it has no queues; it is
/// modified, queried and destroyed like any QP.  NULL with errno set on
/// failure (`EINVAL` for another QP type).
///
/// # Safety
///
/// Called by libibverbs with a context of ours and a valid `attr`.
pub(super) unsafe extern "C" fn open_qp(
    context: *mut IbvContext,
    attr: *mut IbvQpOpenAttr,
) -> *mut IbvQp {
    if context.is_null() || attr.is_null() {
        set_errno(EINVAL);
        return ptr::null_mut();
    }
    const VQP_SIZE: c_int = size_of::<VerbsQp>() as c_int;
    // SAFETY: `attr` is valid per the contract; the struct is plain data.
    let a = unsafe { *attr };
    // SAFETY: with IBV_QP_OPEN_ATTR_XRCD (checked first) `a.xrcd` is NULL
    // or a live XRC domain per the verbs API.
    let checked = check_qp_open_attr(&a).and_then(|()| unsafe { check_context(a.xrcd, context) });
    if let Err(e) = checked {
        set_errno(e);
        return ptr::null_mut();
    }
    // The box's contents stay at this address until it is freed: the
    // kernel's user_handle for the QP.
    let qp = Box::new(RroceQp::new(None));
    let mut cmd = IbvOpenQp::default();
    let mut resp = IbUverbsCreateQpResp::default();
    // SAFETY: `context` and `attr` are valid per the contract; the new
    // `verbs_qp` is VQP_SIZE bytes; `cmd`/`resp` are live locals of the
    // sizes passed.
    let ret = unsafe {
        ibv_cmd_open_qp(
            context,
            qp.vqp(),
            VQP_SIZE,
            attr,
            &mut cmd,
            size_of::<IbvOpenQp>(),
            &mut resp,
            size_of::<IbUverbsCreateQpResp>(),
        )
    };
    if ret != 0 {
        set_errno(errno_of(ret));
        return ptr::null_mut();
    }
    // As in create_qp: offset 0, provenance of the whole allocation.
    Box::into_raw(qp).cast::<IbvQp>()
}

/// `verbs_context_ops::modify_qp` (a MODIFY_QP command); a QP moved to
/// RESET loses its unpolled completions.
///
/// # Safety
///
/// Called by libibverbs with a live QP of ours and a valid `attr`.
pub(super) unsafe extern "C" fn modify_qp(
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
            if !scq.is_null() {
                cq_of(scq).purge_qp(qpn);
            }
            if rcq != scq && !rcq.is_null() {
                cq_of(rcq).purge_qp(qpn);
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
pub(super) unsafe extern "C" fn query_qp(
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
    // SAFETY: `qp` is ours; `attr` is a `struct ibv_qp_attr`, whose `cap`
    // lies at QP_ATTR_CAP_OFFSET (checked against the C header) and is
    // 4-byte aligned.
    unsafe {
        let caps = qp_of(qp).caps(&(*init_attr).cap);
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
pub(super) unsafe extern "C" fn destroy_qp(qp: *mut IbvQp) -> c_int {
    if qp.is_null() {
        return EINVAL;
    }
    // SAFETY: `qp` is a live QP of ours.
    let ret = unsafe { ibv_cmd_destroy_qp(qp) };
    if ret != 0 {
        return ret;
    }
    // SAFETY: the kernel object is gone and the caller gives up `qp`, which
    // came from Box::into_raw in create_common; dropping unmaps the rings.
    drop(unsafe { Box::from_raw(qp.cast::<RroceQp>()) });
    0
}

/// `verbs_context_ops::post_send`: 0 or an errno value, `*bad_wr` the
/// first request not posted (see `crate::qp`).
///
/// # Safety
///
/// `qp` must be a live QP of ours, `wr` NULL or a valid list of work
/// requests, `bad_wr` NULL or writable.
pub(super) unsafe extern "C" fn post_send(
    qp: *mut IbvQp,
    wr: *mut IbvSendWr,
    bad_wr: *mut *mut IbvSendWr,
) -> c_int {
    if qp.is_null() || bad_wr.is_null() {
        return EINVAL;
    }
    // SAFETY: `bad_wr` is writable; `qp` is a live QP of ours.
    let (q, state, db, ctx) = unsafe {
        *bad_wr = ptr::null_mut();
        (qp_of(qp), qp_state(qp), doorbell_of(qp), (*qp).context)
    };
    // SAFETY: `wr` is a valid list for this call, of a QP of `ctx`.
    let wrs = unsafe { SendChain::new(wr, ctx, q) };
    match q.post_send(state, db, wrs) {
        Ok(()) => 0,
        // SAFETY: `e.bad` indexes the list.
        Err(e) => unsafe { report(wr, bad_wr, &e) },
    }
}

/// `verbs_context_ops::post_recv`: 0 or an errno value, `*bad_wr` the
/// first request not posted; no system call.
///
/// # Safety
///
/// As for [`post_send`].
pub(super) unsafe extern "C" fn post_recv(
    qp: *mut IbvQp,
    wr: *mut IbvRecvWr,
    bad_wr: *mut *mut IbvRecvWr,
) -> c_int {
    if qp.is_null() || bad_wr.is_null() {
        return EINVAL;
    }
    // SAFETY: `bad_wr` is writable; `qp` is a live QP of ours.
    let (q, state, db) = unsafe {
        *bad_wr = ptr::null_mut();
        (qp_of(qp), qp_state(qp), doorbell_of(qp))
    };
    // SAFETY: `wr` is a valid list for this call.
    let wrs = unsafe { RecvChain::new(wr, q.max_recv_sge()) };
    match q.post_recv(state, db, wrs) {
        Ok(()) => 0,
        // SAFETY: `e.bad` indexes the list.
        Err(e) => unsafe { report(wr, bad_wr, &e) },
    }
}

/// `verbs_context_ops::bind_mw` (`ibv_bind_mw`, type-1 windows; libibverbs
/// checked the type and the PDs): posts a BIND_MW WQE under the next key
/// and, once posted, gives the window that key.  0 or an errno value; the
/// bind's outcome is its completion.
///
/// # Safety
///
/// Called by libibverbs with live objects of ours.
pub(super) unsafe extern "C" fn bind_mw(
    qp: *mut IbvQp,
    mw: *mut IbvMw,
    bind: *mut IbvMwBind,
) -> c_int {
    if qp.is_null() || mw.is_null() || bind.is_null() {
        return EINVAL;
    }
    // SAFETY: live per the contract.
    let (q, state, db, ctx, b, old) = unsafe {
        (
            qp_of(qp),
            qp_state(qp),
            doorbell_of(qp),
            (*qp).context,
            &*bind,
            (*mw).rkey,
        )
    };
    let new = next_mw_rkey(old);
    let req = SendRequest {
        wr_id: b.wr_id,
        opcode: SendOpcode::BindMw as c_int,
        send_flags: b.send_flags,
        imm_data_or_inv: 0,
        remote_addr: 0,
        rkey: 0,
        compare_add: 0,
        swap: 0,
        ud: None,
        xrc_srqn: None,
        // SAFETY: `mw` and the bind's region are live per the contract.
        bind: Some(unsafe { bind_request(ctx, mw, new, &b.bind_info) }),
        sges: Ok(&[]),
        inline: None,
    };
    match q.post_send(state, db, [req]) {
        Ok(()) => {
            // SAFETY: live per the contract; the application owns the window.
            unsafe { (*mw).rkey = new };
            0
        }
        Err(e) => e.err,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_names_the_bad_request_and_never_walks_past_the_end() {
        let mut second = IbvRecvWr {
            wr_id: 2,
            next: ptr::null_mut(),
            sg_list: ptr::null_mut(),
            num_sge: 0,
        };
        let mut first = IbvRecvWr {
            wr_id: 1,
            next: &raw mut second,
            sg_list: ptr::null_mut(),
            num_sge: 0,
        };
        let list = &raw mut first;
        let mut bad: *mut IbvRecvWr = ptr::null_mut();
        let at = |i| PostError {
            bad: Some(i),
            err: 7,
        };
        // SAFETY: `list` is a valid two-element list, `bad` writable.
        unsafe {
            assert_eq!(report(list, &mut bad, &at(1)), 7);
            assert_eq!(bad, &raw mut second);
            assert_eq!(report(list, &mut bad, &at(0)), 7);
            assert_eq!(bad, list);
            // An index past the end stops at the end (NULL).
            report(list, &mut bad, &at(5));
            assert!(bad.is_null());
            // All posted, the doorbell failed: `*bad_wr` stays as it was.
            bad = list;
            report(list, &mut bad, &PostError { bad: None, err: 5 });
            assert_eq!(bad, list);
        }
    }
}
