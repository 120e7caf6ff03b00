// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! The provider's C boundary, top half: every function libibverbs or the
//! application calls (the ELF constructor, `verbs_device_ops`,
//! `verbs_context_ops`, `ibv_cq_ex`'s and `ibv_qp_ex`'s function
//! pointers) and every call into libibverbs' `ibv_cmd_*` helpers.
//!
//! Each entry point checks its pointers, turns them into references to
//! the provider's objects ([`cq::cq_of`], [`qp::qp_of`], ...) or into safe
//! views of the application's requests, and calls a safe method of
//! `crate::cq`, `crate::qp`, `crate::srq` or `crate::device`, where the
//! logic lives.  Creation and destruction (`Box::into_raw`/`from_raw`
//! around the kernel command) happen here too.

mod cq;
mod mr;
mod pd;
mod qp;
mod srq;
mod wr;

use core::ffi::{c_int, c_void};
use core::mem::{offset_of, size_of};
use core::ptr::{self, NonNull};

use rroce_proto::abi::{AllocUcontextResp, ABI_VERSION};

use crate::device::{c_chars_to_string, errno_of, format_fw_ver, warn, NAME_MATCH_PATTERN};
use crate::ffi::*;

// ---------------------------------------------------------------------------
// Registration
// ---------------------------------------------------------------------------

/// Match table: rroce devices by name prefix only.  rroce has no
/// `RDMA_DRIVER_*` id and no parent bus device to match by modalias.
static MATCH_TABLE: [VerbsMatchEnt; 2] = [
    VerbsMatchEnt::modalias(&NAME_MATCH_PATTERN),
    VerbsMatchEnt::SENTINEL,
];

/// What libibverbs knows about this provider.
static DEVICE_OPS: VerbsDeviceOps = VerbsDeviceOps {
    name: c"rroce".as_ptr(),
    match_min_abi_version: ABI_VERSION,
    match_max_abi_version: ABI_VERSION,
    match_table: MATCH_TABLE.as_ptr(),
    static_providers: ptr::null(),
    match_device: None,
    alloc_context: Some(alloc_context),
    import_context: Some(import_context),
    alloc_device: Some(alloc_device),
    uninit_device: Some(uninit_device),
};

/// Verbs of an open rroce context; NULL entries mean EOPNOTSUPP.
static CONTEXT_OPS: VerbsContextOps = VerbsContextOps {
    alloc_pd: Some(pd::alloc_pd),
    dealloc_pd: Some(pd::dealloc_pd),
    alloc_parent_domain: Some(pd::alloc_parent_domain),
    alloc_td: Some(pd::alloc_td),
    dealloc_td: Some(pd::dealloc_td),
    free_context: Some(free_context),
    query_device_ex: Some(query_device_ex),
    query_rt_values: Some(query_rt_values),
    query_port: Some(query_port),
    create_cq: Some(cq::create_cq),
    create_cq_ex: Some(cq::create_cq_ex),
    poll_cq: Some(cq::poll_cq),
    req_notify_cq: Some(cq::req_notify_cq),
    resize_cq: Some(cq::resize_cq),
    destroy_cq: Some(cq::destroy_cq),
    create_qp: Some(qp::create_qp),
    create_qp_ex: Some(qp::create_qp_ex),
    modify_qp: Some(qp::modify_qp),
    query_qp: Some(qp::query_qp),
    destroy_qp: Some(qp::destroy_qp),
    post_send: Some(qp::post_send),
    post_recv: Some(qp::post_recv),
    create_srq: Some(srq::create_srq),
    create_srq_ex: Some(srq::create_srq_ex),
    get_srq_num: Some(srq::get_srq_num),
    open_xrcd: Some(pd::open_xrcd),
    close_xrcd: Some(pd::close_xrcd),
    open_qp: Some(qp::open_qp),
    modify_srq: Some(srq::modify_srq),
    query_srq: Some(srq::query_srq),
    destroy_srq: Some(srq::destroy_srq),
    post_srq_recv: Some(srq::post_srq_recv),
    reg_mr: Some(mr::reg_mr),
    advise_mr: Some(mr::advise_mr),
    import_mr: Some(mr::import_mr),
    unimport_mr: Some(mr::unimport_mr),
    import_pd: Some(pd::import_pd),
    unimport_pd: Some(pd::unimport_pd),
    dereg_mr: Some(mr::dereg_mr),
    rereg_mr: Some(mr::rereg_mr),
    // Multicast needs nothing of the provider: the kernel does it all.
    attach_mcast: Some(ibv_cmd_attach_mcast),
    detach_mcast: Some(ibv_cmd_detach_mcast),
    alloc_mw: Some(mr::alloc_mw),
    dealloc_mw: Some(mr::dealloc_mw),
    bind_mw: Some(qp::bind_mw),
    create_ah: Some(mr::create_ah),
    destroy_ah: Some(mr::destroy_ah),
    ..VerbsContextOps::NONE
};

