// SPDX-License-Identifier: GPL-2.0
//! Memory windows (type 1 and type 2B): remote access to part of a memory
//! region under a key of its own.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! A window's key comes from the same key table as the regions' (index
//! `<< 8 | key byte`), so the responder resolves an R_Key to either.  The
//! table entry of a window is the address of its [`RroceMw`] with bit 0
//! set ([`MW_TAG`]; regions are at least 8-byte aligned, and xarray stores
//! such "value" entries as they are), so `RroceMr::lookup` refuses it as an
//! L_Key or region R_Key.
//!
//! The rules of binding, access and invalidation are `proto::mw`'s; here
//! the window state lives and changes.  A window is bound by a BIND_MW WQE
//! executed in order by the requester ([`bind`]).  A bound window counts
//! on its region, which `dereg_mr` refuses (`EBUSY`) until the window is
//! unbound, invalidated (type 2: LOCAL_INV, SEND_WITH_INV) or deallocated.
//!
//! The binding is under a per-window `spin_lock_bh`, taken inside the QP
//! lock of whichever QP binds, uses or invalidates it (never two windows
//! at once).  `dealloc_mw` removes the key and waits for an RCU grace
//! period (the data path looks keys up with bottom halves disabled) before
//! ib_core frees the window.

use core::ffi::c_void;
use core::mem::{size_of, MaybeUninit};
use kernel::bindings;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::device::RroceDev;
use crate::sync::lock::{new_spinlock_bh, SpinLockBh};
use crate::mr::{is_mw_entry, MrError, Need, RroceMr, MW_TAG};
use crate::proto::mw as rules;


/// A bound window.
#[derive(Clone, Copy)]
struct Binding {
    /// The region (alive while bound: counted by `RroceMr::bind_get`).
    mr: *const RroceMr,
    /// Range, access, zero-based, QP (2B).
    b: rules::Binding,
}

/// The state under the window lock.
struct MwState {
    /// The current key (index part fixed; 0 until published).
    rkey: u32,
    bound: Option<Binding>,
}

// SAFETY: the region pointer is only dereferenced while the binding holds
// its count (see `Binding::mr`); the rest is plain data.
unsafe impl Send for MwState {}

/// Our part of a window, fixed at allocation.
struct MwPriv {
    st: Pin<KBox<SpinLockBh<MwState>>>,
}

/// Our memory window (allocated by ib_core, `ib` first).
///
/// # Invariants
///
/// `p` is initialised exactly when `alloc_mw` succeeded, until
/// `dealloc_mw` drops it; the key table holds the window (tagged) in
/// between.
#[repr(C)]
pub(crate) struct RroceMw {
    ib: bindings::ib_mw,
    p: MaybeUninit<MwPriv>,
}

/// Size ib_core allocates for a window.
pub(crate) const MW_SIZE: usize = size_of::<RroceMw>();

impl RroceMw {
    fn st(&self) -> &SpinLockBh<MwState> {
        // SAFETY: a window reachable through the key table is initialised
        // (type invariant).
        unsafe { &self.p.assume_init_ref().st }
    }

    fn type2(&self) -> bool {
        self.ib.type_ == bindings::ib_mw_type_IB_MW_TYPE_2
    }
}

/// What a key names.
pub(crate) enum KeyObj<'a> {
    /// A region (see `RroceMr::lookup`).
    Mr,
    /// A window.
    Mw(&'a RroceMw),
}

/// The region or window with index `key >> 8` (the key byte is not
/// checked here).  Bottom halves disabled: see `RroceMr::lookup` for the
/// lifetime.
pub(crate) fn key_object(dev: &RroceDev, key: u32) -> Option<KeyObj<'_>> {
    let raw = dev.p.keys.load(key >> 8);
    if is_mw_entry(raw) {
        let p = (raw as usize & !MW_TAG) as *const RroceMw;
        // SAFETY: tagged entries are live windows of this device
        // (`dealloc_mw` removes the entry and waits for a grace period).
        unsafe { p.as_ref() }.map(KeyObj::Mw)
    } else {
        (!raw.is_null()).then_some(KeyObj::Mr)
    }
}

