// SPDX-License-Identifier: GPL-2.0
//! Queue pairs: creation with mapped send/receive rings, the state machine
//! of `modify_qp`, `query_qp`, destruction.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! The rules of `modify_qp` (legal transitions, required and optional
//! attributes, value checks, all-or-nothing updates) are the safe
//! `proto::qp` logic; this file converts between ib_core's structures and
//! those, and resolves the address vector.  The data path of RC QPs
//! (`dp`) runs under the QP lock: the provider's doorbell (a zero-WR
//! `POST_SEND`) lands in [`post_send`], received packets in [`deliver`],
//! and the retransmission timer in [`timer_fn`].

use core::ptr::NonNull;
use core::mem::{offset_of, size_of, MaybeUninit};
use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::bindings;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::device::RroceDev;
use crate::dp::{Ctx, Dp};
use crate::ring::{Ring, RING_START};
use crate::ffi;
use crate::av::{address_vector, AddressVector};
use crate::dp::path_of;
use crate::ib::ah::RoceAttr;
use crate::proto::rc::{is_rc_request, is_rc_response, is_uc_request, InRequest, InResponse};
use kernel::types::Opaque;
use crate::proto::link;
use crate::sync::lock::{new_spinlock_bh, new_spinlock_irq, SpinLockBh, SpinLockIrq};
use crate::mcast;
use crate::proto::abi::{CreateQpCmd, CreateQpResp};
use crate::proto::qp::{AttrMask, DeviceLimits, QpAttrs, QpState, QpType};
use crate::proto::ring::{Producer, SharedRegion, CONS_FLAGS_OFFSET, CONS_FLUSHING};
use crate::proto::wqe::{self, SendOpcode, SendPayload, SendWqe, Sge};
use crate::limits;
use crate::ib::srq::SrqHandle;
use crate::ib::udata::UData;
use crate::ib::qp::QpEvents;
use crate::net::route::DstCache;
use crate::sync::rcu::ReadGuard;
use crate::sync::timer::{TimerRef, WorkRef};
use crate::ib::cq::CqHandle;
use crate::cq::CqPriv;
use crate::ib::wr::{RecvWrChain, SendExt, SendWr, SendWrChain};
use crate::srq::SrqPriv;

/// Largest inline payload a send WQE may carry.
pub(crate) const MAX_INLINE: u32 = 512;
/// QP numbers handed out (0 and 1 are the special QPs).
const QPN_MIN: u32 = 16;
/// The GSI QP's number.
const GSI_QPN: u32 = 1;
const QPN_MAX: u32 = 0x00ff_ffff;


struct QpStateInner {
    state: QpState,
    attrs: QpAttrs,
    av: Option<AddressVector>,
    dp: KBox<Dp>,
}

/// The rings of a kernel QP are filled by [`post_send`]/[`post_recv`]
/// (under their own irqsave lock, [`QpPriv::kq`]) instead of by a user
/// process; the data path consumes them under the QP lock.
struct KernelQueues {
    sq: Producer,
    rq: Producer,
    /// One entry being built.
    staging: KVVec<u8>,
}

struct QpPriv {
    ty: QpType,
    /// `IB_SIGNAL_ALL_WR` or `IB_SIGNAL_REQ_WR`, as created.
    sq_sig_type: bindings::ib_sig_type,
    sq: Ring,
    rq: Ring,
    max_send_sge: u32,
    max_recv_sge: u32,
    max_inline: u32,
    pd: crate::ib::PdId,
    send_cq: CqHandle<CqPriv>,
    recv_cq: CqHandle<CqPriv>,
    /// The SRQ receives come from, or null (then from `rq`, else `rq` is
    /// a one-entry kernel ring that stays empty).  The QP holds a use
    /// count on it.
    srq: Option<SrqHandle<SrqPriv>>,
    /// Route cache (`None` without memory: a route lookup per packet).
    dst: Option<DstCache>,
    inner: Pin<KBox<SpinLockBh<QpStateInner>>>,
    /// The producer side of a kernel consumer's rings (`None` for a user
    /// QP).  Its own irqsave lock, never held together with `inner`'s
    /// except inside it: kernel consumers post with interrupts disabled.
    kq: Option<Pin<KBox<SpinLockIrq<KernelQueues>>>>,
    /// The QP state as of the last data-path section ([`unlock`]), for
    /// posts that cannot take the QP lock (interrupts disabled).
    state_seen: AtomicU32,
    /// A post with interrupts disabled left the doorbell to the work item.
    kick: AtomicBool,
}

/// Our part of a QP (allocated by ib_core, `ib` first).
///
/// # Invariants
///
/// `p` is initialised exactly when `create_qp` succeeded, until
/// `destroy_qp` drops it.
///
/// `live` is set once `p` and `timer` are initialised and cleared when
/// destruction starts; the receive path only uses QPs it sees live.
#[repr(C)]
pub(crate) struct RroceQp {
    ib: bindings::ib_qp,
    live: AtomicBool,
    timer: Opaque<bindings::timer_list>,
    work: Opaque<bindings::work_struct>,
    p: MaybeUninit<QpPriv>,
}

/// Size ib_core allocates for a QP.
pub(crate) const QP_SIZE: usize = size_of::<RroceQp>();

