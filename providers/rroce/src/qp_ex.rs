// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! The work-request API of `ibv_qp_ex` (`ibv_wr_start`, `ibv_wr_send`,
//! `ibv_wr_set_sge`, ..., `ibv_wr_complete`), for QPs created with
//! `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
//!
//! A batch lives in the SQ's [`WorkQueue`] under the SQ lock.  Each
//! operation call (`wr_send`, `wr_rdma_write`, ...) finishes the request
//! built so far and starts a new one from the `wr_id`/`wr_flags` fields of
//! the `ibv_qp_ex`; the setters (`wr_set_sge`, `wr_set_inline_data`,
//! `wr_set_ud_addr`, ...) complete it.  A finished request is encoded and
//! checked by the same [`encode_send`] as `post_send` and kept in the
//! batch, not yet in the ring, so `post_send` on the same QP never
//! publishes half a batch.  `wr_complete` copies the whole batch into the
//! SQ ring and publishes it and rings the doorbell exactly like
//! `post_send` ([`publish_and_ring`], with its doorbell suppression); it
//! is all or nothing: after the first error (reported by `wr_complete`)
//! nothing of the batch is posted.  `wr_abort` drops the batch.
//!
//! Errors of `wr_complete`: the first error of the batch (`EINVAL` for an
//! invalid request, an operation or setter out of place, a UD request
//! without `wr_set_ud_addr`), `EINVAL` if the QP is not in RTS/SQD/...
//! (below RTS), `ENOMEM` if the SQ has no room for the batch, `EIO` once
//! the ring is broken.

use super::*;

/// The request being built.
#[derive(Clone, Copy, Debug)]
struct Building {
    hdr: SendWqe,
    /// The payload is the SQ's `inline` buffer, not its `sges`.
    inline: bool,
    /// `wr_set_ud_addr` was called (required on UD).
    has_ud_addr: bool,
}

/// State of the work-request API between `wr_start` and
/// `wr_complete`/`wr_abort`.
#[derive(Debug, Default)]
pub(super) struct Batch {
    open: bool,
    /// Encoded, checked WQEs back to back, `lens[i]` bytes each.
    bytes: Vec<u8>,
    lens: Vec<usize>,
    cur: Option<Building>,
    /// First error of the batch, 0 if none.
    err: c_int,
}

impl Batch {
    fn reset(&mut self, open: bool) {
        self.open = open;
        self.bytes.clear();
        self.lens.clear();
        self.cur = None;
        self.err = 0;
    }

    fn fail(&mut self, err: c_int) {
        if self.err == 0 {
            self.err = err;
        }
    }
}

/// `IBV_QP_EX_WITH_*` flags and the operation each enables.
const SEND_OPS: [(u64, SendOpcode); 10] = [
    (IBV_QP_EX_WITH_RDMA_WRITE, SendOpcode::RdmaWrite),
    (
        IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
        SendOpcode::RdmaWriteWithImm,
    ),
    (IBV_QP_EX_WITH_SEND, SendOpcode::Send),
    (IBV_QP_EX_WITH_SEND_WITH_IMM, SendOpcode::SendWithImm),
    (IBV_QP_EX_WITH_RDMA_READ, SendOpcode::RdmaRead),
    (
        IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP,
        SendOpcode::AtomicCmpAndSwp,
    ),
    (
        IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
        SendOpcode::AtomicFetchAndAdd,
    ),
    (IBV_QP_EX_WITH_LOCAL_INV, SendOpcode::LocalInv),
    (IBV_QP_EX_WITH_BIND_MW, SendOpcode::BindMw),
    (IBV_QP_EX_WITH_SEND_WITH_INV, SendOpcode::SendWithInv),
];

/// The `send_ops_flags` a QP with `opcodes` supports.
pub(super) fn send_ops_supported(opcodes: OpcodeSet) -> u64 {
    SEND_OPS
        .iter()
        .filter(|(_, op)| opcodes.contains(*op))
        .fold(0, |acc, (flag, _)| acc | flag)
}

/// Fills in the `ibv_qp_ex` of a new QP for `send_ops_flags` (checked by
/// the caller against [`send_ops_supported`]) and marks it as having one.
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
    q.wr_set_ud_addr = Some(wr_set_ud_addr);
    q.wr_set_inline_data = Some(wr_set_inline_data);
    q.wr_set_inline_data_list = Some(wr_set_inline_data_list);
    q.wr_set_sge = Some(wr_set_sge);
    q.wr_set_sge_list = Some(wr_set_sge_list);
    q.wr_start = Some(wr_start);
    q.wr_complete = Some(wr_complete);
    q.wr_abort = Some(wr_abort);
    vqp.comp_mask |= VERBS_QP_EX;
}

