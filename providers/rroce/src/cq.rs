// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Completion queues: created by the kernel, polled entirely in user space.
//!
//! `create_cq` sends `CreateCqCmd` as driver data, validates the
//! `CreateCqResp` that comes back and maps the ring.  `poll_cq` is the
//! ring's consumer: it copies each CQE out of the mapping, decodes it with
//! [`Cqe::decode`] and releases the slots it consumed (one release-store of
//! the consumer index per call).  A CQE that does not decode, or a producer
//! index that the ring protocol rejects, breaks the CQ for good: that
//! `poll_cq` call returns the completions before the bad entry (or
//! `-EIO` if there were none), every later call returns `-EIO`.  So does
//! a CQ whose ring the kernel closed (`ring::PROD_CLOSED`: ib_core
//! destroyed the CQ because its device was removed) once it is empty,
//! instead of returning 0 forever.
//!
//! `resize_cq` holds the ring lock (so no `poll_cq` runs meanwhile) while
//! it sends `RESIZE_CQ` with a `ResizeCqCmd`; the kernel moves the unpolled
//! CQEs into a new ring at the same indices and answers with its geometry
//! (`ResizeCqResp`).  The provider maps the new ring, attaches its consumer
//! (which must continue at the index the old one reached), and only then
//! unmaps the old ring.  If the kernel refuses, nothing changes.  If the
//! kernel accepted but the new ring cannot be used (mmap fails, the reply
//! breaks the ABI), the CQ is marked broken: the kernel already produces
//! into the new ring and there is no way back.

use core::ffi::c_int;
use core::mem::{offset_of, size_of};
use core::ptr;
use std::sync::{Mutex, PoisonError};

use rroce_proto::abi::{CreateCqCmd, CreateCqResp, ResizeCqCmd};
use rroce_proto::ring::{Consumer, RingLayout};
use rroce_proto::wqe::{Cqe, CQE_BYTES};

use crate::ffi::*;
use crate::mapping::RingMap;
use crate::{set_errno, warn};

/// The consumer side of a CQ ring.
struct CqRing {
    map: RingMap,
    consumer: Consumer,
    /// Set once the ring or an entry was found corrupt.
    broken: bool,
    /// The completion `start_poll`/`next_poll` consumed last (what the
    /// `read_*` functions of `ibv_cq_ex` report).
    current: IbvWc,
}

/// Provider CQ; libibverbs sees only `ibv`: an `ibv_cq`, or for a CQ made
/// by `create_cq_ex` the `ibv_cq_ex` (`verbs_cq`) that begins with it.
#[repr(C)]
pub(crate) struct RroceCq {
    ibv: IbvCqEx,
    cqn: u32,
    ring: Mutex<Option<CqRing>>,
}
const _: () = assert!(offset_of!(RroceCq, ibv) == 0);

/// The ring lock of `cq`.
///
/// # Safety
///
/// `cq` must be a live CQ made by [`rroce_create_cq`].  Only the `ring`
/// field is borrowed: libibverbs keeps writing other fields of `ibv`.
unsafe fn ring_of<'a>(cq: *mut IbvCq) -> &'a Mutex<Option<CqRing>> {
    // SAFETY: per the contract `cq` is the first field of a live RroceCq.
    unsafe { &(*cq.cast::<RroceCq>()).ring }
}

/// Checks the ring geometry of a `CreateCqResp` (or of a `ResizeCqResp`,
/// whose fields are the same) and maps the ring.
fn map_cq_ring(
    cmd_fd: c_int,
    drv: &CreateCqResp,
    core_cqe: c_int,
    requested: c_int,
) -> Result<CqRing, (c_int, &'static str)> {
    let layout = RingLayout::from_resp(drv.entries, drv.entry_size, drv.ring_bytes)
        .map_err(|_| (EPROTO, "invalid CQ ring geometry"))?;
    if (drv.entry_size as usize) < CQE_BYTES {
        return Err((EPROTO, "CQ entries smaller than a CQE"));
    }
    // The CQ depth the core reported (`cq->cqe`, what the application may
    // rely on; libibverbs fills it on both the write and the ioctl path,
    // while `resp.core` is only written on the former) must fit the ring,
    // and the ring must hold what was asked for.
    let requested = u32::try_from(requested).unwrap_or(0);
    let core_cqe = u32::try_from(core_cqe).unwrap_or(u32::MAX);
    if core_cqe > drv.entries || drv.entries < requested {
        return Err((EPROTO, "CQ ring smaller than the CQ"));
    }
    let map = RingMap::map(cmd_fd, drv.mmap_offset, drv.ring_bytes, layout)
        .map_err(|e| (e, "mapping the CQ ring failed"))?;
    let consumer = Consumer::attach(layout, &map.region())
        .map_err(|_| (EPROTO, "CQ ring header is inconsistent"))?;
    Ok(CqRing {
        map,
        consumer,
        broken: false,
        current: IbvWc::default(),
    })
}

