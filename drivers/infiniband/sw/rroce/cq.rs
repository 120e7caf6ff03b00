// SPDX-License-Identifier: GPL-2.0
//! Completion queues: a CQE ring the driver produces into and user space
//! polls without system calls.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! The ring (format: `proto::ring`, entries: `proto::wqe::Cqe`) lives in a
//! [`SharedBuf`].  For a user CQ it is owned by the `rdma_user_mmap_entry`
//! through which user space maps it, so the memory outlives any `mmap`
//! racing with `destroy_cq`; the driver's producer index is private and the
//! user's consumer index is validated on every read.  A kernel consumer's
//! CQ has the same ring, private to the kernel, which [`poll_cq`] consumes.
//!
//! Completion handlers are not called while a CQE is pushed (that happens
//! under the QP lock, and a kernel consumer may post from its handler):
//! [`push`] says whether the handler is due and the caller runs
//! [`notify`] once it dropped its locks.
//!
//! [`resize_cq`] replaces the ring: a new one is allocated (and, for a
//! user CQ, offered through a new mmap entry) without any lock held; then,
//! under the CQ's state lock that [`push`] also takes, the unconsumed CQEs
//! are copied over at the same indices (`Producer::transfer`, which
//! validates the consumer index it reads), and ring, producer and kernel
//! consumer are swapped together.  The old ring's mmap entry goes once the
//! lock is dropped; a user mapping of it stays valid until `munmap` (its
//! pages are reference counted) but receives no more CQEs.

use core::mem::size_of;
use core::ptr;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::bindings;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::device::RroceDev;
use crate::ffi;
use crate::sync::lock::{new_spinlock_irq, SpinLockIrq};
use crate::proto::abi::{CreateCqCmd, CreateCqResp, ResizeCqCmd, ResizeCqResp};
use crate::proto::ring::{Consumer, Producer, RingError, RingLayout};
use crate::proto::wqe::{self, Cqe, CQE_BYTES};
use crate::ib::shm::SharedBuf;
use crate::ib::ucontext::RingMem;
use crate::verbs;

/// First index of every ring: close to the 2^32 wrap, so that the wrap is
/// exercised within the first few thousand completions of every CQ.
const RING_START: u32 = u32::MAX - 1023;

/// Our part of a CQ (allocated by ib_core, `ib` first).
///
/// # Invariants
///
/// `p` is initialised exactly when `create_cq` succeeded, and dropped in
/// `destroy_cq`.
#[repr(C)]
pub(crate) struct RroceCq {
    ib: bindings::ib_cq,
    p: core::mem::MaybeUninit<CqPriv>,
}

/// Size ib_core allocates for a CQ.
pub(crate) const CQ_SIZE: usize = size_of::<RroceCq>();

struct CqState {
    /// The ring (for a user CQ, ib_core owns the mmap entry and frees the
    /// memory when the last mapping and our reference are gone).  Under
    /// the lock because [`resize_cq`] replaces it.
    mem: RingMem,
    prod: Producer,
    /// The consumer side of a kernel CQ ([`poll_cq`]).
    cons: Option<Consumer>,
    /// The CQ overflowed: it is in the error state and takes no more
    /// entries (`IB_EVENT_CQ_ERR` was raised once).
    overflowed: bool,
}

struct CqPriv {
    state: Pin<KBox<SpinLockIrq<CqState>>>,
    /// `IB_CQ_SOLICITED`/`IB_CQ_NEXT_COMP` armed by `req_notify_cq`.
    armed: AtomicU32,
}

