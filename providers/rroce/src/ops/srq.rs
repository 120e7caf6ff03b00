// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Entry points of shared receive queues (`crate::srq` has the logic).

use core::ffi::c_int;
use core::mem::size_of;
use core::ptr;

use super::pd::{check_context, check_pd_context, domain_of};
use super::qp::{report, RecvChain};
use crate::device::errno_of;
use crate::ffi::*;
use crate::srq::{check_srq_init_attr_ex, RroceSrq};

/// The provider SRQ of `srq`.
///
/// # Safety
///
/// `srq` must be a live SRQ made by [`create_srq`] or [`create_srq_ex`];
/// the reference must not outlive it.
unsafe fn srq_of<'a>(srq: *mut IbvSrq) -> &'a RroceSrq {
    // SAFETY: per the contract `srq` is the `ibv_srq` at offset 0 of the
    // `vsrq` field, at offset 0, of a live `RroceSrq`, whose C part is an
    // `Opaque`.
    unsafe { &*srq.cast::<RroceSrq>() }
}

/// Creates an SRQ on `pd`: `create` sends CREATE_SRQ/CREATE_XSRQ for the
/// new SRQ's `verbs_srq` (with rroce's driver data, the response in
/// `resp`); then the response is checked and the ring mapped, and `attr`
/// gets the capacities the SRQ really has.  The SRQ, or an errno value
/// (the kernel SRQ, if any, destroyed again).
///
/// # Safety
///
/// `pd` must be a live PD of ours, `attr` valid and writable; `create`
/// must create the kernel SRQ for the pointer it is given or fail.
unsafe fn create_common(
    pd: *mut IbvPd,
    attr: *mut IbvSrqAttr,
    create: impl FnOnce(*mut VerbsSrq, &mut RroceCreateSrqResp) -> c_int,
) -> Result<*mut IbvSrq, c_int> {
    // SAFETY: `attr` is valid per the contract.
    let requested = unsafe { *attr };
    // SAFETY: `pd` is a live PD of ours.  On a parent domain the SRQ holds
    // it and takes its buffers from its allocator, if any.
    let mut s = Box::new(RroceSrq::new(unsafe { domain_of(pd) }));
    // The box's contents stay at this address until it is freed: the
    // kernel's user_handle for the SRQ.
    let vsrq = s.vsrq();
    let mut resp = RroceCreateSrqResp::default();
    let ret = create(vsrq, &mut resp);
    if ret != 0 {
        return Err(errno_of(ret));
    }
    // SAFETY: `pd` is valid and belongs to a live context; `vsrq` was
    // filled by the create command (its tail for an XRC SRQ only).
    let (cmd_fd, core_srqn) = unsafe {
        (
            (*(*pd).context).cmd_fd,
            ((*vsrq).srq_type == IBV_SRQT_XRC).then(|| (*vsrq).srq_num),
        )
    };
    match s.attach(cmd_fd, &resp.drv, core_srqn, &requested) {
        Ok(real) => {
            // SAFETY: `attr` is valid per the contract.
            unsafe {
                (*attr).max_wr = real.max_wr;
                (*attr).max_sge = real.max_sge;
            }
            // `vsrq` (with its `ibv_srq`) is at offset 0: the pointer keeps
            // the provenance of the whole allocation.
            Ok(Box::into_raw(s).cast::<IbvSrq>())
        }
        Err(err) => {
            // SAFETY: the kernel SRQ exists and nobody else knows the SRQ.
            let _ = unsafe { ibv_cmd_destroy_srq(s.ibv()) };
            Err(err)
        }
    }
}

/// NULL with errno set for an error of [`create_common`].
fn srq_or_errno(r: Result<*mut IbvSrq, c_int>) -> *mut IbvSrq {
    r.unwrap_or_else(|e| {
        set_errno(e);
        ptr::null_mut()
    })
}