/// Creates a CQ: allocates the provider CQ, lets `create` send the
/// CREATE_CQ command (it returns the ret code and the driver response),
/// and maps the ring.  Returns the CQ or an errno value (`EPROTO` if the
/// kernel's response breaks the rroce ABI).
///
/// # Safety
///
/// `context` must be a context of ours; `create` must create the kernel
/// CQ for the given `ibv_cq_ex` (it stays at its address for the CQ's
/// life: it is the user_handle the kernel reports back in events) or fail.
unsafe fn create_cq_common(
    context: *mut IbvContext,
    cqe: c_int,
    create: impl FnOnce(*mut IbvCqEx) -> (c_int, CreateCqResp),
) -> Result<*mut RroceCq, c_int> {
    let cq = Box::into_raw(Box::new(RroceCq {
        // SAFETY: IbvCqEx consists of pointers, integers, opaque byte
        // blobs and optional function pointers, for all of which zero is
        // valid; libibverbs initialises the ibv_cq part.
        ibv: unsafe { core::mem::zeroed() },
        cqn: 0,
        ring: Mutex::new(None),
    }));
    // SAFETY: `cq` is a fresh allocation owned here.
    let ibv = unsafe { &raw mut (*cq).ibv };
    let (ret, drv) = create(ibv);
    if ret != 0 {
        // SAFETY: never handed out.
        drop(unsafe { Box::from_raw(cq) });
        return Err(crate::errno_of(ret));
    }

    // SAFETY: `context` is valid per the contract.
    let cmd_fd = unsafe { (*context).cmd_fd };
    // SAFETY: libibverbs filled `ibv` in the create command.
    let core_cqe = unsafe { (*ibv).cq.cqe };
    match map_cq_ring(cmd_fd, &drv, core_cqe, cqe) {
        Ok(ring) => {
            // SAFETY: still exclusively owned here.
            unsafe {
                (*cq).cqn = drv.cqn;
                *(*cq).ring.get_mut().unwrap_or_else(PoisonError::into_inner) = Some(ring);
            }
            Ok(cq)
        }
        Err((err, why)) => {
            warn(format_args!("create_cq: {why} (cqn {})", drv.cqn));
            // ibv_cmd_destroy_cq waits on cq->mutex/cond, which libibverbs
            // only initialises after create_cq returns; all-zero is glibc's
            // static initialiser for both, and `ibv` is zeroed.
            // SAFETY: the kernel CQ exists and nobody else knows `ibv`.
            let _ = unsafe { ibv_cmd_destroy_cq(ibv.cast::<IbvCq>()) };
            // SAFETY: never handed out.
            drop(unsafe { Box::from_raw(cq) });
            Err(err)
        }
    }
}

