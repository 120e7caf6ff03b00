// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Entry points of the work-request API of `ibv_qp_ex` (`ibv_wr_start`,
//! `ibv_wr_send`, ..., `ibv_wr_complete`); `crate::qp::ex` has the logic.

use core::ffi::{c_int, c_void};

use rroce_proto::wqe::SendOpcode;

use super::mr::ah_num_of;
use super::qp::{bind_request, doorbell_of, qp_of, qp_state};
use crate::ffi::user::{buf_list, sge_list};
use crate::ffi::*;
use crate::qp::{RroceQp, UdAddr};

/// Fills in the `ibv_qp_ex` of a new QP for `send_ops_flags` (checked by
/// `check_qp_init_attr_ex` against the QP type) and marks it as having one.
pub(super) fn install(vqp: &mut VerbsQp, send_ops_flags: u64) {
    let q = &mut vqp.qp_ex;
    let on = |flag: u64| send_ops_flags & flag != 0;
    if on(IBV_QP_EX_WITH_RDMA_WRITE) {
        q.wr_rdma_write = Some(wr_rdma_write);
    }
    if on(IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) {
        q.wr_rdma_write_imm = Some(wr_rdma_write_imm);
    }
    if on(IBV_QP_EX_WITH_SEND) {
        q.wr_send = Some(wr_send);
    }
    if on(IBV_QP_EX_WITH_SEND_WITH_IMM) {
        q.wr_send_imm = Some(wr_send_imm);
    }
    if on(IBV_QP_EX_WITH_RDMA_READ) {
        q.wr_rdma_read = Some(wr_rdma_read);
    }
    if on(IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP) {
        q.wr_atomic_cmp_swp = Some(wr_atomic_cmp_swp);
    }
    if on(IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD) {
        q.wr_atomic_fetch_add = Some(wr_atomic_fetch_add);
    }
    if on(IBV_QP_EX_WITH_LOCAL_INV) {
        q.wr_local_inv = Some(wr_local_inv);
    }
    if on(IBV_QP_EX_WITH_BIND_MW) {
        q.wr_bind_mw = Some(wr_bind_mw);
    }
    if on(IBV_QP_EX_WITH_SEND_WITH_INV) {
        q.wr_send_inv = Some(wr_send_inv);
    }
    if on(IBV_QP_EX_WITH_ATOMIC_WRITE) {
        q.wr_atomic_write = Some(wr_atomic_write);
    }
    q.wr_set_ud_addr = Some(wr_set_ud_addr);
    q.wr_set_xrc_srqn = Some(wr_set_xrc_srqn);
    q.wr_set_inline_data = Some(wr_set_inline_data);
    q.wr_set_inline_data_list = Some(wr_set_inline_data_list);
    q.wr_set_sge = Some(wr_set_sge);
    q.wr_set_sge_list = Some(wr_set_sge_list);
    q.wr_start = Some(wr_start);
    q.wr_complete = Some(wr_complete);
    q.wr_abort = Some(wr_abort);
    vqp.comp_mask |= VERBS_QP_EX;
}

/// The provider QP of `qp`.
///
/// # Safety
///
/// `qp` must be the `ibv_qp_ex` of a live QP of ours made with the
/// work-request API; the reference must not outlive it.
unsafe fn qp_ex_of<'a>(qp: *mut IbvQpEx) -> &'a RroceQp {
    // SAFETY: per the contract; `qp_base` is at offset 0 of the `ibv_qp_ex`.
    unsafe { qp_of(qp.cast::<IbvQp>()) }
}

/// An operation call: starts a request of `op` with the `wr_id` and
/// `wr_flags` the application set in the `ibv_qp_ex`.
///
/// # Safety
///
/// As for [`qp_ex_of`].
unsafe fn begin(
    qp: *mut IbvQpEx,
    op: SendOpcode,
    fill: impl FnOnce(&mut rroce_proto::wqe::SendWqe),
) {
    // SAFETY: `qp` is live; the application writes these fields before the
    // call, a plain read of them is what the API specifies.
    let (wr_id, wr_flags) = unsafe {
        (
            (&raw const (*qp).wr_id).read(),
            (&raw const (*qp).wr_flags).read(),
        )
    };
    // SAFETY: forwarded contract.
    unsafe { qp_ex_of(qp) }.wr_begin(wr_id, wr_flags, op, fill);
}

/// `ibv_qp_ex::wr_send`.
///
/// # Safety
///
/// Called by libibverbs users with the `ibv_qp_ex` of a live QP of ours.
unsafe extern "C" fn wr_send(qp: *mut IbvQpEx) {
    // SAFETY: forwarded contract.
    unsafe { begin(qp, SendOpcode::Send, |_| {}) };
}

/// `ibv_qp_ex::wr_send_imm`; `imm` is the `__be32` as passed.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_send_imm(qp: *mut IbvQpEx, imm: u32) {
    // SAFETY: forwarded contract.
    unsafe { begin(qp, SendOpcode::SendWithImm, |h| h.imm_or_inv = imm) };
}