/// ELF constructor: what rdma-core's `PROVIDER_DRIVER()` macro does in C.
extern "C" fn register_driver() {
    // SAFETY: DEVICE_OPS is a valid, immutable `static`, so the pointer stays
    // valid for the life of the process as libibverbs requires; this library
    // links libibverbs, so the symbol is resolved before constructors run.
    unsafe { verbs_register_driver_34(&DEVICE_OPS) };
}

/// Pointer in `.init_array`: the dynamic loader calls it when libibverbs
/// dlopens this library (`#[used]` keeps it although nothing refers to it).
#[used]
#[link_section = ".init_array"]
static RROCE_CONSTRUCTOR: extern "C" fn() = register_driver;

// ---------------------------------------------------------------------------
// Device, context, PD
// ---------------------------------------------------------------------------

/// `calloc`s one zeroed `T`, or `None` on allocation failure.
fn alloc_zeroed<T>() -> Option<NonNull<T>> {
    // calloc only guarantees alignment for fundamental types.
    const { assert!(core::mem::align_of::<T>() <= 16) };
    // SAFETY: calloc may be called with any arguments; the result is either
    // NULL or a zeroed block of `size_of::<T>()` bytes suitably aligned.
    NonNull::new(unsafe { calloc(1, size_of::<T>()) }.cast::<T>())
}

/// Per-device provider state; libibverbs sees only `vdev`.
#[repr(C)]
struct RroceDevice {
    vdev: VerbsDevice,
}

/// `verbs_device_ops::alloc_device`: a zeroed device, NULL on ENOMEM.
///
/// # Safety
///
/// Called by libibverbs only; `_sysfs_dev` is not used.
unsafe extern "C" fn alloc_device(_sysfs_dev: *mut VerbsSysfsDev) -> *mut VerbsDevice {
    match alloc_zeroed::<RroceDevice>() {
        // `vdev` is the first field, so the cast keeps the same address.
        Some(dev) => dev.as_ptr().cast::<VerbsDevice>(),
        None => {
            set_errno(ENOMEM);
            ptr::null_mut()
        }
    }
}

/// `verbs_device_ops::uninit_device`: frees what `alloc_device` made.
///
/// # Safety
///
/// `vdev` must be NULL or a pointer returned by [`alloc_device`] that
/// libibverbs no longer uses.
unsafe extern "C" fn uninit_device(vdev: *mut VerbsDevice) {
    const { assert!(offset_of!(RroceDevice, vdev) == 0) };
    if vdev.is_null() {
        return;
    }
    // SAFETY: per the contract `vdev` is the start of a calloc'ed RroceDevice
    // that nobody references any more.
    unsafe { free(vdev.cast::<c_void>()) };
}

// ---------------------------------------------------------------------------
// Context
// ---------------------------------------------------------------------------

/// Per-context provider state; libibverbs sees only `vctx`.
#[repr(C)]
struct RroceContext {
    vctx: VerbsContext,
    /// Feature bits the kernel reported in `AllocUcontextResp`.
    features: u64,
}

/// Returns the `RroceContext` owning `ibctx`, or NULL.
///
/// # Safety
///
/// `ibctx` must be NULL or the `context` member of the `verbs_context`
/// inside an `RroceContext` created by [`alloc_context`].
unsafe fn context_of(ibctx: *mut IbvContext) -> *mut RroceContext {
    if ibctx.is_null() {
        return ptr::null_mut();
    }
    let back = offset_of!(VerbsContext, context) + offset_of!(RroceContext, vctx);
    // SAFETY: per the contract, `ibctx` lies `back` bytes into the same
    // RroceContext allocation, so stepping back stays inside it.
    unsafe { ibctx.byte_sub(back).cast::<RroceContext>() }
}