/// `verbs_context_ops::create_srq`: NULL with errno set on failure
/// (`EPROTO` if the kernel's response breaks the rroce ABI).  On success
/// `attr->attr` holds the capacities the SRQ really has.
///
/// # Safety
///
/// Called by libibverbs with a PD of ours and a valid `attr`.
pub(super) unsafe extern "C" fn create_srq(
    pd: *mut IbvPd,
    attr: *mut IbvSrqInitAttr,
) -> *mut IbvSrq {
    if pd.is_null() || attr.is_null() {
        set_errno(EINVAL);
        return ptr::null_mut();
    }
    let create = move |vsrq: *mut VerbsSrq, resp: &mut RroceCreateSrqResp| {
        let mut cmd = RroceCreateSrqCmd::default();
        // SAFETY: `pd` and `attr` are valid per the contract; `vsrq` is the
        // new SRQ; `cmd`/`resp` are live buffers of the sizes passed.
        unsafe {
            ibv_cmd_create_srq(
                pd,
                vsrq.cast::<IbvSrq>(),
                attr,
                &raw mut cmd.core,
                size_of::<RroceCreateSrqCmd>(),
                &raw mut resp.core,
                size_of::<RroceCreateSrqResp>(),
            )
        }
    };
    // SAFETY: `pd` is ours, `attr` valid; `create` makes the kernel SRQ.
    srq_or_errno(unsafe { create_common(pd, &raw mut (*attr).attr, create) })
}

/// `verbs_context_ops::create_srq_ex` (`ibv_create_srq_ex` with more than
/// a PD and the basic type): a basic or an XRC SRQ (see `crate::srq`),
/// with the same driver data as [`create_srq`].  NULL with errno set on
/// failure (`EOPNOTSUPP` for tag matching); on success `attr->attr` holds
/// the capacities the SRQ really has.
///
/// # Safety
///
/// Called by libibverbs with a context of ours and a valid `attr`.
pub(super) unsafe extern "C" fn create_srq_ex(
    context: *mut IbvContext,
    attr: *mut IbvSrqInitAttrEx,
) -> *mut IbvSrq {
    if context.is_null() || attr.is_null() {
        set_errno(EINVAL);
        return ptr::null_mut();
    }
    // SAFETY: `attr` is valid per the contract; the struct is plain data.
    let a = unsafe { *attr };
    let checked = check_srq_init_attr_ex(&a).and_then(|srq_type| {
        // SAFETY: `a.pd`, `a.xrcd` and `a.cq` are NULL or live per the
        // verbs API; all belong to `context` (so are ours) or EINVAL.
        unsafe {
            check_pd_context(a.pd, context)?;
            if srq_type == IBV_SRQT_XRC {
                check_context(a.xrcd, context)?;
                check_context(a.cq, context)?;
            }
        }
        Ok(())
    });
    if let Err(e) = checked {
        set_errno(e);
        return ptr::null_mut();
    }
    let create = move |vsrq: *mut VerbsSrq, resp: &mut RroceCreateSrqResp| {
        let mut cmd = RroceCreateXsrqCmd::default();
        // SAFETY: `context` is ours and `attr` valid per the contract;
        // `vsrq` is the new SRQ; `cmd`/`resp` are live buffers of the
        // sizes passed.
        unsafe {
            ibv_cmd_create_srq_ex(
                context,
                vsrq,
                attr,
                &raw mut cmd.core,
                size_of::<RroceCreateXsrqCmd>(),
                &raw mut resp.core,
                size_of::<RroceCreateSrqResp>(),
            )
        }
    };
    // SAFETY: `a.pd` is a PD of this context (checked), so ours; `attr`
    // is valid; `create` makes the kernel SRQ.
    srq_or_errno(unsafe { create_common(a.pd, &raw mut (*attr).attr, create) })
}

/// `verbs_context_ops::get_srq_num` (`ibv_get_srq_num`): the number of an
/// XRC SRQ, as the kernel reported it at creation; 0 or an errno value
/// (`EINVAL` for a basic SRQ).
///
/// # Safety
///
/// Called by libibverbs with a live SRQ of ours and a writable `srq_num`.
pub(super) unsafe extern "C" fn get_srq_num(srq: *mut IbvSrq, srq_num: *mut u32) -> c_int {
    if srq.is_null() || srq_num.is_null() {
        return EINVAL;
    }
    // SAFETY: `srq` is the `ibv_srq` at offset 0 of the `verbs_srq` of a
    // live SRQ of ours, whose tail libibverbs wrote once, at creation.
    let (srq_type, num) = unsafe {
        let vsrq = srq_of(srq).vsrq();
        ((*vsrq).srq_type, (*vsrq).srq_num)
    };
    match crate::srq::srq_num(srq_type, num) {
        Ok(n) => {
            // SAFETY: `srq_num` is writable per the contract.
            unsafe { *srq_num = n };
            0
        }
        Err(e) => e,
    }
}

