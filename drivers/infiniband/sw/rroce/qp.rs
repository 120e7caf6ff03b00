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

#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use kernel::bindings;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::av::{address_vector, AddressVector};
use crate::cq::CqPriv;
use crate::device::{DevPriv, RroceDev};
use crate::dp::{path_of, Ctx, Dp, Path};
use crate::ib::ah::RoceAttr;
use crate::ib::cq::CqHandle;
use crate::ib::qp::{QpCreate, QpOps, QpRef, QpTable};
use crate::ib::srq::{SrqHandle, SrqRef};
use crate::ib::XrcdId;
use crate::ib::ucontext::UctxRef;
use crate::ib::wr::{RecvWrChain, SendExt, SendWr, SendWrChain};
use crate::limits;
use crate::mcast;
use crate::net::route::DstCache;
use crate::proto::abi::{CreateQpCmd, CreateQpResp};
use crate::proto::link;
use crate::proto::qp::{AttrMask, DeviceLimits, QpAttrs, QpState, QpType};
use crate::proto::rc::{is_rc_request, is_rc_response, is_uc_request, InRequest, InResponse};
use crate::proto::ring::{Producer, SharedRegion, CONS_FLAGS_OFFSET, CONS_FLUSHING};
use crate::proto::wqe::{self, SendOpcode, SendPayload, SendWqe, Sge};
use crate::ring::{Ring, RING_START};
use crate::srq::SrqPriv;
use crate::sync::lock::{new_spinlock_bh, new_spinlock_irq, SpinLockBh, SpinLockIrq};
use crate::sync::rcu::ReadGuard;

/// Largest inline payload a send WQE may carry.
pub(crate) const MAX_INLINE: u32 = 512;
/// QP numbers handed out (0 and 1 are the special QPs).
const QPN_MIN: u32 = 16;
/// The GSI QP's number.
const GSI_QPN: u32 = 1;
/// The last QP number handed out: 0xFFFFFF is the multicast QPN
/// (`mcast::MCAST_QPN`), which every packet naming it is delivered to
/// (until 2026-12-07 the cyclic allocator reached it after ~16.7 M QPs,
/// and that QP never heard a packet; found by review).
const QPN_MAX: u32 = crate::mcast::MCAST_QPN - 1;


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

/// A kernel QP's producer side under its lock.
type KernelQ = Pin<KBox<SpinLockIrq<KernelQueues>>>;

/// Our part of a QP.
pub(crate) struct QpPriv {
    ty: QpType,
    /// `IB_SIGNAL_ALL_WR` or `IB_SIGNAL_REQ_WR`, as created.
    sq_sig_type: bindings::ib_sig_type,
    sq: Ring,
    rq: Ring,
    max_send_sge: u32,
    max_recv_sge: u32,
    max_inline: u32,
    pd: crate::ib::PdId,
    /// The CQs: an XRC initiator has no receive CQ, an XRC target neither.
    send_cq: Option<CqHandle<CqPriv>>,
    recv_cq: Option<CqHandle<CqPriv>>,
    /// An XRC target's domain: the XRC SRQs its requests may name.
    xrcd: Option<XrcdId>,
    /// An XRC target: the XRC SRQ of the last request it accepted (0 for
    /// none), whose PD and CQ its work item and timer use (written under
    /// the QP lock).
    xrc_srqn: AtomicU32,
    /// The SRQ receives come from, or null (then from `rq`, else `rq` is
    /// a one-entry kernel ring that stays empty).  The QP holds a use
    /// count on it.
    srq: Option<SrqHandle<SrqPriv>>,
    /// Route cache of a connected QP, whose packets all go to its one
    /// peer (`None` without memory: a route lookup per packet).  `None`
    /// for UD and GSI QPs: each datagram may go elsewhere, and the cache
    /// is keyed by the source address only (as the kernel's tunnels use
    /// it), so it would send one destination's datagrams on another's
    /// route.
    dst: Option<DstCache>,
    inner: Pin<KBox<SpinLockBh<QpStateInner>>>,
    /// The producer side of a kernel consumer's rings (`None` for a user
    /// QP).  Its own irqsave lock, never held together with `inner`'s
    /// except inside it: kernel consumers post with interrupts disabled.
    kq: Option<KernelQ>,
    /// The QP state as of the last data-path section ([`unlock`]), for
    /// posts that cannot take the QP lock (interrupts disabled).
    state_seen: AtomicU32,
    /// A post with interrupts disabled left the doorbell to the work item.
    kick: AtomicBool,
    /// The data path waits for an on-demand page the work item must
    /// fault in (set by [`unlock`]).
    odp_fault: AtomicBool,
}