impl RroceQp {
    /// # Safety
    ///
    /// `qp` must be a QP of ours that was created successfully and is not
    /// yet destroyed.
    unsafe fn from_ib<'a>(qp: *mut bindings::ib_qp) -> (&'a RroceQp, &'a QpPriv) {
        // SAFETY: per the requirements, `p` is initialised.
        unsafe {
            let q = &*qp.cast::<RroceQp>();
            (q, q.p.assume_init_ref())
        }
    }

    fn dev(&self) -> &RroceDev {
        // SAFETY: ib_core set `device` to one of our devices.
        unsafe { RroceDev::from_ib(self.ib.device) }
    }

    /// The QP's work item.
    fn work(&self) -> WorkRef<'_> {
        // SAFETY: set up in `create` before the QP was published, cancelled
        // in `destroy_qp` only after every user of the QP is done.
        unsafe { WorkRef::new(&self.work) }
    }

    fn ctx<'a>(&'a self, p: &'a QpPriv, rcu: &'a ReadGuard) -> Ctx<'a> {
        Ctx {
            dev: self.dev(),
            qpn: self.ib.qp_num,
            pd: p.pd,
            rcu,
            send_cq: &p.send_cq,
            recv_cq: &p.recv_cq,
            sq_ring: p.sq.buf(),
            rq_ring: p.rq.buf(),
            srq: p.srq.as_ref().map(SrqHandle::get),
            ib_srq: p.srq.as_ref(),
            sig_all: p.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
            // SAFETY: set up in `create` before the QP was published, shut
            // down and cancelled in `destroy_qp` only after every data-path
            // section (the only users of a `Ctx`) is over; the QP itself is
            // fully created and outlives them.
            timer: unsafe { TimerRef::new(&self.timer) },
            work: self.work(),
            dst: p.dst.as_ref(),
            notify: core::cell::Cell::new(0),
            // SAFETY: as above.
            ib_qp: unsafe { QpEvents::new(NonNull::from(&self.ib)) },
            events: core::cell::Cell::new(0),
            cq_lost: core::cell::Cell::new(false),
        }
    }
}

type DpGuard<'a> = kernel::sync::lock::Guard<'a, QpStateInner, crate::sync::lock::SpinLockBhBackend>;

impl QpPriv {
    fn lock_dp(&self) -> DpGuard<'_> {
        self.inner.lock()
    }
}

/// Ends a data-path section: a completion lost to a CQ overflow puts the
/// QP into the error state (the CQ is in error), then the lock is dropped
/// and the due handlers and events run.
fn unlock(p: &QpPriv, ctx: &Ctx<'_>, mut g: DpGuard<'_>) {
    let inner = &mut *g;
    inner.dp.after_cq_loss(ctx, &mut inner.state);
    p.state_seen.store(inner.state as u32, Ordering::Release);
    drop(g);
    ctx.fire();
}

