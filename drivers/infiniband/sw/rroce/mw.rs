// SPDX-License-Identifier: GPL-2.0
//! Memory windows (type 1 and type 2B): remote access to part of a memory
//! region under a key of its own.
//!
//! A window's key comes from the same key table as the regions' (index
//! `<< 8 | key byte`), so the responder resolves an R_Key to either; the
//! table knows which kind each entry is ([`Either`]), so a window's key is
//! never taken for a region's L_Key or R_Key.
//!
//! The rules of binding, access and invalidation are `proto::mw`'s; here
//! the window state ([`Window`], shared by the window's object and the key
//! table) lives and changes.  A window is bound by a BIND_MW WQE executed
//! in order by the requester ([`bind`]).  A bound window holds a counted
//! reference to its region and counts on it (`binds`), so `dereg_mr`
//! refuses the region (`EBUSY`) until the window is unbound, invalidated
//! (type 2: LOCAL_INV, SEND_WITH_INV) or deallocated.
//!
//! The binding is under a per-window `spin_lock_bh`, taken inside the QP
//! lock of whichever QP binds, uses or invalidates it (never two windows
//! at once).  `dealloc_mw` unpublishes the key; the table drops its
//! reference after an RCU grace period (the data path borrows windows for
//! a read-side section).

#![forbid(unsafe_code)]

use kernel::prelude::*;
use kernel::sync::Arc;

use crate::device::{DevPriv, RroceDev};
use crate::ib::mw::{MwInit, MwOps};
use crate::ib::PdId;
use crate::keys::{Binding, Region, Window, WindowState};
use crate::mr::{MrError, Need};
use crate::proto::mw as rules;
use crate::sync::idtable::Either;
use crate::sync::lock::new_spinlock_bh;
use crate::sync::rcu::ReadGuard;

/// Our part of a memory window: its shared state.
pub(crate) struct MwPart {
    w: Arc<Window>,
}

/// What a key names.
pub(crate) enum KeyObj<'a> {
    /// A region (see `mr::lookup`).
    Mr,
    /// A window.
    Mw(&'a Window),
}

/// The region or window with index `key >> 8` (the key byte is not
/// checked here), for the read-side section `rcu`.
pub(crate) fn key_object<'g>(dev: &'g RroceDev, rcu: &'g ReadGuard, key: u32) -> Option<KeyObj<'g>> {
    Some(match dev.p.keys.get(key >> 8, rcu)? {
        Either::A(_) => KeyObj::Mr,
        Either::B(w) => KeyObj::Mw(w),
    })
}

/// The window named by `key`'s index, if it is one of `pd`.
fn window<'g>(dev: &'g RroceDev, rcu: &'g ReadGuard, pd: PdId, key: u32) -> Option<&'g Window> {
    match key_object(dev, rcu, key)? {
        KeyObj::Mw(mw) if mw.pd == pd => Some(mw),
        _ => None,
    }
}

