// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Entry points of protection, parent and thread domains (`crate::pd` has
//! the rules).  Every `ibv_pd` and `ibv_td` handed out is the start of an
//! `Arc`'s value (`Arc::into_raw`), whose reference the application owns
//! until the dealloc verb succeeds.

use core::ffi::c_int;
use core::mem::size_of;
use core::ptr;
use std::sync::Arc;

use crate::device::errno_of;
use crate::ffi::*;
use crate::pd::{check_parent_domain_comp_mask, check_td_comp_mask, RrocePd, RroceTd, RroceXrcd};

/// The provider PD of `pd`.
///
/// # Safety
///
/// `pd` must be a live PD of ours (made by [`alloc_pd`] or
/// [`alloc_parent_domain`]); the reference must not outlive it.
unsafe fn pd_of<'a>(pd: *mut IbvPd) -> &'a RrocePd {
    // SAFETY: per the contract `pd` is the `ibv` field, at offset 0, of a
    // live `RrocePd` inside an `Arc`; its C part is an `Opaque`.
    unsafe { &*pd.cast_const().cast::<RrocePd>() }
}

/// A new reference to the PD `pd`.
///
/// # Safety
///
/// As for [`pd_of`].
unsafe fn pd_arc(pd: *mut IbvPd) -> Arc<RrocePd> {
    let p = pd.cast_const().cast::<RrocePd>();
    // SAFETY: `p` came from `Arc::into_raw` and the application's
    // reference keeps it alive during the call.
    unsafe {
        Arc::increment_strong_count(p);
        Arc::from_raw(p)
    }
}

/// `EINVAL` unless `pd` is non-NULL and a PD of `context` (then it is one
/// of ours, and [`pd_of`] may be used).
///
/// # Safety
///
/// `pd` must be NULL or a live `ibv_pd` (of any provider).
pub(super) unsafe fn check_pd_context(
    pd: *mut IbvPd,
    context: *mut IbvContext,
) -> Result<(), c_int> {
    // SAFETY: forwarded contract; an `ibv_pd` begins with its context.
    unsafe { check_context(pd, context) }
}

/// `EINVAL` unless `obj` is non-NULL and an object of `context` (then it
/// is one of ours).
///
/// # Safety
///
/// `obj` must be NULL or a live C object (of any provider) whose first
/// field is its `struct ibv_context *`: an `ibv_pd`, `ibv_cq` or
/// `ibv_xrcd`.
pub(super) unsafe fn check_context<T>(obj: *mut T, context: *mut IbvContext) -> Result<(), c_int> {
    // SAFETY: a non-NULL `obj` is live and begins with its context pointer
    // (for every provider: libibverbs' own layout).
    if obj.is_null() || unsafe { obj.cast::<*mut IbvContext>().read() } != context {
        return Err(EINVAL);
    }
    Ok(())
}

/// `verbs_context_ops::open_xrcd` (`ibv_open_xrcd`): an OPEN_XRCD command
/// for a new [`RroceXrcd`] (no driver data).  NULL with errno set on
/// failure (`EINVAL` without the FD and OFLAGS attributes, the kernel's
/// errno otherwise).
///
/// # Safety
///
/// Called by libibverbs with a context of ours and a valid `attr`.
pub(super) unsafe extern "C" fn open_xrcd(
    context: *mut IbvContext,
    attr: *mut IbvXrcdInitAttr,
) -> *mut IbvXrcd {
    if context.is_null() || attr.is_null() {
        set_errno(EINVAL);
        return ptr::null_mut();
    }
    const VXRCD_SIZE: c_int = size_of::<VerbsXrcd>() as c_int;
    // The box's contents stay at this address until close_xrcd frees it.
    let x = Box::new(RroceXrcd::new());
    let mut cmd = IbvOpenXrcd::default();
    let mut resp = IbUverbsOpenXrcdResp::default();
    // SAFETY: `context` and `attr` are valid per the contract; the new
    // `verbs_xrcd` is VXRCD_SIZE bytes; `cmd`/`resp` are live locals of
    // the sizes passed.
    let ret = unsafe {
        ibv_cmd_open_xrcd(
            context,
            x.vxrcd(),
            VXRCD_SIZE,
            attr,
            &mut cmd,
            size_of::<IbvOpenXrcd>(),
            &mut resp,
            size_of::<IbUverbsOpenXrcdResp>(),
        )
    };
    if ret != 0 {
        set_errno(errno_of(ret));
        return ptr::null_mut();
    }
    // `vxrcd` (with its `ibv_xrcd`) is at offset 0: the pointer keeps the
    // provenance of the whole allocation, which `close_xrcd` needs.
    Box::into_raw(x).cast::<IbvXrcd>()
}