/// `create_cq` for a user CQ (`udata` set) or a kernel consumer's.
fn create(cq: &mut RroceCq, attr: &bindings::ib_cq_init_attr, udata: *mut bindings::ib_udata) -> Result {
    // SAFETY: `cq.ib.device` is set by ib_core to one of our devices.
    let dev = unsafe { RroceDev::from_ib(cq.ib.device) };
    if attr.flags != 0 {
        return Err(verbs::eopnotsupp());
    }
    let max_cqe = dev.p.attrs.max_cqe as u32;
    if attr.cqe == 0 || attr.cqe > max_cqe {
        return Err(EINVAL);
    }
    if attr.comp_vector >= dev.ib.num_comp_vectors as u32 {
        return Err(EINVAL);
    }
    let uctx = verbs::user_call_raw::<{ CreateCqCmd::SIZE }>(udata, |c| CreateCqCmd::from_bytes(c).is_valid())?;
    let layout = RingLayout::new(attr.cqe, CQE_BYTES as u32, (max_cqe + 1).next_power_of_two())
        .map_err(|_| EINVAL)?;
    let buf = SharedBuf::new(layout.bytes_total())?;
    layout.init_header(&buf, RING_START).map_err(|_| EINVAL)?;
    let cons = uctx.is_none().then(|| Consumer::new(layout, RING_START));
    let (mem, offset) = RingMem::new(uctx, buf)?;
    // From here on dropping `mem` gives the entry back.
    let prod = Producer::new(layout, RING_START);
    let state = KBox::pin_init(new_spinlock_irq!(CqState { mem, prod, cons, overflowed: false }, "rroce_cq"), GFP_KERNEL_ACCOUNT)?;
    if !udata.is_null() {
        let resp = CreateCqResp {
            mmap_offset: offset,
            ring_bytes: layout.bytes_total_u32(),
            entries: layout.entries(),
            entry_size: CQE_BYTES as u32,
            cqn: 0,
        };
        verbs::copy_to_udata(udata, &resp.to_bytes())?;
    }
    cq.ib.cqe = layout.entries() as c_int;
    // INVARIANT: initialised on success only.
    cq.p.write(CqPriv { state, armed: AtomicU32::new(0) });
    Ok(())
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

/// `resize_cq` for a user CQ (`udata` set) or a kernel consumer's.
///
/// # Safety
///
/// `cq` is a CQ of ours that was created successfully; `udata` is null
/// (kernel callers) or the verb's valid udata.
unsafe fn resize(cq: *mut bindings::ib_cq, cqe: c_int, udata: *mut bindings::ib_udata) -> Result {
    // SAFETY: per the requirements `p` is initialised.  Only `p` is
    // borrowed: producers read other fields of the `ib_cq` concurrently.
    let p = unsafe { (*cq.cast::<RroceCq>()).p.assume_init_ref() };
    // SAFETY: ib_core set `device` to one of our devices.
    let dev = unsafe { RroceDev::from_ib((*cq).device) };
    let max_cqe = dev.p.attrs.max_cqe as u32;
    let want = u32::try_from(cqe).map_err(|_| EINVAL)?;
    if want == 0 || want > max_cqe {
        return Err(EINVAL);
    }
    let uctx = verbs::user_call_raw::<{ ResizeCqCmd::SIZE }>(udata, |c| ResizeCqCmd::from_bytes(c).is_valid())?;
    // The new ring, made without any lock held (this may sleep).
    let layout = RingLayout::new(want, CQE_BYTES as u32, (max_cqe + 1).next_power_of_two())
        .map_err(|_| EINVAL)?;
    let buf = SharedBuf::new(layout.bytes_total())?;
    let (mem, offset) = RingMem::new(uctx, buf)?;
    // Dropping `mem` on any error below removes the new entry again.
    if !udata.is_null() {
        // Sent before the swap so that a fault here leaves the CQ as it
        // was; ib_core reports the new depth only if we succeed.
        let resp = ResizeCqResp {
            mmap_offset: offset,
            ring_bytes: layout.bytes_total_u32(),
            entries: layout.entries(),
            entry_size: CQE_BYTES as u32,
            reserved: 0,
        };
        verbs::copy_to_udata(udata, &resp.to_bytes())?;
    }
    let old = {
        let mut guard = p.state.lock();
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
            // `poll_cq`), so the ring's consumer index is its position.
            *c = Consumer::new(layout, t.cons);
        }
        // Under the lock, so that concurrent resizes leave the depth of
        // the ring that won.
        // SAFETY: `cq` is live; `cqe` is a plain int that only create and
        // resize write (a volatile store: ib_core may read it meanwhile).
        unsafe { ptr::write_volatile(&raw mut (*cq).cqe, layout.entries() as c_int) };
        core::mem::replace(&mut st.mem, mem)
    };
    // With the lock dropped: removes the old mmap entry (and frees a kernel
    // ring).
    drop(old);
    Ok(())
}