/// `verbs_context_ops::create_cq`: NULL with errno set on failure
/// (`EPROTO` if the kernel's response breaks the rroce ABI).
///
/// # Safety
///
/// Called by libibverbs with a context of ours; `channel` is NULL or a
/// completion channel of that context.
pub(crate) unsafe extern "C" fn rroce_create_cq(
    context: *mut IbvContext,
    cqe: c_int,
    channel: *mut IbvCompChannel,
    comp_vector: c_int,
) -> *mut IbvCq {
    if context.is_null() || cqe < 1 {
        set_errno(EINVAL);
        return ptr::null_mut();
    }
    let create = |ibv: *mut IbvCqEx| {
        // No flags are defined: the driver data is an all-zero CreateCqCmd.
        let mut cmd = RroceCreateCqCmd::default();
        debug_assert!(cmd.drv == CreateCqCmd::default());
        let mut resp = RroceCreateCqResp::default();
        // SAFETY: `context` is ours per the contract; `ibv` is the new
        // CQ; `cmd`/`resp` are live locals of the sizes passed.
        let ret = unsafe {
            ibv_cmd_create_cq(
                context,
                cqe,
                channel,
                comp_vector,
                ibv.cast::<IbvCq>(),
                &raw mut cmd.core,
                size_of::<RroceCreateCqCmd>(),
                &raw mut resp.core,
                size_of::<RroceCreateCqResp>(),
            )
        };
        (ret, resp.drv)
    };
    // SAFETY: `context` is ours; `create` makes the kernel CQ for `ibv`.
    match unsafe { create_cq_common(context, cqe, create) } {
        // `ibv_cq` is the first member of the `ibv_cq_ex`.
        Ok(cq) => cq.cast::<IbvCq>(),
        Err(e) => {
            set_errno(e);
            ptr::null_mut()
        }
    }
}

/// `ibv_cq_init_attr_ex.wc_flags` the extended CQ offers: every field of
/// `ibv_wc` (`IBV_WC_STANDARD_FLAGS`).  rroce has no completion timestamps
/// (no clock to report in `hca_core_clock`), CVLAN, flow tags or tag
/// matching.
pub(crate) const CQ_EX_WC_FLAGS: u64 = IBV_WC_STANDARD_FLAGS;

/// Checks the attributes of `ibv_create_cq_ex`: `EOPNOTSUPP` for wc_flags
/// beyond [`CQ_EX_WC_FLAGS`], a parent domain, unknown `comp_mask` bits or
/// creation flags other than `IBV_CREATE_CQ_ATTR_SINGLE_THREADED` (a hint
/// only); `EINVAL` for a depth of 0 or above `INT_MAX`.
fn check_cq_init_attr_ex(a: &IbvCqInitAttrEx) -> Result<c_int, c_int> {
    if a.wc_flags & !CQ_EX_WC_FLAGS != 0 {
        return Err(EOPNOTSUPP);
    }
    if a.comp_mask & !IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 {
        return Err(EOPNOTSUPP);
    }
    if a.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS != 0
        && a.flags & !IBV_CREATE_CQ_ATTR_SINGLE_THREADED != 0
    {
        return Err(EOPNOTSUPP);
    }
    match c_int::try_from(a.cqe) {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(EINVAL),
    }
}

/// `verbs_context_ops::create_cq_ex` (`ibv_create_cq_ex`): a CQ on the same
/// mapped ring as [`rroce_create_cq`], which also works with `ibv_poll_cq`,
/// completion channels and `ibv_req_notify_cq`.  NULL with errno set on
/// failure (see [`check_cq_init_attr_ex`]).
///
/// # Safety
///
/// Called by libibverbs with a context of ours and a valid `attr`.
pub(crate) unsafe extern "C" fn rroce_create_cq_ex(
    context: *mut IbvContext,
    attr: *mut IbvCqInitAttrEx,
) -> *mut IbvCqEx {
    if context.is_null() || attr.is_null() {
        set_errno(EINVAL);
        return ptr::null_mut();
    }
    // SAFETY: `attr` is valid per the contract.
    let cqe = match check_cq_init_attr_ex(unsafe { &*attr }) {
        Ok(n) => n,
        Err(e) => {
            set_errno(e);
            return ptr::null_mut();
        }
    };
    let create = |ibv: *mut IbvCqEx| {
        // The same all-zero driver data as for create_cq.
        let mut cmd = RroceCreateCqExCmd::default();
        let mut resp = RroceCreateCqExResp::default();
        // SAFETY: `context` and `attr` are valid per the contract; `ibv`
        // is the new CQ; `cmd`/`resp` are live locals of the sizes passed.
        // No timestamp flag reaches the kernel (rejected above).
        let ret = unsafe {
            ibv_cmd_create_cq_ex(
                context,
                attr,
                ibv,
                &raw mut cmd.core,
                size_of::<RroceCreateCqExCmd>(),
                &raw mut resp.core,
                size_of::<RroceCreateCqExResp>(),
                0,
            )
        };
        (ret, resp.drv)
    };
    // SAFETY: `context` is ours; `create` makes the kernel CQ for `ibv`.
    match unsafe { create_cq_common(context, cqe, create) } {
        Ok(cq) => {
            // SAFETY: `cq` is ours and not handed out yet.
            let ex = unsafe { &mut (*cq).ibv };
            ex.start_poll = Some(cq_start_poll);
            ex.next_poll = Some(cq_next_poll);
            ex.end_poll = Some(cq_end_poll);
            ex.read_opcode = Some(cq_read_opcode);
            ex.read_vendor_err = Some(cq_read_vendor_err);
            ex.read_byte_len = Some(cq_read_byte_len);
            ex.read_imm_data = Some(cq_read_imm_data);
            ex.read_qp_num = Some(cq_read_qp_num);
            ex.read_src_qp = Some(cq_read_src_qp);
            ex.read_wc_flags = Some(cq_read_wc_flags);
            ex.read_slid = Some(cq_read_slid);
            ex.read_sl = Some(cq_read_sl);
            ex.read_dlid_path_bits = Some(cq_read_dlid_path_bits);
            ex
        }
        Err(e) => {
            set_errno(e);
            ptr::null_mut()
        }
    }
}