/// `verbs_context_ops::close_xrcd` (`ibv_close_xrcd`): 0 or an errno
/// value (`EBUSY` from the kernel while SRQs or QPs use the domain).
///
/// # Safety
///
/// `xrcd` must be NULL or an XRC domain of ours that is not used once
/// this returns 0.
pub(super) unsafe extern "C" fn close_xrcd(xrcd: *mut IbvXrcd) -> c_int {
    if xrcd.is_null() {
        return EINVAL;
    }
    // SAFETY: `xrcd` is the `ibv_xrcd` at offset 0 of a live `verbs_xrcd`
    // of ours.
    let ret = unsafe { ibv_cmd_close_xrcd(xrcd.cast::<VerbsXrcd>()) };
    if ret != 0 {
        return ret;
    }
    // SAFETY: the kernel object is gone and the caller gives up `xrcd`,
    // which came from Box::into_raw in open_xrcd.
    drop(unsafe { Box::from_raw(xrcd.cast::<RroceXrcd>()) });
    0
}

/// What a QP, SRQ or CQ created on `pd` holds of it: the parent domain,
/// or `None` for a protection domain.
///
/// # Safety
///
/// As for [`pd_of`].
pub(super) unsafe fn domain_of(pd: *mut IbvPd) -> Option<Arc<RrocePd>> {
    // SAFETY: forwarded contract.
    if unsafe { pd_of(pd) }.is_parent() {
        // SAFETY: forwarded contract.
        Some(unsafe { pd_arc(pd) })
    } else {
        None
    }
}

/// The parent domain `pd` of `context` (`ibv_cq_init_attr_ex.parent_domain`):
/// `EINVAL` for NULL, a PD of another context or a protection domain.
///
/// # Safety
///
/// As for [`check_pd_context`].
pub(super) unsafe fn parent_domain_of(
    pd: *mut IbvPd,
    context: *mut IbvContext,
) -> Result<Arc<RrocePd>, c_int> {
    // SAFETY: forwarded contract; afterwards `pd` is one of ours.
    unsafe {
        check_pd_context(pd, context)?;
        domain_of(pd).ok_or(EINVAL)
    }
}

/// Takes back the application's reference to `T` at `p` if nothing else
/// holds the object, else `EBUSY` (the reference stays the application's).
///
/// # Safety
///
/// `p` must come from `Arc::<T>::into_raw`, and the caller must own that
/// reference.
unsafe fn take_unused<T>(p: *const T, in_use: fn(&Arc<T>) -> bool) -> Result<Arc<T>, c_int> {
    // SAFETY: per the contract.
    let this = unsafe { Arc::from_raw(p) };
    if in_use(&this) {
        // The application keeps its reference.
        let _ = Arc::into_raw(this);
        return Err(EBUSY);
    }
    Ok(this)
}

/// `verbs_context_ops::alloc_pd`: NULL with errno set on failure.
///
/// # Safety
///
/// Called by libibverbs with a context of ours.
pub(super) unsafe extern "C" fn alloc_pd(context: *mut IbvContext) -> *mut IbvPd {
    if context.is_null() {
        set_errno(EINVAL);
        return ptr::null_mut();
    }
    let pd = Arc::new(RrocePd::protection());
    let mut cmd = IbvAllocPd::default();
    let mut resp = IbUverbsAllocPdResp::default();
    // SAFETY: `context` is ours per the contract, `pd.ibv()` a zeroed
    // `ibv_pd` nobody else knows, `cmd`/`resp` live locals of the sizes
    // passed.
    let ret = unsafe {
        ibv_cmd_alloc_pd(
            context,
            pd.ibv(),
            &mut cmd,
            size_of::<IbvAllocPd>(),
            &mut resp,
            size_of::<IbUverbsAllocPdResp>(),
        )
    };
    if ret != 0 {
        set_errno(errno_of(ret));
        return ptr::null_mut();
    }
    // `ibv` is at offset 0: the pointer keeps the provenance of the whole
    // value, which `pd_of` and `dealloc_pd` need.
    Arc::into_raw(pd).cast_mut().cast::<IbvPd>()
}