/// A live QP of ours.
type Q<'a> = QpRef<'a, QpPriv>;

/// The data path's view of `q` for the read-side section `rcu`.
fn ctx<'a>(q: Q<'a>, rcu: &'a ReadGuard) -> Ctx<'a> {
    let p = q.p();
    let mut c = Ctx {
        dev: q.dev(),
        qpn: q.qpn(),
        pd: p.pd,
        rcu,
        send_cq: p.send_cq.as_ref(),
        recv_cq: p.recv_cq.as_ref(),
        sq_ring: p.sq.buf(),
        rq_ring: p.rq.buf(),
        srq: p.srq.as_ref().map(SrqHandle::get),
        ib_srq: p.srq.as_ref().map(SrqHandle::borrow),
        sig_all: p.sq_sig_type == bindings::ib_sig_type_IB_SIGNAL_ALL_WR,
        timer: q.timer(),
        work: q.work(),
        flush: q.flush(),
        tx: q.tx(),
        dst: p.dst.as_ref(),
        notify: core::cell::Cell::new(0),
        ib_qp: q.events(),
        events: core::cell::Cell::new(0),
        cq_lost: core::cell::Cell::new(false),
        fault: core::cell::Cell::new(None),
    };
    if let Some(s) = xrc_srq(q.dev(), p, p.xrc_srqn.load(Ordering::Acquire), rcu) {
        c.receive_into(s);
    }
    c
}

/// XRC SRQ `srqn` if it is one of the domain of XRC target `p`.
fn xrc_srq<'a>(dev: &'a RroceDev, p: &QpPriv, srqn: u32, rcu: &'a ReadGuard) -> Option<SrqRef<'a, SrqPriv>> {
    let xrcd = p.xrcd?;
    dev.p.srqs.get(srqn, rcu).filter(|s| s.p().xrc.as_ref().is_some_and(|x| x.xrcd == xrcd))
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
    // SQD: drained once every WQE taken before it completed.
    if inner.state == QpState::Sqd && inner.attrs.sq_draining && inner.dp.sq_idle() && inner.attrs.sq_drained() {
        ctx.raise(crate::dp::EV_SQ_DRAINED);
    }
    p.state_seen.store(inner.state as u32, Ordering::Release);
    if inner.dp.has_fault() {
        p.odp_fault.store(true, Ordering::Release);
    }
    drop(g);
    ctx.fire();
}

/// The rings of a new QP, their offsets in the user's mapping, and what
/// their entries really hold (never more than the device maximum).
struct NewRings {
    sq: Ring,
    sq_off: u64,
    sq_size: u32,
    rq: Ring,
    rq_off: u64,
    max_send_sge: u32,
    max_recv_sge: u32,
    /// The SGE limit of the receive WQEs the data path takes (the SRQ's,
    /// with one).
    recv_lim_sge: u32,
    max_inline: u32,
}

