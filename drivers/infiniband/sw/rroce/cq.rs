// SPDX-License-Identifier: GPL-2.0
//! Completion queues: a CQE ring the driver produces into and user space
//! polls without system calls.
//!
//! The ring (format: `proto::ring`, entries: `proto::wqe::Cqe`) lives in a
//! [`SharedBuf`].  For a user CQ it is owned by the `rdma_user_mmap_entry`
//! through which user space maps it, so the memory outlives any `mmap`
//! racing with `destroy_cq`; the driver's producer index is private and the
//! user's consumer index is validated on every read.  A kernel consumer's
//! CQ has the same ring, private to the kernel, which [`CqOps::poll`] consumes.
//!
//! Completion handlers are not called while a CQE is pushed (that happens
//! under the QP lock, and a kernel consumer may post from its handler):
//! [`push`] says whether the handler is due and the caller runs
//! [`CqHandle::notify`] once it dropped its locks.
//!
//! [`CqOps::resize`] replaces the ring: a new one is allocated (and, for a
//! user CQ, offered through a new mmap entry) without any lock held; then,
//! under the CQ's state lock that [`push`] also takes, the unconsumed CQEs
//! are copied over at the same indices (`Producer::transfer`, which
//! validates the consumer index it reads), and ring, producer and kernel
//! consumer are swapped together.  The old ring's mmap entry goes once the
//! lock is dropped; a user mapping of it stays valid until `munmap` (its
//! pages are reference counted) but receives no more CQEs.

#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicU32, Ordering};
use kernel::bindings;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::device::{DevPriv, RroceDev};
use crate::ib::cq::{CqHandle, CqOps};
use crate::ib::udata::UData;
use crate::sync::lock::{new_spinlock_irq, SpinLockIrq};
use crate::proto::abi::{CreateCqCmd, CreateCqResp, ResizeCqCmd, ResizeCqResp};
use crate::proto::ring::{Consumer, Producer, RingError, RingLayout};
use crate::proto::wqe::{self, Cqe, WcStatus, CQE_BYTES};
use crate::ib::shm::SharedBuf;
use crate::ib::ucontext::RingMem;
use crate::limits;

/// First index of every ring: close to the 2^32 wrap, so that the wrap is
/// exercised within the first few thousand completions of every CQ.
const RING_START: u32 = u32::MAX - 1023;

struct CqState {
    /// The ring (for a user CQ, ib_core owns the mmap entry and frees the
    /// memory when the last mapping and our reference are gone).  Under
    /// the lock because [`CqOps::resize`] replaces it.
    mem: RingMem,
    prod: Producer,
    /// The consumer side of a kernel CQ ([`CqOps::poll`]).
    cons: Option<Consumer>,
    /// The CQ overflowed: it is in the error state and takes no more
    /// entries (`IB_EVENT_CQ_ERR` was raised once).
    overflowed: bool,
}

pub(crate) struct CqPriv {
    state: Pin<KBox<SpinLockIrq<CqState>>>,
    /// `IB_CQ_SOLICITED`/`IB_CQ_NEXT_COMP` armed by `req_notify_cq`.
    armed: AtomicU32,
    /// Created with `IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION`: every CQE
    /// carries the time it was written (CLOCK_MONOTONIC ns, the device
    /// clock of `hca_core_clock`).
    timestamps: bool,
}

/// The creation flags a CQ takes.
const CQ_FLAGS: u32 = bindings::ib_uverbs_ex_create_cq_flags_IB_UVERBS_CQ_FLAGS_TIMESTAMP_COMPLETION;

