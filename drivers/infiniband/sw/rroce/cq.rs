// SPDX-License-Identifier: GPL-2.0
//! Completion queues: a CQE ring the driver produces into and user space
//! polls without system calls.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! The ring (format: `proto::ring`, entries: `proto::wqe::Cqe`) lives in a
//! [`SharedBuf`] owned by the `rdma_user_mmap_entry` through which user
//! space maps it, so the memory outlives any `mmap` racing with
//! `destroy_cq`.  The driver's producer index is private; the user's
//! consumer index is validated on every read.  Only user CQs exist so far:
//! kernel consumers need the whole kernel-verbs set, which comes with the
//! data path.

use core::mem::size_of;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};
use kernel::bindings;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::device::RroceDev;
use crate::glue;
use crate::lock::{new_spinlock_bh, SpinLockBh};
use crate::proto::abi::{CreateCqCmd, CreateCqResp};
use crate::proto::ring::{Producer, RingLayout};
use crate::proto::wqe::{Cqe, CQE_BYTES};
use crate::shm::SharedBuf;
use crate::verbs::{self, MmapEntry};

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
    prod: Producer,
}

struct CqPriv {
    /// The mapped ring; ib_core owns the entry and frees the memory when
    /// the last mapping and our reference are gone.
    entry: NonNull<MmapEntry>,
    state: Pin<KBox<SpinLockBh<CqState>>>,
    /// `IB_CQ_SOLICITED`/`IB_CQ_NEXT_COMP` armed by `req_notify_cq`.
    armed: AtomicU32,
}

impl CqPriv {
    fn ring(&self) -> &SharedBuf {
        // SAFETY: we hold the entry's initial reference until `destroy_cq`.
        unsafe { self.entry.as_ref() }.buf()
    }
}

/// `create_cq` for a user CQ.
fn create(cq: &mut RroceCq, attr: &bindings::ib_cq_init_attr, udata: *mut bindings::ib_udata) -> Result {
    // SAFETY: `cq.ib.device` is set by ib_core to one of our devices.
    let dev = unsafe { RroceDev::from_ib(cq.ib.device) };
    if udata.is_null() {
        // Kernel CQs come with the kernel verbs of the data path.
        return Err(verbs::eopnotsupp());
    }
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
    let mut cmd = [0u8; CreateCqCmd::SIZE];
    verbs::copy_from_udata(udata, &mut cmd)?;
    if !CreateCqCmd::from_bytes(&cmd).is_valid() {
        return Err(EINVAL);
    }
    let layout = RingLayout::new(attr.cqe, CQE_BYTES as u32, (max_cqe + 1).next_power_of_two())
        .map_err(|_| EINVAL)?;
    let buf = SharedBuf::new(layout.bytes_total())?;
    layout.init_header(&buf, RING_START).map_err(|_| EINVAL)?;
    let state = KBox::pin_init(
        new_spinlock_bh!(CqState { prod: Producer::new(layout, RING_START) }, "rroce_cq"),
        GFP_KERNEL,
    )?;
    // SAFETY: `udata` belongs to a user call, so it has a live context.
    let uctx = unsafe { glue::rroce_udata_ucontext(udata) };
    if uctx.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: `uctx` is the caller's live context.
    let (entry, offset) = unsafe { MmapEntry::insert(uctx, buf)? };
    // From here on failures must give the entry back.
    let resp = CreateCqResp {
        mmap_offset: offset,
        ring_bytes: layout.bytes_total_u32(),
        entries: layout.entries(),
        entry_size: CQE_BYTES as u32,
        cqn: 0,
    };
    if let Err(e) = verbs::copy_to_udata(udata, &resp.to_bytes()) {
        // SAFETY: `entry` was inserted above and is ours to remove.
        unsafe { MmapEntry::remove(entry) };
        return Err(e);
    }
    cq.ib.cqe = layout.entries() as c_int;
    // INVARIANT: initialised on success only.
    cq.p.write(CqPriv { entry, state, armed: AtomicU32::new(0) });
    Ok(())
}

/// Writes `cqe` into the CQ and, if it is armed for it, calls its
/// completion handler.  Returns `false` if the CQ overflowed (the entry is
/// lost and the CQ's owner gets `IB_EVENT_CQ_ERR`).
///
/// # Safety
///
/// `cq` must be a live CQ of ours (e.g. the send or receive CQ of a live
/// QP, which holds a use count on it).
pub(crate) unsafe fn push(cq: *mut bindings::ib_cq, cqe: &Cqe, solicited: bool) -> bool {
    // SAFETY: per the requirements `cq` is a created CQ of ours.
    let (ib, p) = unsafe { (&*cq, (*cq.cast::<RroceCq>()).p.assume_init_ref()) };
    let ok = {
        let mut st = p.state.lock();
        st.prod.push(p.ring(), &cqe.to_bytes()).is_ok()
    };
    if !ok {
        if let Some(h) = ib.event_handler {
            let mut ev = bindings::ib_event {
                device: ib.device,
                event: bindings::ib_event_type_IB_EVENT_CQ_ERR,
                ..Default::default()
            };
            ev.element.cq = cq;
            // SAFETY: the handler and its context were set by ib_core.
            unsafe { h(&mut ev, ib.cq_context) };
        }
        return false;
    }
    let want = if solicited {
        bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK
    } else {
        bindings::ib_cq_notify_flags_IB_CQ_NEXT_COMP
    };
    // Disarm exactly once per event.
    let armed = p.armed.fetch_and(!bindings::ib_cq_notify_flags_IB_CQ_SOLICITED_MASK, Ordering::AcqRel);
    if armed & want != 0 {
        if let Some(h) = ib.comp_handler {
            // SAFETY: ib_core set the handler and context for this CQ.
            unsafe { h(cq, ib.cq_context) };
        }
    } else {
        // Not for us: put the arming back.
        p.armed.fetch_or(armed, Ordering::AcqRel);
    }
    true
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
            (&mut *cq.cast::<RroceCq>(), &*attr, glue::rroce_attrs_udata(attrs))
        };
        create(cq, attr, udata)?;
        Ok(0)
    })
}

/// # Safety
///
/// `ib_device_ops::destroy_cq` contract: `cq` was created successfully.
pub(crate) unsafe extern "C" fn destroy_cq(cq: *mut bindings::ib_cq, _udata: *mut bindings::ib_udata) -> c_int {
    // SAFETY: by the invariant `p` is initialised; this is its one drop.
    let p = unsafe { (*cq.cast::<RroceCq>()).p.assume_init_read() };
    // SAFETY: the entry is ours; after this the ring may be freed.
    unsafe { MmapEntry::remove(p.entry) };
    drop(p);
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
        let mut st = p.state.lock();
        let entries = st.prod.layout().entries();
        match st.prod.free_slots(p.ring()) {
            Ok(free) if free < entries => return 1,
            Ok(_) => {}
            Err(_) => return -(bindings::EIO as c_int),
        }
    }
    0
}

/// `poll_cq` for kernel consumers; user CQs are polled in user space.
///
/// # Safety
///
/// `ib_device_ops::poll_cq` contract.
pub(crate) unsafe extern "C" fn poll_cq(
    _cq: *mut bindings::ib_cq,
    _num: c_int,
    _wc: *mut bindings::ib_wc,
) -> c_int {
    -(bindings::EINVAL as c_int)
}
