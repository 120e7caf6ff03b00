// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Entry points of memory regions, memory windows and address handles:
//! plain uverbs commands, no logic of the provider's own.
//!
//! `reg_mr` sends no driver data (the kernel pins the pages and returns the
//! keys).  `create_ah` receives a `CreateAhResp` whose `ah_num` UD send
//! WQEs carry in their `ah` field.

use core::ffi::{c_int, c_void};
use core::mem::{offset_of, size_of};
use core::ptr;

use crate::device::{errno_of, warn};
use crate::ffi::*;

/// `verbs_context_ops::reg_mr`: NULL with errno set on failure.
///
/// # Safety
///
/// Called by libibverbs with a PD of ours.
pub(super) unsafe extern "C" fn reg_mr(
    pd: *mut IbvPd,
    addr: *mut c_void,
    length: usize,
    hca_va: u64,
    access: c_int,
) -> *mut IbvMr {
    if pd.is_null() {
        set_errno(EINVAL);
        return ptr::null_mut();
    }
    let vmr = Box::into_raw(Box::new(Opaque::<VerbsMr>::zeroed())).cast::<VerbsMr>();
    let mut cmd = IbvRegMr::default();
    let mut resp = IbUverbsRegMrResp::default();
    // SAFETY: `pd` is ours per the contract, `vmr` a fresh allocation,
    // `cmd`/`resp` live locals of the sizes passed.
    let ret = unsafe {
        ibv_cmd_reg_mr(
            pd,
            addr,
            length,
            hca_va,
            access,
            vmr,
            &mut cmd,
            size_of::<IbvRegMr>(),
            &mut resp,
            size_of::<IbUverbsRegMrResp>(),
        )
    };
    if ret != 0 {
        // SAFETY: never handed out.
        drop(unsafe { Box::from_raw(vmr.cast::<Opaque<VerbsMr>>()) });
        set_errno(errno_of(ret));
        return ptr::null_mut();
    }
    // SAFETY: `vmr` is live; `ibv_mr` is its first field.
    unsafe { &raw mut (*vmr).ibv_mr }
}

/// `verbs_context_ops::advise_mr` (`ibv_advise_mr`): the kernel
/// prefetches the on-demand paging pages; 0 or an errno value.
///
/// # Safety
///
/// Called by libibverbs with a PD of ours and `num_sge` SGEs at `sg_list`.
pub(super) unsafe extern "C" fn advise_mr(
    pd: *mut IbvPd,
    advice: c_int,
    flags: u32,
    sg_list: *mut IbvSge,
    num_sge: u32,
) -> c_int {
    if pd.is_null() || sg_list.is_null() {
        return EINVAL;
    }
    // SAFETY: per the contract.
    match unsafe { ibv_cmd_advise_mr(pd, advice, flags, sg_list, num_sge) } {
        0 => 0,
        ret => errno_of(ret),
    }
}

/// `verbs_context_ops::import_mr` (`ibv_import_mr`): the MR `mr_handle`
/// of the kernel context `pd`'s context shares, keys and length from the
/// kernel; NULL with errno set on failure.
///
/// # Safety
///
/// Called by libibverbs with a PD of ours.
pub(super) unsafe extern "C" fn import_mr(pd: *mut IbvPd, mr_handle: u32) -> *mut IbvMr {
    if pd.is_null() {
        set_errno(EINVAL);
        return ptr::null_mut();
    }
    let vmr = Box::into_raw(Box::new(Opaque::<VerbsMr>::zeroed())).cast::<VerbsMr>();
    // SAFETY: `pd` is ours per the contract, `vmr` a fresh allocation.
    let ret = unsafe { ibv_cmd_query_mr(pd, vmr, mr_handle) };
    if ret != 0 {
        // SAFETY: never handed out.
        drop(unsafe { Box::from_raw(vmr.cast::<Opaque<VerbsMr>>()) });
        set_errno(errno_of(ret));
        return ptr::null_mut();
    }
    // SAFETY: `vmr` is live; `ibv_mr` is its first field.
    unsafe { &raw mut (*vmr).ibv_mr }
}