/// A remote access of `len` bytes at `va` with `IB_ACCESS_REMOTE_*` flag
/// `flag` under `rkey` by QP `qpn` of `pd`: the region and its address,
/// after the region's checks (region key) or the window's (window key:
/// valid key, PD, bound QP for type 2B, window access and range).
#[allow(clippy::too_many_arguments)]
pub(crate) fn remote<'g>(
    dev: &'g RroceDev,
    rcu: &'g ReadGuard,
    pd: PdId,
    qpn: u32,
    rkey: u32,
    va: u64,
    len: u32,
    flag: u32,
) -> Result<(&'g Region, u64), MrError> {
    let mw = match key_object(dev, rcu, rkey) {
        Some(KeyObj::Mw(mw)) => mw,
        _ => {
            let mr = crate::mr::lookup(dev, rcu, pd, rkey)?;
            mr.check(va, len, Need::Remote(flag))?;
            return Ok((mr, va));
        }
    };
    if mw.pd != pd {
        return Err(MrError::BadKey);
    }
    let (mr, at) = {
        let st = mw.st.lock();
        let b = st.bound.as_ref();
        let at = rules::check_access(st.rkey, b.map(|b| &b.b), rkey, qpn, va, len, flag).map_err(|e| match e {
            rules::AccessFault::Key => MrError::BadKey,
            rules::AccessFault::Access => MrError::Access,
            rules::AccessFault::Range => MrError::Range,
        })?;
        let bound = &b.ok_or(MrError::BadKey)?.mr;
        // The region as the key table holds it, borrowed for `rcu` like any
        // region: the binding's own reference lives only under the lock.
        let mr = match dev.p.keys.get(bound.index.load(core::sync::atomic::Ordering::Relaxed), rcu) {
            Some(Either::A(r)) if core::ptr::eq(r, &**bound) => r,
            _ => return Err(MrError::BadKey),
        };
        (mr, at)
    };
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
pub(crate) fn bind(dev: &RroceDev, rcu: &ReadGuard, pd: PdId, qpn: u32, r: &BindReq) -> Result<(), rules::BindError> {
    let mw = window(dev, rcu, pd, r.mw_key).ok_or(rules::BindError::NoWindow)?;
    let mut st = mw.st.lock();
    if st.rkey >> 8 != r.mw_key >> 8 {
        // Not published yet.
        return Err(rules::BindError::NoWindow);
    }
    let info = rules::WindowInfo { type2: mw.type2, rkey: st.rkey, bound: st.bound.is_some() };
    let mr = crate::mr::lookup(dev, rcu, pd, r.mr_lkey).ok();
    let region = mr.map(|m| rules::RegionInfo { access: m.access(), range: m.user_range() });
    let outcome = rules::check_bind(&info, &r.req, region.as_ref(), qpn)?;
    let new = match (outcome, mr) {
        (rules::BindOutcome::Unbind, _) => None,
        (rules::BindOutcome::Bind(b), Some(mr)) => {
            // A counted reference for the binding: the region as the table
            // holds it under the key just checked.
            let mr = match dev.p.keys.get_arc(crate::proto::mr::key_index(r.mr_lkey), rcu) {
                Some(Either::A(a)) if core::ptr::eq(&*a, mr) => a,
                _ => return Err(rules::BindError::NoRegion),
            };
            if !mr.bind_get() {
                // Being deregistered.
                return Err(rules::BindError::NoRegion);
            }
            Some(Binding { mr, b })
        }
        (rules::BindOutcome::Bind(_), None) => return Err(rules::BindError::NoRegion),
    };
    if let Some(old) = core::mem::replace(&mut st.bound, new) {
        old.mr.bind_put();
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
    rcu: &ReadGuard,
    pd: PdId,
    qpn: Option<u32>,
    rkey: u32,
) -> Option<Result<(), rules::InvalidateError>> {
    let mw = match key_object(dev, rcu, rkey)? {
        KeyObj::Mw(mw) => mw,
        KeyObj::Mr => return None,
    };
    Some((|| {
        if mw.pd != pd {
            return Err(rules::InvalidateError::Key);
        }
        let mut st = mw.st.lock();
        rules::check_invalidate(mw.type2, st.rkey, st.bound.as_ref().map(|b| &b.b), rkey, qpn)?;
        if let Some(b) = st.bound.take() {
            b.mr.bind_put();
        }
        Ok(())
    })())
}

impl MwOps for MwPart {
    type Dev = DevPriv;

    fn alloc(dev: &RroceDev, init: MwInit) -> Result<(Self, u32)> {
        let max = dev.p.attrs.max_mr as u32;
        let index = dev.p.keys.reserve(1, max, max)?;
        let rkey = crate::mr::new_key(index);
        let w = Arc::pin_init(
            pin_init!(Window {
                pd: init.pd,
                type2: init.type2,
                index,
                st <- new_spinlock_bh!(WindowState { rkey, bound: None }, "rroce_mw"),
            }),
            GFP_KERNEL_ACCOUNT,
        );
        let w = match w {
            Ok(w) => w,
            Err(e) => {
                dev.p.keys.unreserve(index);
                return Err(e);
            }
        };
        // Committed: nothing fails from here on.
        dev.p.keys.publish(index, Either::B(w.clone()));
        Ok((MwPart { w }, rkey))
    }

    fn dealloc(self, dev: &RroceDev) {
        // Every data-path section that may have found the window ends
        // before the table lets go of it.
        dev.p.keys.remove_if(self.w.index, Either::B(&*self.w));
        // Deallocating a bound window unbinds it (IBA 11.2.8.x).
        if let Some(b) = self.w.st.lock().bound.take() {
            b.mr.bind_put();
        }
    }
}
