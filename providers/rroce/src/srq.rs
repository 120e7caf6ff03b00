// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Shared receive queues: the kernel creates the SRQ and hands out its
//! receive ring (the RQ format); the provider is its producer.
//!
//! `post_srq_recv` encodes each work request like `post_recv` does for an
//! RQ (validated with the kernel's decoder) and publishes the producer
//! index once; the kernel reads the ring when a message arrives for any
//! QP attached to the SRQ, so there is no system call.  `modify_srq`
//! (limit only; resizing gives `EOPNOTSUPP` from the kernel), `query_srq`
//! and `destroy_srq` are plain commands.

use core::ffi::c_int;
use core::mem::size_of;
use core::ptr;
use std::sync::{Mutex, PoisonError};

use rroce_proto::abi::{CreateSrqCmd, CreateSrqResp};
use rroce_proto::ring::Producer;
use rroce_proto::wqe::{recv_max_sge, RecvLimits, MAX_MSG_SIZE};

use crate::ffi::*;
use crate::mapping::RingMap;
use crate::qp::{check_ring, post_recv_list, WorkQueue};
use crate::{set_errno, warn};

/// Provider SRQ; libibverbs sees only `srq` (and may treat the memory as
/// a `struct verbs_srq`, hence the zeroed tail).
#[repr(C)]
pub(crate) struct RroceSrq {
    srq: IbvSrq,
    verbs_tail: [u8; VERBS_SRQ_TAIL],
    lim: RecvLimits,
    rq: Mutex<Option<WorkQueue>>,
}
const _: () = assert!(core::mem::offset_of!(RroceSrq, srq) == 0);

/// The ring of a new SRQ from the kernel's response, checked against
/// what was requested.
fn map_srq_ring(
    cmd_fd: c_int,
    drv: &CreateSrqResp,
    req: &IbvSrqAttr,
) -> Result<(RecvLimits, WorkQueue), (c_int, &'static str)> {
    let proto = |why| (EPROTO, why);
    let layout = check_ring(drv.entries, drv.entry_size, drv.ring_bytes).map_err(proto)?;
    let max_sge = u16::try_from(drv.max_sge).map_err(|_| proto("max_sge"))?;
    if max_sge > recv_max_sge(drv.entry_size) {
        return Err(proto("SRQ capacities do not fit the entries"));
    }
    if drv.entries < req.max_wr || drv.max_sge < req.max_sge {
        return Err(proto("SRQ smaller than requested"));
    }
    let map = RingMap::map(cmd_fd, drv.mmap_offset, drv.ring_bytes, layout)
        .map_err(|e| (e, "mapping the SRQ ring failed"))?;
    let producer = Producer::attach(layout, &map.region())
        .map_err(|_| proto("ring header is inconsistent"))?;
    let lim = RecvLimits {
        max_sge,
        max_msg_size: MAX_MSG_SIZE,
    };
    Ok((lim, WorkQueue::new(map, producer, max_sge, 0)))
}