fn create(qp: &mut RroceQp, init: &mut bindings::ib_qp_init_attr, udata: Option<UData<'_>>) -> Result {
    let ty = QpType::from_ib(init.qp_type).ok_or_else(limits::eopnotsupp)?;
    // The GSI QP (QP1) belongs to ib_core's MAD layer: kernel only.
    if !matches!(ty, QpType::Rc | QpType::Uc | QpType::Ud) && (ty != QpType::Gsi || udata.is_some()) {
        return Err(limits::eopnotsupp());
    }
    if init.create_flags != 0 {
        return Err(limits::eopnotsupp());
    }
    if !init.srq.is_null() && !matches!(ty, QpType::Rc | QpType::Ud) {
        return Err(limits::eopnotsupp());
    }
    // SAFETY: ib_core passes null or a live SRQ of this device, and the
    // QP's live CQs, on which the QP holds use counts from now until it is
    // destroyed.
    let (srq_handle, send_cq, recv_cq) = unsafe {
        (SrqHandle::<SrqPriv>::from_raw(init.srq), CqHandle::from_raw(init.send_cq), CqHandle::from_raw(init.recv_cq))
    };
    let (Some(send_cq), Some(recv_cq)) = (send_cq, recv_cq) else { return Err(EINVAL) };
    let srq = srq_handle.as_ref().map(SrqHandle::get);
    let self_ptr: *mut RroceQp = qp;
    // SAFETY: ib_core set `device` to one of our devices, which outlives
    // its QPs.
    let dev = unsafe { RroceDev::from_ib(qp.ib.device) };
    let cap = &mut init.cap;
    let max_wr = limits::max_qp_wr();
    let max_sge = dev.p.attrs.max_send_sge as u32;
    // With an SRQ the receive capacities are the SRQ's; ignored here.
    let rq_bad = srq.is_none() && (cap.max_recv_wr == 0 || cap.max_recv_wr > max_wr || cap.max_recv_sge > max_sge);
    if cap.max_send_wr == 0 || cap.max_send_wr > max_wr || rq_bad || cap.max_send_sge > max_sge || cap.max_inline_data > MAX_INLINE {
        return Err(EINVAL);
    }
    let uctx = limits::user_call::<{ CreateQpCmd::SIZE }>(udata, |c| CreateQpCmd::from_bytes(c).is_valid())?;
    let sq_size = wqe::send_entry_size(cap.max_send_sge.max(1), cap.max_inline_data).ok_or(EINVAL)?;
    let (sq, sq_off) = Ring::new(uctx, cap.max_send_wr, sq_size)?;
    // What the rounded entries really hold, never more than the device max.
    let (sq_sge, sq_data) = wqe::send_caps(sq_size);
    let max_send_sge = u32::from(sq_sge).min(max_sge);
    let max_inline = sq_data.min(MAX_INLINE);
    let (rq, rq_off, max_recv_sge, recv_lim_sge) = match srq {
        Some(s) => {
            // A placeholder RQ with the SRQ's entry size (which sizes the
            // data path's receive scratch), never posted to or mapped.
            let (rq, _) = Ring::new(None, 1, s.entry_size())?;
            (rq, 0, 0, u32::from(s.recv_limits().max_sge))
        }
        None => {
            let rq_size = wqe::recv_entry_size(cap.max_recv_sge.max(1)).ok_or(EINVAL)?;
            let (rq, rq_off) = Ring::new(uctx, cap.max_recv_wr, rq_size)?;
            let n = u32::from(wqe::recv_max_sge(rq_size)).min(max_sge);
            (rq, rq_off, n, n)
        }
    };
    let rq_size = rq.layout.entry_size();

    let max_msg = dev.p.attrs.max_mr_size.min(1 << 31) as u32;
    let ud = matches!(ty, QpType::Ud | QpType::Gsi);
    let uc = ty == QpType::Uc;
    let mut dp = Dp::new(
        sq.layout,
        rq.layout,
        RING_START,
        max_send_sge as u16,
        recv_lim_sge as u16,
        max_inline,
        max_msg,
        ud,
        uc,
    )?;
    let kq = if sq.mem.is_kernel() {
        dp.allow_fast_reg();
        let queues = KernelQueues {
            sq: Producer::new(sq.layout, RING_START),
            rq: Producer::new(rq.layout, RING_START),
            staging: KVVec::from_elem(0u8, sq_size.max(rq_size) as usize, GFP_KERNEL_ACCOUNT)?,
        };
        Some(KBox::pin_init(new_spinlock_irq!(queues, "rroce_qp_post"), GFP_KERNEL_ACCOUNT)?)
    } else {
        None
    };
    let inner = KBox::pin_init(
        new_spinlock_bh!(QpStateInner { state: QpState::Reset, attrs: QpAttrs::default(), av: None, dp }, "rroce_qp"),
        GFP_KERNEL_ACCOUNT,
    )?;
    let max_qp = dev.p.attrs.max_qp as u32;
    // Only reserved here: the QP is published once it is complete (below),
    // so the receive path never finds one whose creation still fails.
    let qpn = if ty == QpType::Gsi {
        dev.p.qpns.reserve(GSI_QPN, GSI_QPN, max_qp, bindings::GFP_KERNEL)?
    } else {
        dev.p.qpns.reserve(QPN_MIN, QPN_MAX, max_qp, bindings::GFP_KERNEL)?
    };
    let has_rq = srq.is_none();
    let resp = CreateQpResp {
        sq_offset: sq_off,
        rq_offset: rq_off,
        sq_bytes: sq.layout.bytes_total_u32(),
        rq_bytes: if has_rq { rq.layout.bytes_total_u32() } else { 0 },
        sq_entries: sq.layout.entries(),
        rq_entries: if has_rq { rq.layout.entries() } else { 0 },
        sq_entry_size: sq_size,
        rq_entry_size: if has_rq { rq_size } else { 0 },
        max_send_sge,
        max_recv_sge,
        max_inline,
        qpn,
        flags: 0,
        reserved: 0,
    };
    if let Some(udata) = udata {
        if let Err(e) = udata.write(&resp.to_bytes()) {
            dev.p.qpns.unreserve(qpn);
            return Err(e);
        }
    }
    cap.max_send_wr = sq.layout.entries();
    cap.max_recv_wr = if has_rq { rq.layout.entries() } else { 0 };
    cap.max_send_sge = max_send_sge;
    cap.max_recv_sge = max_recv_sge;
    cap.max_inline_data = max_inline;
    qp.ib.qp_num = qpn;
    // INVARIANT: initialised on success only.
    qp.p.write(QpPriv {
        ty,
        sq_sig_type: init.sq_sig_type,
        sq,
        rq,
        max_send_sge,
        max_recv_sge,
        max_inline,
        pd: crate::ib::PdId::of(qp.ib.pd),
        send_cq,
        recv_cq,
        srq: srq_handle,
        dst: DstCache::new(),
        inner,
        kq,
        state_seen: AtomicU32::new(QpState::Reset as u32),
        kick: AtomicBool::new(false),
    });
    // SAFETY: the timer and the work item are embedded in the QP, which
    // does not move; `destroy_qp` shuts the timer down and cancels the
    // work before the QP memory is freed.
    unsafe {
        ffi::rroce_timer_setup(qp.timer.get(), timer_fn);
        ffi::rroce_work_init(qp.work.get(), work_fn);
    }
    qp.live.store(true, Ordering::Release);
    dev.p.qpns.publish(qpn, self_ptr.cast());
    Ok(())
}

fn to_proto(a: &bindings::ib_qp_attr) -> QpAttrs {
    QpAttrs {
        state: QpState::from_ib(a.qp_state).unwrap_or(QpState::Err),
        cur_state: QpState::from_ib(a.cur_qp_state).unwrap_or(QpState::Err),
        en_sqd_async_notify: a.en_sqd_async_notify != 0,
        sq_draining: false,
        access_flags: a.qp_access_flags as u32,
        pkey_index: a.pkey_index,
        port: a.port_num,
        qkey: a.qkey,
        path_mtu: a.path_mtu,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        rq_psn: a.rq_psn,
        sq_psn: a.sq_psn,
        dest_qpn: a.dest_qp_num,
        max_rd_atomic: a.max_rd_atomic,
        max_dest_rd_atomic: a.max_dest_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        path_mig_state: a.path_mig_state,
    }
}