/// The new CQ's part and depth (the caller counts it on the device).
fn create(dev: &RroceDev, attr: &bindings::ib_cq_init_attr, udata: Option<UData<'_>>) -> Result<(CqPriv, u32)> {
    if attr.flags & !CQ_FLAGS != 0 {
        return Err(limits::eopnotsupp());
    }
    let timestamps = attr.flags & CQ_FLAGS != 0;
    let max_cqe = dev.p.attrs.max_cqe as u32;
    if attr.cqe == 0 || attr.cqe > max_cqe {
        return Err(EINVAL);
    }
    if attr.comp_vector >= dev.num_comp_vectors() {
        return Err(EINVAL);
    }
    let uctx = limits::user_call::<{ CreateCqCmd::SIZE }>(udata, |c| CreateCqCmd::from_bytes(c).is_valid())?;
    let layout = RingLayout::new(attr.cqe, CQE_BYTES as u32, (max_cqe + 1).next_power_of_two())
        .map_err(|_| EINVAL)?;
    let buf = SharedBuf::new(layout.bytes_total())?;
    layout.init_header(&buf, RING_START).map_err(|_| EINVAL)?;
    let cons = uctx.is_none().then(|| Consumer::new(layout, RING_START));
    let (mem, offset) = RingMem::new(uctx, buf)?;
    // From here on dropping `mem` gives the entry back.
    let prod = Producer::new(layout, RING_START);
    let state = KBox::pin_init(new_spinlock_irq!(CqState { mem, prod, cons, overflowed: false }, "rroce_cq"), GFP_KERNEL_ACCOUNT)?;
    if let Some(udata) = udata {
        let resp = CreateCqResp {
            mmap_offset: offset,
            ring_bytes: layout.bytes_total_u32(),
            entries: layout.entries(),
            entry_size: CQE_BYTES as u32,
            cqn: 0,
        };
        udata.write(&resp.to_bytes())?;
    }
    Ok((CqPriv { state, armed: AtomicU32::new(0), timestamps }, layout.entries()))
}

/// The errno for a ring that [`Producer::transfer`] refused.
fn transfer_errno(e: RingError) -> Error {
    match e {
        // More unpolled CQEs than the new ring holds.
        RingError::Full => EINVAL,
        // The consumer index user space wrote is impossible (or the ring
        // broke earlier): the CQ is unusable, as `push` will find too.
        _ => EIO,
    }
}

/// What [`push`] did.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// The CQ overflowed earlier: the entry is lost, the CQ is in the
    /// error state and the QP must enter the error state.
    Lost,
    /// The CQ overflowed now: as [`Pushed::Lost`], and the caller raises
    /// `IB_EVENT_CQ_ERR` ([`CqHandle::error_event`]) once no lock is held.
    Overflow,
    /// Stored; the CQ was not armed for it.
    Stored,
    /// Stored and the CQ was armed for it: call [`CqHandle::notify`] once no lock is
    /// held.
    Notify,
}

/// Writes `cqe` into the CQ and disarms it if it was armed for it: for
/// any completion, or (`IB_CQ_SOLICITED`) for a `solicited` one or one
/// that is not a success (`ibv_req_notify_cq(3)`: an error completion
/// counts as solicited, so that a consumer sleeping on solicited events
/// learns its QP failed).
pub(crate) fn push(cq: &CqHandle<CqPriv>, cqe: &Cqe, solicited: bool) -> Pushed {
    let p = cq.get();
    let mut cqe = *cqe;
    // `Err(first)`: lost, and whether this is the overflow itself.
    let r = {
        let mut guard = p.state.lock();
        let st = &mut *guard;
        // Stamped under the lock, so the times rise in ring order.
        if p.timestamps {
            cqe.timestamp = crate::sync::timer::ktime_ns();
        }
        if st.overflowed {
            Err(false)
        } else if st.prod.push(st.mem.buf(), &cqe.to_bytes()).is_ok() {
            Ok(())
        } else {
            st.overflowed = true;
            Err(true)
        }
    };
    if let Err(first) = r {
        // The caller raises IB_EVENT_CQ_ERR once its locks are dropped
        // (a consumer's handler may call back into the QP).
        return if first { Pushed::Overflow } else { Pushed::Lost };
    }
    let want = if solicited || cqe.status != WcStatus::Success {
        bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
    } else {
        bindings::ib_cq_notify_flags_IB_CQ_NEXT_COMP
    };
    // The entry (stored above) is published before the arm is read, and
    // `req_notify` arms before the consumer reads the producer index: a
    // full barrier on each side (store buffering), so an arming that this
    // push does not see finds the entry when its consumer polls.  Without
    // it, on x86, the load of `armed` could pass the buffered ring stores:
    // no event, and a user consumer that polled after arming saw the old
    // producer index and slept with a CQE waiting (found by review).
    crate::sync::smp_mb();
    // Disarm exactly once per event, in one atomic transition: an arming
    // this entry does not match stays untouched (clearing it and putting
    // it back would hide it from a concurrent push of another QP).
    let disarmed = p.armed.fetch_update(Ordering::AcqRel, Ordering::Acquire, |armed| (armed & want != 0).then_some(0));
    if disarmed.is_ok() {
        Pushed::Notify
    } else {
        Pushed::Stored
    }
}