/// Consumes the next completion for `start_poll`/`next_poll`: 0 with
/// `wr_id`/`status` of the `ibv_cq_ex` set and the completion kept for the
/// `read_*` functions, `ENOENT` if the CQ is empty, `EIO` once it is
/// broken.
///
/// # Safety
///
/// `cq` must be a live CQ made by [`rroce_create_cq_ex`].
unsafe fn poll_one(cq: *mut IbvCqEx) -> c_int {
    // SAFETY: `cq` is a live CQ of ours.
    let lock = unsafe { ring_of(cq.cast::<IbvCq>()) };
    // SAFETY: only the immutable cqn is read.
    let cqn = unsafe { (*cq.cast::<RroceCq>()).cqn };
    let mut guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(ring) = guard.as_mut() else {
        return EINVAL;
    };
    let mut got = None;
    // A completion read before the ring turned out broken is still
    // delivered; the next call reports EIO.
    let _ = drain(ring, cqn, |_, w| got = Some(w), 1);
    let Some(w) = got else {
        return if ring.broken { EIO } else { ENOENT };
    };
    ring.current = w;
    // SAFETY: `cq` is live; these two fields are the provider's to write
    // during polling.
    unsafe {
        (*cq).wr_id = w.wr_id;
        (*cq).status = w.status;
    }
    0
}

/// `ibv_cq_ex::start_poll`: `EINVAL` for a non-zero `attr->comp_mask`,
/// otherwise as [`poll_one`].
///
/// # Safety
///
/// Called with a live CQ of ours made by `create_cq_ex`; `attr` NULL or
/// valid.
unsafe extern "C" fn cq_start_poll(cq: *mut IbvCqEx, attr: *mut IbvPollCqAttr) -> c_int {
    // SAFETY: `attr` is NULL or valid per the contract.
    if cq.is_null() || (!attr.is_null() && unsafe { (*attr).comp_mask } != 0) {
        return EINVAL;
    }
    // SAFETY: forwarded contract.
    unsafe { poll_one(cq) }
}

/// `ibv_cq_ex::next_poll`, as [`poll_one`].
///
/// # Safety
///
/// As for [`cq_start_poll`].
unsafe extern "C" fn cq_next_poll(cq: *mut IbvCqEx) -> c_int {
    if cq.is_null() {
        return EINVAL;
    }
    // SAFETY: forwarded contract.
    unsafe { poll_one(cq) }
}

/// `ibv_cq_ex::end_poll`: nothing to do, each completion was released to
/// the kernel when it was read.
///
/// # Safety
///
/// As for [`cq_start_poll`].
unsafe extern "C" fn cq_end_poll(_cq: *mut IbvCqEx) {}