/// Runs `f` with the QP's limits and its SQ, under the SQ lock.  `None`
/// if the QP has no SQ (never the case for a created QP).
///
/// # Safety
///
/// `qp` must be the `ibv_qp_ex` of a live QP of ours.
unsafe fn with_sq<R>(qp: *mut IbvQpEx, f: impl FnOnce(&QpInfo, &mut WorkQueue) -> R) -> Option<R> {
    // SAFETY: per the contract `qp` is the start of a live RroceQp; only
    // the immutable `info` and the `sq` lock are borrowed.
    let (info, lock) = unsafe {
        let r = qp.cast::<RroceQp>();
        ((*r).info, &(*r).sq)
    };
    let mut guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
    guard.as_mut().map(|sq| f(&info, sq))
}

/// Runs `f` on the request being built; an error if there is none.
///
/// # Safety
///
/// As for [`with_sq`].
unsafe fn with_current(
    qp: *mut IbvQpEx,
    f: impl FnOnce(&QpInfo, &mut WorkQueue) -> Result<(), c_int>,
) {
    // SAFETY: forwarded contract.
    unsafe {
        with_sq(qp, |info, sq| {
            if !sq.batch.open {
                return;
            }
            if sq.batch.cur.is_none() {
                sq.batch.fail(EINVAL);
                return;
            }
            if let Err(e) = f(info, sq) {
                sq.batch.fail(e);
            }
        })
    };
}

/// Encodes the request being built, if any, into the batch.
fn finish_current(info: &QpInfo, sq: &mut WorkQueue) {
    let Some(b) = sq.batch.cur.take() else {
        return;
    };
    if sq.batch.err != 0 {
        return;
    }
    if info.send.ud && !b.has_ud_addr {
        sq.batch.fail(EINVAL);
        return;
    }
    if sq.batch.lens.len() >= info.sq_entries as usize {
        // More than the SQ could ever take at once.
        sq.batch.fail(ENOMEM);
        return;
    }
    let payload = if b.inline {
        SendPayload::Inline(&sq.inline)
    } else {
        SendPayload::Sges(&sq.sges)
    };
    match encode_send(info, &mut sq.staging, &b.hdr, payload) {
        Ok(len) => match sq.staging.get(..len) {
            Some(bytes) => {
                sq.batch.bytes.extend_from_slice(bytes);
                sq.batch.lens.push(len);
            }
            None => sq.batch.fail(EINVAL),
        },
        Err(e) => sq.batch.fail(e),
    }
}

/// Starts a request of operation `op` (after finishing the one before):
/// `wr_id` and `wr_flags` come from the `ibv_qp_ex`, `fill` sets the
/// operation's fields.
///
/// # Safety
///
/// As for [`with_sq`].
unsafe fn begin(qp: *mut IbvQpEx, op: SendOpcode, fill: impl FnOnce(&mut SendWqe)) {
    // SAFETY: `qp` is live; the application writes these fields before the
    // call, a plain read of them is what the API specifies.
    let (wr_id, wr_flags) = unsafe {
        (
            (&raw const (*qp).wr_id).read(),
            (&raw const (*qp).wr_flags).read(),
        )
    };
    // SAFETY: forwarded contract.
    unsafe {
        with_sq(qp, |info, sq| {
            if !sq.batch.open {
                return;
            }
            finish_current(info, sq);
            if let Err(e) = check_send(info, c_int::from(op as u8), wr_flags) {
                sq.batch.fail(e);
                return;
            }
            let mut hdr = SendWqe::new(wr_id, op);
            hdr.flags = (wr_flags & u32::from(SEND_FLAGS_ALL)) as u8;
            fill(&mut hdr);
            sq.sges.clear();
            sq.inline.clear();
            sq.batch.cur = Some(Building {
                hdr,
                inline: false,
                has_ud_addr: false,
            });
        })
    };
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

/// `ibv_qp_ex::wr_bind_mw`: binds `mw` under the new key `rkey` (the
/// window keeps its `rkey` field, as the API leaves it to the caller).
///
/// # Safety
///
/// As for [`wr_send`]; `mw` is a live window, `info` valid with a NULL or
/// live region.
unsafe extern "C" fn wr_bind_mw(
    qp: *mut IbvQpEx,
    mw: *mut IbvMw,
    rkey: u32,
    info: *const IbvMwBindInfo,
) {
    let mut bind = SendWqe::new(0, SendOpcode::BindMw);
    // SAFETY: `qp` is live; its context never changes.
    let ctx = unsafe { (*qp).qp_base.context };
    // SAFETY: `info` is NULL or valid per the contract.
    let r = match unsafe { info.as_ref() } {
        // SAFETY: `mw` and the region are live per the contract.
        Some(i) => unsafe { encode_bind(&mut bind, ctx, mw, rkey, i) },
        None => Err(EINVAL),
    };
    // SAFETY: forwarded contract.
    unsafe {
        begin(qp, SendOpcode::BindMw, |h| {
            h.imm_or_inv = bind.imm_or_inv;
            h.rkey = bind.rkey;
            h.remote_addr = bind.remote_addr;
            h.compare_add = bind.compare_add;
            h.remote_qpn = bind.remote_qpn;
            h.remote_qkey = bind.remote_qkey;
            h.ah = bind.ah;
        })
    };
    if let Err(e) = r {
        // SAFETY: forwarded contract.
        unsafe {
            with_sq(qp, |_, sq| {
                if sq.batch.open {
                    sq.batch.fail(e);
                }
            })
        };
    }
}

/// `ibv_qp_ex::wr_set_ud_addr`: `EINVAL` (at `wr_complete`) on a QP that
/// is not UD or with an AH that is not of this QP's context.
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
    let f = |info: &QpInfo, sq: &mut WorkQueue| {
        if !info.send.ud {
            return Err(EINVAL);
        }
        // SAFETY: a non-NULL AH is a live AH of some context per the
        // verbs API; `ah_num_of` only accepts ones of `ctx`.
        let num = unsafe { ah_num_of(ah, ctx) }.ok_or(EINVAL)?;
        let b = sq.batch.cur.as_mut().ok_or(EINVAL)?;
        b.hdr.ah = num;
        b.hdr.remote_qpn = remote_qpn;
        b.hdr.remote_qkey = remote_qkey;
        b.has_ud_addr = true;
        Ok(())
    };
    // SAFETY: forwarded contract.
    unsafe { with_current(qp, f) };
}

