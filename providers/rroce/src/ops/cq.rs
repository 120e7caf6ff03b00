// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Entry points of completion queues (`crate::cq` has the logic).

use core::ffi::c_int;
use core::mem::{size_of, MaybeUninit};
use core::ptr;
use std::sync::Arc;

use rroce_proto::abi::CreateCqResp;

use super::pd::parent_domain_of;
use crate::cq::{check_cq_init_attr_ex, RroceCq};
use crate::device::errno_of;
use crate::ffi::*;
use crate::pd::RrocePd;

/// The provider CQ of `cq`.
///
/// # Safety
///
/// `cq` must be a live CQ made by [`create_cq`] or [`create_cq_ex`]; the
/// reference must not outlive it.
pub(super) unsafe fn cq_of<'a>(cq: *mut IbvCq) -> &'a RroceCq {
    // SAFETY: per the contract `cq` is the `ibv` field, at offset 0, of a
    // live `RroceCq`; its C part is an `Opaque`, so the shared reference
    // does not conflict with libibverbs writing it.
    unsafe { &*cq.cast::<RroceCq>() }
}

/// Creates a CQ, holding parent domain `domain` if one was given:
/// `create` sends CREATE_CQ for the new CQ's `ibv_cq_ex` and returns its
/// result and the driver response; then the ring is mapped.  The CQ, or an
/// errno value.
///
/// # Safety
///
/// `context` must be a context of ours; `create` must create the kernel
/// CQ for the pointer it is given or fail.
unsafe fn create_common(
    context: *mut IbvContext,
    cqe: c_int,
    domain: Option<Arc<RrocePd>>,
    create: impl FnOnce(*mut IbvCqEx) -> (c_int, CreateCqResp),
) -> Result<*mut RroceCq, c_int> {
    let mut cq = Box::new(RroceCq::new(domain));
    // The box's contents stay at this address until it is freed: the
    // kernel's user_handle for the CQ.
    let ibv = cq.ibv();
    let (ret, drv) = create(ibv);
    if ret != 0 {
        return Err(errno_of(ret));
    }
    // SAFETY: `context` is ours; libibverbs filled `ibv` in the command.
    let (cmd_fd, core_cqe) = unsafe { ((*context).cmd_fd, (*ibv).cq.cqe) };
    match cq.attach(cmd_fd, &drv, core_cqe, cqe) {
        Ok(()) => Ok(Box::into_raw(cq)),
        Err(err) => {
            // ibv_cmd_destroy_cq waits on cq->mutex/cond, which libibverbs
            // only initialises after create_cq returns; all-zero is glibc's
            // static initialiser for both, and `ibv` is zeroed.
            // SAFETY: the kernel CQ exists and nobody else knows the CQ.
            let _ = unsafe { ibv_cmd_destroy_cq(cq.ibv().cast::<IbvCq>()) };
            Err(err)
        }
    }
}

/// `verbs_context_ops::create_cq`: NULL with errno set on failure
/// (`EPROTO` if the kernel's response breaks the rroce ABI).
///
/// # Safety
///
/// Called by libibverbs with a context of ours; `channel` is NULL or a
/// completion channel of that context.
pub(super) unsafe extern "C" fn create_cq(
    context: *mut IbvContext,
    cqe: c_int,
    channel: *mut IbvCompChannel,
    comp_vector: c_int,
) -> *mut IbvCq {
    if context.is_null() || cqe < 1 {
        set_errno(EINVAL);
        return ptr::null_mut();
    }
    let create = |ibv: *mut IbvCqEx| {
        // No flags are defined: the driver data is an all-zero CreateCqCmd.
        let mut cmd = RroceCreateCqCmd::default();
        let mut resp = RroceCreateCqResp::default();
        // SAFETY: `context` is ours per the contract; `ibv` is the new
        // CQ; `cmd`/`resp` are live locals of the sizes passed.
        let ret = unsafe {
            ibv_cmd_create_cq(
                context,
                cqe,
                channel,
                comp_vector,
                ibv.cast::<IbvCq>(),
                &raw mut cmd.core,
                size_of::<RroceCreateCqCmd>(),
                &raw mut resp.core,
                size_of::<RroceCreateCqResp>(),
            )
        };
        (ret, resp.drv)
    };
    // SAFETY: `context` is ours; `create` makes the kernel CQ for `ibv`.
    match unsafe { create_common(context, cqe, None, create) } {
        // `ibv_cq` is the first member of the `ibv_cq_ex`, at offset 0.
        Ok(cq) => cq.cast::<IbvCq>(),
        Err(e) => {
            set_errno(e);
            ptr::null_mut()
        }
    }
}