/// The window named by `key`'s index, if it is one of `pd`.
fn window<'a>(dev: &'a RroceDev, pd: *mut bindings::ib_pd, key: u32) -> Option<&'a RroceMw> {
    match key_object(dev, key)? {
        KeyObj::Mw(mw) if mw.ib.pd == pd => Some(mw),
        _ => None,
    }
}

/// A remote access of `len` bytes at `va` with `IB_ACCESS_REMOTE_*` flag
/// `flag` under `rkey` by QP `qpn` of `pd`: the region and its address,
/// after the region's checks (region key) or the window's (window key:
/// valid key, PD, bound QP for type 2B, window access and range).
/// Bottom halves disabled (see `RroceMr::lookup`).
pub(crate) fn remote<'a>(
    dev: &'a RroceDev,
    pd: *mut bindings::ib_pd,
    qpn: u32,
    rkey: u32,
    va: u64,
    len: u32,
    flag: u32,
) -> Result<(&'a RroceMr, u64), MrError> {
    let mw = match key_object(dev, rkey) {
        Some(KeyObj::Mw(mw)) => mw,
        _ => {
            let mr = RroceMr::lookup(dev, pd, rkey)?;
            mr.check(va, len, Need::Remote(flag))?;
            return Ok((mr, va));
        }
    };
    if mw.ib.pd != pd {
        return Err(MrError::BadKey);
    }
    let (mr, at) = {
        let st = mw.st().lock();
        let b = st.bound.as_ref();
        let at = rules::check_access(st.rkey, b.map(|b| &b.b), rkey, qpn, va, len, flag).map_err(|e| match e {
            rules::AccessFault::Key => MrError::BadKey,
            rules::AccessFault::Access => MrError::Access,
            rules::AccessFault::Range => MrError::Range,
        })?;
        (b.map(|b| b.mr).ok_or(MrError::BadKey)?, at)
    };
    // SAFETY: the binding counted on the region, which `dereg_mr` therefore
    // refused; an unbind after the lock was dropped lets `dereg_mr` go on,
    // but it waits for a grace period, and bottom halves are disabled.
    let mr = unsafe { &*mr };
    mr.check(at, len, Need::LocalRead)?;
    Ok((mr, at))
}

/// What a BIND_MW WQE asks for (see `proto::wqe` for the fields).
pub(crate) struct BindReq {
    /// Any key of the window (its index is what counts).
    pub(crate) mw_key: u32,
    pub(crate) mr_lkey: u32,
    pub(crate) req: rules::BindRequest,
}

/// Executes a bind posted on QP `qpn` of `pd` (rules: `proto::mw`).  Under
/// the QP lock.
pub(crate) fn bind(dev: &RroceDev, pd: *mut bindings::ib_pd, qpn: u32, r: &BindReq) -> Result<(), rules::BindError> {
    let mw = window(dev, pd, r.mw_key).ok_or(rules::BindError::NoWindow)?;
    let mut st = mw.st().lock();
    if st.rkey >> 8 != r.mw_key >> 8 {
        // Not published yet.
        return Err(rules::BindError::NoWindow);
    }
    let info = rules::WindowInfo { type2: mw.type2(), rkey: st.rkey, bound: st.bound.is_some() };
    let mr = RroceMr::lookup(dev, pd, r.mr_lkey).ok();
    let region = mr.map(|m| rules::RegionInfo { access: m.access(), range: m.user_range() });
    let outcome = rules::check_bind(&info, &r.req, region.as_ref(), qpn)?;
    let new = match (outcome, mr) {
        (rules::BindOutcome::Unbind, _) => None,
        (rules::BindOutcome::Bind(b), Some(mr)) => {
            if !mr.bind_get() {
                // Being deregistered.
                return Err(rules::BindError::NoRegion);
            }
            Some(Binding { mr, b })
        }
        (rules::BindOutcome::Bind(_), None) => return Err(rules::BindError::NoRegion),
    };
    if let Some(old) = core::mem::replace(&mut st.bound, new) {
        // SAFETY: counted while bound (see `Binding::mr`).
        unsafe { (*old.mr).bind_put() };
    }
    st.rkey = r.req.new_rkey;
    Ok(())
}