/// `ibv_qp_ex::wr_rdma_write`.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_rdma_write(qp: *mut IbvQpEx, rkey: u32, remote_addr: u64) {
    // SAFETY: forwarded contract.
    unsafe {
        begin(qp, SendOpcode::RdmaWrite, |h| {
            h.rkey = rkey;
            h.remote_addr = remote_addr;
        })
    };
}

/// `ibv_qp_ex::wr_rdma_write_imm`.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_rdma_write_imm(qp: *mut IbvQpEx, rkey: u32, remote_addr: u64, imm: u32) {
    // SAFETY: forwarded contract.
    unsafe {
        begin(qp, SendOpcode::RdmaWriteWithImm, |h| {
            h.rkey = rkey;
            h.remote_addr = remote_addr;
            h.imm_or_inv = imm;
        })
    };
}

/// `ibv_qp_ex::wr_rdma_read`.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_rdma_read(qp: *mut IbvQpEx, rkey: u32, remote_addr: u64) {
    // SAFETY: forwarded contract.
    unsafe {
        begin(qp, SendOpcode::RdmaRead, |h| {
            h.rkey = rkey;
            h.remote_addr = remote_addr;
        })
    };
}

/// `ibv_qp_ex::wr_atomic_cmp_swp`.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_atomic_cmp_swp(
    qp: *mut IbvQpEx,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    // SAFETY: forwarded contract.
    unsafe {
        begin(qp, SendOpcode::AtomicCmpAndSwp, |h| {
            h.rkey = rkey;
            h.remote_addr = remote_addr;
            h.compare_add = compare;
            h.swap = swap;
        })
    };
}

/// `ibv_qp_ex::wr_atomic_fetch_add`.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_atomic_fetch_add(qp: *mut IbvQpEx, rkey: u32, remote_addr: u64, add: u64) {
    // SAFETY: forwarded contract.
    unsafe {
        begin(qp, SendOpcode::AtomicFetchAndAdd, |h| {
            h.rkey = rkey;
            h.remote_addr = remote_addr;
            h.compare_add = add;
        })
    };
}

/// `ibv_qp_ex::wr_atomic_write`: the 8 bytes at `atomic_wr` are copied
/// into the WQE now (the caller may reuse them once this returns).
///
/// # Safety
///
/// As for [`wr_send`]; `atomic_wr` points to 8 readable bytes.
unsafe extern "C" fn wr_atomic_write(
    qp: *mut IbvQpEx,
    rkey: u32,
    remote_addr: u64,
    atomic_wr: *const c_void,
) {
    let value = if atomic_wr.is_null() {
        None
    } else {
        // SAFETY: 8 readable bytes (the caller's contract); no alignment
        // is promised, hence the unaligned read.
        Some(u64::from_ne_bytes(unsafe {
            atomic_wr.cast::<[u8; 8]>().read_unaligned()
        }))
    };
    // SAFETY: forwarded contract.
    unsafe {
        begin(qp, SendOpcode::AtomicWrite, |h| {
            h.rkey = rkey;
            h.remote_addr = remote_addr;
            h.compare_add = value.unwrap_or(0);
        })
    };
    if value.is_none() {
        // No value to write: an error of the batch.
        // SAFETY: forwarded contract.
        unsafe { qp_ex_of(qp) }.wr_fail(EINVAL);
    }
}

/// `ibv_qp_ex::wr_local_inv`.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_local_inv(qp: *mut IbvQpEx, invalidate_rkey: u32) {
    // SAFETY: forwarded contract.
    unsafe { begin(qp, SendOpcode::LocalInv, |h| h.imm_or_inv = invalidate_rkey) };
}

/// `ibv_qp_ex::wr_send_inv`.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_send_inv(qp: *mut IbvQpEx, invalidate_rkey: u32) {
    // SAFETY: forwarded contract.
    unsafe {
        begin(qp, SendOpcode::SendWithInv, |h| {
            h.imm_or_inv = invalidate_rkey
        })
    };
}

/// `ibv_qp_ex::wr_bind_mw`: binds `mw` under the new key `rkey`.
///
/// # Safety
///
/// As for [`wr_send`]; `mw` is NULL or a live window, `info` NULL or
/// valid with a NULL or live region.
unsafe extern "C" fn wr_bind_mw(
    qp: *mut IbvQpEx,
    mw: *mut IbvMw,
    rkey: u32,
    info: *const IbvMwBindInfo,
) {
    // SAFETY: `qp` is live; these fields never change or are the
    // application's to set before the call.
    let (ctx, wr_id, wr_flags) = unsafe {
        (
            (*qp).qp_base.context,
            (&raw const (*qp).wr_id).read(),
            (&raw const (*qp).wr_flags).read(),
        )
    };
    // SAFETY: `info` is NULL or valid per the contract.
    let bind = match unsafe { info.as_ref() } {
        // SAFETY: `mw` and the region are NULL or live per the contract.
        Some(i) => unsafe { bind_request(ctx, mw, rkey, i) },
        None => crate::qp::BindRequest {
            mw: None,
            rkey,
            mr: None,
            addr: 0,
            length: 0,
            access: 0,
        },
    };
    // SAFETY: forwarded contract.
    unsafe { qp_ex_of(qp) }.wr_bind_mw(wr_id, wr_flags, &bind);
}