/// Checks the type, flags and capacities of a new QP (`EOPNOTSUPP` for
/// what rroce does not do, `EINVAL` for what is out of range).
#[inline(never)]
fn check_create(dev: &RroceDev, ty: QpType, init: &bindings::ib_qp_init_attr, has_srq: bool, user: bool) -> Result {
    // The GSI QP (QP1) belongs to ib_core's MAD layer: kernel only.  An
    // XRC initiator is for user space only: a kernel send request has no
    // field for the remote SRQ number.
    if (ty == QpType::Gsi && user) || (ty == QpType::XrcIni && !user) {
        return Err(limits::eopnotsupp());
    }
    if init.create_flags != 0 || (has_srq && !matches!(ty, QpType::Rc | QpType::Ud)) {
        return Err(limits::eopnotsupp());
    }
    // An XRC target has no queues (ib_core creates it for uverbs without
    // user data, in an XRC domain); an initiator no receive queue.
    if ty == QpType::XrcTgt {
        return if init.xrcd.is_null() { Err(EINVAL) } else { Ok(()) };
    }
    let cap = &init.cap;
    let max_wr = limits::max_qp_wr();
    let max_sge = dev.p.attrs.max_send_sge as u32;
    // With an SRQ the receive capacities are the SRQ's; ignored here.  A
    // depth of 0 is allowed (a send-only or receive-only QP, as rxe, siw
    // and mlx5 allow; EINVAL until 2026-12-07, found by review): the
    // queue gets the smallest ring, and reports its capacity.
    let rq_bad = !has_srq && ty != QpType::XrcIni && (cap.max_recv_wr > max_wr || cap.max_recv_sge > max_sge);
    if cap.max_send_wr > max_wr || rq_bad || cap.max_send_sge > max_sge || cap.max_inline_data > MAX_INLINE {
        return Err(EINVAL);
    }
    Ok(())
}

/// Allocates the rings for `cap` (mapped for the user context `uctx`).
#[inline(never)]
fn new_rings(dev: &RroceDev, ty: QpType, uctx: Option<UctxRef>, cap: &bindings::ib_qp_cap, srq: Option<&SrqPriv>) -> Result<NewRings> {
    let max_sge = dev.p.attrs.max_send_sge as u32;
    // An XRC target sends nothing: a placeholder SQ, never posted to.
    let (send_wr, send_sge, inline) = match ty {
        QpType::XrcTgt => (1, 1, 0),
        _ => (cap.max_send_wr.max(1), cap.max_send_sge.max(1), cap.max_inline_data),
    };
    let sq_size = wqe::send_entry_size(send_sge, inline).ok_or(EINVAL)?;
    let (sq, sq_off) = Ring::new(uctx, send_wr, sq_size)?;
    let (sq_sge, sq_data) = wqe::send_caps(sq_size);
    let no_rq = |esz: u32| -> Result<(Ring, u64, u32, u32)> {
        // A placeholder RQ with an SRQ's entry size (which sizes the data
        // path's receive scratch), never posted to or mapped.
        let (rq, _) = Ring::new(None, 1, esz)?;
        Ok((rq, 0, 0, u32::from(wqe::recv_max_sge(esz))))
    };
    let (rq, rq_off, max_recv_sge, recv_lim_sge) = match (srq, ty) {
        (Some(s), _) => {
            let (rq, _) = Ring::new(None, 1, s.entry_size())?;
            (rq, 0, 0, u32::from(s.recv_limits().max_sge))
        }
        // Receives into the XRC SRQs of its domain: room for the largest.
        (None, QpType::XrcTgt) => no_rq(wqe::recv_entry_size(dev.p.attrs.max_srq_sge as u32).ok_or(EINVAL)?)?,
        (None, QpType::XrcIni) => no_rq(wqe::recv_entry_size(1).ok_or(EINVAL)?)?,
        (None, _) => {
            let rq_size = wqe::recv_entry_size(cap.max_recv_sge.max(1)).ok_or(EINVAL)?;
            let (rq, rq_off) = Ring::new(uctx, cap.max_recv_wr.max(1), rq_size)?;
            let n = u32::from(wqe::recv_max_sge(rq_size)).min(max_sge);
            (rq, rq_off, n, n)
        }
    };
    Ok(NewRings {
        sq,
        sq_off,
        sq_size,
        rq,
        rq_off,
        max_send_sge: u32::from(sq_sge).min(max_sge),
        max_recv_sge,
        recv_lim_sge,
        max_inline: sq_data.min(MAX_INLINE),
    })
}