/// # Safety
///
/// `ib_device_ops::resize_cq` contract: `cq` was created successfully;
/// `udata` is null for kernel callers (`ib_resize_cq`).
pub(crate) unsafe extern "C" fn resize_cq(
    cq: *mut bindings::ib_cq,
    cqe: c_int,
    udata: *mut bindings::ib_udata,
) -> c_int {
    from_result(|| {
        // SAFETY: forwarded contract.
        unsafe { resize(cq, cqe, udata)? };
        Ok(0)
    })
}

/// What [`push`] did.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// The CQ overflowed (now or earlier): the entry is lost, the CQ is in
    /// the error state (its owner got one `IB_EVENT_CQ_ERR`) and the QP
    /// must enter the error state.
    Lost,
    /// Stored; the CQ was not armed for it.
    Stored,
    /// Stored and the CQ was armed for it: call [`notify`] once no lock is
    /// held.
    Notify,
}

/// Writes `cqe` into the CQ and disarms it if it was armed for it.
///
/// # Safety
///
/// `cq` must be a live CQ of ours (e.g. the send or receive CQ of a live
/// QP, which holds a use count on it).
pub(crate) unsafe fn push(cq: *mut bindings::ib_cq, cqe: &Cqe, solicited: bool) -> Pushed {
    // SAFETY: per the requirements `cq` is a created CQ of ours.  Only
    // `p` is borrowed: `resize_cq` may write `ib.cqe` meanwhile.
    let p = unsafe { (*cq.cast::<RroceCq>()).p.assume_init_ref() };
    // `Err(first)`: lost, and whether this is the overflow itself.
    let r = {
        let mut guard = p.state.lock();
        let st = &mut *guard;
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
        if !first {
            return Pushed::Lost;
        }
        // SAFETY: `cq` is live; ib_core set these fields at creation.
        let (handler, device, context) = unsafe { ((*cq).event_handler, (*cq).device, (*cq).cq_context) };
        if let Some(h) = handler {
            let mut ev = bindings::ib_event {
                device,
                event: bindings::ib_event_type_IB_EVENT_CQ_ERR,
                ..Default::default()
            };
            ev.element.cq = cq;
            // SAFETY: the handler and its context were set by ib_core.
            unsafe { h(&mut ev, context) };
        }
        return Pushed::Lost;
    }
    let want = if solicited {
        bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
    } else {
        bindings::ib_cq_notify_flags_IB_CQ_NEXT_COMP
    };
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

/// Calls the completion handler of `cq` (after [`Pushed::Notify`]).
///
/// # Safety
///
/// As for [`push`]; no spinlock of ours may be held (the handler of a
/// kernel consumer may post work or poll).
pub(crate) unsafe fn notify(cq: *mut bindings::ib_cq) {
    // SAFETY: per the requirements `cq` is live (fields are read one by
    // one: `resize_cq` may write `cqe` meanwhile).
    let (handler, context) = unsafe { ((*cq).comp_handler, (*cq).cq_context) };
    if let Some(h) = handler {
        // SAFETY: ib_core set the handler and context for this CQ.
        unsafe { h(cq, context) };
    }
}

/// # Safety
///
/// `ib_device_ops::create_cq` contract.
pub(crate) unsafe extern "C" fn create_cq(
    cq: *mut bindings::ib_cq,
    attr: *const bindings::ib_cq_init_attr,
    attrs: *mut bindings::uverbs_attr_bundle,
) -> c_int {
    from_result(|| {
        // SAFETY: ib_core passes a zeroed CQ of `CQ_SIZE` bytes and valid
        // attributes; `attrs` is null for kernel callers.
        let (cq, attr, udata) = unsafe {
            (&mut *cq.cast::<RroceCq>(), &*attr, ffi::rroce_attrs_udata(attrs))
        };
        // SAFETY: `cq.ib.device` is set by ib_core to one of our devices.
        let dev = unsafe { RroceDev::from_ib(cq.ib.device) };
        let max = dev.p.attrs.max_cq as u32;
        dev.p
            .cqs
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < max).then_some(n + 1))
            .map_err(|_| ENOMEM)?;
        create(cq, attr, udata).inspect_err(|_| {
            dev.p.cqs.fetch_sub(1, Ordering::Relaxed);
        })?;
        Ok(0)
    })
}

