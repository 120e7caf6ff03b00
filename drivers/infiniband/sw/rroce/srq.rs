// SPDX-License-Identifier: GPL-2.0
//! Shared receive queues: a receive ring (same format as a QP's RQ) that
//! the QPs created with it consume from, mapped into user space like an RQ.
//!
//! The ring's consumer state and the limit watch are under the SRQ's own
//! lock.  A QP's responder takes that lock inside the QP lock (never the
//! other way round) for as long as it peeks at and takes the head WQE, so
//! two QPs never take the same WQE; a taken WQE is copied into the QP
//! (`Dp::cur_recv`), which owns it until its completion.  The
//! `IB_EVENT_SRQ_LIMIT_REACHED` event is raised after the QP lock is
//! dropped (`Ctx::fire`).  Attribute rules: `proto::srq`.

#![forbid(unsafe_code)]

use kernel::bindings;
use kernel::prelude::*;

use crate::device::{DevPriv, RroceDev};
use crate::ib::srq::{SrqInit, SrqOps};
use crate::ib::wr::{RecvWr, RecvWrChain};
use crate::sync::lock::{new_spinlock_irq, SpinLockIrq, SpinLockIrqBackend};
use crate::proto::abi::{CreateSrqCmd, CreateSrqResp};
use crate::proto::ring::{Consumer, Producer};
use crate::proto::srq::{check_create, check_modify, LimitWatch, SrqError, SrqLimits};
use crate::proto::wqe::{self, RecvLimits, Sge};
use crate::ring::{Ring, RING_START};
use crate::ib::shm::SharedBuf;
use crate::limits;

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

fn srq_err(e: SrqError) -> Error {
    Error::from_errno(-e.errno())
}

impl SrqOps for SrqPriv {
    type Dev = DevPriv;

    fn create(dev: &RroceDev, init: SrqInit<'_>) -> Result<Self> {
        if init.srq_type != bindings::ib_srq_type_IB_SRQT_BASIC {
            return Err(limits::eopnotsupp());
        }
        let limits = SrqLimits { max_wr: dev.p.attrs.max_srq_wr as u32, max_sge: dev.p.attrs.max_srq_sge as u32 };
        let a = init.attr;
        let sge = check_create(a.max_wr, a.max_sge, a.srq_limit, &limits).map_err(srq_err)?;
        let uctx = limits::user_call::<{ CreateSrqCmd::SIZE }>(init.udata, |c| CreateSrqCmd::from_bytes(c).is_valid())?;
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
        // The number is what user space and `query_srq` see; nothing is
        // looked up by it.
        let srqn = dev.p.srqns.reserve(SRQN_MIN, SRQN_MAX, dev.p.attrs.max_srq as u32, bindings::GFP_KERNEL)?;
        if let Some(udata) = init.udata {
            let resp = CreateSrqResp {
                mmap_offset: off,
                ring_bytes: ring.layout.bytes_total_u32(),
                entries: ring.layout.entries(),
                entry_size: esz,
                max_sge,
                srqn,
                reserved: 0,
            };
            if let Err(e) = udata.write(&resp.to_bytes()) {
                dev.p.srqns.unreserve(srqn);
                return Err(e);
            }
        }
        a.max_wr = ring.layout.entries();
        a.max_sge = max_sge;
        let lim = RecvLimits { max_sge: max_sge as u16, max_msg_size: dev.p.attrs.max_mr_size.min(1 << 31) as u32 };
        Ok(SrqPriv { ring, lim, max_sge, srqn, inner })
    }

    fn modify(&self, a: &bindings::ib_srq_attr, mask: bindings::ib_srq_attr_mask) -> Result {
        let arm = check_modify(mask, a.max_wr, a.srq_limit, self.ring.layout.entries()).map_err(srq_err)?;
        if let Some(limit) = arm {
            self.lock().watch.arm(limit);
        }
        Ok(())
    }

    fn query(&self, a: &mut bindings::ib_srq_attr) -> Result {
        a.max_wr = self.ring.layout.entries();
        a.max_sge = self.max_sge;
        a.srq_limit = self.lock().watch.limit();
        Ok(())
    }

    /// No QP uses it any more (ib_core refuses while its use count is not
    /// zero; each QP waited for an RCU grace period when it was destroyed,
    /// so no receive path still looks at it).
    fn destroy(self, dev: &RroceDev) {
        dev.p.srqns.unreserve(self.srqn);
        // Dropping the ring gives its mapping back.
    }

    /// `post_srq_recv` of a kernel SRQ (user SRQs post into their mapped
    /// ring): `ENOMEM` when full, `EINVAL` for a bad request.
    fn post_recv(&self, chain: &mut RecvWrChain<'_>) -> Result {
        let ring = self.ring();
        let esz = self.entry_size() as usize;
        let mut g = self.lock();
        let kq = g.kq.as_mut().ok_or(EINVAL)?;
        post_chain(&mut kq.prod, ring, &mut kq.staging, chain, self.max_sge, esz)
    }
}

/// Writes the requests of `chain` into a kernel receive ring through
/// `prod` and publishes them: `ENOMEM` when the ring is full, `EINVAL` for
/// a bad request; the walk stops at the first one not posted.
pub(crate) fn post_chain(
    prod: &mut Producer,
    ring: &SharedBuf,
    staging: &mut [u8],
    chain: &mut RecvWrChain<'_>,
    max_sge: u32,
    esz: usize,
) -> Result {
    let mut r = Ok(());
    for w in chain.by_ref() {
        let entry = match w.and_then(|w| kernel_recv_wqe(&w, max_sge, esz, staging)) {
            Ok(e) => e,
            Err(e) => {
                r = Err(e);
                break;
            }
        };
        if prod.write_next(ring, entry).is_err() {
            r = Err(ENOMEM);
            break;
        }
    }
    let _ = prod.publish(ring);
    r
}

/// Encodes one kernel receive work request into `staging`; returns the
/// entry bytes.
pub(crate) fn kernel_recv_wqe<'a>(w: &RecvWr<'_>, max_sge: u32, esz: usize, staging: &'a mut [u8]) -> Result<&'a [u8]> {
    if w.sges.len() > max_sge as usize {
        return Err(EINVAL);
    }
    let mut sges = [Sge::default(); limits::MAX_SGE as usize];
    for (d, s) in sges.iter_mut().zip(w.sges) {
        *d = Sge { addr: s.addr, length: s.length, lkey: s.lkey };
    }
    staging.fill(0);
    let sges = sges.get(..w.sges.len()).ok_or(EINVAL)?;
    wqe::write_recv_wqe(staging, w.wr_id, sges).map_err(|_| EINVAL)?;
    staging.get(..esz).ok_or(EINVAL)
}