/// Tears down and frees a context made by `_verbs_init_and_alloc_context`.
///
/// # Safety
///
/// `ctx` must be a fully initialised (by libibverbs) `RroceContext` that is no
/// longer used by anyone.
unsafe fn destroy_context(ctx: *mut RroceContext) {
    // SAFETY: `ctx` is valid per the contract; verbs_uninit_context closes the
    // fds and drops the device reference taken at init, then the calloc'ed
    // block is returned with free.
    unsafe {
        verbs_uninit_context(&raw mut (*ctx).vctx);
        free(ctx.cast::<c_void>());
    }
}

/// A new `RroceContext` on `cmd_fd`, initialised by libibverbs (not yet
/// published), and its `verbs_context`; `None` with errno set (and
/// `cmd_fd` closed) on failure.
///
/// # Safety
///
/// `ibdev` is a valid registered device of ours; `cmd_fd` an open uverbs
/// file the context then owns.
unsafe fn new_context(
    ibdev: *mut IbvDevice,
    cmd_fd: c_int,
) -> Option<(*mut RroceContext, *mut VerbsContext)> {
    // SAFETY: per the contract; the size and offset describe RroceContext,
    // whose alignment calloc satisfies.  On failure libibverbs closes
    // cmd_fd, sets errno and returns NULL.
    let raw = unsafe {
        _verbs_init_and_alloc_context(
            ibdev,
            cmd_fd,
            size_of::<RroceContext>(),
            ptr::without_provenance_mut(offset_of!(RroceContext, vctx)),
            RDMA_DRIVER_UNKNOWN,
        )
    };
    let ctx = raw.cast::<RroceContext>();
    if ctx.is_null() {
        return None;
    }
    // SAFETY: `ctx` is the non-NULL allocation just returned by libibverbs.
    Some((ctx, unsafe { &raw mut (*ctx).vctx }))
}

/// `verbs_device_ops::alloc_context`: opens a context on `cmd_fd`.
///
/// Takes ownership of `cmd_fd` (closed on failure).  Returns NULL with errno
/// set on failure, in particular `EPROTO` if the kernel driver's private ABI
/// is not [`ABI_VERSION`].
///
/// # Safety
///
/// Called by libibverbs only, with `ibdev` pointing at a device made by
/// [`alloc_device`] and `cmd_fd` an open uverbs file descriptor.
unsafe extern "C" fn alloc_context(
    ibdev: *mut IbvDevice,
    cmd_fd: c_int,
    _private_data: *mut c_void,
) -> *mut VerbsContext {
    if ibdev.is_null() {
        if cmd_fd >= 0 {
            // SAFETY: we own cmd_fd and give it up here.
            unsafe { close(cmd_fd) };
        }
        set_errno(EINVAL);
        return ptr::null_mut();
    }

    // SAFETY: per the contract.
    let Some((ctx, vctx)) = (unsafe { new_context(ibdev, cmd_fd) }) else {
        return ptr::null_mut();
    };

    let mut cmd = IbvGetContext::default();
    let mut resp = RroceGetContextResp::default();
    // SAFETY: `vctx` was just initialised by libibverbs; `cmd` and `resp` are
    // live locals of exactly the sizes passed, and the response pointer is
    // derived from the whole `resp` so the driver part may be written too.
    let ret = unsafe {
        ibv_cmd_get_context(
            vctx,
            &mut cmd,
            size_of::<IbvGetContext>(),
            (&raw mut resp).cast::<IbUverbsGetContextResp>(),
            size_of::<RroceGetContextResp>(),
        )
    };
    if ret != 0 {
        // SAFETY: the context is initialised and not yet published.
        unsafe { destroy_context(ctx) };
        set_errno(errno_of(ret));
        return ptr::null_mut();
    }

    let drv: AllocUcontextResp = resp.drv;
    if drv.abi_version != ABI_VERSION {
        // SAFETY: `ibdev` is valid (checked non-NULL, owned by libibverbs).
        let name = c_chars_to_string(unsafe { &(*ibdev).name });
        warn(format_args!(
            "device {name}: kernel driver reports rroce ABI version {}, \
             this provider supports only {ABI_VERSION}",
            drv.abi_version
        ));
        // SAFETY: the context is initialised and not yet published.
        unsafe { destroy_context(ctx) };
        set_errno(EPROTO);
        return ptr::null_mut();
    }

    // SAFETY: `ctx` is our live, exclusively owned allocation; `CONTEXT_OPS`
    // is a 'static table.
    unsafe {
        (*ctx).features = drv.features;
        verbs_set_ops(vctx, &CONTEXT_OPS);
    }
    vctx
}