impl CqOps for CqPriv {
    type Dev = DevPriv;

    /// `create_cq` for a user CQ (`udata` set) or a kernel consumer's.
    fn create(dev: &RroceDev, attr: &bindings::ib_cq_init_attr, udata: Option<UData<'_>>) -> Result<(Self, u32)> {
        let max = dev.p.attrs.max_cq as u32;
        dev.p
            .cqs
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < max).then_some(n + 1))
            .map_err(|_| ENOMEM)?;
        create(dev, attr, udata).inspect_err(|_| {
            dev.p.cqs.fetch_sub(1, Ordering::Relaxed);
        })
    }

    /// `resize_cq` for a user CQ (`udata` set) or a kernel consumer's.
    fn resize(&self, dev: &RroceDev, want: u32, udata: Option<UData<'_>>, set_depth: &dyn Fn(u32)) -> Result {
        let max_cqe = dev.p.attrs.max_cqe as u32;
        if want == 0 || want > max_cqe {
            return Err(EINVAL);
        }
        let uctx = limits::user_call::<{ ResizeCqCmd::SIZE }>(udata, |c| ResizeCqCmd::from_bytes(c).is_valid())?;
        // The new ring, made without any lock held (this may sleep).
        let layout = RingLayout::new(want, CQE_BYTES as u32, (max_cqe + 1).next_power_of_two())
            .map_err(|_| EINVAL)?;
        let buf = SharedBuf::new(layout.bytes_total())?;
        let (mem, offset) = RingMem::new(uctx, buf)?;
        // Dropping `mem` on any error below removes the new entry again.
        if let Some(udata) = udata {
            // Sent before the swap so that a fault here leaves the CQ as it
            // was; ib_core reports the new depth only if we succeed.
            let resp = ResizeCqResp {
                mmap_offset: offset,
                ring_bytes: layout.bytes_total_u32(),
                entries: layout.entries(),
                entry_size: CQE_BYTES as u32,
                reserved: 0,
            };
            udata.write(&resp.to_bytes())?;
        }
        let old = {
            let mut guard = self.state.lock();
            let st = &mut *guard;
            // A kernel CQ stays a kernel CQ and a user CQ a user CQ.
            if st.mem.is_kernel() != uctx.is_none() {
                return Err(EINVAL);
            }
            let t = st.prod.transfer(st.mem.buf(), layout, mem.buf()).map_err(transfer_errno)?;
            // Not smaller than what is still to be polled.
            if t.count > want {
                return Err(EINVAL);
            }
            // Nothing fails from here on.
            st.prod = t.producer;
            if let Some(c) = st.cons.as_mut() {
                // The kernel consumer releases everything it reads (see
                // `poll`), so the ring's consumer index is its position.
                *c = Consumer::new(layout, t.cons);
            }
            // Under the lock, so that concurrent resizes leave the depth of
            // the ring that won.
            set_depth(layout.entries());
            core::mem::replace(&mut st.mem, mem)
        };
        // With the lock dropped: removes the old mmap entry (and frees a
        // kernel ring).
        drop(old);
        Ok(())
    }

    fn destroy(self, dev: &RroceDev) {
        {
            // Tell a process that still polls the ring (its device was
            // removed and ib_core is destroying its objects) that nothing
            // more will come; its QPs are gone already.  A store into our
            // own buffer cannot fail, and if it did the process would
            // merely keep polling.
            let st = self.state.lock();
            let _ = st.prod.close(st.mem.buf());
        }
        // Dropping the ring gives a user mapping back (the memory goes when
        // the last mapping does).
        drop(self);
        dev.p.cqs.fetch_sub(1, Ordering::Relaxed);
    }

    fn req_notify(&self, flags: bindings::ib_cq_notify_flags) -> Result<bool> {
        let arm = flags & bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK;
        self.armed.fetch_or(arm, Ordering::AcqRel);
        // Pairs with the barrier in `push` (user consumers poll the ring
        // after this returns, without our lock).
        crate::sync::smp_mb();
        if flags & bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0 {
            let mut guard = self.state.lock();
            let st = &mut *guard;
            let entries = st.prod.layout().entries();
            return match st.prod.free_slots(st.mem.buf()) {
                Ok(free) => Ok(free < entries),
                Err(_) => Err(EIO),
            };
        }
        Ok(false)
    }

    /// `poll_cq` for kernel consumers; user CQs are polled in user space.
    fn poll(&self, dev: &RroceDev, wc: &mut [bindings::ib_wc]) -> Result<usize> {
        let mut guard = self.state.lock();
        let st = &mut *guard;
        let ring = st.mem.buf();
        let cons = st.cons.as_mut().ok_or(EINVAL)?;
        let mut n = 0usize;
        let mut buf = [0u8; CQE_BYTES];
        while let Some(out) = wc.get_mut(n) {
            match cons.read_next(ring, &mut buf) {
                Ok(true) => {}
                _ => break,
            }
            let _ = cons.release_all(ring);
            // Our own entries, in kernel memory: they always decode.
            let Ok(c) = Cqe::decode(&buf) else { continue };
            fill_wc(dev, &c, out);
            n += 1;
        }
        Ok(n)
    }
}