fn modify(qp: &RroceQp, p: &QpPriv, attr: &bindings::ib_qp_attr, mask: c_int) -> Result {
    let mask = AttrMask::from_bits_retain(mask as u32);
    let dev = qp.dev();
    // A state given in the request must be one we know (to_proto maps
    // unknown values to ERR, which must not slip through).
    if mask.contains(AttrMask::STATE) && QpState::from_ib(attr.qp_state).is_none() {
        return Err(EINVAL);
    }
    if mask.contains(AttrMask::CUR_STATE) && QpState::from_ib(attr.cur_qp_state).is_none() {
        return Err(EINVAL);
    }
    let av = if mask.contains(AttrMask::AV) {
        // SAFETY: for an AV ib_core resolves the source GID attribute
        // before calling the driver and keeps it referenced for the call.
        let roce = unsafe { RoceAttr::from_raw(&attr.ah_attr) }?;
        Some(address_vector(&roce)?)
    } else {
        None
    };
    let limits = DeviceLimits {
        active_mtu: link::active_mtu(dev.p.ndev.mtu()).unwrap_or(link::IbMtu::Mtu256),
        max_qp_init_rd_atom: dev.p.attrs.max_qp_init_rd_atom as u32,
        max_qp_rd_atom: dev.p.attrs.max_qp_rd_atom as u32,
    };
    let new = to_proto(attr);
    let mut g = p.inner.lock();
    let cur = g.state;
    let next = g
        .attrs
        .apply(cur, p.ty, &new, mask, &limits)
        .map_err(|e| Error::from_errno(-e.errno()))?;
    g.state = next;
    if av.is_some() {
        g.av = av;
    }
    let rcu = ReadGuard::new();
    let ctx = qp.ctx(p, &rcu);
    let inner = &mut *g;
    let path = match (inner.av, next) {
        (Some(av), QpState::Rtr | QpState::Rts | QpState::Sqd) => {
            Some(path_of(dev, &av, qp.ib.qp_num, inner.attrs.dest_qpn))
        }
        _ => None,
    };
    inner.dp.set_path(&ctx, path);
    inner.dp.set_qkey(inner.attrs.qkey);
    if next != cur {
        inner.dp.on_modify(&ctx, &mut inner.state, &inner.attrs, cur, next);
    }
    if next == QpState::Reset {
        inner.attrs = QpAttrs::default();
        inner.av = None;
    }
    unlock(p, &ctx, g);
    Ok(())
}

/// A kernel send request as the driver sees it.
type KernelSendWr<'a> = SendWr<'a, crate::ah::RroceAh, crate::mr::MrPart>;

/// The send WQE of a kernel work request, written into `out`; `EINVAL`
/// for what the QP cannot take.
fn kernel_send_wqe(p: &QpPriv, wr: &KernelSendWr<'_>, out: &mut [u8]) -> Result {
    if wr.opcode == bindings::ib_wr_opcode_IB_WR_REG_MR {
        return kernel_reg_wqe(p, wr, out);
    }
    let op = u8::try_from(wr.opcode).ok().and_then(SendOpcode::from_u8).ok_or(EINVAL)?;
    // READ, atomics and SEND with invalidate do not exist on UC.
    if p.ty == QpType::Uc && !wqe::OpcodeSet::UC.contains(op) {
        return Err(EINVAL);
    }
    // LOCAL_INV is the only local operation of kernel consumers posted
    // with its own opcode (REG_MR above); not on UD/GSI QPs.
    let n = wr.sges.len();
    let local_ok = op == SendOpcode::LocalInv && matches!(p.ty, QpType::Rc | QpType::Uc) && n == 0;
    if (op.is_local() && !local_ok) || op == SendOpcode::RegMr || n > p.max_send_sge as usize {
        return Err(EINVAL);
    }
    let flags = wr.send_flags;
    let mut h = SendWqe::new(wr.wr_id, op);
    h.flags = (flags & u32::from(wqe::SEND_FLAGS_ALL)) as u8;
    if op.has_imm() || op.has_inv() {
        h.imm_or_inv = wr.imm_or_inv;
    }
    match wr.ext {
        SendExt::Rdma { remote_addr, rkey } => {
            h.remote_addr = remote_addr;
            h.rkey = rkey;
        }
        SendExt::Ud { ah, remote_qpn, remote_qkey } => {
            h.ah = ah.ok_or(EINVAL)?.num;
            h.remote_qpn = remote_qpn;
            h.remote_qkey = remote_qkey;
        }
        SendExt::Atomic { remote_addr, rkey, compare_add, swap } => {
            h.remote_addr = remote_addr;
            h.rkey = rkey;
            h.compare_add = compare_add;
            h.swap = swap;
        }
        SendExt::None | SendExt::Reg { .. } => {}
    }
    let inline = flags & bindings::ib_send_flags_IB_SEND_INLINE as u32 != 0 && op.allows_inline();
    if inline {
        let total = wr.sges.iter().try_fold(0u32, |t, s| t.checked_add(s.length)).ok_or(EINVAL)?;
        if total > p.max_inline {
            return Err(EINVAL);
        }
        if out.len() < wqe::SEND_HDR_BYTES {
            return Err(EINVAL);
        }
        let (head, data) = out.split_at_mut(wqe::SEND_HDR_BYTES);
        let mut at = 0usize;
        for i in 0..n {
            let src = wr.inline_bytes(i).ok_or(EINVAL)?;
            data.get_mut(at..at + src.len()).ok_or(EINVAL)?.copy_from_slice(src);
            at += src.len();
        }
        h.flags |= wqe::SEND_INLINE;
        h.inline_len = total;
        head.copy_from_slice(&h.to_bytes());
        return Ok(());
    }
    let mut sges = [Sge::default(); limits::MAX_SGE as usize];
    for (d, s) in sges.iter_mut().zip(wr.sges) {
        *d = Sge { addr: s.addr, length: s.length, lkey: s.lkey };
    }
    let sges = sges.get(..n).ok_or(EINVAL)?;
    wqe::write_send_wqe(out, &h, SendPayload::Sges(sges)).map_err(|_| EINVAL)?;
    Ok(())
}