/// `verbs_context_ops::unimport_mr`: forgets an imported MR (the kernel
/// MR stays, its owner deregisters it).
///
/// # Safety
///
/// `mr` must be NULL or an MR of ours from [`import_mr`], not used again.
pub(super) unsafe extern "C" fn unimport_mr(mr: *mut IbvMr) {
    if !mr.is_null() {
        // SAFETY: `ibv_mr` is the first field of the `VerbsMr` that
        // `import_mr` made with Box::into_raw.
        drop(unsafe { Box::from_raw(mr.cast::<Opaque<VerbsMr>>()) });
    }
}

/// `verbs_context_ops::rereg_mr`: 0 or an errno value (errno set too).
/// libibverbs has checked `flags` and updates `ibv_mr`'s PD/address/length
/// on success; the kernel returns the (possibly new) keys.
///
/// # Safety
///
/// `vmr` must be NULL or an MR of ours; `pd` a PD of the same context when
/// `flags` has `IBV_REREG_MR_CHANGE_PD`.
pub(super) unsafe extern "C" fn rereg_mr(
    vmr: *mut VerbsMr,
    flags: c_int,
    pd: *mut IbvPd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    if vmr.is_null() || (flags & IBV_REREG_MR_CHANGE_PD != 0 && pd.is_null()) {
        set_errno(EINVAL);
        return EINVAL;
    }
    let mut cmd = IbvReregMr::default();
    let mut resp = IbUverbsReregMrResp::default();
    // SAFETY: `vmr`/`pd` valid per the contract; `cmd`/`resp` are live
    // locals of the sizes passed.
    let ret = unsafe {
        ibv_cmd_rereg_mr(
            vmr,
            flags as u32,
            addr,
            length,
            addr as u64,
            access,
            pd,
            &mut cmd,
            size_of::<IbvReregMr>(),
            &mut resp,
            size_of::<IbUverbsReregMrResp>(),
        )
    };
    if ret != 0 {
        set_errno(errno_of(ret));
    }
    ret
}

/// `verbs_context_ops::dereg_mr`: 0 or an errno value.
///
/// # Safety
///
/// `vmr` must be NULL or an MR of ours that is not used once this returns 0.
pub(super) unsafe extern "C" fn dereg_mr(vmr: *mut VerbsMr) -> c_int {
    if vmr.is_null() {
        return EINVAL;
    }
    // SAFETY: `vmr` is a live MR of ours.
    let ret = unsafe { ibv_cmd_dereg_mr(vmr) };
    if ret == 0 {
        // SAFETY: the kernel MR is gone; `vmr` came from Box::into_raw.
        drop(unsafe { Box::from_raw(vmr.cast::<Opaque<VerbsMr>>()) });
    }
    ret
}

/// Provider AH; libibverbs sees only `ibv`.
#[repr(C)]
struct RroceAh {
    ibv: Opaque<IbvAh>,
    ah_num: u32,
}
const _: () = assert!(offset_of!(RroceAh, ibv) == 0);

/// The `ah_num` of `ah` if it is an AH of `ctx`.
///
/// # Safety
///
/// `ah` must be NULL or a live AH; every AH of an rroce context is ours.
pub(super) unsafe fn ah_num_of(ah: *mut IbvAh, ctx: *mut IbvContext) -> Option<u32> {
    if ah.is_null() {
        return None;
    }
    // SAFETY: `ah` is a live AH per the contract.
    if unsafe { (*ah).context } != ctx {
        return None;
    }
    // SAFETY: an AH of our context was made by create_ah.
    Some(unsafe { (*ah.cast::<RroceAh>()).ah_num })
}