/// `verbs_context_ops::create_srq`: NULL with errno set on failure
/// (`EPROTO` if the kernel's response breaks the rroce ABI).  On success
/// `attr->attr` holds the capacities the SRQ really has.
///
/// # Safety
///
/// Called by libibverbs with a PD of ours and a valid `attr`.
pub(crate) unsafe extern "C" fn rroce_create_srq(
    pd: *mut IbvPd,
    attr: *mut IbvSrqInitAttr,
) -> *mut IbvSrq {
    if pd.is_null() || attr.is_null() {
        set_errno(EINVAL);
        return ptr::null_mut();
    }
    // SAFETY: `attr` is valid per the contract.
    let requested = unsafe { (*attr).attr };
    let s = Box::into_raw(Box::new(RroceSrq {
        // SAFETY: IbvSrq consists of pointers, integers and opaque
        // pthread blobs, for all of which zero is valid; libibverbs
        // initialises them.
        srq: unsafe { core::mem::zeroed() },
        verbs_tail: [0; VERBS_SRQ_TAIL],
        lim: RecvLimits {
            max_sge: 0,
            max_msg_size: 0,
        },
        rq: Mutex::new(None),
    }));
    // SAFETY: `s` is a fresh allocation owned here.
    let ibsrq = unsafe { &raw mut (*s).srq };
    let mut cmd = RroceCreateSrqCmd::default();
    debug_assert!(cmd.drv == CreateSrqCmd::default());
    let mut resp = RroceCreateSrqResp::default();
    // SAFETY: `pd` and `attr` are valid per the contract; `ibsrq` stays at
    // this address for the SRQ's life (it is the kernel's user_handle);
    // `cmd`/`resp` are live locals of the sizes passed.
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
        // SAFETY: never handed out.
        drop(unsafe { Box::from_raw(s) });
        set_errno(crate::errno_of(ret));
        return ptr::null_mut();
    }
    // SAFETY: `pd` is valid and belongs to a live context.
    let cmd_fd = unsafe { (*(*pd).context).cmd_fd };
    match map_srq_ring(cmd_fd, &resp.drv, &requested) {
        Ok((lim, wq)) => {
            // SAFETY: still exclusively owned; `attr` is valid.
            unsafe {
                (*s).lim = lim;
                *(*s).rq.get_mut().unwrap_or_else(PoisonError::into_inner) = Some(wq);
                (*attr).attr.max_wr = resp.drv.entries;
                (*attr).attr.max_sge = resp.drv.max_sge;
            }
            ibsrq
        }
        Err((err, why)) => {
            warn(format_args!("create_srq: {why} (srqn {})", resp.drv.srqn));
            // SAFETY: the kernel SRQ exists and nobody else knows `ibsrq`.
            let _ = unsafe { ibv_cmd_destroy_srq(ibsrq) };
            // SAFETY: never handed out.
            drop(unsafe { Box::from_raw(s) });
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
pub(crate) unsafe extern "C" fn rroce_modify_srq(
    srq: *mut IbvSrq,
    attr: *mut IbvSrqAttr,
    attr_mask: c_int,
) -> c_int {
    if srq.is_null() || attr.is_null() {
        return EINVAL;
    }
    let mut cmd = IbvModifySrq::default();
    // SAFETY: pointers valid per the contract; `cmd` is a live local of the
    // size passed.
    unsafe { ibv_cmd_modify_srq(srq, attr, attr_mask, &mut cmd, size_of::<IbvModifySrq>()) }
}

/// `verbs_context_ops::query_srq` (a QUERY_SRQ command).
///
/// # Safety
///
/// Called by libibverbs with a live SRQ of ours and a writable `attr`.
pub(crate) unsafe extern "C" fn rroce_query_srq(srq: *mut IbvSrq, attr: *mut IbvSrqAttr) -> c_int {
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
pub(crate) unsafe extern "C" fn rroce_destroy_srq(srq: *mut IbvSrq) -> c_int {
    if srq.is_null() {
        return EINVAL;
    }
    // SAFETY: `srq` is a live SRQ of ours.
    let ret = unsafe { ibv_cmd_destroy_srq(srq) };
    if ret != 0 {
        return ret;
    }
    // SAFETY: the kernel object is gone and the caller gives up `srq`,
    // which came from Box::into_raw in rroce_create_srq; dropping unmaps
    // the ring.
    drop(unsafe { Box::from_raw(srq.cast::<RroceSrq>()) });
    0
}

/// `verbs_context_ops::post_srq_recv`: 0 or an errno value (`EINVAL` for
/// a bad request, `ENOMEM` when the SRQ is full, `EIO` once the ring is
/// broken); `*bad_wr` is the first request not posted.  No system call.
///
/// # Safety
///
/// `srq` must be a live SRQ of ours, `wr` NULL or a valid list of work
/// requests, `bad_wr` NULL or writable.
pub(crate) unsafe extern "C" fn rroce_post_srq_recv(
    srq: *mut IbvSrq,
    wr: *mut IbvRecvWr,
    bad_wr: *mut *mut IbvRecvWr,
) -> c_int {
    if srq.is_null() || bad_wr.is_null() {
        return EINVAL;
    }
    // SAFETY: `bad_wr` is writable.
    unsafe { *bad_wr = ptr::null_mut() };
    // SAFETY: `srq` is ours; only the immutable `lim` and the lock are
    // borrowed.
    let (lim, lock) = unsafe {
        let r = srq.cast::<RroceSrq>();
        ((*r).lim, &(*r).rq)
    };
    let mut guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(rq) = guard.as_mut() else {
        // SAFETY: as above.
        unsafe { *bad_wr = wr };
        return EINVAL;
    };
    // SAFETY: per this function's contract.
    unsafe { post_recv_list(&lim, rq, wr, bad_wr) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srq_response_checks() {
        let req = IbvSrqAttr {
            max_wr: 16,
            max_sge: 1,
            srq_limit: 0,
        };
        let good = CreateSrqResp {
            mmap_offset: 0,
            ring_bytes: 8192,
            entries: 16,
            entry_size: 64,
            max_sge: 3,
            srqn: 1,
            reserved: 0,
        };
        // Geometry is checked before anything is mapped.
        let bad_sge = CreateSrqResp { max_sge: 4, ..good };
        assert_eq!(
            map_srq_ring(-1, &bad_sge, &req).err().map(|e| e.0),
            Some(EPROTO)
        );
        let small = CreateSrqResp { entries: 8, ..good };
        assert_eq!(
            map_srq_ring(-1, &small, &req).err().map(|e| e.0),
            Some(EPROTO)
        );
        let odd = CreateSrqResp {
            entry_size: 48,
            ..good
        };
        assert_eq!(
            map_srq_ring(-1, &odd, &req).err().map(|e| e.0),
            Some(EPROTO)
        );
    }
}