/// `verbs_context_ops::create_cq_ex` (`ibv_create_cq_ex`): a CQ on the same
/// mapped ring as [`create_cq`], which also works with `ibv_poll_cq`,
/// completion channels and `ibv_req_notify_cq`.  NULL with errno set on
/// failure (see [`check_cq_init_attr_ex`]; `EINVAL` if
/// `IBV_CQ_INIT_ATTR_MASK_PD` comes with a `parent_domain` that is not a
/// parent domain of this context).  A CQ on a parent domain holds it.
///
/// # Safety
///
/// Called by libibverbs with a context of ours and a valid `attr`.
pub(super) unsafe extern "C" fn create_cq_ex(
    context: *mut IbvContext,
    attr: *mut IbvCqInitAttrEx,
) -> *mut IbvCqEx {
    if context.is_null() || attr.is_null() {
        set_errno(EINVAL);
        return ptr::null_mut();
    }
    // SAFETY: `attr` is valid per the contract.
    let a = unsafe { &*attr };
    let checked = check_cq_init_attr_ex(a).and_then(|cqe| {
        if a.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD == 0 {
            return Ok((cqe, None));
        }
        // SAFETY: `parent_domain` is NULL or a live PD per the verbs API.
        let domain = unsafe { parent_domain_of(a.parent_domain, context) }?;
        Ok((cqe, Some(domain)))
    });
    let (cqe, domain) = match checked {
        Ok(c) => c,
        Err(e) => {
            set_errno(e);
            return ptr::null_mut();
        }
    };
    let wc_flags = a.wc_flags;
    // libibverbs asks the kernel for timestamped CQEs
    // (IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION) for
    // IBV_WC_EX_WITH_COMPLETION_TIMESTAMP only; the wall-clock reader needs
    // them too.
    let mut kattr = *a;
    if wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK != 0 {
        kattr.wc_flags |= IBV_WC_EX_WITH_COMPLETION_TIMESTAMP;
    }
    let create = |ibv: *mut IbvCqEx| {
        // The same all-zero driver data as for create_cq.
        let mut cmd = RroceCreateCqExCmd::default();
        let mut resp = RroceCreateCqExResp::default();
        // SAFETY: `context` is valid per the contract and `kattr` a live
        // copy of its attributes; `ibv` is the new CQ; `cmd`/`resp` are
        // live locals of the sizes passed.
        let ret = unsafe {
            ibv_cmd_create_cq_ex(
                context,
                &raw mut kattr,
                ibv,
                &raw mut cmd.core,
                size_of::<RroceCreateCqExCmd>(),
                &raw mut resp.core,
                size_of::<RroceCreateCqExResp>(),
                0,
            )
        };
        (ret, resp.drv)
    };
    // SAFETY: `context` is ours; `create` makes the kernel CQ for `ibv`.
    match unsafe { create_common(context, cqe, domain, create) } {
        Ok(cq) => {
            // SAFETY: `cq` is ours and not handed out yet: nobody else
            // accesses its C part, which is at offset 0 (the pointer keeps
            // the provenance of the whole allocation, which `cq_of` and
            // `destroy_cq` need).
            let ex = unsafe { &mut *cq.cast::<IbvCqEx>() };
            ex.start_poll = Some(start_poll);
            ex.next_poll = Some(next_poll);
            ex.end_poll = Some(end_poll);
            ex.read_opcode = Some(read_opcode);
            ex.read_vendor_err = Some(read_vendor_err);
            ex.read_byte_len = Some(read_byte_len);
            ex.read_imm_data = Some(read_imm_data);
            ex.read_qp_num = Some(read_qp_num);
            ex.read_src_qp = Some(read_src_qp);
            ex.read_wc_flags = Some(read_wc_flags);
            ex.read_slid = Some(read_slid);
            ex.read_sl = Some(read_sl);
            ex.read_dlid_path_bits = Some(read_dlid_path_bits);
            if wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP != 0 {
                ex.read_completion_ts = Some(read_completion_ts);
            }
            if wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK != 0 {
                ex.read_completion_wallclock_ns = Some(read_completion_wallclock_ns);
            }
            ex
        }
        Err(e) => {
            set_errno(e);
            ptr::null_mut()
        }
    }
}

