// SPDX-License-Identifier: GPL-2.0
//! Shared receive queues: a receive ring (same format as a QP's RQ) that
//! the QPs created with it consume from, mapped into user space like an RQ.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! The ring's consumer state and the limit watch are under the SRQ's own
//! lock.  A QP's responder takes that lock inside the QP lock (never the
//! other way round) for as long as it peeks at and takes the head WQE, so
//! two QPs never take the same WQE; a taken WQE is copied into the QP
//! (`Dp::cur_recv`), which owns it until its completion.  The
//! `IB_EVENT_SRQ_LIMIT_REACHED` event is raised after the QP lock is
//! dropped (`Ctx::fire`).  Attribute rules: `proto::srq`.

use core::mem::{size_of, MaybeUninit};
use kernel::bindings;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::device::RroceDev;
use crate::sync::lock::{new_spinlock_irq, SpinLockIrq, SpinLockIrqBackend};
use crate::proto::abi::{CreateSrqCmd, CreateSrqResp};
use crate::proto::ring::{Consumer, Producer};
use crate::proto::srq::{check_create, check_modify, LimitWatch, SrqError, SrqLimits};
use crate::proto::wqe::{self, RecvLimits, Sge};
use crate::qp::{Ring, RING_START};
use crate::ib::shm::SharedBuf;
use crate::verbs;

/// SRQ numbers handed out.
const SRQN_MIN: u32 = 1;
const SRQN_MAX: u32 = 0x00ff_ffff;

/// Producer side of a kernel consumer's SRQ.
struct KernelSrq {
    prod: Producer,
    /// One entry being built.
    staging: KVVec<u8>,
}

/// The state under the SRQ lock.
pub(crate) struct SrqInner {
    cons: Consumer,
    watch: LimitWatch,
    kq: Option<KernelSrq>,
}

impl SrqInner {
    /// The ring's consumer (peek under this lock only).
    pub(crate) fn consumer(&mut self) -> &mut Consumer {
        &mut self.cons
    }

    /// Takes the WQE at the head (after a successful peek) and gives its
    /// slot back; returns whether the limit event is now due.
    pub(crate) fn take(&mut self, ring: &SharedBuf) -> bool {
        if self.cons.consume().is_err() {
            return false;
        }
        let _ = self.cons.release_all(ring);
        match self.cons.refresh(ring) {
            Ok(remaining) => self.watch.on_taken(remaining),
            Err(_) => false,
        }
    }
}

/// Our part of an SRQ, fixed at creation.
pub(crate) struct SrqPriv {
    ring: Ring,
    lim: RecvLimits,
    max_sge: u32,
    srqn: u32,
    inner: Pin<KBox<SpinLockIrq<SrqInner>>>,
}

impl SrqPriv {
    /// The ring memory.
    pub(crate) fn ring(&self) -> &SharedBuf {
        self.ring.buf()
    }

    /// What a receive WQE of this SRQ may hold.
    pub(crate) fn recv_limits(&self) -> RecvLimits {
        self.lim
    }

    /// Bytes per ring entry.
    pub(crate) fn entry_size(&self) -> u32 {
        self.ring.layout.entry_size()
    }

    /// Takes the SRQ lock.
    pub(crate) fn lock(&self) -> kernel::sync::lock::Guard<'_, SrqInner, SpinLockIrqBackend> {
        self.inner.lock()
    }
}

/// Our part of an SRQ (allocated by ib_core, `ib` first).
///
/// # Invariants
///
/// `p` is initialised exactly when `create_srq` succeeded, until
/// `destroy_srq` drops it.
#[repr(C)]
pub(crate) struct RroceSrq {
    ib: bindings::ib_srq,
    p: MaybeUninit<SrqPriv>,
}

/// Size ib_core allocates for an SRQ.
pub(crate) const SRQ_SIZE: usize = size_of::<RroceSrq>();

/// The private part of `srq`, `None` for null.
///
/// # Safety
///
/// `srq` must be null or an SRQ of ours that was created successfully and
/// stays alive for `'a` (a QP attached to it holds a use count on it).
pub(crate) unsafe fn priv_of<'a>(srq: *mut bindings::ib_srq) -> Option<&'a SrqPriv> {
    // SAFETY: per the requirements `p` is initialised.
    unsafe { srq.cast::<RroceSrq>().as_ref().map(|s| s.p.assume_init_ref()) }
}