/// Invalidates the type-2 window bound under `rkey` in `pd`: LOCAL_INV
/// (`qpn` `None`) or a SEND_WITH_INV received by QP `qpn` (type 2B: the QP
/// it is bound to).  `None` if `rkey` is not a window's key (a region's,
/// or nothing), so the caller can try a region.
pub(crate) fn invalidate(
    dev: &RroceDev,
    pd: *mut bindings::ib_pd,
    qpn: Option<u32>,
    rkey: u32,
) -> Option<Result<(), rules::InvalidateError>> {
    let mw = match key_object(dev, rkey)? {
        KeyObj::Mw(mw) => mw,
        KeyObj::Mr => return None,
    };
    Some((|| {
        if mw.ib.pd != pd {
            return Err(rules::InvalidateError::Key);
        }
        let mut st = mw.st().lock();
        rules::check_invalidate(mw.type2(), st.rkey, st.bound.as_ref().map(|b| &b.b), rkey, qpn)?;
        if let Some(b) = st.bound.take() {
            // SAFETY: counted while bound.
            unsafe { (*b.mr).bind_put() };
        }
        Ok(())
    })())
}

fn alloc(mw: &mut RroceMw) -> Result {
    // SAFETY: ib_core set `device` to one of ours.
    let dev = unsafe { RroceDev::from_ib(mw.ib.device) };
    if !matches!(mw.ib.type_, bindings::ib_mw_type_IB_MW_TYPE_1 | bindings::ib_mw_type_IB_MW_TYPE_2) {
        return Err(EINVAL);
    }
    let st = KBox::pin_init(new_spinlock_bh!(MwState { rkey: 0, bound: None }, "rroce_mw"), GFP_KERNEL_ACCOUNT)?;
    // INVARIANT: initialised before the window is published below.
    mw.p.write(MwPriv { st });
    let tagged = (mw as *mut RroceMw as usize | MW_TAG) as *mut c_void;
    let max = dev.p.attrs.max_mr as u32;
    let index = match dev.p.keys.insert(tagged, 1, max, max) {
        Ok(i) => i,
        Err(e) => {
            // SAFETY: written above, never published.
            unsafe { mw.p.assume_init_drop() };
            return Err(e);
        }
    };
    let key = crate::mr::new_key(index);
    mw.st().lock().rkey = key;
    mw.ib.rkey = key;
    Ok(())
}

/// # Safety
///
/// `ib_device_ops::alloc_mw` contract: `ibmw` is a zeroed window of
/// [`MW_SIZE`] bytes with `device`, `pd` and `type` set.
pub(crate) unsafe extern "C" fn alloc_mw(ibmw: *mut bindings::ib_mw, _udata: *mut bindings::ib_udata) -> c_int {
    from_result(|| {
        // SAFETY: per the contract.
        alloc(unsafe { &mut *ibmw.cast::<RroceMw>() })?;
        Ok(0)
    })
}

/// # Safety
///
/// `ib_device_ops::dealloc_mw` contract: `ibmw` was allocated by
/// `alloc_mw`; ib_core frees it when this returns 0.
pub(crate) unsafe extern "C" fn dealloc_mw(ibmw: *mut bindings::ib_mw) -> c_int {
    // SAFETY: per the contract.
    let mw = unsafe { &mut *ibmw.cast::<RroceMw>() };
    // SAFETY: ib_core set `device` to one of ours.
    let dev = unsafe { RroceDev::from_ib(mw.ib.device) };
    let key = mw.st().lock().rkey;
    dev.p.keys.remove(key >> 8);
    // Every data-path section that may have found the window ends first.
    crate::sync::rcu::synchronize();
    // Deallocating a bound window unbinds it (IBA 11.2.8.x).
    if let Some(b) = mw.st().lock().bound.take() {
        // SAFETY: counted while bound.
        unsafe { (*b.mr).bind_put() };
    }
    // SAFETY: initialised by `alloc_mw` and no longer reachable.
    unsafe { mw.p.assume_init_drop() };
    0
}