/// The completion the last `start_poll`/`next_poll` returned.
///
/// # Safety
///
/// As for [`cq_start_poll`].
unsafe fn current(cq: *mut IbvCqEx) -> IbvWc {
    if cq.is_null() {
        return IbvWc::default();
    }
    // SAFETY: `cq` is a live CQ of ours.
    let lock = unsafe { ring_of(cq.cast::<IbvCq>()) };
    let guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
    guard.as_ref().map(|r| r.current).unwrap_or_default()
}

/// Defines `ibv_cq_ex::read_*` functions returning one `ibv_wc` field.
macro_rules! cq_readers {
    ($($name:ident -> $ty:ty = $field:ident;)*) => {$(
        #[doc = concat!("`ibv_cq_ex::", stringify!($name), "`-style reader of `ibv_wc.", stringify!($field), "`.")]
        ///
        /// # Safety
        ///
        /// As for [`cq_start_poll`], after a successful poll.
        unsafe extern "C" fn $name(cq: *mut IbvCqEx) -> $ty {
            // SAFETY: forwarded contract.
            let w = unsafe { current(cq) };
            <$ty>::try_from(w.$field).unwrap_or_default()
        }
    )*};
}

cq_readers! {
    cq_read_opcode -> u32 = opcode;
    cq_read_vendor_err -> u32 = vendor_err;
    cq_read_byte_len -> u32 = byte_len;
    cq_read_imm_data -> u32 = imm_data;
    cq_read_qp_num -> u32 = qp_num;
    cq_read_src_qp -> u32 = src_qp;
    cq_read_wc_flags -> u32 = wc_flags;
    cq_read_slid -> u32 = slid;
    cq_read_sl -> u8 = sl;
    cq_read_dlid_path_bits -> u8 = dlid_path_bits;
}

/// `verbs_context_ops::destroy_cq`: 0 or an errno value.
///
/// # Safety
///
/// `cq` must be NULL or a CQ of ours that is not used once this returns 0.
pub(crate) unsafe extern "C" fn rroce_destroy_cq(cq: *mut IbvCq) -> c_int {
    if cq.is_null() {
        return EINVAL;
    }
    // SAFETY: `cq` is a live CQ of ours.
    let ret = unsafe { ibv_cmd_destroy_cq(cq) };
    if ret != 0 {
        return ret;
    }
    // SAFETY: the kernel object is gone and the caller gives up `cq`, which
    // came from Box::into_raw in rroce_create_cq; dropping unmaps the ring.
    drop(unsafe { Box::from_raw(cq.cast::<RroceCq>()) });
    0
}

/// `verbs_context_ops::req_notify_cq` (a REQ_NOTIFY_CQ command).
///
/// # Safety
///
/// `cq` must be NULL or a live CQ of ours.
pub(crate) unsafe extern "C" fn rroce_req_notify_cq(
    cq: *mut IbvCq,
    solicited_only: c_int,
) -> c_int {
    if cq.is_null() {
        return EINVAL;
    }
    // SAFETY: `cq` is a live CQ of ours.
    unsafe { ibv_cmd_req_notify_cq(cq, solicited_only) }
}