/// # Safety
///
/// `ib_device_ops::destroy_cq` contract: `cq` was created successfully.
pub(crate) unsafe extern "C" fn destroy_cq(cq: *mut bindings::ib_cq, _udata: *mut bindings::ib_udata) -> c_int {
    // SAFETY: by the invariant `p` is initialised; this is its one drop.
    let p = unsafe { (*cq.cast::<RroceCq>()).p.assume_init_read() };
    {
        // Tell a process that still polls the ring (its device was removed
        // and ib_core is destroying its objects) that nothing more will
        // come; its QPs are gone already.  A store into our own buffer
        // cannot fail, and if it did the process would merely keep polling.
        let st = p.state.lock();
        let _ = st.prod.close(st.mem.buf());
    }
    // Dropping the ring gives a user mapping back (the memory goes when
    // the last mapping does).
    drop(p);
    // SAFETY: `cq.device` is one of our devices, which outlives its CQs.
    let dev = unsafe { RroceDev::from_ib((*cq).device) };
    dev.p.cqs.fetch_sub(1, Ordering::Relaxed);
    0
}

/// # Safety
///
/// `ib_device_ops::req_notify_cq` contract.
pub(crate) unsafe extern "C" fn req_notify_cq(
    cq: *mut bindings::ib_cq,
    flags: bindings::ib_cq_notify_flags,
) -> c_int {
    // SAFETY: `cq` was created successfully, so `p` is initialised.
    let p = unsafe { (*cq.cast::<RroceCq>()).p.assume_init_ref() };
    let arm = flags & bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK;
    p.armed.fetch_or(arm, Ordering::AcqRel);
    if flags & bindings::ib_cq_notify_flags_IB_CQ_REPORT_MISSED_EVENTS != 0 {
        let mut guard = p.state.lock();
        let st = &mut *guard;
        let entries = st.prod.layout().entries();
        match st.prod.free_slots(st.mem.buf()) {
            Ok(free) if free < entries => return 1,
            Ok(_) => {}
            Err(_) => return -(bindings::EIO as c_int),
        }
    }
    0
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
    wc.qp = dev.p.qpns.load(c.qp_num).cast();
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

/// `poll_cq` for kernel consumers; user CQs are polled in user space.
///
/// # Safety
///
/// `ib_device_ops::poll_cq` contract: `wc` has room for `num` entries.
pub(crate) unsafe extern "C" fn poll_cq(cq: *mut bindings::ib_cq, num: c_int, wc: *mut bindings::ib_wc) -> c_int {
    // SAFETY: `cq` was created successfully, so `p` is initialised; only
    // `p` is borrowed (`resize_cq` may write `cqe` meanwhile).
    let p = unsafe { (*cq.cast::<RroceCq>()).p.assume_init_ref() };
    // SAFETY: ib_core set `device` to one of our devices.
    let dev = unsafe { RroceDev::from_ib((*cq).device) };
    let Ok(num) = usize::try_from(num) else { return -(bindings::EINVAL as c_int) };
    let mut guard = p.state.lock();
    let st = &mut *guard;
    let ring = st.mem.buf();
    let Some(cons) = st.cons.as_mut() else { return -(bindings::EINVAL as c_int) };
    let mut n = 0usize;
    let mut buf = [0u8; CQE_BYTES];
    while n < num {
        match cons.read_next(ring, &mut buf) {
            Ok(true) => {}
            _ => break,
        }
        let _ = cons.release_all(ring);
        // Our own entries, in kernel memory: they always decode.
        let Ok(c) = Cqe::decode(&buf) else { continue };
        // SAFETY: `n < num`, so the entry is inside the caller's array.
        fill_wc(dev, &c, unsafe { &mut *wc.add(n) });
        n += 1;
    }
    n as c_int
}