/// `verbs_context_ops::import_pd` (`ibv_import_pd`): the protection
/// domain `pd_handle` of the kernel context `context` shares (an imported
/// context's).  Nothing to ask the kernel: a wrong handle fails the
/// commands that use it.
///
/// # Safety
///
/// Called by libibverbs with a context of ours.
pub(super) unsafe extern "C" fn import_pd(context: *mut IbvContext, pd_handle: u32) -> *mut IbvPd {
    if context.is_null() {
        set_errno(EINVAL);
        return ptr::null_mut();
    }
    let pd = Arc::new(RrocePd::protection());
    // SAFETY: `pd.ibv()` is a zeroed `ibv_pd` nobody else knows yet.
    unsafe {
        (*pd.ibv()).context = context;
        (*pd.ibv()).handle = pd_handle;
    }
    Arc::into_raw(pd).cast_mut().cast::<IbvPd>()
}

/// `verbs_context_ops::unimport_pd`: forgets an imported protection
/// domain (the kernel PD stays, its owner deallocates it); one still in
/// use by a parent domain stays too.
///
/// # Safety
///
/// `pd` must be NULL or a PD of ours from [`import_pd`], not used again.
pub(super) unsafe extern "C" fn unimport_pd(pd: *mut IbvPd) {
    if pd.is_null() {
        return;
    }
    // SAFETY: `pd` came from `Arc::into_raw` (import_pd) and the caller
    // gives up its reference.
    if let Ok(this) = unsafe { take_unused(pd.cast_const().cast::<RrocePd>(), RrocePd::in_use) } {
        drop(this);
    }
}

/// `verbs_context_ops::dealloc_pd`, for both kinds: 0 or an errno value,
/// `EBUSY` while a parent domain (of a protection domain) or a QP, SRQ or
/// CQ (of a parent domain) holds it.  A parent domain is provider memory
/// only; a protection domain is also a kernel object (which the kernel
/// refuses to destroy while its objects use it).
///
/// # Safety
///
/// `pd` must be NULL or a PD of ours that is not used once this returns 0.
pub(super) unsafe extern "C" fn dealloc_pd(pd: *mut IbvPd) -> c_int {
    if pd.is_null() {
        return EINVAL;
    }
    // SAFETY: `pd` came from `Arc::into_raw` (alloc_pd, alloc_parent_domain)
    // and the caller gives up its reference.
    let this = match unsafe { take_unused(pd.cast_const().cast::<RrocePd>(), RrocePd::in_use) } {
        Ok(this) => this,
        Err(e) => return e,
    };
    if !this.is_parent() {
        // SAFETY: `pd` is a live protection domain of ours.
        let ret = unsafe { ibv_cmd_dealloc_pd(pd) };
        if ret != 0 {
            // The application keeps its reference.
            let _ = Arc::into_raw(this);
            return ret;
        }
    }
    // Frees the object, and lets go of a parent domain's protection
    // domain, thread domain and allocator.
    drop(this);
    0
}

/// `verbs_context_ops::alloc_td` (`ibv_alloc_td`): NULL with errno set,
/// `EINVAL` for a NULL `init_attr` or any `comp_mask` bit.
///
/// # Safety
///
/// Called by libibverbs with a context of ours; `init_attr` NULL or valid.
pub(super) unsafe extern "C" fn alloc_td(
    context: *mut IbvContext,
    init_attr: *mut IbvTdInitAttr,
) -> *mut IbvTd {
    // SAFETY: `init_attr` is NULL or valid per the contract.
    let checked = match unsafe { init_attr.as_ref() } {
        Some(a) if !context.is_null() => check_td_comp_mask(a.comp_mask),
        _ => Err(EINVAL),
    };
    if let Err(e) = checked {
        set_errno(e);
        return ptr::null_mut();
    }
    // `ibv` is at offset 0 (provenance of the whole value, for dealloc_td).
    Arc::into_raw(Arc::new(RroceTd::new(context)))
        .cast_mut()
        .cast::<IbvTd>()
}

