// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Entry points of shared receive queues (`crate::srq` has the logic).

use core::ffi::c_int;
use core::mem::size_of;
use core::ptr;

use super::pd::domain_of;
use super::qp::{report, RecvChain};
use crate::device::errno_of;
use crate::ffi::*;
use crate::srq::RroceSrq;

/// The provider SRQ of `srq`.
///
/// # Safety
///
/// `srq` must be a live SRQ made by [`create_srq`]; the reference must not
/// outlive it.
unsafe fn srq_of<'a>(srq: *mut IbvSrq) -> &'a RroceSrq {
    // SAFETY: per the contract `srq` is the `srq` field, at offset 0, of a
    // live `RroceSrq`, whose C part is an `Opaque`.
    unsafe { &*srq.cast::<RroceSrq>() }
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
    // SAFETY: `attr` is valid per the contract.
    let requested = unsafe { (*attr).attr };
    // SAFETY: `pd` is a live PD of ours.  On a parent domain the SRQ holds
    // it and takes its buffers from its allocator, if any.
    let mut s = Box::new(RroceSrq::new(unsafe { domain_of(pd) }));
    // The box's contents stay at this address until it is freed: the
    // kernel's user_handle for the SRQ.
    let ibsrq = s.ibv();
    let mut cmd = RroceCreateSrqCmd::default();
    let mut resp = RroceCreateSrqResp::default();
    // SAFETY: `pd` and `attr` are valid per the contract; `ibsrq` is the
    // new SRQ; `cmd`/`resp` are live locals of the sizes passed.
    let ret = unsafe {
        ibv_cmd_create_srq(
            pd,
            ibsrq,
            attr,
            &raw mut cmd.core,
            size_of::<RroceCreateSrqCmd>(),
            &raw mut resp.core,
            size_of::<RroceCreateSrqResp>(),
        )
    };
    if ret != 0 {
        set_errno(errno_of(ret));
        return ptr::null_mut();
    }
    // SAFETY: `pd` is valid and belongs to a live context.
    let cmd_fd = unsafe { (*(*pd).context).cmd_fd };
    match s.attach(cmd_fd, &resp.drv, &requested) {
        Ok(real) => {
            // SAFETY: `attr` is valid per the contract.
            unsafe {
                (*attr).attr.max_wr = real.max_wr;
                (*attr).attr.max_sge = real.max_sge;
            }
            Box::into_raw(s).cast::<IbvSrq>()
        }
        Err(err) => {
            // SAFETY: the kernel SRQ exists and nobody else knows the SRQ.
            let _ = unsafe { ibv_cmd_destroy_srq(s.ibv()) };
            set_errno(err);
            ptr::null_mut()
        }
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
    // which came from Box::into_raw in create_srq; dropping unmaps the
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