/// Raises `IB_EVENT_SRQ_LIMIT_REACHED` on `srq`.  Call without locks.
///
/// # Safety
///
/// `srq` must be a live SRQ.
pub(crate) unsafe fn limit_event(srq: *mut bindings::ib_srq) {
    // SAFETY: `srq` is live; ib_core set these fields before create_srq.
    let (handler, device, context) = unsafe { ((*srq).event_handler, (*srq).device, (*srq).srq_context) };
    if let Some(h) = handler {
        let mut ev = bindings::ib_event {
            device,
            event: bindings::ib_event_type_IB_EVENT_SRQ_LIMIT_REACHED,
            ..Default::default()
        };
        ev.element.srq = srq;
        // SAFETY: the handler and its context were set by ib_core.
        unsafe { h(&mut ev, context) };
    }
}

fn srq_err(e: SrqError) -> Error {
    Error::from_errno(-e.errno())
}

fn create(s: &mut RroceSrq, init: &mut bindings::ib_srq_init_attr, udata: *mut bindings::ib_udata) -> Result {
    if init.srq_type != bindings::ib_srq_type_IB_SRQT_BASIC {
        return Err(verbs::eopnotsupp());
    }
    let self_ptr: *mut RroceSrq = s;
    // SAFETY: ib_core set `device` to one of our devices, which outlives
    // its SRQs.
    let dev = unsafe { RroceDev::from_ib(s.ib.device) };
    let limits = SrqLimits { max_wr: dev.p.attrs.max_srq_wr as u32, max_sge: dev.p.attrs.max_srq_sge as u32 };
    let a = &mut init.attr;
    let sge = check_create(a.max_wr, a.max_sge, a.srq_limit, &limits).map_err(srq_err)?;
    let uctx = verbs::user_call::<{ CreateSrqCmd::SIZE }>(udata, |c| CreateSrqCmd::from_bytes(c).is_valid())?;
    let esz = wqe::recv_entry_size(sge).ok_or(EINVAL)?;
    let (ring, off) = Ring::new(uctx, a.max_wr, esz)?;
    let max_sge = u32::from(wqe::recv_max_sge(esz)).min(limits.max_sge);
    let kq = if ring.mem.is_kernel() {
        Some(KernelSrq {
            prod: Producer::new(ring.layout, RING_START),
            staging: KVVec::from_elem(0u8, esz as usize, GFP_KERNEL_ACCOUNT)?,
        })
    } else {
        None
    };
    let inner = KBox::pin_init(
        new_spinlock_irq!(
            SrqInner { cons: Consumer::new(ring.layout, RING_START), watch: LimitWatch::default(), kq },
            "rroce_srq"
        ),
        GFP_KERNEL_ACCOUNT,
    )?;
    let srqn = dev.p.srqns.insert(self_ptr.cast(), SRQN_MIN, SRQN_MAX, dev.p.attrs.max_srq as u32)?;
    if !udata.is_null() {
        let resp = CreateSrqResp {
            mmap_offset: off,
            ring_bytes: ring.layout.bytes_total_u32(),
            entries: ring.layout.entries(),
            entry_size: esz,
            max_sge,
            srqn,
            reserved: 0,
        };
        if let Err(e) = verbs::copy_to_udata(udata, &resp.to_bytes()) {
            dev.p.srqns.remove(srqn);
            return Err(e);
        }
    }
    a.max_wr = ring.layout.entries();
    a.max_sge = max_sge;
    let lim = RecvLimits { max_sge: max_sge as u16, max_msg_size: dev.p.attrs.max_mr_size.min(1 << 31) as u32 };
    // INVARIANT: initialised on success only.
    s.p.write(SrqPriv { ring, lim, max_sge, srqn, inner });
    Ok(())
}

/// # Safety
///
/// `ib_device_ops::create_srq` contract.
pub(crate) unsafe extern "C" fn create_srq(
    srq: *mut bindings::ib_srq,
    init: *mut bindings::ib_srq_init_attr,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: ib_core passes a zeroed SRQ of `SRQ_SIZE` bytes (with
        // `device` set) and valid init attributes.
        let (s, init) = unsafe { (&mut *srq.cast::<RroceSrq>(), &mut *init) };
        create(s, init, udata)?;
        Ok(0)
    })
}

/// # Safety
///
/// `ib_device_ops::modify_srq` contract.
pub(crate) unsafe extern "C" fn modify_srq(
    srq: *mut bindings::ib_srq,
    attr: *mut bindings::ib_srq_attr,
    mask: bindings::ib_srq_attr_mask,
    _udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: `srq` was created by us; `attr` is valid.
        let (p, a) = unsafe { (priv_of(srq).ok_or(EINVAL)?, &*attr) };
        let arm = check_modify(mask, a.max_wr, a.srq_limit, p.ring.layout.entries()).map_err(srq_err)?;
        if let Some(limit) = arm {
            p.lock().watch.arm(limit);
        }
        Ok(0)
    })
}