/// The data path of a new QP of type `ty` over `r`, and a kernel QP's
/// producer side.
#[inline(never)]
fn new_dp(dev: &RroceDev, ty: QpType, r: &NewRings) -> Result<(KBox<Dp>, Option<KernelQ>)> {
    let max_msg = dev.p.attrs.max_mr_size.min(u64::from(limits::MAX_MSG_SZ)) as u32;
    let mut dp = Dp::new(
        r.sq.layout,
        r.rq.layout,
        RING_START,
        r.max_send_sge as u16,
        r.recv_lim_sge as u16,
        r.max_inline,
        max_msg,
        ty,
    )?;
    if !r.sq.mem.is_kernel() {
        return Ok((dp, None));
    }
    dp.allow_fast_reg();
    let queues = KernelQueues {
        sq: Producer::new(r.sq.layout, RING_START),
        rq: Producer::new(r.rq.layout, RING_START),
        staging: KVVec::from_elem(0u8, r.sq_size.max(r.rq.layout.entry_size()) as usize, GFP_KERNEL_ACCOUNT)?,
    };
    let kq = KBox::pin_init(new_spinlock_irq!(queues, "rroce_qp_post"), GFP_KERNEL_ACCOUNT)?;
    Ok((dp, Some(kq)))
}

/// What `create_qp` tells the provider.
#[inline(never)]
fn create_resp(r: &NewRings, has_rq: bool, qpn: u32) -> CreateQpResp {
    let (rq, rq_size) = (&r.rq.layout, r.rq.layout.entry_size());
    CreateQpResp {
        sq_offset: r.sq_off,
        rq_offset: r.rq_off,
        sq_bytes: r.sq.layout.bytes_total_u32(),
        rq_bytes: if has_rq { rq.bytes_total_u32() } else { 0 },
        sq_entries: r.sq.layout.entries(),
        rq_entries: if has_rq { rq.entries() } else { 0 },
        sq_entry_size: r.sq_size,
        rq_entry_size: if has_rq { rq_size } else { 0 },
        max_send_sge: r.max_send_sge,
        max_recv_sge: r.max_recv_sge,
        max_inline: r.max_inline,
        qpn,
        flags: 0,
        reserved: 0,
    }
}