/// `ibv_qp_ex::wr_set_ud_addr`.  The AH is looked at before it is known
/// whether the batch takes it (the API requires a live AH in any case).
///
/// # Safety
///
/// As for [`wr_send`]; `ah` is NULL or a live AH.
unsafe extern "C" fn wr_set_ud_addr(
    qp: *mut IbvQpEx,
    ah: *mut IbvAh,
    remote_qpn: u32,
    remote_qkey: u32,
) {
    // SAFETY: `qp` is live; the context never changes.
    let ctx = unsafe { (*qp).qp_base.context };
    let ud = UdAddr {
        // SAFETY: a non-NULL AH is a live AH per the verbs API.
        ah: unsafe { ah_num_of(ah, ctx) },
        remote_qpn,
        remote_qkey,
    };
    // SAFETY: forwarded contract.
    unsafe { qp_ex_of(qp) }.wr_set_ud_addr(ud);
}

/// `ibv_qp_ex::wr_set_xrc_srqn`: the remote XRC SRQ of the request
/// being built (XRC_SEND QPs).
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_set_xrc_srqn(qp: *mut IbvQpEx, remote_srqn: u32) {
    // SAFETY: forwarded contract.
    unsafe { qp_ex_of(qp) }.wr_set_xrc_srqn(remote_srqn);
}

/// `ibv_qp_ex::wr_set_sge`.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_set_sge(qp: *mut IbvQpEx, lkey: u32, addr: u64, length: u32) {
    let sge = [IbvSge { addr, length, lkey }];
    // SAFETY: forwarded contract.
    unsafe { qp_ex_of(qp) }.wr_set_sges(Ok(&sge));
}

/// `ibv_qp_ex::wr_set_sge_list`.
///
/// # Safety
///
/// As for [`wr_send`]; `list` holds `num_sge` SGEs.
unsafe extern "C" fn wr_set_sge_list(qp: *mut IbvQpEx, num_sge: usize, list: *const IbvSge) {
    // SAFETY: forwarded contract.
    let q = unsafe { qp_ex_of(qp) };
    let sges = c_int::try_from(num_sge)
        .map_err(|_| EINVAL)
        // SAFETY: per the contract `list` holds `num_sge` SGEs; the count
        // is checked first.
        .and_then(|n| unsafe { sge_list(list, n, q.max_send_sge()) });
    q.wr_set_sges(sges);
}

/// `ibv_qp_ex::wr_set_inline_data`: the data is copied now.
///
/// # Safety
///
/// As for [`wr_send`]; `addr` points at `length` readable bytes.
unsafe extern "C" fn wr_set_inline_data(qp: *mut IbvQpEx, addr: *mut c_void, length: usize) {
    let buf = [IbvDataBuf { addr, length }];
    // SAFETY: forwarded contract.
    let q = unsafe { qp_ex_of(qp) };
    // SAFETY: the buffer is readable per the contract.
    q.wr_set_inline(unsafe { InlineData::from_bufs(&buf, q.max_inline()) });
}

/// `ibv_qp_ex::wr_set_inline_data_list`: the data is copied now.
///
/// # Safety
///
/// As for [`wr_send`]; `list` holds `num_buf` buffers of readable bytes.
unsafe extern "C" fn wr_set_inline_data_list(
    qp: *mut IbvQpEx,
    num_buf: usize,
    list: *const IbvDataBuf,
) {
    // SAFETY: forwarded contract.
    let q = unsafe { qp_ex_of(qp) };
    // SAFETY: per the contract `list` holds `num_buf` readable buffers.
    let data = unsafe { buf_list(list, num_buf) }
        .and_then(|b| unsafe { InlineData::from_bufs(b, q.max_inline()) });
    q.wr_set_inline(data);
}

/// `ibv_qp_ex::wr_start`: opens a new, empty batch.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_start(qp: *mut IbvQpEx) {
    // SAFETY: forwarded contract.
    unsafe { qp_ex_of(qp) }.wr_start();
}

/// `ibv_qp_ex::wr_abort`: drops the batch.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_abort(qp: *mut IbvQpEx) {
    // SAFETY: forwarded contract.
    unsafe { qp_ex_of(qp) }.wr_abort();
}

/// `ibv_qp_ex::wr_complete`: posts the batch; 0 or an errno value.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_complete(qp: *mut IbvQpEx) -> c_int {
    let base = qp.cast::<IbvQp>();
    // SAFETY: forwarded contract; `qp_base` is at offset 0.
    let (q, state, db) = unsafe { (qp_ex_of(qp), qp_state(base), doorbell_of(base)) };
    q.wr_complete(state, db)
}