/// `start_poll` (`start`) or `next_poll`: 0 with `wr_id`/`status` of the
/// `ibv_cq_ex` set, or the errno value of [`RroceCq::poll_one`].
///
/// # Safety
///
/// `cq` must be a live CQ made by [`create_cq_ex`].
unsafe fn poll_one(cq: *mut IbvCqEx, start: bool) -> c_int {
    // SAFETY: per the contract.
    let c = unsafe { cq_of(cq.cast::<IbvCq>()) };
    match if start { c.start_poll() } else { c.poll_one() } {
        Ok(w) => {
            // SAFETY: `cq` is live; these two fields are the provider's to
            // write during polling (inside the CQ's session: no other
            // thread writes them meanwhile).
            unsafe {
                (*cq).wr_id = w.wr_id;
                (*cq).status = w.status;
            }
            0
        }
        Err(e) => e,
    }
}

/// `ibv_cq_ex::start_poll`: `EINVAL` for a non-zero `attr->comp_mask`,
/// otherwise as [`poll_one`].
///
/// # Safety
///
/// Called with a live CQ of ours made by `create_cq_ex`; `attr` NULL or
/// valid.
unsafe extern "C" fn start_poll(cq: *mut IbvCqEx, attr: *mut IbvPollCqAttr) -> c_int {
    // SAFETY: `attr` is NULL or valid per the contract.
    if cq.is_null() || (!attr.is_null() && unsafe { (*attr).comp_mask } != 0) {
        return EINVAL;
    }
    // SAFETY: forwarded contract.
    unsafe { poll_one(cq, true) }
}

/// `ibv_cq_ex::next_poll`, as [`poll_one`].
///
/// # Safety
///
/// As for [`start_poll`].
unsafe extern "C" fn next_poll(cq: *mut IbvCqEx) -> c_int {
    if cq.is_null() {
        return EINVAL;
    }
    // SAFETY: forwarded contract.
    unsafe { poll_one(cq, false) }
}

/// `ibv_cq_ex::end_poll`: ends the session (each completion was released
/// to the kernel when it was read).
///
/// # Safety
///
/// As for [`start_poll`].
unsafe extern "C" fn end_poll(cq: *mut IbvCqEx) {
    if cq.is_null() {
        return;
    }
    // SAFETY: forwarded contract.
    unsafe { cq_of(cq.cast::<IbvCq>()) }.end_poll();
}

/// Defines `ibv_cq_ex::read_*` functions returning one `ibv_wc` field of
/// the completion the last `start_poll`/`next_poll` returned.
macro_rules! cq_readers {
    ($($name:ident -> $ty:ty = $field:ident;)*) => {$(
        #[doc = concat!("`ibv_cq_ex::", stringify!($name), "`: `ibv_wc.", stringify!($field), "`.")]
        ///
        /// # Safety
        ///
        /// As for [`start_poll`].
        unsafe extern "C" fn $name(cq: *mut IbvCqEx) -> $ty {
            if cq.is_null() {
                return <$ty>::default();
            }
            // SAFETY: forwarded contract.
            let w = unsafe { cq_of(cq.cast::<IbvCq>()) }.current();
            <$ty>::try_from(w.$field).unwrap_or_default()
        }
    )*};
}

cq_readers! {
    read_opcode -> u32 = opcode;
    read_vendor_err -> u32 = vendor_err;
    read_byte_len -> u32 = byte_len;
    read_imm_data -> u32 = imm_data;
    read_qp_num -> u32 = qp_num;
    read_src_qp -> u32 = src_qp;
    read_wc_flags -> u32 = wc_flags;
    read_slid -> u32 = slid;
    read_sl -> u8 = sl;
    read_dlid_path_bits -> u8 = dlid_path_bits;
}

/// `ibv_cq_ex::read_completion_ts`: the device clock when the kernel
/// wrote the completion (CLOCK_MONOTONIC ns; `hca_core_clock` 1 GHz).
///
/// # Safety
///
/// As for [`start_poll`].
unsafe extern "C" fn read_completion_ts(cq: *mut IbvCqEx) -> u64 {
    if cq.is_null() {
        return 0;
    }
    // SAFETY: forwarded contract.
    unsafe { cq_of(cq.cast::<IbvCq>()) }.current_ts()
}