/// The WQE of an `IB_WR_REG_MR` (RC QPs): the MR's mapping from its last
/// `ib_map_mr_sg`, the new key and the access flags go into the WQE; the
/// registration happens when the requester reaches it (`dp`).
fn kernel_reg_wqe(p: &QpPriv, wr: &KernelSendWr<'_>, out: &mut [u8]) -> Result {
    let SendExt::Reg { mr, key, access } = wr.ext else { return Err(EINVAL) };
    if p.ty != QpType::Rc || !wr.sges.is_empty() {
        return Err(EINVAL);
    }
    let req = crate::mr::reg_request(&mr, key, access)?;
    let mut h = SendWqe::new(wr.wr_id, SendOpcode::RegMr);
    h.flags = (wr.send_flags & u32::from(wqe::SEND_FLAGS_ALL & !wqe::SEND_INLINE)) as u8;
    req.to_wqe(&mut h);
    wqe::write_send_wqe(out, &h, SendPayload::Sges(&[])).map_err(|_| EINVAL)?;
    Ok(())
}

/// `post_send` of a kernel QP: each work request becomes a WQE in the SQ
/// ring, then the doorbell runs.  The walk stops at the first request not
/// posted (`ENOMEM` for a full queue, `EINVAL` for a bad request or
/// state).
fn post_send_kernel(q: &RroceQp, p: &QpPriv, chain: &mut SendWrChain<'_, crate::ah::RroceAh, crate::mr::MrPart>) -> Result {
    let kq = p.kq.as_ref().ok_or(EINVAL)?;
    // With interrupts disabled (ib_mad posts under `spin_lock_irqsave`)
    // neither the QP's `_bh` lock nor transmission is allowed: the
    // requests go into the ring and the work item rings the doorbell.
    let deferred = crate::sync::lock::irqs_disabled();
    let g = (!deferred).then(|| p.lock_dp());
    let state = g.as_ref().map_or_else(|| p.state_seen.load(Ordering::Acquire), |g| g.state as u32);
    if [QpState::Reset, QpState::Init, QpState::Rtr].iter().any(|&s| s as u32 == state) {
        return Err(EINVAL);
    }
    let r = fill_sq(p, &mut kq.lock(), chain);
    match g {
        Some(mut g) => {
            let rcu = ReadGuard::new();
            let ctx = q.ctx(p, &rcu);
            let inner = &mut *g;
            let _ = inner.dp.doorbell(&ctx, &mut inner.state);
            unlock(p, &ctx, g);
        }
        None => kick(q, p),
    }
    r
}

/// Writes the requests of `chain` into the SQ ring of a kernel QP and
/// publishes them; the walk stops at the first one not posted.
fn fill_sq(p: &QpPriv, kq: &mut KernelQueues, chain: &mut SendWrChain<'_, crate::ah::RroceAh, crate::mr::MrPart>) -> Result {
    let ring = p.sq.buf();
    let esz = p.sq.layout.entry_size() as usize;
    let mut r = Ok(());
    for w in chain.by_ref() {
        // The walk stops at this request: it is the first not posted.
        if !matches!(kq.sq.is_full(ring), Ok(false)) {
            r = Err(ENOMEM);
            break;
        }
        kq.staging.fill(0);
        if let Err(e) = w.and_then(|w| kernel_send_wqe(p, &w, &mut kq.staging)) {
            r = Err(e);
            break;
        }
        let entry = kq.staging.get(..esz).unwrap_or(&[]);
        if kq.sq.write_next(ring, entry).is_err() {
            r = Err(ENOMEM);
            break;
        }
    }
    let _ = kq.sq.publish(ring);
    r
}

/// Leaves the doorbell of a kernel post made with interrupts disabled to
/// the QP's work item.
fn kick(q: &RroceQp, p: &QpPriv) {
    p.kick.store(true, Ordering::Release);
    q.work().queue();
}

/// `post_send`: for a kernel QP the work requests; for a user QP the
/// doorbell (no work requests: the WQEs are in the mapped SQ).
///
/// # Safety
///
/// `ib_device_ops::post_send` contract.
pub(crate) unsafe extern "C" fn post_send(
    qp: *mut bindings::ib_qp,
    wr: *const bindings::ib_send_wr,
    bad_wr: *mut *const bindings::ib_send_wr,
) -> c_int {
    // SAFETY: `qp` was created by us and its owner holds it for the call.
    let (q, p) = unsafe { RroceQp::from_ib(qp) };
    // SAFETY: a kernel caller passes a valid chain of requests in their
    // containers (the MRs of this device are `mr::MrPart`s, the AHs
    // `RroceAh`s); a user QP gets none (its WQEs are in its mapped ring).
    let mut chain = unsafe { SendWrChain::from_raw(wr, matches!(p.ty, QpType::Ud | QpType::Gsi), q.ib.device) };
    if p.sq.mem.is_kernel() || !wr.is_null() {
        let r = if p.sq.mem.is_kernel() { post_send_kernel(q, p, &mut chain) } else { Err(EINVAL) };
        // SAFETY: ib_core passes a writable `bad_wr`.
        return unsafe { chain.finish(r, bad_wr) };
    }
    let rcu = ReadGuard::new();
    let ctx = q.ctx(p, &rcu);
    let mut g = p.lock_dp();
    let inner = &mut *g;
    let r = match inner.dp.doorbell(&ctx, &mut inner.state) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    };
    unlock(p, &ctx, g);
    r
}