/// `verbs_context_ops::create_ah`: NULL with errno set on failure
/// (`EPROTO` if the kernel returns AH number 0).
///
/// # Safety
///
/// Called by libibverbs with a PD of ours and a valid `attr`.
pub(super) unsafe extern "C" fn create_ah(pd: *mut IbvPd, attr: *mut IbvAhAttr) -> *mut IbvAh {
    if pd.is_null() || attr.is_null() {
        set_errno(EINVAL);
        return ptr::null_mut();
    }
    let ah = Box::into_raw(Box::new(RroceAh {
        ibv: Opaque::zeroed(),
        ah_num: 0,
    }));
    let mut resp = RroceCreateAhResp::default();
    // SAFETY: `pd`/`attr` valid per the contract; `ah` is a fresh
    // allocation; `resp` is a live local of the size passed.
    let ret = unsafe {
        ibv_cmd_create_ah(
            pd,
            (*ah).ibv.get(),
            attr,
            &raw mut resp.core,
            size_of::<RroceCreateAhResp>(),
        )
    };
    if ret != 0 {
        // SAFETY: never handed out.
        drop(unsafe { Box::from_raw(ah) });
        set_errno(errno_of(ret));
        return ptr::null_mut();
    }
    if resp.drv.ah_num == 0 {
        warn(format_args!("create_ah: kernel returned AH number 0"));
        // SAFETY: the kernel AH exists; nobody else knows `ah`.
        let _ = unsafe { ibv_cmd_destroy_ah((*ah).ibv.get()) };
        // SAFETY: never handed out.
        drop(unsafe { Box::from_raw(ah) });
        set_errno(EPROTO);
        return ptr::null_mut();
    }
    // SAFETY: still exclusively owned.
    unsafe { (*ah).ah_num = resp.drv.ah_num };
    // `ibv` is at offset 0: the pointer keeps the provenance of the whole
    // allocation, which `ah_num_of` and `destroy_ah` need.
    ah.cast::<IbvAh>()
}

/// `verbs_context_ops::destroy_ah`: 0 or an errno value.
///
/// # Safety
///
/// `ah` must be NULL or an AH of ours that is not used once this returns 0.
pub(super) unsafe extern "C" fn destroy_ah(ah: *mut IbvAh) -> c_int {
    if ah.is_null() {
        return EINVAL;
    }
    // SAFETY: `ah` is a live AH of ours.
    let ret = unsafe { ibv_cmd_destroy_ah(ah) };
    if ret == 0 {
        // SAFETY: the kernel AH is gone; `ah` came from Box::into_raw.
        drop(unsafe { Box::from_raw(ah.cast::<RroceAh>()) });
    }
    ret
}

/// `verbs_context_ops::alloc_mw`: NULL with errno set on failure (the
/// kernel refuses types other than 1 and 2 with `EINVAL`).
///
/// # Safety
///
/// Called by libibverbs with a PD of ours.
pub(super) unsafe extern "C" fn alloc_mw(pd: *mut IbvPd, mw_type: c_int) -> *mut IbvMw {
    if pd.is_null() {
        set_errno(EINVAL);
        return ptr::null_mut();
    }
    let mw = Box::into_raw(Box::new(Opaque::<IbvMw>::zeroed())).cast::<IbvMw>();
    let mut cmd = IbvAllocMw::default();
    let mut resp = IbUverbsAllocMwResp::default();
    // SAFETY: `pd` is ours per the contract, `mw` a fresh allocation,
    // `cmd`/`resp` live locals of the sizes passed.
    let ret = unsafe {
        ibv_cmd_alloc_mw(
            pd,
            mw_type,
            mw,
            &mut cmd,
            size_of::<IbvAllocMw>(),
            &mut resp,
            size_of::<IbUverbsAllocMwResp>(),
        )
    };
    if ret != 0 {
        // SAFETY: never handed out.
        drop(unsafe { Box::from_raw(mw.cast::<Opaque<IbvMw>>()) });
        set_errno(errno_of(ret));
        return ptr::null_mut();
    }
    mw
}

/// `verbs_context_ops::dealloc_mw`: 0 or an errno value.  A bound window
/// is unbound by the kernel.
///
/// # Safety
///
/// `mw` must be NULL or a window of ours that is not used once this
/// returns 0.
pub(super) unsafe extern "C" fn dealloc_mw(mw: *mut IbvMw) -> c_int {
    if mw.is_null() {
        return EINVAL;
    }
    // SAFETY: `mw` is a live window of ours.
    let ret = unsafe { ibv_cmd_dealloc_mw(mw) };
    if ret == 0 {
        // SAFETY: the kernel window is gone; `mw` came from Box::into_raw.
        drop(unsafe { Box::from_raw(mw.cast::<Opaque<IbvMw>>()) });
    }
    ret
}