/// `verbs_context_ops::dealloc_td` (`ibv_dealloc_td`): 0, or `EBUSY` while
/// a parent domain holds the thread domain.
///
/// # Safety
///
/// `td` must be NULL or a TD of ours that is not used once this returns 0.
pub(super) unsafe extern "C" fn dealloc_td(td: *mut IbvTd) -> c_int {
    if td.is_null() {
        return EINVAL;
    }
    // SAFETY: `td` came from `Arc::into_raw` in alloc_td and the caller
    // gives up its reference.
    match unsafe { take_unused(td.cast_const().cast::<RroceTd>(), RroceTd::in_use) } {
        Ok(this) => {
            drop(this);
            0
        }
        Err(e) => e,
    }
}

/// `verbs_context_ops::alloc_parent_domain` (`ibv_alloc_parent_domain`):
/// NULL with errno set on failure, `EINVAL` for a NULL `attr`, unknown
/// `comp_mask` bits, a `pd` that is NULL, of another context or a parent
/// domain, or a `td` of another context.  The allocator is used only if
/// `IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS` gives both `alloc` and `free`
/// (as on mlx5); `pd_context` only with
/// `IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT`.
///
/// # Safety
///
/// Called by libibverbs with a context of ours and `attr` NULL or valid
/// (its `pd` NULL or a live PD, its `td` NULL or a live TD, its callbacks
/// as ibv_alloc_parent_domain(3) specifies).
pub(super) unsafe extern "C" fn alloc_parent_domain(
    context: *mut IbvContext,
    attr: *mut IbvParentDomainInitAttr,
) -> *mut IbvPd {
    // SAFETY: forwarded contract.
    match unsafe { new_parent_domain(context, attr) } {
        Ok(pd) => pd,
        Err(e) => {
            set_errno(e);
            ptr::null_mut()
        }
    }
}

/// [`alloc_parent_domain`] with `Result`.
///
/// # Safety
///
/// As for [`alloc_parent_domain`].
unsafe fn new_parent_domain(
    context: *mut IbvContext,
    attr: *mut IbvParentDomainInitAttr,
) -> Result<*mut IbvPd, c_int> {
    if context.is_null() || attr.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: `attr` is valid per the contract; the struct is plain data.
    let a = unsafe { attr.read() };
    check_parent_domain_comp_mask(a.comp_mask)?;
    // SAFETY: `a.pd` is NULL or a live `ibv_pd`; once checked, one of ours.
    let protection = unsafe {
        check_pd_context(a.pd, context)?;
        pd_arc(a.pd)
    };
    let td = if a.td.is_null() {
        None
    } else {
        // SAFETY: a non-NULL `td` is a live `ibv_td`, whose only field is
        // `context`; of our context, it is one of ours (from alloc_td).
        unsafe {
            if (&raw const (*a.td).context).read() != context {
                return Err(EINVAL);
            }
            let p = a.td.cast_const().cast::<RroceTd>();
            Arc::increment_strong_count(p);
            Some(Arc::from_raw(p))
        }
    };
    let allocator = match (a.alloc, a.free) {
        (Some(alloc), Some(free)) if a.comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS != 0 => {
            let pd_context = if a.comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT != 0 {
                a.pd_context
            } else {
                ptr::null_mut()
            };
            // SAFETY: the callbacks keep ibv_alloc_parent_domain(3)'s
            // contract (this function's contract).
            Some(Arc::new(unsafe { Allocator::new(alloc, free, pd_context) }))
        }
        _ => None,
    };
    // The protection domain's context and kernel handle
    // (`ibv_initialize_parent_domain`), which ibv_cmd_alloc_pd set before
    // the PD was handed out and nobody changes.
    // SAFETY: the `ibv_pd` of a live PD of ours.
    let ibv = unsafe { protection.ibv().read() };
    let parent = RrocePd::parent(protection, ibv, td, allocator)?;
    // `ibv` is at offset 0 (provenance of the whole value, for dealloc_pd).
    Ok(Arc::into_raw(Arc::new(parent)).cast_mut().cast::<IbvPd>())
}