/// `post_recv` of a kernel QP (user QPs post into their mapped RQ).
///
/// # Safety
///
/// `ib_device_ops::post_recv` contract.
pub(crate) unsafe extern "C" fn post_recv(
    qp: *mut bindings::ib_qp,
    wr: *const bindings::ib_recv_wr,
    bad_wr: *mut *const bindings::ib_recv_wr,
) -> c_int {
    // SAFETY: `qp` was created by us and its owner holds it for the call.
    let (q, p) = unsafe { RroceQp::from_ib(qp) };
    // SAFETY: ib_core passes a valid chain of work requests.
    let mut chain = unsafe { RecvWrChain::from_raw(wr) };
    let r = post_recv_kernel(q, p, &mut chain);
    // SAFETY: ib_core passes a writable `bad_wr`.
    unsafe { chain.finish(r, bad_wr) }
}

fn post_recv_kernel(q: &RroceQp, p: &QpPriv, chain: &mut RecvWrChain<'_>) -> Result {
    let kq = p.kq.as_ref().ok_or(EINVAL)?;
    // Receives of a QP with an SRQ are posted to the SRQ.
    if p.srq.is_some() {
        return Err(EINVAL);
    }
    // As in `post_send_kernel`: with interrupts disabled the QP lock is
    // not taken.
    let deferred = crate::sync::lock::irqs_disabled();
    let g = (!deferred).then(|| p.lock_dp());
    let state = g.as_ref().map_or_else(|| p.state_seen.load(Ordering::Acquire), |g| g.state as u32);
    if state == QpState::Reset as u32 {
        return Err(EINVAL);
    }
    let r = fill_rq(p, &mut kq.lock(), chain);
    match g {
        Some(mut g) => {
            let rcu = ReadGuard::new();
            let ctx = q.ctx(p, &rcu);
            let inner = &mut *g;
            if inner.state == QpState::Err {
                inner.dp.flush_rq(&ctx);
            }
            unlock(p, &ctx, g);
        }
        None => {
            // A QP entering ERR sets CONS_FLUSHING, then a full barrier,
            // then flushes the ring; publishing, a full barrier, then
            // reading the flag here means one of the two sees the other's
            // entries.
            crate::sync::smp_mb();
            let flags = p.rq.buf().load_u32_acquire(CONS_FLAGS_OFFSET).unwrap_or(0);
            if flags & CONS_FLUSHING != 0 {
                kick(q, p);
            }
        }
    }
    r
}

/// Writes the requests of `chain` into the RQ ring of a kernel QP and
/// publishes them; the walk stops at the first one not posted.
fn fill_rq(p: &QpPriv, kq: &mut KernelQueues, chain: &mut RecvWrChain<'_>) -> Result {
    let esz = p.rq.layout.entry_size() as usize;
    crate::srq::post_chain(&mut kq.rq, p.rq.buf(), &mut kq.staging, chain, p.max_recv_sge, esz)
}

