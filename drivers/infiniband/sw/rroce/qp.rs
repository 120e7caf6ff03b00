// SPDX-License-Identifier: GPL-2.0
//! Queue pairs: creation with mapped send/receive rings, the state machine
//! of `modify_qp`, `query_qp`, destruction.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! The rules of `modify_qp` (legal transitions, required and optional
//! attributes, value checks, all-or-nothing updates) are the safe
//! `proto::qp` logic; this file converts between ib_core's structures and
//! those, and resolves the address vector.  The requester/responder engine
//! (`proto::rc`) is not attached yet, so the kernel does not consume WQEs:
//! without `IB_USER_VERBS_CMD_POST_SEND` in the command mask, the
//! provider's doorbell fails and `ibv_post_send` reports the error.

use core::mem::{size_of, MaybeUninit};
use core::ptr::NonNull;
use kernel::bindings;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::device::RroceDev;
use crate::glue;
use crate::proto::link;
use crate::lock::{new_spinlock_bh, SpinLockBh};
use crate::proto::abi::{CreateQpCmd, CreateQpResp};
use crate::proto::qp::{AttrMask, DeviceLimits, QpAttrs, QpState, QpType};
use crate::proto::ring::RingLayout;
use crate::proto::wqe;
use crate::shm::SharedBuf;
use crate::verbs::{self, MmapEntry};

/// First index of every ring (near the 2^32 wrap, as for CQs).
const RING_START: u32 = u32::MAX - 1023;
/// Largest inline payload a send WQE may carry.
pub(crate) const MAX_INLINE: u32 = 512;
/// QP numbers handed out (0 and 1 are the special QPs).
const QPN_MIN: u32 = 16;
const QPN_MAX: u32 = 0x00ff_ffff;
/// `IB_GID_TYPE_ROCE_UDP_ENCAP`: RoCEv2, the only GID type rroce speaks.
const GID_TYPE_ROCE_V2: u32 = bindings::ib_gid_type_IB_GID_TYPE_ROCE_UDP_ENCAP;

/// Where a connected QP sends to, resolved at `modify_qp(AV)`.
#[derive(Clone, Copy, Default)]
pub(crate) struct AddressVector {
    pub(crate) dgid: [u8; 16],
    pub(crate) sgid_index: u8,
    pub(crate) hop_limit: u8,
    pub(crate) traffic_class: u8,
    pub(crate) flow_label: u32,
    pub(crate) dmac: [u8; 6],
}

struct QpStateInner {
    state: QpState,
    attrs: QpAttrs,
    av: Option<AddressVector>,
}

/// A mapped ring of a user QP.
struct Ring {
    entry: NonNull<MmapEntry>,
    layout: RingLayout,
}

impl Ring {
    fn new(uctx: *mut bindings::ib_ucontext, entries: u32, entry_size: u32) -> Result<(Ring, u64)> {
        let layout = RingLayout::new(entries, entry_size, verbs::max_qp_wr().next_power_of_two())
            .map_err(|_| EINVAL)?;
        let buf = SharedBuf::new(layout.bytes_total())?;
        layout.init_header(&buf, RING_START).map_err(|_| EINVAL)?;
        // SAFETY: `uctx` is the caller's live context.
        let (entry, off) = unsafe { MmapEntry::insert(uctx, buf)? };
        Ok((Ring { entry, layout }, off))
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: inserted in `Ring::new`, removed once here.
        unsafe { MmapEntry::remove(self.entry) };
    }
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
    inner: Pin<KBox<SpinLockBh<QpStateInner>>>,
}

/// Our part of a QP (allocated by ib_core, `ib` first).
///
/// # Invariants
///
/// `p` is initialised exactly when `create_qp` succeeded, until
/// `destroy_qp` drops it.
#[repr(C)]
pub(crate) struct RroceQp {
    ib: bindings::ib_qp,
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
}