/// `verbs_context_ops::resize_cq` (`ibv_resize_cq`): 0 or an errno value.
///
/// # Safety
///
/// `cq` must be NULL or a live CQ of ours.
pub(crate) unsafe extern "C" fn rroce_resize_cq(cq: *mut IbvCq, cqe: c_int) -> c_int {
    if cq.is_null() {
        return EINVAL;
    }
    // SAFETY: `cq` is a live CQ of ours.
    let lock = unsafe { ring_of(cq) };
    // SAFETY: only the immutable cqn is read.
    let cqn = unsafe { (*cq.cast::<RroceCq>()).cqn };
    // Held across the command: no poll may consume from the old ring while
    // the kernel copies what is left in it.
    let mut guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(ring) = guard.as_mut() else {
        return EINVAL;
    };
    if ring.broken {
        return EIO;
    }

    let mut cmd = RroceResizeCqCmd::default();
    debug_assert!(cmd.drv == ResizeCqCmd::default());
    let mut resp = RroceResizeCqResp::default();
    // SAFETY: `cq` is live; `cmd`/`resp` are live locals of the sizes
    // passed.  libibverbs sets `cq->cqe` only on success.
    let ret = unsafe {
        ibv_cmd_resize_cq(
            cq,
            cqe,
            &raw mut cmd.core,
            size_of::<RroceResizeCqCmd>(),
            &raw mut resp.core,
            size_of::<RroceResizeCqResp>(),
        )
    };
    if ret != 0 {
        return crate::errno_of(ret);
    }

    let d = resp.drv;
    let geometry = CreateCqResp {
        mmap_offset: d.mmap_offset,
        ring_bytes: d.ring_bytes,
        entries: d.entries,
        entry_size: d.entry_size,
        cqn,
    };
    // SAFETY: `cq` is live; its context is ours.
    let (cmd_fd, core_cqe) = unsafe { ((*(*cq).context).cmd_fd, (*cq).cqe) };
    let new = map_cq_ring(cmd_fd, &geometry, core_cqe, cqe).and_then(|new| {
        // The kernel moved the unpolled CQEs to the same indices: the new
        // consumer starts exactly where this one stopped.
        if new.consumer.index() == ring.consumer.released() && ring.consumer.unreleased() == 0 {
            Ok(new)
        } else {
            Err((EPROTO, "resized CQ ring does not continue the old one"))
        }
    });
    match new {
        Ok(new) => {
            // Dropping the old ring unmaps it.
            *ring = new;
            0
        }
        Err((err, why)) => {
            warn(format_args!(
                "resize_cq: {why} (cqn {cqn}); the kernel resized the CQ, which is unusable now"
            ));
            ring.broken = true;
            err
        }
    }
}

/// The `ibv_wc` for a decoded CQE.
pub(crate) fn wc_of(c: &Cqe) -> IbvWc {
    IbvWc {
        wr_id: c.wr_id,
        status: c_int::from(c.status as u8),
        opcode: c_int::from(c.opcode as u8),
        vendor_err: c.vendor_err,
        byte_len: c.byte_len,
        // Stored as on the wire (a __be32's memory bytes) or a host-order
        // rkey: either way the native u32 carries the bytes unchanged.
        imm_data: c.imm_or_inv,
        qp_num: c.qp_num,
        src_qp: c.src_qp,
        wc_flags: u32::from(c.wc_flags),
        pkey_index: c.pkey_index,
        slid: c.slid,
        sl: c.sl,
        dlid_path_bits: c.dlid_path_bits,
    }
}

/// Outcome of draining up to `max` CQEs.
#[derive(Debug, PartialEq, Eq)]
enum Drained {
    /// This many completions were written.
    Ok(usize),
    /// This many were written, then the CQ turned out broken.
    Broken(usize),
}

/// Consumes up to `max` CQEs of `ring`, handing each to `out`.
fn drain(ring: &mut CqRing, cqn: u32, out: impl FnMut(usize, IbvWc), max: usize) -> Drained {
    let CqRing {
        map,
        consumer,
        broken,
        ..
    } = ring;
    drain_parts(map, consumer, broken, cqn, out, max)
}

/// [`drain`] on the parts of a [`CqRing`].
fn drain_parts(
    map: &RingMap,
    consumer: &mut Consumer,
    is_broken: &mut bool,
    cqn: u32,
    mut out: impl FnMut(usize, IbvWc),
    max: usize,
) -> Drained {
    if *is_broken {
        return Drained::Broken(0);
    }
    let region = map.region();
    let mut n = 0;
    let mut broken = false;
    while n < max {
        let mut buf = [0u8; CQE_BYTES];
        match consumer.read_next(&region, &mut buf) {
            Ok(true) => {}
            Ok(false) => {
                if consumer.closed_and_drained(&region) {
                    warn(format_args!(
                        "CQ {cqn}: destroyed by the kernel (device removed); no more completions"
                    ));
                    broken = true;
                }
                break;
            }
            Err(e) => {
                warn(format_args!("CQ {cqn}: ring error {e:?}; CQ is unusable"));
                broken = true;
                break;
            }
        }
        match Cqe::decode(&buf) {
            Ok(c) => {
                out(n, wc_of(&c));
                n += 1;
            }
            Err(e) => {
                warn(format_args!(
                    "CQ {cqn}: corrupt CQE ({e:?}); CQ is unusable"
                ));
                broken = true;
                break;
            }
        }
    }
    if consumer.unreleased() > 0 && consumer.release_all(&region).is_err() {
        broken = true;
    }
    if broken {
        *is_broken = true;
        Drained::Broken(n)
    } else {
        Drained::Ok(n)
    }
}