/// `ibv_qp_ex::wr_set_sge`.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_set_sge(qp: *mut IbvQpEx, lkey: u32, addr: u64, length: u32) {
    let sge = IbvSge { addr, length, lkey };
    // SAFETY: `sge` is one valid SGE; forwarded contract.
    unsafe { wr_set_sge_list(qp, 1, &sge) };
}

/// `ibv_qp_ex::wr_set_sge_list`: `EINVAL` for more SGEs than the QP has.
///
/// # Safety
///
/// As for [`wr_send`]; `list` holds `num_sge` SGEs.
unsafe extern "C" fn wr_set_sge_list(qp: *mut IbvQpEx, num_sge: usize, list: *const IbvSge) {
    let f = |info: &QpInfo, sq: &mut WorkQueue| {
        let n = c_int::try_from(num_sge).map_err(|_| EINVAL)?;
        // SAFETY: per the contract `list` holds `num_sge` SGEs.
        unsafe { gather_sges(list, n, info.send.max_sge, &mut sq.sges)? };
        let b = sq.batch.cur.as_mut().ok_or(EINVAL)?;
        b.inline = false;
        Ok(())
    };
    // SAFETY: forwarded contract.
    unsafe { with_current(qp, f) };
}

/// `ibv_qp_ex::wr_set_inline_data`: the data is copied now.
///
/// # Safety
///
/// As for [`wr_send`]; `addr` points at `length` readable bytes.
unsafe extern "C" fn wr_set_inline_data(qp: *mut IbvQpEx, addr: *mut c_void, length: usize) {
    let buf = IbvDataBuf { addr, length };
    // SAFETY: `buf` is one valid buffer; forwarded contract.
    unsafe { wr_set_inline_data_list(qp, 1, &buf) };
}

/// `ibv_qp_ex::wr_set_inline_data_list`: the data is copied now;
/// `EINVAL` for more than the QP's `max_inline_data` bytes.
///
/// # Safety
///
/// As for [`wr_send`]; `list` holds `num_buf` buffers of readable bytes.
unsafe extern "C" fn wr_set_inline_data_list(
    qp: *mut IbvQpEx,
    num_buf: usize,
    list: *const IbvDataBuf,
) {
    let f = |info: &QpInfo, sq: &mut WorkQueue| {
        if num_buf > 0 && list.is_null() {
            return Err(EINVAL);
        }
        sq.sges.clear();
        if num_buf > 0 {
            // SAFETY: per the contract `list` holds `num_buf` buffers.
            let bufs = unsafe { core::slice::from_raw_parts(list, num_buf) };
            for b in bufs {
                let length = u32::try_from(b.length).map_err(|_| EINVAL)?;
                sq.sges.push(Sge {
                    addr: b.addr.addr() as u64,
                    length,
                    lkey: 0,
                });
            }
        }
        // SAFETY: the SGEs describe the application's buffers, readable
        // per the contract.
        unsafe { gather_inline(&sq.sges, info.send.max_inline, &mut sq.inline)? };
        let b = sq.batch.cur.as_mut().ok_or(EINVAL)?;
        b.inline = true;
        Ok(())
    };
    // SAFETY: forwarded contract.
    unsafe { with_current(qp, f) };
}