/// # Safety
///
/// `ib_device_ops::query_srq` contract.
pub(crate) unsafe extern "C" fn query_srq(srq: *mut bindings::ib_srq, attr: *mut bindings::ib_srq_attr) -> c_int {
    from_result(|| {
        // SAFETY: `srq` was created by us; `attr` is writable.
        let (p, a) = unsafe { (priv_of(srq).ok_or(EINVAL)?, &mut *attr) };
        a.max_wr = p.ring.layout.entries();
        a.max_sge = p.max_sge;
        a.srq_limit = p.lock().watch.limit();
        Ok(0)
    })
}

/// # Safety
///
/// `ib_device_ops::destroy_srq` contract: `srq` was created successfully
/// and no QP uses it any more (ib_core refuses while its use count is
/// not zero; each QP waited for an RCU grace period when it was
/// destroyed, so no receive path still looks at it).
pub(crate) unsafe extern "C" fn destroy_srq(srq: *mut bindings::ib_srq, _udata: *mut bindings::ib_udata) -> c_int {
    // SAFETY: `srq` is ours and created.
    let s = unsafe { &mut *srq.cast::<RroceSrq>() };
    // SAFETY: ib_core set `device` to one of our devices.
    let dev = unsafe { RroceDev::from_ib(s.ib.device) };
    // SAFETY: by the invariant `p` is initialised; this is its one drop.
    let p = unsafe { s.p.assume_init_read() };
    dev.p.srqns.remove(p.srqn);
    // Dropping the ring gives its mapping back.
    drop(p);
    0
}

/// Encodes one kernel receive work request into `staging`; returns the
/// entry bytes.
///
/// # Safety
///
/// `w` must be a valid kernel receive work request.
pub(crate) unsafe fn kernel_recv_wqe<'a>(
    w: &bindings::ib_recv_wr,
    max_sge: u32,
    esz: usize,
    staging: &'a mut [u8],
) -> Result<&'a [u8]> {
    if w.num_sge < 0 || w.num_sge as u32 > max_sge {
        return Err(EINVAL);
    }
    let n = w.num_sge as usize;
    let mut sges = [Sge::default(); verbs::MAX_SGE as usize];
    if n != 0 {
        // SAFETY: the request has `num_sge` SGEs.
        let sgl = unsafe { core::slice::from_raw_parts(w.sg_list, n) };
        for (d, s) in sges.iter_mut().zip(sgl) {
            *d = Sge { addr: s.addr, length: s.length, lkey: s.lkey };
        }
    }
    staging.fill(0);
    // SAFETY: plain-old-data union.
    let wr_id = unsafe { w.__bindgen_anon_1.wr_id };
    let sges = sges.get(..n).ok_or(EINVAL)?;
    wqe::write_recv_wqe(staging, wr_id, sges).map_err(|_| EINVAL)?;
    staging.get(..esz).ok_or(EINVAL)
}

/// `post_srq_recv` of a kernel SRQ (user SRQs post into their mapped
/// ring): `ENOMEM` when full, `EINVAL` for a bad request.
///
/// # Safety
///
/// `ib_device_ops::post_srq_recv` contract.
pub(crate) unsafe extern "C" fn post_srq_recv(
    srq: *mut bindings::ib_srq,
    mut wr: *const bindings::ib_recv_wr,
    bad_wr: *mut *const bindings::ib_recv_wr,
) -> c_int {
    // SAFETY: `srq` was created by us and its owner holds it for the call.
    let Some(p) = (unsafe { priv_of(srq) }) else {
        return -(bindings::EINVAL as c_int);
    };
    let ring = p.ring();
    let esz = p.entry_size() as usize;
    let mut err = 0;
    let mut g = p.lock();
    match g.kq.as_mut() {
        Some(kq) => {
            // SAFETY: ib_core passes a valid chain of work requests.
            while let Some(w) = unsafe { wr.as_ref() } {
                // SAFETY: `w` is a valid kernel request.
                let entry = match unsafe { kernel_recv_wqe(w, p.max_sge, esz, &mut kq.staging) } {
                    Ok(e) => e,
                    Err(e) => {
                        err = e.to_errno();
                        break;
                    }
                };
                if kq.prod.write_next(ring, entry).is_err() {
                    err = -(bindings::ENOMEM as c_int);
                    break;
                }
                wr = w.next;
            }
            let _ = kq.prod.publish(ring);
        }
        None => err = -(bindings::EINVAL as c_int),
    }
    drop(g);
    if err != 0 && !bad_wr.is_null() {
        // SAFETY: ib_core passes a writable `bad_wr`.
        unsafe { *bad_wr = wr };
    }
    err
}