/// Runs `f` on the data path of `q` under its lock, if `q` is live.
fn with_live(q: &RroceQp, f: impl FnOnce(&Ctx<'_>, &QpPriv, &mut QpStateInner)) {
    if !q.live.load(Ordering::Acquire) {
        return;
    }
    // SAFETY: live implies `p` is initialised.
    let p = unsafe { q.p.assume_init_ref() };
    let rcu = ReadGuard::new();
    let ctx = q.ctx(p, &rcu);
    let mut g = p.lock_dp();
    f(&ctx, p, &mut g);
    unlock(p, &ctx, g);
}

/// The retransmission timer of a QP.
///
/// # Safety
///
/// Called by the timer core with the `timer` of a live [`RroceQp`].
unsafe extern "C" fn timer_fn(t: *mut bindings::timer_list) {
    // SAFETY: the timer is the `timer` field of an `RroceQp` (container_of);
    // `destroy_qp` shuts the timer down before the QP goes away.
    let q = unsafe { &*t.cast::<u8>().sub(offset_of!(RroceQp, timer)).cast::<RroceQp>() };
    with_live(q, |ctx, _, inner| inner.dp.on_timer(ctx, &mut inner.state));
}

/// The response work item of a QP.
///
/// # Safety
///
/// Called by the workqueue with the `work` of a live [`RroceQp`].
unsafe extern "C" fn work_fn(w: *mut bindings::work_struct) {
    // SAFETY: the work is the `work` field of an `RroceQp`; `destroy_qp`
    // cancels it before the QP goes away.
    let q = unsafe { &*w.cast::<u8>().sub(offset_of!(RroceQp, work)).cast::<RroceQp>() };
    with_live(q, |ctx, p, inner| {
        if p.kick.swap(false, Ordering::AcqRel) {
            // Posted with interrupts disabled (`post_send_kernel`).
            let _ = inner.dp.doorbell(ctx, &mut inner.state);
        }
        inner.dp.on_work(ctx, &mut inner.state)
    });
}

/// A UD datagram for UD/GSI QP `p`.  Bottom halves disabled.
fn deliver_ud(p: &QpPriv, ctx: &Ctx<'_>, parsed: &crate::proto::hdr::Parsed, ip: &[u8], payload: &[u8]) -> bool {
    let mut g = p.lock_dp();
    let inner = &mut *g;
    let taken = matches!(inner.state, QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe)
        && inner.dp.on_ud(ctx, parsed, ip, payload);
    unlock(p, ctx, g);
    taken
}

/// A datagram to QP 0xFFFFFF: a copy for every UD QP attached to the group
/// of its destination address.  Bottom halves disabled.
fn deliver_mcast(dev: &RroceDev, parsed: &crate::proto::hdr::Parsed, roce: &[u8], ip: &[u8]) -> bool {
    let mgid = crate::proto::net::ip_addrs(ip).map(|(_, dst)| dst.to_gid());
    let Some(mgid) = mgid else { return false };
    let mut qpns = [0u32; mcast::MAX_QP_PER_GROUP];
    let n = dev.p.mcast.members(&mgid, &mut qpns);
    let payload = parsed.payload(roce);
    let mut taken = false;
    for &qpn in qpns.get(..n).unwrap_or(&[]) {
        let q = dev.p.qpns.load(qpn).cast::<RroceQp>();
        // SAFETY: as in `deliver`.
        let Some(q) = (unsafe { q.as_ref() }) else { continue };
        if !q.live.load(Ordering::Acquire) {
            continue;
        }
        // SAFETY: live implies `p` is initialised.
        let p = unsafe { q.p.assume_init_ref() };
        if p.ty != QpType::Ud {
            continue;
        }
        let rcu = ReadGuard::new();
        let ctx = q.ctx(p, &rcu);
        taken |= deliver_ud(p, &ctx, parsed, ip, payload);
    }
    taken
}

/// Hands a received, validated RC packet to QP `qpn` of `dev`.  Returns
/// `false` if no QP could take it.
///
/// Called in the receive softirq (RCU read side): `destroy_qp` waits for a
/// grace period after unpublishing the QP.
pub(crate) fn deliver(dev: &RroceDev, parsed: &crate::proto::hdr::Parsed, roce: &[u8], ip: &[u8]) -> bool {
    if parsed.bth.dest_qpn == mcast::MCAST_QPN {
        return deliver_mcast(dev, parsed, roce, ip);
    }
    let q = dev.p.qpns.load(parsed.bth.dest_qpn).cast::<RroceQp>();
    // SAFETY: QPN table entries are QPs of this device, valid during the
    // RCU read-side section (see above).
    let Some(q) = (unsafe { q.as_ref() }) else { return false };
    if !q.live.load(Ordering::Acquire) {
        return false;
    }
    // SAFETY: live implies `p` is initialised.
    let p = unsafe { q.p.assume_init_ref() };
    let rcu = ReadGuard::new();
    let ctx = q.ctx(p, &rcu);
    let payload = parsed.payload(roce);
    if matches!(p.ty, QpType::Ud | QpType::Gsi) {
        return deliver_ud(p, &ctx, parsed, ip, payload);
    }
    let op = parsed.bth.opcode;
    // The transport of the opcode must be the QP's (IBA 9.6.1.1: else
    // the packet is dropped).
    let request = match p.ty {
        QpType::Rc => is_rc_request(op),
        QpType::Uc => is_uc_request(op),
        _ => return false,
    };
    let mut g = p.lock_dp();
    let inner = &mut *g;
    let st = inner.state;
    // Connected QPs take packets from their peer only.
    if !inner.dp.is_from_peer(ip) {
        return false;
    }
    let taken = if request && matches!(st, QpState::Rtr | QpState::Rts | QpState::Sqd) {
        let access = inner.attrs.access_flags;
        inner.dp.on_request(&ctx, &mut inner.state, access, &InRequest::from_parsed(parsed), payload);
        true
    } else if p.ty == QpType::Rc && is_rc_response(op) && matches!(st, QpState::Rts | QpState::Sqd) {
        inner.dp.on_response(&ctx, &mut inner.state, &InResponse::from_parsed(parsed), payload);
        true
    } else {
        false
    };
    unlock(p, &ctx, g);
    taken
}

/// # Safety
///
/// `ib_device_ops::create_qp` contract.
pub(crate) unsafe extern "C" fn create_qp(
    qp: *mut bindings::ib_qp,
    init: *mut bindings::ib_qp_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: ib_core passes a zeroed QP of `QP_SIZE` bytes (with
        // `device` set), valid init attributes, and null or the call's
        // `udata`.
        let (qp, init, udata) = unsafe { (&mut *qp.cast::<RroceQp>(), &mut *init, UData::from_raw(udata)) };
        create(qp, init, udata)?;
        Ok(0)
    })
}

/// # Safety
///
/// `ib_device_ops::modify_qp` contract.
pub(crate) unsafe extern "C" fn modify_qp(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    mask: c_int,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `qp` was created by us; `attr` is valid.
        let ((q, p), attr) = unsafe { (RroceQp::from_ib(qp), &*attr) };
        modify(q, p, attr, mask)?;
        Ok(0)
    })
}