/// `ib_wc_flags` of a CQE's `WC_*` flags (the uverbs bit order differs).
fn ib_wc_flags(f: u8) -> c_int {
    let map = [
        (wqe::WC_GRH, bindings::ib_wc_flags_IB_WC_GRH),
        (wqe::WC_WITH_IMM, bindings::ib_wc_flags_IB_WC_WITH_IMM),
        (wqe::WC_WITH_INV, bindings::ib_wc_flags_IB_WC_WITH_INVALIDATE),
        (wqe::WC_IP_CSUM_OK, bindings::ib_wc_flags_IB_WC_IP_CSUM_OK),
    ];
    map.iter().filter(|(w, _)| f & w != 0).fold(0, |acc, (_, b)| acc | *b as c_int)
}

/// Fills a work completion from a CQE.
fn fill_wc(dev: &RroceDev, c: &Cqe, wc: &mut bindings::ib_wc) {
    *wc = bindings::ib_wc::default();
    wc.__bindgen_anon_1.wr_id = c.wr_id;
    wc.status = u32::from(c.status as u8);
    wc.opcode = u32::from(c.opcode as u8);
    wc.vendor_err = c.vendor_err;
    wc.byte_len = c.byte_len;
    // The QP of a completion outlives it for kernel consumers (they drain
    // before destroying); a QP already gone gives a null pointer.
    wc.qp = dev.p.qps.raw(c.qp_num);
    wc.ex.imm_data = c.imm_or_inv;
    wc.src_qp = c.src_qp;
    wc.wc_flags = ib_wc_flags(c.wc_flags);
    wc.pkey_index = c.pkey_index;
    wc.sl = c.sl;
    wc.dlid_path_bits = c.dlid_path_bits;
    wc.port_num = 1;
    if c.network_hdr_type != 0 {
        // UD receives: how to read the GRH area (ib_init_ah_attr_from_wc).
        wc.network_hdr_type = c.network_hdr_type;
        wc.wc_flags |= bindings::ib_wc_flags_IB_WC_WITH_NETWORK_HDR_TYPE as c_int;
    }
}