/// `verbs_device_ops::import_context` (`ibv_import_device`): a context
/// on `cmd_fd`, a uverbs file whose kernel context another `ibv_context`
/// (this process's or another's) made.  No GET_CONTEXT: the kernel context
/// exists; its driver data has nothing to check (libibverbs matched the
/// device on the driver's ABI version, `match_*_abi_version`).
///
/// # Safety
///
/// Called by libibverbs with a device of ours and an open `cmd_fd`.
unsafe extern "C" fn import_context(ibdev: *mut IbvDevice, cmd_fd: c_int) -> *mut VerbsContext {
    if ibdev.is_null() {
        set_errno(EINVAL);
        return ptr::null_mut();
    }
    // SAFETY: per the contract.
    let Some((ctx, vctx)) = (unsafe { new_context(ibdev, cmd_fd) }) else {
        return ptr::null_mut();
    };
    // SAFETY: `vctx` was just initialised.
    let ret = unsafe { ibv_cmd_query_context(&raw mut (*vctx).context, ptr::null_mut()) };
    if ret != 0 {
        // SAFETY: the context is initialised and not yet published.
        unsafe { destroy_context(ctx) };
        set_errno(errno_of(ret));
        return ptr::null_mut();
    }
    // SAFETY: as in `alloc_context`.
    unsafe { verbs_set_ops(vctx, &CONTEXT_OPS) };
    vctx
}

/// `verbs_context_ops::free_context` (`ibv_close_device`).
///
/// # Safety
///
/// `ibctx` must be NULL or a context returned by [`alloc_context`] that
/// the application no longer uses.
unsafe extern "C" fn free_context(ibctx: *mut IbvContext) {
    // SAFETY: forwarded contract.
    let ctx = unsafe { context_of(ibctx) };
    if ctx.is_null() {
        return;
    }
    // SAFETY: forwarded contract: the context is ours and unused.
    unsafe { destroy_context(ctx) };
}

// ---------------------------------------------------------------------------
// Verbs
// ---------------------------------------------------------------------------

/// `verbs_context_ops::query_device_ex` (also backs `ibv_query_device`).
///
/// # Safety
///
/// Called by libibverbs with a context of ours, `attr` valid for `attr_size`
/// writable bytes and `input` NULL or valid.
unsafe extern "C" fn query_device_ex(
    context: *mut IbvContext,
    input: *const IbvQueryDeviceExInput,
    attr: *mut IbvDeviceAttrEx,
    attr_size: usize,
) -> c_int {
    if context.is_null() || attr.is_null() {
        return EINVAL;
    }
    let mut resp = IbUverbsExQueryDeviceResp::ZERO;
    let mut resp_size = size_of::<IbUverbsExQueryDeviceResp>();
    // SAFETY: pointers come from libibverbs per the contract; `resp` and
    // `resp_size` are live locals and `resp_size` is the size of `resp`.
    let ret = unsafe {
        ibv_cmd_query_device_any(context, input, attr, attr_size, &mut resp, &mut resp_size)
    };
    if ret != 0 {
        return ret;
    }
    if resp.fw_ver != 0 {
        let fw = format_fw_ver(resp.fw_ver);
        // SAFETY: the call above succeeded, so attr_size >=
        // sizeof(struct ibv_device_attr) and orig_attr.fw_ver (64 bytes at
        // DEVICE_ATTR_FW_VER_OFFSET) is in bounds; a byte array has alignment 1.
        unsafe {
            attr.byte_add(DEVICE_ATTR_FW_VER_OFFSET)
                .cast::<[u8; DEVICE_ATTR_FW_VER_LEN]>()
                .write(fw);
        }
    }
    0
}