/// `ibv_qp_ex::wr_start`: opens a new, empty batch.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_start(qp: *mut IbvQpEx) {
    // SAFETY: forwarded contract.
    unsafe { with_sq(qp, |_, sq| sq.batch.reset(true)) };
}

/// `ibv_qp_ex::wr_abort`: drops the batch; nothing of it was posted.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_abort(qp: *mut IbvQpEx) {
    // SAFETY: forwarded contract.
    unsafe { with_sq(qp, |_, sq| sq.batch.reset(false)) };
}

/// Copies the batch into the SQ ring (unpublished): all of it or, on an
/// error, nothing but what an impossible ring failure left behind.
fn write_batch(info: &QpInfo, sq: &mut WorkQueue, state: c_int) -> Result<(), c_int> {
    finish_current(info, sq);
    if sq.batch.err != 0 {
        return Err(sq.batch.err);
    }
    if state < IBV_QPS_RTS {
        return Err(EINVAL);
    }
    let region = sq.map.region();
    let free = sq.producer.free_slots(&region).map_err(ring_errno)?;
    if (free as usize) < sq.batch.lens.len() {
        return Err(ENOMEM);
    }
    let mut off = 0usize;
    for &len in &sq.batch.lens {
        let end = off.checked_add(len).ok_or(EINVAL)?;
        let bytes = sq.batch.bytes.get(off..end).ok_or(EINVAL)?;
        sq.producer.write_next(&region, bytes).map_err(ring_errno)?;
        off = end;
    }
    Ok(())
}

/// `ibv_qp_ex::wr_complete`: posts the batch (see the module
/// documentation); 0 or an errno value.
///
/// # Safety
///
/// As for [`wr_send`].
unsafe extern "C" fn wr_complete(qp: *mut IbvQpEx) -> c_int {
    // SAFETY: `qp` is the start of a live RroceQp; only the immutable
    // `info`, the `sq` lock and fields that never change are read.
    let (info, lock, ctx, handle) = unsafe {
        let r = qp.cast::<RroceQp>();
        (
            (*r).info,
            &(*r).sq,
            (*qp).qp_base.context,
            (*qp).qp_base.handle,
        )
    };
    // SAFETY: `qp` is live.
    let state = unsafe { qp_state(qp.cast::<IbvQp>()) };
    let mut guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(sq) = guard.as_mut() else {
        return EINVAL;
    };
    if !sq.batch.open {
        return EINVAL;
    }
    let written = write_batch(&info, sq, state);
    sq.batch.reset(false);
    if let Err(e) = written {
        return e;
    }
    // SAFETY: `ctx` is the QP's live context.
    let cmd_fd = unsafe { (*ctx).cmd_fd };
    match publish_and_ring(guard, cmd_fd, handle) {
        Ok(()) => 0,
        Err(RingFailure::Unpublished(e) | RingFailure::Doorbell(e)) => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_ops_per_qp_type() {
        let all = IBV_QP_EX_WITH_RDMA_WRITE
            | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
            | IBV_QP_EX_WITH_SEND
            | IBV_QP_EX_WITH_SEND_WITH_IMM
            | IBV_QP_EX_WITH_RDMA_READ
            | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
            | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
            | IBV_QP_EX_WITH_LOCAL_INV
            | IBV_QP_EX_WITH_BIND_MW
            | IBV_QP_EX_WITH_SEND_WITH_INV;
        assert_eq!(send_ops_supported(OpcodeSet::RC), all);
        assert_eq!(
            send_ops_supported(OpcodeSet::UC),
            IBV_QP_EX_WITH_RDMA_WRITE
                | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
                | IBV_QP_EX_WITH_SEND
                | IBV_QP_EX_WITH_SEND_WITH_IMM
                | IBV_QP_EX_WITH_LOCAL_INV
                | IBV_QP_EX_WITH_BIND_MW
        );
        assert_eq!(
            send_ops_supported(OpcodeSet::UD),
            IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM
        );
    }

    #[test]
    fn batch_keeps_first_error() {
        let mut b = Batch::default();
        b.reset(true);
        b.fail(EINVAL);
        b.fail(ENOMEM);
        assert_eq!(b.err, EINVAL);
        b.bytes.push(1);
        b.lens.push(1);
        b.reset(false);
        assert!(!b.open && b.err == 0 && b.bytes.is_empty() && b.lens.is_empty());
    }
}