/// `verbs_context_ops::modify_srq` (a MODIFY_SRQ command).
///
/// # Safety
///
/// Called by libibverbs with a live SRQ of ours and a valid `attr`.
pub(super) unsafe extern "C" fn modify_srq(
    srq: *mut IbvSrq,
    attr: *mut IbvSrqAttr,
    attr_mask: c_int,
) -> c_int {
    if srq.is_null() || attr.is_null() {
        return EINVAL;
    }
    let command = |cmd: &mut RroceModifySrqCmd| {
        // SAFETY: pointers valid per the contract; `cmd` is a live buffer
        // of the size passed.
        unsafe {
            ibv_cmd_modify_srq(
                srq,
                attr,
                attr_mask,
                &raw mut cmd.core,
                size_of::<RroceModifySrqCmd>(),
            )
        }
    };
    if attr_mask & IBV_SRQ_MAX_WR == 0 {
        return command(&mut RroceModifySrqCmd::default());
    }
    // SAFETY: `srq` is live; its context is ours; `srq` is one of ours.
    let (cmd_fd, s) = unsafe { ((*(*srq).context).cmd_fd, srq_of(srq)) };
    // SAFETY: `attr` is valid per the contract.
    let want = unsafe { (*attr).max_wr };
    let r = s.resize(cmd_fd, want, command);
    if r == 0 {
        // The new capacity, as `ibv_modify_srq(3)` reports it back.
        // SAFETY: `attr` is writable per the contract.
        unsafe { (*attr).max_wr = s.max_wr() };
    }
    r
}

/// `verbs_context_ops::query_srq` (a QUERY_SRQ command).
///
/// # Safety
///
/// Called by libibverbs with a live SRQ of ours and a writable `attr`.
pub(super) unsafe extern "C" fn query_srq(srq: *mut IbvSrq, attr: *mut IbvSrqAttr) -> c_int {
    if srq.is_null() || attr.is_null() {
        return EINVAL;
    }
    let mut cmd = IbvQuerySrq::default();
    // SAFETY: pointers valid per the contract; `cmd` is a live local.
    unsafe { ibv_cmd_query_srq(srq, attr, &mut cmd, size_of::<IbvQuerySrq>()) }
}

/// `verbs_context_ops::destroy_srq`: 0 or an errno value (`EBUSY` while a
/// QP uses it).
///
/// # Safety
///
/// `srq` must be NULL or an SRQ of ours that is not used once this
/// returns 0.
pub(super) unsafe extern "C" fn destroy_srq(srq: *mut IbvSrq) -> c_int {
    if srq.is_null() {
        return EINVAL;
    }
    // SAFETY: `srq` is a live SRQ of ours.
    let ret = unsafe { ibv_cmd_destroy_srq(srq) };
    if ret != 0 {
        return ret;
    }
    // SAFETY: the kernel object is gone and the caller gives up `srq`,
    // which came from Box::into_raw in create_common; dropping unmaps the
    // ring.
    drop(unsafe { Box::from_raw(srq.cast::<RroceSrq>()) });
    0
}

/// `verbs_context_ops::post_srq_recv`: 0 or an errno value, `*bad_wr` the
/// first request not posted.  No system call.
///
/// # Safety
///
/// `srq` must be a live SRQ of ours, `wr` NULL or a valid list of work
/// requests, `bad_wr` NULL or writable.
pub(super) unsafe extern "C" fn post_srq_recv(
    srq: *mut IbvSrq,
    wr: *mut IbvRecvWr,
    bad_wr: *mut *mut IbvRecvWr,
) -> c_int {
    if srq.is_null() || bad_wr.is_null() {
        return EINVAL;
    }
    // SAFETY: `bad_wr` is writable; `srq` is a live SRQ of ours.
    let s = unsafe {
        *bad_wr = ptr::null_mut();
        srq_of(srq)
    };
    // SAFETY: `wr` is a valid list for this call.
    let wrs = unsafe { RecvChain::new(wr, s.max_sge()) };
    match s.post_recv(wrs) {
        Ok(()) => 0,
        // SAFETY: `e.bad` indexes the list.
        Err(e) => unsafe { report(wr, bad_wr, &e) },
    }
}
