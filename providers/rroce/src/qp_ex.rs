// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! The work-request API of `ibv_qp_ex` (`ibv_wr_start`, `ibv_wr_send`,
//! `ibv_wr_set_sge`, ..., `ibv_wr_complete`), for QPs created with
//! `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
//!
//! `wr_start` … `wr_complete`/`wr_abort` is a critical section of the
//! QP (`ibv_wr_post(3)`): `wr_start` takes the QP's session lock
//! ([`crate::session`]) and the other two give it back, and `post_send`
//! holds it too, so another thread's post waits for the session to end
//! (the request being built uses the SQ's scratch buffers).
//!
//! A batch lives in the SQ's [`WorkQueue`] under the SQ lock.  Each
//! operation call (`wr_send`, `wr_rdma_write`, ...) finishes the request
//! built so far and starts a new one from the `wr_id`/`wr_flags` fields of
//! the `ibv_qp_ex`; the setters (`wr_set_sge`, `wr_set_inline_data`,
//! `wr_set_ud_addr`, `wr_set_xrc_srqn`, ...) complete it.  A finished request is encoded and
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
//! without `wr_set_ud_addr`, a request of an XRC_SEND QP without
//! `wr_set_xrc_srqn` (but LOCAL_INV and BIND_MW)), `EINVAL` if the QP is not in RTS/SQD/...
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
    /// What `wr_set_xrc_srqn` set (required on XRC_SEND).
    xrc_srqn: Option<u32>,
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
pub(crate) const SEND_OPS: [(u64, SendOpcode); 11] = [
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
    (IBV_QP_EX_WITH_ATOMIC_WRITE, SendOpcode::AtomicWrite),
];

/// The `send_ops_flags` a QP with `opcodes` supports.
pub(crate) fn send_ops_supported(opcodes: OpcodeSet) -> u64 {
    SEND_OPS
        .iter()
        .filter(|(_, op)| opcodes.contains(*op))
        .fold(0, |acc, (flag, _)| acc | flag)
}

impl RroceQp {
    /// Runs `f` with the QP's limits and its SQ, under the SQ lock.  `None`
    /// if the QP has no SQ (never the case for a created QP).
    fn with_sq<R>(&self, f: impl FnOnce(&QpInfo, &mut WorkQueue) -> R) -> Option<R> {
        lock(&self.sq).as_mut().map(|sq| f(&self.info, sq))
    }

    /// Runs `f` on the request being built, if a batch is open; an error
    /// of the batch if there is no such request or `f` fails.
    fn with_current(&self, f: impl FnOnce(&QpInfo, &mut WorkQueue) -> Result<(), c_int>) {
        self.with_sq(|info, sq| {
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
        });
    }

    /// `wr_start`: opens a new, empty batch, and the QP's session (no
    /// other thread posts to the QP until `wr_complete`/`wr_abort`).
    pub(crate) fn wr_start(&self) {
        self.session.acquire();
        self.with_sq(|_, sq| sq.batch.reset(true));
    }

    /// `wr_abort`: drops the batch; nothing of it was posted.  Ends the
    /// session.
    pub(crate) fn wr_abort(&self) {
        self.with_sq(|_, sq| sq.batch.reset(false));
        self.session.release();
    }

