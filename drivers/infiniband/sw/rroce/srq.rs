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
use crate::cq::CqPriv;
use crate::ib::cq::CqHandle;
use crate::ib::srq::{SrqInit, SrqOps, SrqTable};
use crate::ib::{PdId, XrcdId};
use crate::ib::wr::{RecvWr, RecvWrChain};
use crate::sync::lock::{new_spinlock_irq, SpinLockIrq, SpinLockIrqBackend};
use crate::ib::udata::UData;
use crate::proto::abi::{CreateSrqCmd, CreateSrqResp, ModifySrqCmd, ResizeSrqResp};
use crate::proto::ring::{Consumer, Producer, RingError};
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
    /// The ring: replaced by a resize (`modify_srq` with `IB_SRQ_MAX_WR`),
    /// so only reached through this lock.
    ring: Ring,
    cons: Consumer,
    watch: LimitWatch,
    kq: Option<KernelSrq>,
}

impl SrqInner {
    /// The ring memory and its consumer (peek under this lock only).
    pub(crate) fn parts(&mut self) -> (&SharedBuf, &mut Consumer) {
        (self.ring.buf(), &mut self.cons)
    }

    /// Takes the WQE at the head (after a successful peek) and gives its
    /// slot back; returns whether the limit event is now due.
    pub(crate) fn take(&mut self) -> bool {
        let ring = self.ring.buf();
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

/// What an XRC SRQ has besides its ring.
pub(crate) struct XrcSrq {
    /// Its domain: only XRC target QPs of the same domain receive into it.
    pub(crate) xrcd: XrcdId,
    /// Its PD: the one the requests received into it are checked against
    /// (R_Keys) and its receive buffers (L_Keys).
    pub(crate) pd: PdId,
    /// The CQ its receives complete on.
    pub(crate) cq: CqHandle<CqPriv>,
}

/// Our part of an SRQ.
pub(crate) struct SrqPriv {
    /// Bytes per ring entry (a resize keeps it).
    esz: u32,
    lim: RecvLimits,
    max_sge: u32,
    srqn: u32,
    /// `Some` for an XRC SRQ.
    pub(crate) xrc: Option<XrcSrq>,
    inner: Pin<KBox<SpinLockIrq<SrqInner>>>,
}

impl SrqPriv {
    /// What a receive WQE of this SRQ may hold.
    pub(crate) fn recv_limits(&self) -> RecvLimits {
        self.lim
    }

    /// Bytes per ring entry.
    pub(crate) fn entry_size(&self) -> u32 {
        self.esz
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
    type Cq = CqPriv;

    fn table(dev: &RroceDev) -> &SrqTable<Self> {
        &dev.p.srqs
    }

    fn srqn(&self) -> u32 {
        self.srqn
    }

    fn create(dev: &RroceDev, init: SrqInit<'_, CqPriv>) -> Result<(Self, u32)> {
        // Basic and XRC SRQs; no tag matching.
        if init.srq_type != bindings::ib_srq_type_IB_SRQT_BASIC && init.xrc.is_none() {
            return Err(limits::eopnotsupp());
        }
        let limits = SrqLimits { max_wr: dev.p.attrs.max_srq_wr as u32, max_sge: dev.p.attrs.max_srq_sge as u32 };
        let a = init.attr;
        let sge = check_create(a.max_wr, a.max_sge, &limits).map_err(srq_err)?;
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
        let layout = ring.layout;
        let inner = KBox::pin_init(
            new_spinlock_irq!(
                SrqInner { ring, cons: Consumer::new(layout, RING_START), watch: LimitWatch::default(), kq },
                "rroce_srq"
            ),
            GFP_KERNEL_ACCOUNT,
        )?;
        // The number is what user space and `query_srq` see; the receive
        // path finds an XRC SRQ by it (the layer publishes it).
        let srqn = dev.p.srqs.reserve(SRQN_MIN, SRQN_MAX, dev.p.attrs.max_srq as u32)?;
        if let Some(udata) = init.udata {
            let resp = CreateSrqResp {
                mmap_offset: off,
                ring_bytes: layout.bytes_total_u32(),
                entries: layout.entries(),
                entry_size: esz,
                max_sge,
                srqn,
                reserved: 0,
            };
            if let Err(e) = udata.write(&resp.to_bytes()) {
                dev.p.srqs.unreserve(srqn);
                return Err(e);
            }
        }
        a.max_wr = layout.entries();
        a.max_sge = max_sge;
        let lim = RecvLimits { max_sge: max_sge as u16, max_msg_size: dev.p.attrs.max_mr_size.min(u64::from(crate::limits::MAX_MSG_SZ)) as u32 };
        let xrc = init.xrc.map(|x| XrcSrq { xrcd: x.xrcd, pd: init.pd, cq: x.cq });
        Ok((SrqPriv { esz, lim, max_sge, srqn, xrc, inner }, srqn))
    }

    fn modify(
        &self,
        dev: &RroceDev,
        a: &bindings::ib_srq_attr,
        mask: bindings::ib_srq_attr_mask,
        udata: Option<UData<'_>>,
    ) -> Result {
        let limits = SrqLimits { max_wr: dev.p.attrs.max_srq_wr as u32, max_sge: dev.p.attrs.max_srq_sge as u32 };
        let (entries, armed) = {
            let g = self.lock();
            (g.ring.layout.entries(), g.watch.limit())
        };
        let m = check_modify(mask, a.max_wr, a.srq_limit, entries, armed, &limits).map_err(srq_err)?;
        if let Some(want) = m.resize {
            self.resize(want, udata, m.arm.is_none())?;
        }
        if let Some(limit) = m.arm {
            let mut g = self.lock();
            // A concurrent resize may have shrunk the ring since the check.
            if limit > g.ring.layout.entries() {
                return Err(EINVAL);
            }
            g.watch.arm(limit);
        }
        Ok(())
    }

    fn query(&self, a: &mut bindings::ib_srq_attr) -> Result {
        let g = self.lock();
        a.max_wr = g.ring.layout.entries();
        a.max_sge = self.max_sge;
        a.srq_limit = g.watch.limit();
        Ok(())
    }

    /// No QP uses it any more (ib_core refuses while its use count is not
    /// zero; each QP waited for an RCU grace period when it was destroyed,
    /// and the layer waited for one after unpublishing an XRC SRQ, so no
    /// receive path still looks at it).
    fn destroy(self, _dev: &RroceDev) {
        // Dropping the ring gives its mapping back.
    }

    /// `post_srq_recv` of a kernel SRQ (user SRQs post into their mapped
    /// ring): `ENOMEM` when full, `EINVAL` for a bad request.
    fn post_recv(&self, chain: &mut RecvWrChain<'_>) -> Result {
        let esz = self.entry_size() as usize;
        let mut guard = self.lock();
        let g = &mut *guard;
        let kq = g.kq.as_mut().ok_or(EINVAL)?;
        post_chain(&mut kq.prod, g.ring.buf(), &mut kq.staging, chain, self.max_sge, esz)
    }
}

impl SrqPriv {
    /// Resizes the ring to at least `want` entries: a new ring (made
    /// without the lock; for a user SRQ a new mmap entry, whose
    /// [`ResizeSrqResp`] goes to the address the command names, since
    /// `modify_srq` has no response buffer), the posted WQEs copied over at
    /// the same indices under the lock, the consumer (and a kernel SRQ's
    /// producer) continuing there, and the old ring dropped after the lock.
    /// `EINVAL` if more WQEs are posted than `want` holds; the SRQ is left
    /// as it was on any error.
    fn resize(&self, want: u32, udata: Option<UData<'_>>, keep_limit: bool) -> Result {
        let cmd = match udata {
            Some(u) => {
                let mut c = [0u8; ModifySrqCmd::SIZE];
                u.read(&mut c)?;
                let cmd = ModifySrqCmd::from_bytes(&c);
                if cmd.resp_addr == 0 {
                    return Err(EINVAL);
                }
                Some((u, cmd, u.ucontext().ok_or(EINVAL)?))
            }
            None => None,
        };
        let uctx = cmd.as_ref().map(|&(_, _, x)| x);
        let (ring, off) = Ring::new(uctx, want, self.esz)?;
        if let Some((u, c, _)) = &cmd {
            // Before the swap: a fault here leaves the SRQ as it was.
            let resp = ResizeSrqResp {
                mmap_offset: off,
                ring_bytes: ring.layout.bytes_total_u32(),
                entries: ring.layout.entries(),
                entry_size: self.esz,
                reserved: 0,
            };
            u.write_at(c.resp_addr, &resp.to_bytes())?;
        }
        let old = {
            let mut guard = self.lock();
            let g = &mut *guard;
            // A kernel SRQ stays a kernel SRQ and a user SRQ a user SRQ.
            if g.ring.mem.is_kernel() != cmd.is_none() {
                return Err(EINVAL);
            }
            // The limit that stays armed (re-checked under the lock: a
            // concurrent modify_srq may have armed one meanwhile).
            if keep_limit && g.watch.limit() > ring.layout.entries() {
                return Err(EINVAL);
            }
            let t = g.cons.transfer(g.ring.buf(), ring.layout, ring.buf()).map_err(|e| match e {
                RingError::Full => EINVAL,
                _ => EIO,
            })?;
            // A kernel SRQ's own producer continues in the new ring (its
            // posts publish at once, under this lock).
            let prod = match g.kq.as_ref() {
                Some(_) => Some(Producer::attach(ring.layout, ring.buf()).map_err(|_| EIO)?),
                None => None,
            };
            // Nothing fails from here on.
            if let (Some(kq), Some(p)) = (g.kq.as_mut(), prod) {
                kq.prod = p;
            }
            g.cons = t.consumer;
            core::mem::replace(&mut g.ring, ring)
        };
        // With the lock dropped: removes the old mmap entry (and frees a
        // kernel ring).
        drop(old);
        Ok(())
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