/// `ibv_cq_ex::read_completion_wallclock_ns`: the completion time as
/// CLOCK_REALTIME ns (the device timestamp moved by the current offset of
/// the two clocks).
///
/// # Safety
///
/// As for [`start_poll`].
unsafe extern "C" fn read_completion_wallclock_ns(cq: *mut IbvCqEx) -> u64 {
    if cq.is_null() {
        return 0;
    }
    // SAFETY: forwarded contract.
    let ts = unsafe { cq_of(cq.cast::<IbvCq>()) }.current_ts();
    let wall = i128::from(ts) + crate::ffi::sys::realtime_offset_ns();
    u64::try_from(wall).unwrap_or(0)
}

/// `verbs_context_ops::destroy_cq`: 0 or an errno value.
///
/// # Safety
///
/// `cq` must be NULL or a CQ of ours that is not used once this returns 0.
pub(super) unsafe extern "C" fn destroy_cq(cq: *mut IbvCq) -> c_int {
    if cq.is_null() {
        return EINVAL;
    }
    // SAFETY: `cq` is a live CQ of ours.
    let ret = unsafe { ibv_cmd_destroy_cq(cq) };
    if ret != 0 {
        return ret;
    }
    // SAFETY: the kernel object is gone and the caller gives up `cq`, which
    // came from Box::into_raw in create_common; dropping unmaps the ring.
    drop(unsafe { Box::from_raw(cq.cast::<RroceCq>()) });
    0
}

/// `verbs_context_ops::req_notify_cq` (a REQ_NOTIFY_CQ command).
///
/// # Safety
///
/// `cq` must be NULL or a live CQ of ours.
pub(super) unsafe extern "C" fn req_notify_cq(cq: *mut IbvCq, solicited_only: c_int) -> c_int {
    if cq.is_null() {
        return EINVAL;
    }
    // SAFETY: `cq` is a live CQ of ours.
    unsafe { ibv_cmd_req_notify_cq(cq, solicited_only) }
}

/// `verbs_context_ops::resize_cq` (`ibv_resize_cq`): 0 or an errno value.
///
/// # Safety
///
/// `cq` must be NULL or a live CQ of ours.
pub(super) unsafe extern "C" fn resize_cq(cq: *mut IbvCq, cqe: c_int) -> c_int {
    if cq.is_null() {
        return EINVAL;
    }
    // SAFETY: `cq` is live; its context is ours.
    let cmd_fd = unsafe { (*(*cq).context).cmd_fd };
    let command = |cmd: &mut RroceResizeCqCmd, resp: &mut RroceResizeCqResp| {
        // SAFETY: `cq` is live; `cmd`/`resp` are live buffers of the sizes
        // passed.  libibverbs sets `cq->cqe` only on success, read after.
        unsafe {
            let ret = ibv_cmd_resize_cq(
                cq,
                cqe,
                &raw mut cmd.core,
                size_of::<RroceResizeCqCmd>(),
                &raw mut resp.core,
                size_of::<RroceResizeCqResp>(),
            );
            (ret, (*cq).cqe)
        }
    };
    // SAFETY: `cq` is a live CQ of ours.
    unsafe { cq_of(cq) }.resize(cqe, cmd_fd, command)
}

/// `verbs_context_ops::poll_cq` (`ibv_poll_cq`): the number of completions
/// written to `wc` (at most `num_entries`), or a negative errno value:
/// `-EINVAL` for bad arguments, `-EIO` once the CQ is broken.
///
/// # Safety
///
/// `cq` must be NULL or a live CQ of ours; `wc` must have room for
/// `num_entries` entries.
pub(super) unsafe extern "C" fn poll_cq(
    cq: *mut IbvCq,
    num_entries: c_int,
    wc: *mut IbvWc,
) -> c_int {
    if cq.is_null() || num_entries < 0 || (wc.is_null() && num_entries > 0) {
        return -EINVAL;
    }
    let n = usize::try_from(num_entries).unwrap_or(0);
    let out: &mut [MaybeUninit<IbvWc>] = if n == 0 {
        &mut []
    } else {
        // SAFETY: per the contract `wc` has room for `n` entries, which
        // the caller does not touch during the call.
        unsafe { core::slice::from_raw_parts_mut(wc.cast::<MaybeUninit<IbvWc>>(), n) }
    };
    // SAFETY: `cq` is a live CQ of ours.
    unsafe { cq_of(cq) }.poll(out)
}