    /// An operation call (`wr_send`, `wr_rdma_write`, ...): finishes the
    /// request built so far and starts one of operation `op` with the
    /// `wr_id`/`wr_flags` the application set in the `ibv_qp_ex`; `fill`
    /// sets the operation's fields.
    pub(crate) fn wr_begin(
        &self,
        wr_id: u64,
        wr_flags: u32,
        op: SendOpcode,
        fill: impl FnOnce(&mut SendWqe),
    ) {
        self.with_sq(|info, sq| {
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
                xrc_srqn: None,
            });
        });
    }

    /// `wr_bind_mw`: binds the window of `bind` under its new key (the
    /// window keeps its `rkey` field, as the API leaves that to the
    /// caller); a bad bind is an error of the batch.
    pub(crate) fn wr_bind_mw(&self, wr_id: u64, wr_flags: u32, bind: &BindRequest) {
        let mut b = SendWqe::new(0, SendOpcode::BindMw);
        let r = encode_bind(&mut b, bind);
        self.wr_begin(wr_id, wr_flags, SendOpcode::BindMw, |h| {
            h.imm_or_inv = b.imm_or_inv;
            h.rkey = b.rkey;
            h.remote_addr = b.remote_addr;
            h.compare_add = b.compare_add;
            h.remote_qpn = b.remote_qpn;
            h.remote_qkey = b.remote_qkey;
            h.ah = b.ah;
        });
        if let Err(e) = r {
            self.wr_fail(e);
        }
    }

    /// An error `err` of the open batch (reported by `wr_complete`).
    pub(crate) fn wr_fail(&self, err: c_int) {
        self.with_sq(|_, sq| {
            if sq.batch.open {
                sq.batch.fail(err);
            }
        });
    }

    /// `wr_set_ud_addr`: `EINVAL` (at `wr_complete`) on a QP that is not
    /// UD or without an AH of this QP's context.
    pub(crate) fn wr_set_ud_addr(&self, ud: UdAddr) {
        self.with_current(|info, sq| {
            if !info.send.ud {
                return Err(EINVAL);
            }
            let num = ud.ah.ok_or(EINVAL)?;
            let b = sq.batch.cur.as_mut().ok_or(EINVAL)?;
            b.hdr.ah = num;
            b.hdr.remote_qpn = ud.remote_qpn;
            b.hdr.remote_qkey = ud.remote_qkey;
            b.has_ud_addr = true;
            Ok(())
        });
    }

    /// `wr_set_xrc_srqn`: the remote XRC SRQ of the request; `EINVAL` (at
    /// `wr_complete`) on a QP that is not XRC_SEND or for a number above
    /// 24 bits.
    pub(crate) fn wr_set_xrc_srqn(&self, remote_srqn: u32) {
        self.with_current(|info, sq| {
            if !info.xrc {
                return Err(EINVAL);
            }
            let b = sq.batch.cur.as_mut().ok_or(EINVAL)?;
            b.xrc_srqn = Some(remote_srqn);
            Ok(())
        });
    }

    /// `wr_set_sge(_list)`: `EINVAL` for more SGEs than the QP has.
    pub(crate) fn wr_set_sges(&self, sges: Result<&[IbvSge], c_int>) {
        self.with_current(|info, sq| {
            gather_sges(sges?, info.send.max_sge, &mut sq.sges)?;
            let b = sq.batch.cur.as_mut().ok_or(EINVAL)?;
            b.inline = false;
            Ok(())
        });
    }

    /// `wr_set_inline_data(_list)`: the data is copied now; `EINVAL` for
    /// more than the QP's `max_inline_data` bytes.
    pub(crate) fn wr_set_inline(&self, data: Result<InlineData<'_>, c_int>) {
        self.with_current(|info, sq| {
            let data = data?;
            if data.len() > info.send.max_inline as usize {
                return Err(EINVAL);
            }
            data.copy_into(&mut sq.inline)?;
            let b = sq.batch.cur.as_mut().ok_or(EINVAL)?;
            b.inline = true;
            Ok(())
        });
    }

    /// `wr_complete` in QP state `state`: posts the batch (see the module
    /// documentation); 0 or an errno value.  Ends the session.
    pub(crate) fn wr_complete(&self, state: c_int, db: Doorbell) -> c_int {
        let r = self.complete_batch(state, db);
        self.session.release();
        r
    }

    fn complete_batch(&self, state: c_int, db: Doorbell) -> c_int {
        let mut guard = lock(&self.sq);
        let Some(sq) = guard.as_mut() else {
            return EINVAL;
        };
        if !sq.batch.open {
            return EINVAL;
        }
        let written = write_batch(&self.info, sq, state);
        sq.batch.reset(false);
        if let Err(e) = written {
            return e;
        }
        match publish_and_ring(guard, db) {
            Ok(()) => 0,
            Err(RingFailure::Unpublished(e) | RingFailure::Doorbell(e)) => e,
        }
    }
}

/// Encodes the request being built, if any, into the batch.
fn finish_current(info: &QpInfo, sq: &mut WorkQueue) {
    let Some(mut b) = sq.batch.cur.take() else {
        return;
    };
    if sq.batch.err != 0 {
        return;
    }
    if info.send.ud && !b.has_ud_addr {
        sq.batch.fail(EINVAL);
        return;
    }
    if let Err(e) = set_xrc_srqn(info, &mut b.hdr, b.xrc_srqn) {
        sq.batch.fail(e);
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
            | IBV_QP_EX_WITH_SEND_WITH_INV
            | IBV_QP_EX_WITH_ATOMIC_WRITE;
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