fn create(qp: &mut RroceQp, init: &mut bindings::ib_qp_init_attr, udata: *mut bindings::ib_udata) -> Result {
    let ty = QpType::from_ib(init.qp_type).ok_or_else(verbs::eopnotsupp)?;
    if !matches!(ty, QpType::Rc | QpType::Uc | QpType::Ud) {
        return Err(verbs::eopnotsupp());
    }
    if udata.is_null() {
        // Kernel QPs come with the kernel verbs of the data path.
        return Err(verbs::eopnotsupp());
    }
    if init.create_flags != 0 || !init.srq.is_null() {
        return Err(verbs::eopnotsupp());
    }
    let self_ptr: *mut RroceQp = qp;
    // SAFETY: ib_core set `device` to one of our devices, which outlives
    // its QPs.
    let dev = unsafe { RroceDev::from_ib(qp.ib.device) };
    let cap = &mut init.cap;
    let max_wr = verbs::max_qp_wr();
    let max_sge = dev.p.attrs.max_send_sge as u32;
    if cap.max_send_wr == 0
        || cap.max_send_wr > max_wr
        || cap.max_recv_wr == 0
        || cap.max_recv_wr > max_wr
        || cap.max_send_sge > max_sge
        || cap.max_recv_sge > max_sge
        || cap.max_inline_data > MAX_INLINE
    {
        return Err(EINVAL);
    }
    let mut cmd = [0u8; CreateQpCmd::SIZE];
    verbs::copy_from_udata(udata, &mut cmd)?;
    if !CreateQpCmd::from_bytes(&cmd).is_valid() {
        return Err(EINVAL);
    }
    // SAFETY: a user call's `udata` has a live context.
    let uctx = unsafe { glue::rroce_udata_ucontext(udata) };
    if uctx.is_null() {
        return Err(EINVAL);
    }
    let sq_size = wqe::send_entry_size(cap.max_send_sge.max(1), cap.max_inline_data).ok_or(EINVAL)?;
    let rq_size = wqe::recv_entry_size(cap.max_recv_sge.max(1)).ok_or(EINVAL)?;
    let (sq, sq_off) = Ring::new(uctx, cap.max_send_wr, sq_size)?;
    let (rq, rq_off) = Ring::new(uctx, cap.max_recv_wr, rq_size)?;
    // What the rounded entries really hold, never more than the device max.
    let (sq_sge, sq_data) = wqe::send_caps(sq_size);
    let max_send_sge = u32::from(sq_sge).min(max_sge);
    let max_inline = sq_data.min(MAX_INLINE);
    let max_recv_sge = u32::from(wqe::recv_max_sge(rq_size)).min(max_sge);

    let inner = KBox::pin_init(
        new_spinlock_bh!(
            QpStateInner { state: QpState::Reset, attrs: QpAttrs::default(), av: None },
            "rroce_qp"
        ),
        GFP_KERNEL,
    )?;
    let max_qp = dev.p.attrs.max_qp as u32;
    let qpn = dev.p.qpns.insert(self_ptr.cast(), QPN_MIN, QPN_MAX, max_qp)?;
    let resp = CreateQpResp {
        sq_offset: sq_off,
        rq_offset: rq_off,
        sq_bytes: sq.layout.bytes_total_u32(),
        rq_bytes: rq.layout.bytes_total_u32(),
        sq_entries: sq.layout.entries(),
        rq_entries: rq.layout.entries(),
        sq_entry_size: sq_size,
        rq_entry_size: rq_size,
        max_send_sge,
        max_recv_sge,
        max_inline,
        qpn,
        flags: 0,
        reserved: 0,
    };
    if let Err(e) = verbs::copy_to_udata(udata, &resp.to_bytes()) {
        dev.p.qpns.remove(qpn);
        return Err(e);
    }
    cap.max_send_wr = sq.layout.entries();
    cap.max_recv_wr = rq.layout.entries();
    cap.max_send_sge = max_send_sge;
    cap.max_recv_sge = max_recv_sge;
    cap.max_inline_data = max_inline;
    qp.ib.qp_num = qpn;
    // INVARIANT: initialised on success only.
    qp.p.write(QpPriv { ty, sq_sig_type: init.sq_sig_type, sq, rq, max_send_sge, max_recv_sge, max_inline, inner });
    Ok(())
}

/// The address vector of a `modify_qp(AV)`: RoCEv2 with a GRH only.
pub(crate) fn address_vector(ah: &bindings::rdma_ah_attr) -> Result<AddressVector> {
    if ah.type_ != bindings::rdma_ah_attr_type_RDMA_AH_ATTR_TYPE_ROCE
        || ah.ah_flags as u32 & bindings::ib_ah_flags_IB_AH_GRH == 0
        || ah.port_num != 1
    {
        return Err(EINVAL);
    }
    let grh = &ah.grh;
    // SAFETY: for RoCE ib_core resolves the source GID attribute before
    // calling the driver and keeps it referenced during the call.
    let sgid = unsafe { grh.sgid_attr.as_ref() }.ok_or(EINVAL)?;
    if sgid.gid_type != GID_TYPE_ROCE_V2 {
        return Err(EINVAL);
    }
    // SAFETY: plain-old-data unions.
    let (dgid, dmac) = unsafe { (grh.dgid.raw, ah.__bindgen_anon_1.roce.dmac) };
    Ok(AddressVector {
        dgid,
        sgid_index: grh.sgid_index,
        hop_limit: grh.hop_limit,
        traffic_class: grh.traffic_class,
        flow_label: grh.flow_label,
        dmac,
    })
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
    let av = if mask.contains(AttrMask::AV) { Some(address_vector(&attr.ah_attr)?) } else { None };
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
    if next == QpState::Reset {
        g.attrs = QpAttrs::default();
        g.av = None;
    }
    Ok(())
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
        // `device` set) and valid init attributes.
        let (qp, init) = unsafe { (&mut *qp.cast::<RroceQp>(), &mut *init) };
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
    let caps = bindings::ib_qp_cap {
        max_send_wr: p.sq.layout.entries(),
        max_recv_wr: p.rq.layout.entries(),
        max_send_sge: p.max_send_sge,
        max_recv_sge: p.max_recv_sge,
        max_inline_data: p.max_inline,
        ..Default::default()
    };
    a.cap = caps;
    init.cap = caps;
    init.qp_type = p.ty.to_ib();
    init.sq_sig_type = p.sq_sig_type;
    0
}

/// # Safety
///
/// `ib_device_ops::destroy_qp` contract: `qp` was created successfully.
pub(crate) unsafe extern "C" fn destroy_qp(qp: *mut bindings::ib_qp, _udata: *mut bindings::ib_udata) -> c_int {
    // SAFETY: by the invariant `p` is initialised; this is its one drop.
    let (p, qpn, dev) = unsafe {
        let q = &mut *qp.cast::<RroceQp>();
        (q.p.assume_init_read(), q.ib.qp_num, RroceDev::from_ib(q.ib.device))
    };
    dev.p.qpns.remove(qpn);
    // Dropping the rings gives their mappings back.
    drop(p);
    0
}