/// # Safety
///
/// `ib_device_ops::query_qp` contract.
pub(crate) unsafe extern "C" fn query_qp(
    qp: *mut bindings::ib_qp,
    attr: *mut bindings::ib_qp_attr,
    _mask: c_int,
    init: *mut bindings::ib_qp_init_attr,
) -> c_int {
    // SAFETY: `qp` was created by us; `attr`/`init` are writable.
    let ((_, p), a, init) = unsafe { (RroceQp::from_ib(qp), &mut *attr, &mut *init) };
    let g = p.inner.lock();
    let s = &g.attrs;
    a.qp_state = g.state.to_ib();
    a.cur_qp_state = g.state.to_ib();
    a.path_mtu = s.path_mtu;
    a.path_mig_state = s.path_mig_state;
    a.qkey = s.qkey;
    a.rq_psn = s.rq_psn;
    a.sq_psn = s.sq_psn;
    a.dest_qp_num = s.dest_qpn;
    a.qp_access_flags = s.access_flags as c_int;
    a.pkey_index = s.pkey_index;
    a.en_sqd_async_notify = u8::from(s.en_sqd_async_notify);
    a.sq_draining = u8::from(s.sq_draining);
    a.max_rd_atomic = s.max_rd_atomic;
    a.max_dest_rd_atomic = s.max_dest_rd_atomic;
    a.min_rnr_timer = s.min_rnr_timer;
    a.port_num = s.port;
    a.timeout = s.timeout;
    a.retry_cnt = s.retry_cnt;
    a.rnr_retry = s.rnr_retry;
    if let Some(av) = g.av {
        let ah = &mut a.ah_attr;
        ah.type_ = bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE;
        ah.port_num = 1;
        ah.ah_flags = bindings::ib_ah_flags_IB_AH_GRH as u8;
        ah.grh.dgid.raw = av.dgid;
        ah.grh.sgid_index = av.sgid_index;
        ah.grh.hop_limit = av.hop_limit;
        ah.grh.traffic_class = av.traffic_class;
        ah.grh.flow_label = av.flow_label;
        ah.__bindgen_anon_1.roce.dmac = av.dmac;
    }
    let has_rq = p.srq.is_none();
    let caps = bindings::ib_qp_cap {
        max_send_wr: p.sq.layout.entries(),
        max_recv_wr: if has_rq { p.rq.layout.entries() } else { 0 },
        max_send_sge: p.max_send_sge,
        max_recv_sge: p.max_recv_sge,
        max_inline_data: p.max_inline,
        ..Default::default()
    };
    a.cap = caps;
    init.cap = caps;
    init.qp_type = p.ty.to_ib();
    init.srq = p.srq.as_ref().map_or(core::ptr::null_mut(), SrqHandle::as_raw);
    init.sq_sig_type = p.sq_sig_type;
    0
}

/// # Safety
///
/// `ib_device_ops::destroy_qp` contract: `qp` was created successfully.
pub(crate) unsafe extern "C" fn destroy_qp(qp: *mut bindings::ib_qp, _udata: *mut bindings::ib_udata) -> c_int {
    // SAFETY: `qp` is ours and created.
    let q = unsafe { &*qp.cast::<RroceQp>() };
    q.live.store(false, Ordering::Release);
    // Attachments a kernel consumer left behind (uverbs detaches first).
    q.dev().p.mcast.forget_qp(&q.dev().p.ndev, q.ib.qp_num);
    q.dev().p.qpns.remove(q.ib.qp_num);
    // Receivers that found the QP before it was unpublished are done after
    // a grace period; then no one can arm the timer any more.
    crate::sync::rcu::synchronize();
    // SAFETY: set up in `create`.
    unsafe { ffi::rroce_timer_shutdown(q.timer.get()) };
    // SAFETY: set up in `create`; waits for a running instance.
    unsafe { ffi::rroce_work_cancel(q.work.get()) };
    // SAFETY: by the invariant `p` is initialised; this is its one drop.
    let p = unsafe { (*qp.cast::<RroceQp>()).p.assume_init_read() };
    // Dropping the rings gives their mappings back.
    drop(p);
    0
}

/// The GID of a multicast attach/detach call.
///
/// # Safety
///
/// `gid` must point to a valid `ib_gid`.
unsafe fn mgid_of(gid: *mut bindings::ib_gid) -> Result<[u8; 16]> {
    // SAFETY: per the requirements.
    let raw = unsafe { gid.as_ref() }.ok_or(EINVAL)?;
    // SAFETY: every 16-byte pattern is a valid `raw` view of the union.
    Ok(unsafe { raw.raw })
}

/// # Safety
///
/// `ib_device_ops::attach_mcast` contract.
pub(crate) unsafe extern "C" fn attach_mcast(qp: *mut bindings::ib_qp, gid: *mut bindings::ib_gid, _lid: u16) -> c_int {
    from_result(|| {
        // SAFETY: `qp` is ours and created.
        let (q, p) = unsafe { RroceQp::from_ib(qp) };
        if p.ty != QpType::Ud {
            return Err(EINVAL);
        }
        // SAFETY: ib_core passes a valid GID.
        let mgid = unsafe { mgid_of(gid) }?;
        let dev = q.dev();
        dev.p.mcast.attach(&dev.p.ndev, &mgid, q.ib.qp_num)?;
        Ok(0)
    })
}

/// # Safety
///
/// `ib_device_ops::detach_mcast` contract.
pub(crate) unsafe extern "C" fn detach_mcast(qp: *mut bindings::ib_qp, gid: *mut bindings::ib_gid, _lid: u16) -> c_int {
    from_result(|| {
        // SAFETY: `qp` is ours and created.
        let (q, _) = unsafe { RroceQp::from_ib(qp) };
        // SAFETY: ib_core passes a valid GID.
        let mgid = unsafe { mgid_of(gid) }?;
        let dev = q.dev();
        dev.p.mcast.detach(&dev.p.ndev, &mgid, q.ib.qp_num)?;
        Ok(0)
    })
}
