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
//! A window is bound by a BIND_MW WQE executed in order by the requester
//! ([`bind`]): the range must lie in a region of the QP's PD that allows
//! `IB_ACCESS_MW_BIND`, remote write/atomic need the region's local write,
//! the new key keeps the window's index; a type-2 window must be free and
//! is then bound to the QP (type 2B: only that QP may use or remotely
//! invalidate it), a type-1 window may be rebound and a zero-length bind
//! unbinds it.  A bound window counts on its region, which `dereg_mr`
//! refuses (`EBUSY`) until the window is unbound, invalidated (type 2:
//! LOCAL_INV, SEND_WITH_INV) or deallocated.
//!
//! The binding is under a per-window `spin_lock_bh`, taken inside the QP
//! lock of whichever QP binds, uses or invalidates it (never two windows
//! at once).  `dealloc_mw` removes the key and waits for an RCU grace
//! period (the data path looks keys up with bottom halves disabled) before
//! ib_core frees the window.

use core::ffi::c_void;
use core::mem::{size_of, MaybeUninit};
use core::sync::atomic::Ordering;
use kernel::bindings;
use kernel::error::from_result;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::device::RroceDev;
use crate::lock::{new_spinlock_bh, SpinLockBh};
use crate::mr::{MrError, Need, RroceMr};

/// Bit 0 of a key-table entry: the entry is a window.
const MW_TAG: usize = 1;

/// Window access flags a bind may ask for.  `IB_ACCESS_LOCAL_WRITE` means
/// nothing for a window and is accepted (and ignored), as on other devices.
const MW_ACCESS: u32 = bindings::ib_access_flags_IB_ACCESS_REMOTE_READ
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE
    | bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC
    | bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE
    | bindings::ib_access_flags_IB_ZERO_BASED;

/// Whether a key-table entry is a window's.
pub(crate) fn is_mw_entry(entry: *mut c_void) -> bool {
    entry as usize & MW_TAG != 0
}

/// A bound window.
#[derive(Clone, Copy)]
struct Binding {
    /// The region (alive while bound: counted by `RroceMr::bind_get`).
    mr: *const RroceMr,
    /// First address in the region and length of the window.
    addr: u64,
    len: u64,
    /// `IB_ACCESS_REMOTE_*` flags of the window.
    access: u32,
    /// Remote addresses are offsets from `addr`.
    zero_based: bool,
    /// Type 2B: the QP it is bound to.
    qpn: Option<u32>,
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
        let b = match st.bound {
            Some(b) if st.rkey == rkey => b,
            _ => return Err(MrError::BadKey),
        };
        if b.qpn.is_some_and(|q| q != qpn) {
            return Err(MrError::BadKey);
        }
        if b.access & flag != flag {
            return Err(MrError::Access);
        }
        let off = if b.zero_based { Some(va) } else { va.checked_sub(b.addr) };
        let end = off.and_then(|o| o.checked_add(u64::from(len)));
        let (off, end) = match (off, end) {
            (Some(o), Some(e)) => (o, e),
            _ if len == 0 => (0, 0),
            _ => return Err(MrError::Range),
        };
        if len != 0 && end > b.len {
            return Err(MrError::Range);
        }
        (b.mr, b.addr.wrapping_add(off))
    };
    // SAFETY: the binding counted on the region, which `dereg_mr` therefore
    // refused; an unbind after the lock was dropped lets `dereg_mr` go on,
    // but it waits for a grace period, and bottom halves are disabled.
    let mr = unsafe { &*mr };
    mr.check(at, len, Need::LocalRead)?;
    Ok((mr, at))
}

/// Why a bind or invalidation failed (completed with `MW_BIND_ERR` or the
/// caller's status).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BindError {
    /// No window of the QP's PD with this index, or of the wrong type.
    Window,
    /// The new key changes the index.
    Key,
    /// A type-2 window that is bound already (or, invalidating, one that
    /// is not bound under this key).
    State,
    /// Access flags the window cannot have or the region does not allow.
    Access,
    /// No suitable region (key, PD, `MW_BIND`, user memory), or the range
    /// is outside it.
    Region,
}

/// What a BIND_MW WQE asks for (see `proto::wqe` for the fields).
pub(crate) struct BindReq {
    /// Any key of the window (its index is what counts).
    pub(crate) mw_key: u32,
    pub(crate) new_rkey: u32,
    pub(crate) type2: bool,
    pub(crate) mr_lkey: u32,
    pub(crate) addr: u64,
    pub(crate) len: u64,
    pub(crate) access: u32,
}