/// `verbs_context_ops::query_rt_values` (`ibv_query_rt_values_ex`): the
/// device clock now (`IBV_VALUES_MASK_RAW_CLOCK`), which is the kernel's
/// CLOCK_MONOTONIC in ns (`hca_core_clock` 1 GHz).  As hardware providers
/// do, the raw tick count goes into `tv_nsec` with `tv_sec` 0, so it
/// compares directly with `ibv_wc_read_completion_ts`.  `EINVAL` for other
/// `comp_mask` bits.
///
/// # Safety
///
/// Called by libibverbs with a context of ours and a writable `values`.
unsafe extern "C" fn query_rt_values(context: *mut IbvContext, values: *mut IbvValuesEx) -> c_int {
    if context.is_null() || values.is_null() {
        return EINVAL;
    }
    // SAFETY: `values` is valid per the contract.
    let v = unsafe { &mut *values };
    if v.comp_mask & !IBV_VALUES_MASK_RAW_CLOCK != 0 {
        return EINVAL;
    }
    if v.comp_mask & IBV_VALUES_MASK_RAW_CLOCK != 0 {
        let ns = crate::ffi::sys::timespec_ns(crate::ffi::sys::monotonic_now());
        v.raw_clock = Timespec {
            tv_sec: 0,
            tv_nsec: i64::try_from(ns).unwrap_or(i64::MAX),
        };
    }
    0
}

/// `verbs_context_ops::query_port`.
///
/// # Safety
///
/// Called by libibverbs with a context of ours and a writable `port_attr`.
unsafe extern "C" fn query_port(
    context: *mut IbvContext,
    port_num: u8,
    port_attr: *mut IbvPortAttr,
) -> c_int {
    if context.is_null() || port_attr.is_null() {
        return EINVAL;
    }
    let mut cmd = IbvQueryPort::default();
    // SAFETY: pointers come from libibverbs per the contract; `cmd` is a live
    // local of the size passed.
    unsafe {
        ibv_cmd_query_port(
            context,
            port_num,
            port_attr,
            &mut cmd,
            size_of::<IbvQueryPort>(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::NAME_MODALIAS_PREFIX;
    use core::ffi::c_char;
    use std::ffi::CString;

    unsafe extern "C" {
        fn fnmatch(pattern: *const c_char, string: *const c_char, flags: c_int) -> c_int;
    }

    /// Does libibverbs' name match (fnmatch of "rdma_device:N<name>") accept
    /// `name`?
    fn name_matches(name: &str) -> bool {
        let subject = CString::new(format!("{NAME_MODALIAS_PREFIX}{name}")).unwrap();
        // SAFETY: both arguments are NUL-terminated strings.
        unsafe { fnmatch(NAME_MATCH_PATTERN.as_ptr().cast(), subject.as_ptr(), 0) == 0 }
    }

    #[test]
    fn claims_only_rroce_names() {
        for name in ["rroce0", "rroce1", "rroce_eth0", "rroce"] {
            assert!(name_matches(name), "{name} must match");
        }
        for name in ["rxe0", "siw0", "mlx5_0", "xrroce0", "rroc0", "Nrroce0"] {
            assert!(!name_matches(name), "{name} must not match");
        }
    }

    #[test]
    fn table_and_ops() {
        assert_eq!(MATCH_TABLE[0].kind, VERBS_MATCH_MODALIAS);
        assert_eq!(MATCH_TABLE[1].kind, VERBS_MATCH_SENTINEL);
        assert_eq!(DEVICE_OPS.match_min_abi_version, 1);
        assert_eq!(DEVICE_OPS.match_max_abi_version, 1);
        assert!(CONTEXT_OPS.create_qp.is_some() && CONTEXT_OPS.reg_mr.is_some());
        assert!(CONTEXT_OPS.poll_cq.is_some() && CONTEXT_OPS.post_send.is_some());
        assert!(CONTEXT_OPS.create_srq.is_some() && CONTEXT_OPS.resize_cq.is_some());
        assert!(CONTEXT_OPS.alloc_pd.is_some() && CONTEXT_OPS.free_context.is_some());
        assert!(CONTEXT_OPS.create_cq_ex.is_some() && CONTEXT_OPS.create_qp_ex.is_some());
        assert!(CONTEXT_OPS.alloc_parent_domain.is_some() && CONTEXT_OPS.alloc_td.is_some());
        assert!(CONTEXT_OPS.dealloc_td.is_some());
        assert!(CONTEXT_OPS.open_xrcd.is_some() && CONTEXT_OPS.close_xrcd.is_some());
        assert!(CONTEXT_OPS.create_srq_ex.is_some() && CONTEXT_OPS.get_srq_num.is_some());
        assert!(CONTEXT_OPS.open_qp.is_some());
    }
}