fn create(dev: &RroceDev, c: QpCreate<'_, QpPriv>) -> Result<(QpPriv, u32)> {
    let QpCreate { init, pd, send_cq, recv_cq, srq: srq_handle, udata } = c;
    let ty = QpType::from_ib(init.qp_type).ok_or_else(limits::eopnotsupp)?;
    check_create(dev, ty, init, srq_handle.is_some(), udata.is_some())?;
    // The CQs each type completes on.
    let cqs_ok = match ty {
        QpType::XrcTgt => true,
        QpType::XrcIni => send_cq.is_some(),
        _ => send_cq.is_some() && recv_cq.is_some(),
    };
    if !cqs_ok {
        return Err(EINVAL);
    }
    let xrcd = (ty == QpType::XrcTgt).then(|| XrcdId::of(init.xrcd));
    let srq = srq_handle.as_ref().map(SrqHandle::get);
    let uctx = limits::user_call::<{ CreateQpCmd::SIZE }>(udata, |c| CreateQpCmd::from_bytes(c).is_valid())?;
    let r = new_rings(dev, ty, uctx, &init.cap, srq)?;
    let (dp, kq) = new_dp(dev, ty, &r)?;
    let inner = KBox::pin_init(
        new_spinlock_bh!(QpStateInner { state: QpState::Reset, attrs: QpAttrs::default(), av: None, dp }, "rroce_qp"),
        GFP_KERNEL_ACCOUNT,
    )?;
    let max_qp = dev.p.attrs.max_qp as u32;
    // Only reserved here: the QP is published once it is complete (by the
    // layer), so the receive path never finds one whose creation fails.
    let qpn = if ty == QpType::Gsi {
        dev.p.qps.reserve(GSI_QPN, GSI_QPN, max_qp)?
    } else {
        dev.p.qps.reserve(QPN_MIN, QPN_MAX, max_qp)?
    };
    let has_rq = srq.is_none() && !ty.is_xrc();
    if let Some(udata) = udata {
        if let Err(e) = udata.write(&create_resp(&r, has_rq, qpn).to_bytes()) {
            dev.p.qps.unreserve(qpn);
            return Err(e);
        }
    }
    let cap = &mut init.cap;
    cap.max_send_wr = r.sq.layout.entries();
    cap.max_recv_wr = if has_rq { r.rq.layout.entries() } else { 0 };
    cap.max_send_sge = r.max_send_sge;
    cap.max_recv_sge = r.max_recv_sge;
    cap.max_inline_data = r.max_inline;
    let p = QpPriv {
        ty,
        sq_sig_type: init.sq_sig_type,
        sq: r.sq,
        rq: r.rq,
        max_send_sge: r.max_send_sge,
        max_recv_sge: r.max_recv_sge,
        max_inline: r.max_inline,
        pd,
        send_cq,
        recv_cq,
        xrcd,
        xrc_srqn: AtomicU32::new(0),
        srq: srq_handle,
        dst: if matches!(ty, QpType::Ud | QpType::Gsi) { None } else { DstCache::new() },
        inner,
        kq,
        state_seen: AtomicU32::new(QpState::Reset as u32),
        kick: AtomicBool::new(false),
        odp_fault: AtomicBool::new(false),
    };
    Ok((p, qpn))
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

fn modify(qp: Q<'_>, attr: &bindings::ib_qp_attr, mask: c_int, roce: Option<RoceAttr>) -> Result {
    let p = qp.p();
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
    let av = match roce {
        Some(r) if mask.contains(AttrMask::AV) => Some(address_vector(&r)?),
        _ => None,
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
    let ctx = ctx(qp, &rcu);
    let inner = &mut *g;
    let path = match (inner.av, next) {
        (Some(av), QpState::Rtr | QpState::Rts | QpState::Sqd) => {
            Some(Path { xrc: p.ty.is_xrc(), ..path_of(dev, &av, qp.qpn(), inner.attrs.dest_qpn) })
        }
        _ => None,
    };
    inner.dp.set_path(&ctx, path);
    inner.dp.set_qkey(inner.attrs.qkey);
    if next != cur {
        inner.dp.on_modify(&ctx, &mut inner.state, &inner.attrs, cur, next);
    }
    let timing = [
        AttrMask::TIMEOUT,
        AttrMask::RETRY_CNT,
        AttrMask::RNR_RETRY,
        AttrMask::MAX_QP_RD_ATOMIC,
        AttrMask::MIN_RNR_TIMER,
        AttrMask::MAX_DEST_RD_ATOMIC,
    ];
    if matches!(cur, QpState::Rts | QpState::Sqd)
        && matches!(next, QpState::Rts | QpState::Sqd)
        && timing.iter().any(|&m| mask.intersects(m))
    {
        inner.dp.refresh_timing(&inner.attrs);
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
    // ATOMIC WRITE and FLUSH are for user QPs: ib_core 6.12 has no
    // work-request container for the 8 bytes of the one nor the placement
    // type, selectivity and length of the other (rdma_rxe's kernel path
    // reads none of them), and no kernel consumer posts them.
    if matches!(op, SendOpcode::AtomicWrite | SendOpcode::Flush) {
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
fn post_send_kernel(q: Q<'_>, p: &QpPriv, chain: &mut SendWrChain<'_, crate::ah::RroceAh, crate::mr::MrPart>) -> Result {
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
            let ctx = ctx(q, &rcu);
            let inner = &mut *g;
            let in_err = inner.state == QpState::Err;
            // In ERR the work item flushes: see `post_recv_kernel`.
            if !in_err {
                let _ = inner.dp.doorbell(&ctx, &mut inner.state);
            }
            unlock(p, &ctx, g);
            if in_err {
                kick(q, p);
            }
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
fn kick(q: Q<'_>, p: &QpPriv) {
    p.kick.store(true, Ordering::Release);
    q.work().queue();
}

/// `post_send`: for a kernel QP the work requests; for a user QP the
/// doorbell (no work requests: the WQEs are in the mapped SQ).
fn post_send(q: Q<'_>, chain: &mut SendWrChain<'_, crate::ah::RroceAh, crate::mr::MrPart>) -> Result {
    let p = q.p();
    // An XRC target has no send queue.
    if p.ty == QpType::XrcTgt {
        return Err(EINVAL);
    }
    if p.sq.mem.is_kernel() || !chain.is_empty() {
        return if p.sq.mem.is_kernel() { post_send_kernel(q, p, chain) } else { Err(EINVAL) };
    }
    let rcu = ReadGuard::new();
    let ctx = ctx(q, &rcu);
    let mut g = p.lock_dp();
    let inner = &mut *g;
    let r = inner.dp.doorbell(&ctx, &mut inner.state);
    unlock(p, &ctx, g);
    r
}

fn post_recv_kernel(q: Q<'_>, p: &QpPriv, chain: &mut RecvWrChain<'_>) -> Result {
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
        Some(g) => {
            let rcu = ReadGuard::new();
            let ctx = ctx(q, &rcu);
            let in_err = g.state == QpState::Err;
            unlock(p, &ctx, g);
            if in_err {
                // Requests posted in ERR are flushed by the work item, as
                // an HCA flushes them: not from inside the post.  A ULP
                // that reposts every buffer its flush completion hands
                // back (cifs's SMB Direct on unmount) would otherwise
                // never see its pool run dry -- the completion runs in
                // the softirq that the unlock above lets in.
                kick(q, p);
            }
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

/// Runs `f` on the data path of `q` under its lock.
fn section(q: Q<'_>, f: impl FnOnce(&Ctx<'_>, &QpPriv, &mut QpStateInner)) {
    let p = q.p();
    let rcu = ReadGuard::new();
    let ctx = ctx(q, &rcu);
    let mut g = p.lock_dp();
    f(&ctx, p, &mut g);
    unlock(p, &ctx, g);
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
fn deliver_mcast(dev: &RroceDev, rcu: &ReadGuard, parsed: &crate::proto::hdr::Parsed, payload: &[u8], ip: &[u8]) -> bool {
    let mgid = crate::proto::net::ip_addrs(ip).map(|(_, dst)| dst.to_gid());
    let Some(mgid) = mgid else { return false };
    let mut qpns = [0u32; mcast::MAX_QP_PER_GROUP];
    let n = dev.p.mcast.members(&mgid, &mut qpns);
    let mut taken = false;
    for &qpn in qpns.get(..n).unwrap_or(&[]) {
        let Some(q) = dev.p.qps.get(qpn, rcu) else { continue };
        let p = q.p();
        if p.ty != QpType::Ud {
            continue;
        }
        let ctx = ctx(q, rcu);
        taken |= deliver_ud(p, &ctx, parsed, ip, payload);
    }
    taken
}

/// An XRC packet as the RC engines take it: the RC opcode of the same
/// operation (the XRCETH stays in `ext`); `None` for any other transport.
fn xrc_as_rc(parsed: &crate::proto::hdr::Parsed) -> Option<crate::proto::hdr::Parsed> {
    let rc = crate::proto::opcode::rc_of_xrc(parsed.bth.opcode)?;
    let info = crate::proto::opcode::lookup(rc)?;
    let mut p = *parsed;
    p.bth.opcode = rc;
    p.info = info;
    Some(p)
}

/// Hands a received, validated packet (its payload `payload`, its IP header
/// `ip`) to QP `qpn` of `dev`.  Returns `false` if no QP could take it.
///
/// Called in the receive softirq; the QP is borrowed for the receive
/// path's RCU read-side section `rcu` (`destroy_qp` waits for a grace
/// period after unpublishing it).
pub(crate) fn deliver(dev: &RroceDev, rcu: &ReadGuard, parsed: &crate::proto::hdr::Parsed, payload: &[u8], ip: &[u8]) -> bool {
    if parsed.bth.dest_qpn == mcast::MCAST_QPN {
        return deliver_mcast(dev, rcu, parsed, payload, ip);
    }
    let Some(q) = dev.p.qps.get(parsed.bth.dest_qpn, rcu) else { return false };
    let p = q.p();
    let mut ctx = ctx(q, rcu);
    if matches!(p.ty, QpType::Ud | QpType::Gsi) {
        // A datagram for a QP (not the multicast QPN) must be addressed to
        // this device (rxe's rxe_chk_dgid; a NIC steers by destination
        // GID): the UDP socket also hands us broadcasts and, by the
        // weak-host model, datagrams for another local address that came
        // in on our netdev.  Until 2026-12-07 those reached UD and GSI QPs
        // (found by review).
        let ours = crate::proto::net::ip_addrs(ip).is_some_and(|(_, dst)| dev.p.ndev.has_addr(dst.as_bytes()));
        if !ours {
            return false;
        }
        return deliver_ud(p, &ctx, parsed, ip, payload);
    }
    // The transport of the opcode must be the QP's (IBA 9.6.1.1: else
    // the packet is dropped): XRC requests for the target, XRC responses
    // for the initiator, which the RC engines take under RC's opcodes.
    let xrc;
    let (parsed, request) = match (p.ty, xrc_as_rc(parsed)) {
        (QpType::Rc, _) => (parsed, is_rc_request(parsed.bth.opcode)),
        (QpType::Uc, _) => (parsed, is_uc_request(parsed.bth.opcode)),
        (QpType::XrcTgt, Some(rc)) if is_rc_request(rc.bth.opcode) => {
            xrc = rc;
            (&xrc, true)
        }
        (QpType::XrcIni, Some(rc)) if is_rc_response(rc.bth.opcode) => {
            xrc = rc;
            (&xrc, false)
        }
        _ => return false,
    };
    // An XRC request names the SRQ it is for: one of the target's domain.
    let target = match parsed.ext.xrceth {
        Some(x) if p.ty == QpType::XrcTgt => match xrc_srq(dev, p, x.srqn, rcu) {
            Some(s) => Some((x.srqn, s)),
            None => {
                dev.p.stats.inc(crate::stats::Counter::XrcBadSrqn);
                return true;
            }
        },
        _ => None,
    };
    let mut g = p.lock_dp();
    let inner = &mut *g;
    let st = inner.state;
    // Connected QPs take packets from their peer only.
    if !inner.dp.is_from_peer(ip) {
        return false;
    }
    if let Some((srqn, s)) = target {
        if srqn != p.xrc_srqn.load(Ordering::Relaxed) {
            // Every packet of a message is for the SRQ its first packet
            // named (a SEND's receive WQE came from there, a WRITE's R_Key
            // was checked under its PD): a Middle or Last naming another
            // one, or a new message naming another while a SEND holds a
            // receive WQE of the last one, is a peer's error.
            let starts = crate::proto::opcode::lookup(parsed.bth.opcode).is_some_and(|o| o.position.is_start());
            if !starts || inner.dp.holds_recv() {
                dev.p.stats.inc(crate::stats::Counter::XrcBadSrqn);
                unlock(p, &ctx, g);
                return true;
            }
            let same_pd = s.p().xrc.as_ref().is_some_and(|x| x.pd == ctx.pd);
            if !inner.dp.xrc_may_switch(same_pd) {
                // Like a request dropped for want of response room: the
                // requester's retransmission brings it back.
                dev.p.stats.inc(crate::stats::Counter::RespBackpressure);
                unlock(p, &ctx, g);
                return true;
            }
            p.xrc_srqn.store(srqn, Ordering::Release);
        }
        ctx.receive_into(s);
        inner.dp.receive_from(s.p().recv_limits(), s.p().entry_size());
    }
    let taken = if request && matches!(st, QpState::Rtr | QpState::Rts | QpState::Sqd) {
        let access = inner.attrs.access_flags;
        inner.dp.on_request(&ctx, &mut inner.state, access, &InRequest::from_parsed(parsed, payload), payload);
        true
    } else if matches!(p.ty, QpType::Rc | QpType::XrcIni)
        && is_rc_response(parsed.bth.opcode)
        && matches!(st, QpState::Rts | QpState::Sqd)
    {
        inner.dp.on_response(&ctx, &mut inner.state, &InResponse::from_parsed(parsed), payload);
        true
    } else {
        false
    };
    unlock(p, &ctx, g);
    taken
}

impl QpOps for QpPriv {
    type Dev = DevPriv;
    type Cq = CqPriv;
    type Srq = SrqPriv;
    type Ah = crate::ah::RroceAh;
    type Mr = crate::mr::MrPart;

    fn table(dev: &RroceDev) -> &QpTable<Self> {
        &dev.p.qps
    }

    fn create(dev: &RroceDev, c: QpCreate<'_, Self>) -> Result<(Self, u32)> {
        create(dev, c)
    }

    fn modify(q: Q<'_>, attr: &bindings::ib_qp_attr, mask: c_int, av: Option<RoceAttr>) -> Result {
        modify(q, attr, mask, av)
    }

    fn query(q: Q<'_>, a: &mut bindings::ib_qp_attr, init: &mut bindings::ib_qp_init_attr) {
        let p = q.p();
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
        let has_rq = p.srq.is_none() && !p.ty.is_xrc();
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
    }

    fn before_destroy(q: Q<'_>) {
        // Attachments a kernel consumer left behind (uverbs detaches
        // first), while the QP number is still this QP's.
        let dev = q.dev();
        dev.p.mcast.forget_qp(&dev.p.ndev, q.qpn());
        // The ACKs of requests already completed (`Dp::send_queued_acks`),
        // for a QP destroyed without going through ERR.
        section(q, |ctx, _, inner| {
            if matches!(inner.state, QpState::Rtr | QpState::Rts | QpState::Sqd) {
                inner.dp.send_queued_acks(ctx);
            }
        });
    }

    fn destroy(self, _dev: &RroceDev) {
        // Dropping the rings gives their mappings back.
        drop(self);
    }

    fn post_send(q: Q<'_>, chain: &mut SendWrChain<'_, Self::Ah, Self::Mr>) -> Result {
        post_send(q, chain)
    }

    fn post_recv(q: Q<'_>, chain: &mut RecvWrChain<'_>) -> Result {
        // Neither XRC half has a receive queue.
        if q.p().ty.is_xrc() {
            return Err(EINVAL);
        }
        post_recv_kernel(q, q.p(), chain)
    }

    fn on_timer(q: Q<'_>) {
        section(q, |ctx, _, inner| inner.dp.on_timer(ctx));
    }

    fn on_work(q: Q<'_>) {
        // On-demand paging: the page a stalled step of the data path waits
        // for is faulted in here, outside the QP lock and the RCU section
        // (it sleeps), with a counted reference to its region.
        let mut todo = None;
        if q.p().odp_fault.swap(false, Ordering::AcqRel) {
            section(q, |ctx, _, inner| {
                todo = inner.dp.take_fault().map(|f| {
                    // (Deregistered meanwhile, its index maybe reused: not
                    // another region's pages.)
                    let region = crate::mr::counted_at(ctx.dev, ctx.rcu, f.index)
                        .filter(|r| r.key.load(Ordering::Relaxed) == f.key);
                    (f, region)
                });
            });
        }
        let done = todo.map(|(f, region)| {
            let Some(region) = region else { return false };
            let (va, len) = crate::mr::fault_window(&region, f.va, f.len);
            // Ahead of the miss only what the process has mapped: if the
            // window fails, the miss alone.
            region.fault(va, len, f.write, true).or_else(|_| region.fault(f.va, f.len.into(), f.write, true)).is_ok()
        });
        section(q, |ctx, p, inner| {
            if let Some(ok) = done {
                inner.dp.faulted(ok);
            }
            if p.kick.swap(false, Ordering::AcqRel) {
                // Posted with interrupts disabled, or in ERR
                // (`post_send_kernel`, `post_recv_kernel`).
                let _ = inner.dp.doorbell(ctx, &mut inner.state);
            }
            let access = inner.attrs.access_flags;
            inner.dp.on_work(ctx, &mut inner.state, access)
        });
    }

    fn on_flush(q: Q<'_>) {
        section(q, |ctx, _, inner| inner.dp.on_flush(ctx, &mut inner.state));
    }

    fn mcast(q: Q<'_>, mgid: &[u8; 16], attach: bool) -> Result {
        let dev = q.dev();
        if !attach {
            return dev.p.mcast.detach(&dev.p.ndev, mgid, q.qpn());
        }
        if q.p().ty != QpType::Ud {
            return Err(EINVAL);
        }
        dev.p.mcast.attach(&dev.p.ndev, mgid, q.qpn())
    }
}