/// Executes a bind posted on QP `qpn` of `pd`.  Under the QP lock.
pub(crate) fn bind(dev: &RroceDev, pd: *mut bindings::ib_pd, qpn: u32, r: &BindReq) -> Result<(), BindError> {
    let mw = window(dev, pd, r.mw_key).ok_or(BindError::Window)?;
    if mw.type2() != r.type2 {
        return Err(BindError::Window);
    }
    if r.new_rkey >> 8 != r.mw_key >> 8 {
        return Err(BindError::Key);
    }
    if r.access & !MW_ACCESS != 0 || (!r.type2 && r.access & bindings::ib_access_flags_IB_ZERO_BASED != 0) {
        return Err(BindError::Access);
    }
    let mut st = mw.st().lock();
    if st.rkey >> 8 != r.mw_key >> 8 {
        // Not published yet.
        return Err(BindError::Window);
    }
    if r.type2 && st.bound.is_some() {
        // IBA 10.6.7.2: a type-2 window is bound only from the free state.
        return Err(BindError::State);
    }
    if !r.type2 && r.len == 0 {
        // Type 1: a zero-length bind unbinds the window (under a new key).
        if let Some(old) = st.bound.take() {
            // SAFETY: counted while bound (see `Binding::mr`).
            unsafe { (*old.mr).bind_put() };
        }
        st.rkey = r.new_rkey;
        return Ok(());
    }
    let mr = RroceMr::lookup(dev, pd, r.mr_lkey).map_err(|_| BindError::Region)?;
    let acc = mr.access();
    if acc & bindings::ib_access_flags_IB_ACCESS_MW_BIND == 0 {
        return Err(BindError::Region);
    }
    let needs_lw = bindings::ib_access_flags_IB_ACCESS_REMOTE_WRITE | bindings::ib_access_flags_IB_ACCESS_REMOTE_ATOMIC;
    if r.access & needs_lw != 0 && acc & bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE == 0 {
        return Err(BindError::Access);
    }
    let (start, mlen) = mr.user_range().ok_or(BindError::Region)?;
    let end = r.addr.checked_add(r.len).ok_or(BindError::Region)?;
    if r.addr < start || end > start.saturating_add(mlen) {
        return Err(BindError::Region);
    }
    if !mr.bind_get() {
        return Err(BindError::Region);
    }
    if let Some(old) = st.bound.take() {
        // SAFETY: counted while bound.
        unsafe { (*old.mr).bind_put() };
    }
    st.bound = Some(Binding {
        mr,
        addr: r.addr,
        len: r.len,
        access: r.access & !bindings::ib_access_flags_IB_ACCESS_LOCAL_WRITE,
        zero_based: r.access & bindings::ib_access_flags_IB_ZERO_BASED != 0,
        qpn: r.type2.then_some(qpn),
    });
    st.rkey = r.new_rkey;
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
) -> Option<Result<(), BindError>> {
    let mw = match key_object(dev, rkey)? {
        KeyObj::Mw(mw) => mw,
        KeyObj::Mr => return None,
    };
    Some((|| {
        if mw.ib.pd != pd {
            return Err(BindError::Window);
        }
        if !mw.type2() {
            // o10-37.2.26: type-1 windows are not invalidated by WQEs.
            return Err(BindError::Window);
        }
        let mut st = mw.st().lock();
        match st.bound {
            Some(b) if st.rkey == rkey && qpn.is_none_or(|q| b.qpn == Some(q)) => {
                st.bound = None;
                // SAFETY: counted while bound.
                unsafe { (*b.mr).bind_put() };
                Ok(())
            }
            _ => Err(BindError::State),
        }
    })())
}

fn alloc(mw: &mut RroceMw) -> Result {
    // SAFETY: ib_core set `device` to one of ours.
    let dev = unsafe { RroceDev::from_ib(mw.ib.device) };
    if !matches!(mw.ib.type_, bindings::ib_mw_type_IB_MW_TYPE_1 | bindings::ib_mw_type_IB_MW_TYPE_2) {
        return Err(EINVAL);
    }
    let st = KBox::pin_init(new_spinlock_bh!(MwState { rkey: 0, bound: None }, "rroce_mw"), GFP_KERNEL)?;
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
    let key = (index << 8) | (dev.p.key_gen.fetch_add(1, Ordering::Relaxed) & 0xff);
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
    // SAFETY: process context.
    unsafe { bindings::synchronize_rcu() };
    // Deallocating a bound window unbinds it (IBA 11.2.8.x).
    if let Some(b) = mw.st().lock().bound.take() {
        // SAFETY: counted while bound.
        unsafe { (*b.mr).bind_put() };
    }
    // SAFETY: initialised by `alloc_mw` and no longer reachable.
    unsafe { mw.p.assume_init_drop() };
    0
}