/// Removes the unpolled completions of QP `qpn` from `cq` (the QP went to
/// RESET: its old completions must not surface once it is reused, as on
/// hardware providers).  A broken CQ is left alone.
///
/// # Safety
///
/// `cq` must be NULL or a live CQ of ours.
pub(crate) unsafe fn purge_qp(cq: *mut IbvCq, qpn: u32) {
    if cq.is_null() {
        return;
    }
    // SAFETY: per the contract.
    let lock = unsafe { ring_of(cq) };
    let mut g = lock.lock().unwrap_or_else(|p| p.into_inner());
    let Some(ring) = g.as_mut() else { return };
    if ring.broken {
        return;
    }
    let region = ring.map.region();
    let keep = |e: &[u8]| {
        <&[u8; CQE_BYTES]>::try_from(e)
            .ok()
            .and_then(|b| Cqe::decode(b).ok())
            .is_none_or(|c| c.qp_num != qpn)
    };
    if let Err(e) = ring.consumer.purge(&region, keep) {
        warn(format_args!(
            "CQ ring error {e:?} while removing QP {qpn}'s completions"
        ));
        ring.broken = true;
    }
}

/// `verbs_context_ops::poll_cq` (`ibv_poll_cq`): the number of completions
/// written to `wc` (at most `num_entries`), or a negative errno value:
/// `-EINVAL` for bad arguments, `-EIO` once the CQ is broken.
///
/// # Safety
///
/// `cq` must be NULL or a live CQ of ours; `wc` must have room for
/// `num_entries` entries.
pub(crate) unsafe extern "C" fn rroce_poll_cq(
    cq: *mut IbvCq,
    num_entries: c_int,
    wc: *mut IbvWc,
) -> c_int {
    if cq.is_null() || num_entries < 0 || (wc.is_null() && num_entries > 0) {
        return -EINVAL;
    }
    let max = usize::try_from(num_entries).unwrap_or(0);
    // SAFETY: `cq` is a live CQ of ours.
    let lock = unsafe { ring_of(cq) };
    // SAFETY: only the immutable cqn is read.
    let cqn = unsafe { (*cq.cast::<RroceCq>()).cqn };
    let mut guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
    let Some(ring) = guard.as_mut() else {
        return -EINVAL;
    };
    let write = |i: usize, w: IbvWc| {
        // SAFETY: i < max == num_entries, for which `wc` has room.
        unsafe { wc.add(i).write(w) };
    };
    match drain(ring, cqn, write, max) {
        Drained::Ok(n) => c_int::try_from(n).unwrap_or(c_int::MAX),
        Drained::Broken(0) => -EIO,
        Drained::Broken(n) => c_int::try_from(n).unwrap_or(c_int::MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rroce_proto::ring::{Producer, SharedRegion, CONS_OFFSET};
    use rroce_proto::wqe::{WcOpcode, WcStatus, WC_WITH_IMM};

    fn ring(entries: u32) -> CqRing {
        let layout = RingLayout::new(entries, CQE_BYTES as u32, 1024).unwrap();
        let map = RingMap::anonymous(layout);
        let consumer = Consumer::attach(layout, &map.region()).unwrap();
        CqRing {
            map,
            consumer,
            broken: false,
            current: IbvWc::default(),
        }
    }

    fn cqe(i: u64) -> Cqe {
        let mut c = Cqe::new(i, WcStatus::Success, WcOpcode::Recv, 0x42);
        c.wc_flags = WC_WITH_IMM;
        c.imm_or_inv = u32::from_ne_bytes([1, 2, 3, 4]);
        c.byte_len = i as u32 * 10;
        c.src_qp = 7;
        c.pkey_index = 1;
        c.slid = 2;
        c.sl = 3;
        c.dlid_path_bits = 4;
        c.vendor_err = 5;
        c
    }

    #[test]
    fn wc_fields() {
        let w = wc_of(&cqe(9));
        assert_eq!(
            w,
            IbvWc {
                wr_id: 9,
                status: 0,
                opcode: 128,
                vendor_err: 5,
                byte_len: 90,
                imm_data: u32::from_ne_bytes([1, 2, 3, 4]),
                qp_num: 0x42,
                src_qp: 7,
                wc_flags: 2,
                pkey_index: 1,
                slid: 2,
                sl: 3,
                dlid_path_bits: 4,
            }
        );
    }

    #[test]
    fn drain_releases_and_breaks_on_garbage() {
        let mut r = ring(4);
        let layout = *r.map.layout();
        let region = r.map.region();
        let mut kernel = Producer::attach(layout, &region).unwrap();
        let mut got = Vec::new();
        for round in 0..5u64 {
            for i in 0..4 {
                kernel
                    .push(&region, &cqe(round * 4 + i).to_bytes())
                    .unwrap();
            }
            assert_eq!(kernel.is_full(&region), Ok(true));
            let d = drain_parts(
                &r.map,
                &mut r.consumer,
                &mut r.broken,
                1,
                |_, w| got.push(w.wr_id),
                3,
            );
            assert_eq!(d, Drained::Ok(3));
            let d = drain_parts(
                &r.map,
                &mut r.consumer,
                &mut r.broken,
                1,
                |_, w| got.push(w.wr_id),
                8,
            );
            assert_eq!(d, Drained::Ok(1));
            assert_eq!(
                region.load_u32_acquire(CONS_OFFSET),
                Some(4 * (round as u32 + 1))
            );
        }
        assert_eq!(got, (0..20).collect::<Vec<_>>());

        // One good CQE, then one with an undefined status.
        kernel.push(&region, &cqe(100).to_bytes()).unwrap();
        let mut bad = cqe(101).to_bytes();
        bad[8] = 200;
        kernel.push(&region, &bad).unwrap();
        let mut n = 0;
        assert_eq!(
            drain_parts(&r.map, &mut r.consumer, &mut r.broken, 1, |_, _| n += 1, 8),
            Drained::Broken(1)
        );
        kernel.push(&region, &cqe(102).to_bytes()).unwrap();
        assert_eq!(
            drain_parts(&r.map, &mut r.consumer, &mut r.broken, 1, |_, _| n += 1, 8),
            Drained::Broken(0)
        );
        assert_eq!(n, 1);
    }

    #[test]
    fn closed_ring_ends_polling_after_its_last_completions() {
        fn poll(r: &mut CqRing, got: &mut Vec<u64>, max: usize) -> Drained {
            drain_parts(
                &r.map,
                &mut r.consumer,
                &mut r.broken,
                1,
                |_, w| got.push(w.wr_id),
                max,
            )
        }
        let mut r = ring(4);
        let layout = *r.map.layout();
        let mut kernel = Producer::attach(layout, &r.map.region()).unwrap();
        let mut got = Vec::new();
        assert_eq!(poll(&mut r, &mut got, 8), Drained::Ok(0));
        {
            let region = r.map.region();
            kernel.push(&region, &cqe(1).to_bytes()).unwrap();
            kernel.push(&region, &cqe(2).to_bytes()).unwrap();
            kernel.close(&region).unwrap();
        }
        // What was published before the close is delivered first.
        assert_eq!(poll(&mut r, &mut got, 1), Drained::Ok(1));
        assert_eq!(poll(&mut r, &mut got, 8), Drained::Broken(1));
        assert_eq!(poll(&mut r, &mut got, 8), Drained::Broken(0));
        assert!(r.broken);
        assert_eq!(got, [1, 2]);
    }

    #[test]
    fn impossible_producer_index() {
        let mut r = ring(2);
        let region = r.map.region();
        assert!(region.store_u32_release(0, 3));
        assert_eq!(
            drain_parts(&r.map, &mut r.consumer, &mut r.broken, 1, |_, _| {}, 8),
            Drained::Broken(0)
        );
    }
}
