// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Every C type and C function the provider shares with libibverbs.
//!
//! This is the only module that spells out C layouts.  Debian ships no
//! `infiniband/driver.h`, so the provider-private ABI of rdma-core v44
//! (`IBVERBS_PRIVATE_34`) is declared here by hand.  Three kinds of items:
//!
//! * public libibverbs types (`infiniband/verbs.h`, installed on the build
//!   host): besides the constant assertions below, the unit test
//!   [`c_layout`] compiles a C program against the installed header and
//!   compares every size and offset we rely on;
//! * provider-private types of `libibverbs/driver.h` (not installed): sizes
//!   and offsets are derived by hand from the v44.0 field lists, which are
//!   recorded next to each assertion;
//! * kernel uverbs structs (`rdma/ib_user_verbs.h`, installed by
//!   linux-libc-dev): checked by the same unit test.
//!
//! The layouts assume an LP64 Linux target (x86_64 or aarch64), where
//! pointers, `size_t` and `long` are 8 bytes and `int`/`enum` are 4 bytes.

use core::ffi::{c_char, c_int, c_void};
use core::mem::{offset_of, size_of};
use core::sync::atomic::AtomicI32;

use rroce_proto::abi::AllocUcontextResp;

#[cfg(not(all(
    target_os = "linux",
    target_pointer_width = "64",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
compile_error!("the rroce provider layouts are only derived for 64-bit x86_64/aarch64 Linux");

// ---------------------------------------------------------------------------
// libc
// ---------------------------------------------------------------------------

/// `ENOMEM` (asm-generic/errno-base.h).
pub const ENOMEM: c_int = 12;
/// `EINVAL` (asm-generic/errno-base.h).
pub const EINVAL: c_int = 22;
/// `EIO` (asm-generic/errno-base.h).
pub const EIO: c_int = 5;
/// `EPROTO` (asm-generic/errno.h).
pub const EPROTO: c_int = 71;

unsafe extern "C" {
    /// glibc `calloc(3)`; memory from it may be released by libibverbs with
    /// `free(3)` and vice versa.
    pub fn calloc(nmemb: usize, size: usize) -> *mut c_void;
    /// glibc `free(3)`.
    pub fn free(ptr: *mut c_void);
    /// glibc `close(2)` wrapper.
    pub fn close(fd: c_int) -> c_int;
    /// glibc's per-thread `errno` location.
    pub fn __errno_location() -> *mut c_int;
}

// ---------------------------------------------------------------------------
// Public libibverbs types (infiniband/verbs.h, v44.0 == installed header)
// ---------------------------------------------------------------------------

/// `IBV_SYSFS_NAME_MAX`.
pub const IBV_SYSFS_NAME_MAX: usize = 64;
/// `IBV_SYSFS_PATH_MAX`.
pub const IBV_SYSFS_PATH_MAX: usize = 256;

/// `struct ibv_device`.
///
/// Fields: `struct _ibv_device_ops _ops` (two obsolete function pointers,
/// 16 bytes) @0, `enum ibv_node_type node_type` @16, `enum ibv_transport_type
/// transport_type` @20, `char name[64]` @24, `char dev_name[64]` @88,
/// `char dev_path[256]` @152, `char ibdev_path[256]` @408; size 664, align 8.
#[repr(C)]
pub struct IbvDevice {
    pub _ops: [*mut c_void; 2],
    pub node_type: c_int,
    pub transport_type: c_int,
    pub name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
}
const _: () = assert!(offset_of!(IbvDevice, node_type) == 16);
const _: () = assert!(offset_of!(IbvDevice, transport_type) == 20);
const _: () = assert!(offset_of!(IbvDevice, name) == 24);
const _: () = assert!(offset_of!(IbvDevice, dev_name) == 88);
const _: () = assert!(offset_of!(IbvDevice, dev_path) == 152);
const _: () = assert!(offset_of!(IbvDevice, ibdev_path) == 408);
const _: () = assert!(size_of::<IbvDevice>() == 664);

/// Number of function-pointer slots in `struct ibv_context_ops`.
///
/// `_compat_query_device`, `_compat_query_port`, `_compat_alloc_pd`,
/// `_compat_dealloc_pd`, `_compat_reg_mr`, `_compat_rereg_mr`,
/// `_compat_dereg_mr`, `alloc_mw`, `bind_mw`, `dealloc_mw`,
/// `_compat_create_cq`, `poll_cq`, `req_notify_cq`, `_compat_cq_event`,
/// `_compat_resize_cq`, `_compat_destroy_cq`, `_compat_create_srq`,
/// `_compat_modify_srq`, `_compat_query_srq`, `_compat_destroy_srq`,
/// `post_srq_recv`, `_compat_create_qp`, `_compat_query_qp`,
/// `_compat_modify_qp`, `_compat_destroy_qp`, `post_send`, `post_recv`,
/// `_compat_create_ah`, `_compat_destroy_ah`, `_compat_attach_mcast`,
/// `_compat_detach_mcast`, `_compat_async_event`: 32 pointers, 256 bytes.
pub const IBV_CONTEXT_OPS_SLOTS: usize = 32;

/// Size of glibc's `pthread_mutex_t` (`__SIZEOF_PTHREAD_MUTEX_T`).
#[cfg(target_arch = "x86_64")]
pub const PTHREAD_MUTEX_SIZE: usize = 40;
/// Size of glibc's `pthread_mutex_t` (`__SIZEOF_PTHREAD_MUTEX_T`).
#[cfg(target_arch = "aarch64")]
pub const PTHREAD_MUTEX_SIZE: usize = 48;

/// glibc `pthread_mutex_t`: an opaque, 8-byte aligned blob.
#[repr(C)]
pub struct PthreadMutex {
    _opaque: [u64; PTHREAD_MUTEX_SIZE / 8],
}
const _: () = assert!(size_of::<PthreadMutex>() == PTHREAD_MUTEX_SIZE);

/// `struct ibv_context`.
///
/// Fields: `struct ibv_device *device` @0, `struct ibv_context_ops ops`
/// (32 pointers) @8, `int cmd_fd` @264, `int async_fd` @268,
/// `int num_comp_vectors` @272, 4 bytes padding, `pthread_mutex_t mutex` @280,
/// `void *abi_compat` @280+mutex; size 328 on x86_64 (40-byte mutex).
#[repr(C)]
pub struct IbvContext {
    pub device: *mut IbvDevice,
    pub ops: [*mut c_void; IBV_CONTEXT_OPS_SLOTS],
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: PthreadMutex,
    pub abi_compat: *mut c_void,
}
const _: () = assert!(offset_of!(IbvContext, ops) == 8);
const _: () = assert!(offset_of!(IbvContext, cmd_fd) == 264);
const _: () = assert!(offset_of!(IbvContext, async_fd) == 268);
const _: () = assert!(offset_of!(IbvContext, num_comp_vectors) == 272);
const _: () = assert!(offset_of!(IbvContext, mutex) == 280);
const _: () = assert!(offset_of!(IbvContext, abi_compat) == 280 + PTHREAD_MUTEX_SIZE);
const _: () = assert!(size_of::<IbvContext>() == 288 + PTHREAD_MUTEX_SIZE);

/// Number of pointer-sized slots in `struct verbs_context` before
/// `_ABI_placeholder3`.
///
/// In order: `query_port`, `advise_mr`, `alloc_null_mr`, `read_counters`,
/// `attach_counters_point_flow`, `create_counters`, `destroy_counters`,
/// `reg_dm_mr`, `alloc_dm`, `free_dm`, `modify_flow_action_esp`,
/// `destroy_flow_action`, `create_flow_action_esp`, `modify_qp_rate_limit`,
/// `alloc_parent_domain`, `dealloc_td`, `alloc_td`, `modify_cq`,
/// `post_srq_ops`, `destroy_rwq_ind_table`, `create_rwq_ind_table`,
/// `destroy_wq`, `modify_wq`, `create_wq`, `query_rt_values`,
/// `create_cq_ex` (26 function pointers, slots 0..=25), `priv` (slot 26),
/// `query_device_ex` (27), `ibv_destroy_flow` (28), `ABI_placeholder2` (29),
/// `ibv_create_flow` (30), `ABI_placeholder1` (31), `open_qp` (32),
/// `create_qp_ex` (33), `get_srq_num` (34), `create_srq_ex` (35),
/// `open_xrcd` (36), `close_xrcd` (37): 38 slots, 304 bytes.
pub const VERBS_CONTEXT_SLOTS: usize = 38;
/// Slot index of `verbs_context::priv` (checked against the C header).
pub const VERBS_CONTEXT_PRIV_SLOT: usize = 26;
/// Slot index of `verbs_context::query_device_ex` (checked against C).
pub const VERBS_CONTEXT_QUERY_DEVICE_EX_SLOT: usize = 27;
/// Slot index of `verbs_context::close_xrcd` (checked against C).
pub const VERBS_CONTEXT_CLOSE_XRCD_SLOT: usize = 37;
const _: () = assert!(VERBS_CONTEXT_PRIV_SLOT < VERBS_CONTEXT_QUERY_DEVICE_EX_SLOT);
const _: () = assert!(VERBS_CONTEXT_CLOSE_XRCD_SLOT + 1 == VERBS_CONTEXT_SLOTS);

/// `struct verbs_context`: the extended context wrapping `ibv_context`.
///
/// The provider never reads the slots; libibverbs fills them in
/// `verbs_init_context`/`verbs_set_ops`.  Fields: 38 pointer slots @0,
/// `uint64_t _ABI_placeholder3` @304, `size_t sz` @312,
/// `struct ibv_context context` @320 (must be last); size 320 + 328 = 648 on
/// x86_64.
#[repr(C)]
pub struct VerbsContext {
    pub slots: [*mut c_void; VERBS_CONTEXT_SLOTS],
    pub abi_placeholder3: u64,
    pub sz: usize,
    pub context: IbvContext,
}
const _: () = assert!(offset_of!(VerbsContext, abi_placeholder3) == 304);
const _: () = assert!(offset_of!(VerbsContext, sz) == 312);
const _: () = assert!(offset_of!(VerbsContext, context) == 320);
const _: () = assert!(size_of::<VerbsContext>() == 320 + size_of::<IbvContext>());

/// `struct ibv_pd`: `struct ibv_context *context` @0, `uint32_t handle` @8;
/// size 16.
#[repr(C)]
pub struct IbvPd {
    pub context: *mut IbvContext,
    pub handle: u32,
}
const _: () = assert!(offset_of!(IbvPd, handle) == 8);
const _: () = assert!(size_of::<IbvPd>() == 16);

/// `struct ibv_port_attr`; only passed through to `ibv_cmd_query_port`.
#[repr(C)]
pub struct IbvPortAttr {
    _opaque: [u8; 0],
}

/// `struct ibv_query_device_ex_input`; only passed through.
#[repr(C)]
pub struct IbvQueryDeviceExInput {
    _opaque: [u8; 0],
}

/// `struct ibv_device_attr_ex`; only passed through, except for
/// `orig_attr.fw_ver` (see [`DEVICE_ATTR_FW_VER_OFFSET`]).
#[repr(C)]
pub struct IbvDeviceAttrEx {
    _opaque: [u8; 0],
}

/// `offsetof(struct ibv_device_attr_ex, orig_attr.fw_ver)`: `orig_attr` is
/// the first member and `char fw_ver[64]` is the first member of
/// `struct ibv_device_attr`.
pub const DEVICE_ATTR_FW_VER_OFFSET: usize = 0;
/// `sizeof(((struct ibv_device_attr *)0)->fw_ver)`.
pub const DEVICE_ATTR_FW_VER_LEN: usize = 64;
/// `sizeof(struct ibv_device_attr)`: the smallest `attr_size` that
/// `ibv_cmd_query_device_any` accepts (so `fw_ver` is always in bounds after
/// it succeeded).
pub const IBV_DEVICE_ATTR_SIZE: usize = 232;
const _: () = assert!(DEVICE_ATTR_FW_VER_OFFSET + DEVICE_ATTR_FW_VER_LEN <= IBV_DEVICE_ATTR_SIZE);

// ---------------------------------------------------------------------------
// Provider-private libibverbs types (libibverbs/driver.h of v44.0)
// ---------------------------------------------------------------------------

/// `struct list_node` of ccan/list.h: `next` @0, `prev` @8; size 16.
#[repr(C)]
pub struct ListNode {
    pub next: *mut ListNode,
    pub prev: *mut ListNode,
}
const _: () = assert!(size_of::<ListNode>() == 16);

/// `struct verbs_sysfs_dev`; the provider does not look inside.
#[repr(C)]
pub struct VerbsSysfsDev {
    _opaque: [u8; 0],
}

/// `VERBS_MATCH_SENTINEL`: end of a match table.
pub const VERBS_MATCH_SENTINEL: u8 = 0;
/// `VERBS_MATCH_MODALIAS`: `u.modalias` is an fnmatch(3) pattern.
pub const VERBS_MATCH_MODALIAS: u8 = 2;

/// The anonymous union in `struct verbs_match_ent`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union VerbsMatchKey {
    pub modalias: *const c_char,
    pub driver_id: u64,
}

/// `struct verbs_match_ent`.
///
/// Fields: `void *driver_data` @0, union { `const char *modalias`;
/// `uint64_t driver_id` } @8, `uint16_t vendor` @16, `uint16_t device` @18,
/// `uint8_t kind` @20, 3 bytes tail padding; size 24, align 8.
#[repr(C)]
pub struct VerbsMatchEnt {
    pub driver_data: *mut c_void,
    pub u: VerbsMatchKey,
    pub vendor: u16,
    pub device: u16,
    pub kind: u8,
}
const _: () = assert!(offset_of!(VerbsMatchEnt, u) == 8);
const _: () = assert!(offset_of!(VerbsMatchEnt, vendor) == 16);
const _: () = assert!(offset_of!(VerbsMatchEnt, device) == 18);
const _: () = assert!(offset_of!(VerbsMatchEnt, kind) == 20);
const _: () = assert!(size_of::<VerbsMatchEnt>() == 24);

impl VerbsMatchEnt {
    /// A `VERBS_MATCH_MODALIAS` entry with a NUL-terminated fnmatch pattern.
    pub const fn modalias(pattern: &'static [u8]) -> Self {
        Self {
            driver_data: core::ptr::null_mut(),
            u: VerbsMatchKey {
                modalias: pattern.as_ptr().cast(),
            },
            vendor: 0,
            device: 0,
            kind: VERBS_MATCH_MODALIAS,
        }
    }

    /// The all-zero terminator of a match table.
    pub const SENTINEL: Self = Self {
        driver_data: core::ptr::null_mut(),
        u: VerbsMatchKey { driver_id: 0 },
        vendor: 0,
        device: 0,
        kind: VERBS_MATCH_SENTINEL,
    };
}

// SAFETY: a match entry is immutable after construction and only points at
// `'static` data (the modalias pattern); libibverbs reads it from any thread.
unsafe impl Sync for VerbsMatchEnt {}

/// `verbs_device_ops::match_device`.
pub type MatchDeviceFn = unsafe extern "C" fn(sysfs_dev: *mut VerbsSysfsDev) -> bool;
/// `verbs_device_ops::alloc_context`.
pub type AllocContextFn = unsafe extern "C" fn(
    device: *mut IbvDevice,
    cmd_fd: c_int,
    private_data: *mut c_void,
) -> *mut VerbsContext;
/// `verbs_device_ops::import_context`.
pub type ImportContextFn =
    unsafe extern "C" fn(device: *mut IbvDevice, cmd_fd: c_int) -> *mut VerbsContext;
/// `verbs_device_ops::alloc_device`.
pub type AllocDeviceFn = unsafe extern "C" fn(sysfs_dev: *mut VerbsSysfsDev) -> *mut VerbsDevice;
/// `verbs_device_ops::uninit_device`.
pub type UninitDeviceFn = unsafe extern "C" fn(device: *mut VerbsDevice);

/// `struct verbs_device_ops`.
///
/// Fields: `const char *name` @0, `uint32_t match_min_abi_version` @8,
/// `uint32_t match_max_abi_version` @12, `const struct verbs_match_ent
/// *match_table` @16, `const struct verbs_device_ops **static_providers` @24,
/// `match_device` @32, `alloc_context` @40, `import_context` @48,
/// `alloc_device` @56, `uninit_device` @64; size 72.
#[repr(C)]
pub struct VerbsDeviceOps {
    pub name: *const c_char,
    pub match_min_abi_version: u32,
    pub match_max_abi_version: u32,
    pub match_table: *const VerbsMatchEnt,
    pub static_providers: *const *const VerbsDeviceOps,
    pub match_device: Option<MatchDeviceFn>,
    pub alloc_context: Option<AllocContextFn>,
    pub import_context: Option<ImportContextFn>,
    pub alloc_device: Option<AllocDeviceFn>,
    pub uninit_device: Option<UninitDeviceFn>,
}
const _: () = assert!(offset_of!(VerbsDeviceOps, match_min_abi_version) == 8);
const _: () = assert!(offset_of!(VerbsDeviceOps, match_max_abi_version) == 12);
const _: () = assert!(offset_of!(VerbsDeviceOps, match_table) == 16);
const _: () = assert!(offset_of!(VerbsDeviceOps, static_providers) == 24);
const _: () = assert!(offset_of!(VerbsDeviceOps, match_device) == 32);
const _: () = assert!(offset_of!(VerbsDeviceOps, alloc_context) == 40);
const _: () = assert!(offset_of!(VerbsDeviceOps, import_context) == 48);
const _: () = assert!(offset_of!(VerbsDeviceOps, alloc_device) == 56);
const _: () = assert!(offset_of!(VerbsDeviceOps, uninit_device) == 64);
const _: () = assert!(size_of::<VerbsDeviceOps>() == 72);

// SAFETY: the ops table is immutable and its pointers refer to `'static`
// data (name string, match table); libibverbs reads it from any thread.
unsafe impl Sync for VerbsDeviceOps {}

/// `struct verbs_device`.
///
/// Fields: `struct ibv_device device` @0 (664 bytes, must be first),
/// `const struct verbs_device_ops *ops` @664, `atomic_int refcount` @672,
/// 4 bytes padding, `struct list_node entry` @680, `struct verbs_sysfs_dev
/// *sysfs` @696, `uint64_t core_support` @704; size 712.
///
/// libibverbs owns every field; the provider only allocates it zeroed.
#[repr(C)]
pub struct VerbsDevice {
    pub device: IbvDevice,
    pub ops: *const VerbsDeviceOps,
    pub refcount: AtomicI32,
    pub entry: ListNode,
    pub sysfs: *mut VerbsSysfsDev,
    pub core_support: u64,
}
const _: () = assert!(offset_of!(VerbsDevice, device) == 0);
const _: () = assert!(offset_of!(VerbsDevice, ops) == 664);
const _: () = assert!(offset_of!(VerbsDevice, refcount) == 672);
const _: () = assert!(offset_of!(VerbsDevice, entry) == 680);
const _: () = assert!(offset_of!(VerbsDevice, sysfs) == 696);
const _: () = assert!(offset_of!(VerbsDevice, core_support) == 704);
const _: () = assert!(size_of::<VerbsDevice>() == 712);

/// A context op the provider does not implement (always `None`).
pub type UnusedOp = Option<unsafe extern "C" fn()>;

/// `verbs_context_ops::alloc_pd`.
pub type AllocPdFn = unsafe extern "C" fn(context: *mut IbvContext) -> *mut IbvPd;
/// `verbs_context_ops::dealloc_pd`.
pub type DeallocPdFn = unsafe extern "C" fn(pd: *mut IbvPd) -> c_int;
/// `verbs_context_ops::free_context`.
pub type FreeContextFn = unsafe extern "C" fn(context: *mut IbvContext);
/// `verbs_context_ops::query_device_ex`.
pub type QueryDeviceExFn = unsafe extern "C" fn(
    context: *mut IbvContext,
    input: *const IbvQueryDeviceExInput,
    attr: *mut IbvDeviceAttrEx,
    attr_size: usize,
) -> c_int;
/// `verbs_context_ops::query_port`.
pub type QueryPortFn = unsafe extern "C" fn(
    context: *mut IbvContext,
    port_num: u8,
    port_attr: *mut IbvPortAttr,
) -> c_int;

/// `struct verbs_context_ops`: 76 function pointers, in the (alphabetical)
/// order of driver.h v44.0; size 608.  `verbs_set_ops` copies the non-NULL
/// entries into the context, NULL ones keep libibverbs' EOPNOTSUPP stubs.
#[repr(C)]
pub struct VerbsContextOps {
    pub advise_mr: UnusedOp,
    pub alloc_dm: UnusedOp,
    pub alloc_mw: UnusedOp,
    pub alloc_null_mr: UnusedOp,
    pub alloc_parent_domain: UnusedOp,
    pub alloc_pd: Option<AllocPdFn>,
    pub alloc_td: UnusedOp,
    pub async_event: UnusedOp,
    pub attach_counters_point_flow: UnusedOp,
    pub attach_mcast: UnusedOp,
    pub bind_mw: UnusedOp,
    pub close_xrcd: UnusedOp,
    pub cq_event: UnusedOp,
    pub create_ah: UnusedOp,
    pub create_counters: UnusedOp,
    pub create_cq: UnusedOp,
    pub create_cq_ex: UnusedOp,
    pub create_flow: UnusedOp,
    pub create_flow_action_esp: UnusedOp,
    pub create_qp: UnusedOp,
    pub create_qp_ex: UnusedOp,
    pub create_rwq_ind_table: UnusedOp,
    pub create_srq: UnusedOp,
    pub create_srq_ex: UnusedOp,
    pub create_wq: UnusedOp,
    pub dealloc_mw: UnusedOp,
    pub dealloc_pd: Option<DeallocPdFn>,
    pub dealloc_td: UnusedOp,
    pub dereg_mr: UnusedOp,
    pub destroy_ah: UnusedOp,
    pub destroy_counters: UnusedOp,
    pub destroy_cq: UnusedOp,
    pub destroy_flow: UnusedOp,
    pub destroy_flow_action: UnusedOp,
    pub destroy_qp: UnusedOp,
    pub destroy_rwq_ind_table: UnusedOp,
    pub destroy_srq: UnusedOp,
    pub destroy_wq: UnusedOp,
    pub detach_mcast: UnusedOp,
    pub free_context: Option<FreeContextFn>,
    pub free_dm: UnusedOp,
    pub get_srq_num: UnusedOp,
    pub import_dm: UnusedOp,
    pub import_mr: UnusedOp,
    pub import_pd: UnusedOp,
    pub modify_cq: UnusedOp,
    pub modify_flow_action_esp: UnusedOp,
    pub modify_qp: UnusedOp,
    pub modify_qp_rate_limit: UnusedOp,
    pub modify_srq: UnusedOp,
    pub modify_wq: UnusedOp,
    pub open_qp: UnusedOp,
    pub open_xrcd: UnusedOp,
    pub poll_cq: UnusedOp,
    pub post_recv: UnusedOp,
    pub post_send: UnusedOp,
    pub post_srq_ops: UnusedOp,
    pub post_srq_recv: UnusedOp,
    pub query_device_ex: Option<QueryDeviceExFn>,
    pub query_ece: UnusedOp,
    pub query_port: Option<QueryPortFn>,
    pub query_qp: UnusedOp,
    pub query_qp_data_in_order: UnusedOp,
    pub query_rt_values: UnusedOp,
    pub query_srq: UnusedOp,
    pub read_counters: UnusedOp,
    pub reg_dm_mr: UnusedOp,
    pub reg_dmabuf_mr: UnusedOp,
    pub reg_mr: UnusedOp,
    pub req_notify_cq: UnusedOp,
    pub rereg_mr: UnusedOp,
    pub resize_cq: UnusedOp,
    pub set_ece: UnusedOp,
    pub unimport_dm: UnusedOp,
    pub unimport_mr: UnusedOp,
    pub unimport_pd: UnusedOp,
}
// Index in the alphabetical list times 8.
const _: () = assert!(offset_of!(VerbsContextOps, alloc_pd) == 5 * 8);
const _: () = assert!(offset_of!(VerbsContextOps, dealloc_pd) == 26 * 8);
const _: () = assert!(offset_of!(VerbsContextOps, free_context) == 39 * 8);
const _: () = assert!(offset_of!(VerbsContextOps, query_device_ex) == 58 * 8);
const _: () = assert!(offset_of!(VerbsContextOps, query_port) == 60 * 8);
const _: () = assert!(offset_of!(VerbsContextOps, unimport_pd) == 75 * 8);
const _: () = assert!(size_of::<VerbsContextOps>() == 76 * 8);

impl VerbsContextOps {
    /// Every op NULL.
    pub const NONE: Self = {
        // SAFETY: every field is an `Option` of a function pointer, for which
        // the all-zero bit pattern is a valid `None`.
        unsafe { core::mem::zeroed() }
    };
}

// ---------------------------------------------------------------------------
// Kernel uverbs command structs (rdma/ib_user_verbs.h) and libibverbs'
// wrappers around them (libibverbs/kern-abi.h: DECLARE_CMD = header + core)
// ---------------------------------------------------------------------------

/// `struct ib_uverbs_cmd_hdr`: `u32 command`, `u16 in_words`,
/// `u16 out_words`; size 8.
#[repr(C)]
#[derive(Default)]
pub struct IbUverbsCmdHdr {
    pub command: u32,
    pub in_words: u16,
    pub out_words: u16,
}
const _: () = assert!(size_of::<IbUverbsCmdHdr>() == 8);

/// `struct ibv_get_context`: header + `struct ib_uverbs_get_context`
/// (`__aligned_u64 response`); size 16.  libibverbs fills it in.
#[repr(C)]
#[derive(Default)]
pub struct IbvGetContext {
    pub hdr: IbUverbsCmdHdr,
    pub response: u64,
}
const _: () = assert!(offset_of!(IbvGetContext, response) == 8);
const _: () = assert!(size_of::<IbvGetContext>() == 16);

/// `struct ib_uverbs_get_context_resp`: `u32 async_fd`,
/// `u32 num_comp_vectors`; size 8.
#[repr(C)]
#[derive(Default)]
pub struct IbUverbsGetContextResp {
    pub async_fd: u32,
    pub num_comp_vectors: u32,
}
const _: () = assert!(size_of::<IbUverbsGetContextResp>() == 8);

/// Response buffer handed to `ibv_cmd_get_context`: the core response
/// followed directly by rroce's driver data, which libibverbs passes to the
/// kernel as the udata output buffer (`resp_size - sizeof(core)` bytes).
#[repr(C)]
#[derive(Default)]
pub struct RroceGetContextResp {
    pub core: IbUverbsGetContextResp,
    pub drv: AllocUcontextResp,
}
const _: () = assert!(offset_of!(RroceGetContextResp, drv) == size_of::<IbUverbsGetContextResp>());
const _: () = assert!(size_of::<RroceGetContextResp>() == 8 + AllocUcontextResp::SIZE);

/// `struct ibv_query_port`: header + `struct ib_uverbs_query_port`
/// (`__aligned_u64 response`, `u8 port_num`, `u8 reserved[7]`); size 24.
#[repr(C)]
#[derive(Default)]
pub struct IbvQueryPort {
    pub hdr: IbUverbsCmdHdr,
    pub response: u64,
    pub port_num: u8,
    pub reserved: [u8; 7],
}
const _: () = assert!(offset_of!(IbvQueryPort, port_num) == 16);
const _: () = assert!(size_of::<IbvQueryPort>() == 24);

/// `struct ibv_alloc_pd`: header + `struct ib_uverbs_alloc_pd`
/// (`__aligned_u64 response`); size 16.
#[repr(C)]
#[derive(Default)]
pub struct IbvAllocPd {
    pub hdr: IbUverbsCmdHdr,
    pub response: u64,
}
const _: () = assert!(size_of::<IbvAllocPd>() == 16);

/// `struct ib_uverbs_alloc_pd_resp`: `u32 pd_handle`; size 4.
#[repr(C)]
#[derive(Default)]
pub struct IbUverbsAllocPdResp {
    pub pd_handle: u32,
}
const _: () = assert!(size_of::<IbUverbsAllocPdResp>() == 4);

/// `struct ib_uverbs_ex_query_device_resp`.
///
/// `struct ib_uverbs_query_device_resp base` (176 bytes: `__aligned_u64
/// fw_ver` @0, then GUIDs, limits and `reserved[4]`) @0, `u32 comp_mask`
/// @176, `u32 response_length` @180, then `odp_caps` (24), `timestamp_mask`,
/// `hca_core_clock`, `device_cap_flags_ex` (8 each), `rss_caps` (16),
/// `max_wq_type_rq`, `raw_packet_caps` (4 each), `tm_caps` (24),
/// `cq_moderation_caps` (8), `max_dm_size` (8), `xrc_odp_caps`, `reserved`
/// (4 each) = 120 bytes @184; size 304.  Only `base.fw_ver` is read here;
/// the rest is decoded by libibverbs.
#[repr(C)]
pub struct IbUverbsExQueryDeviceResp {
    pub fw_ver: u64,
    pub base_rest: [u8; 168],
    pub comp_mask: u32,
    pub response_length: u32,
    pub ext: [u64; 15],
}
const _: () = assert!(offset_of!(IbUverbsExQueryDeviceResp, comp_mask) == 176);
const _: () = assert!(offset_of!(IbUverbsExQueryDeviceResp, response_length) == 180);
const _: () = assert!(offset_of!(IbUverbsExQueryDeviceResp, ext) == 184);
const _: () = assert!(size_of::<IbUverbsExQueryDeviceResp>() == 304);

impl IbUverbsExQueryDeviceResp {
    /// All zero.
    pub const ZERO: Self = Self {
        fw_ver: 0,
        base_rest: [0; 168],
        comp_mask: 0,
        response_length: 0,
        ext: [0; 15],
    };
}

// ---------------------------------------------------------------------------
// libibverbs functions (all at symbol version IBVERBS_PRIVATE_34)
// ---------------------------------------------------------------------------

/// `RDMA_DRIVER_UNKNOWN` of enum rdma_driver_id: rroce has no driver id.
pub const RDMA_DRIVER_UNKNOWN: u32 = 0;

#[link(name = "ibverbs")]
unsafe extern "C" {
    /// `verbs_register_driver` for private ABI 34: appends `ops` to the
    /// driver list.  `ops` must stay valid forever.
    pub fn verbs_register_driver_34(ops: *const VerbsDeviceOps);

    /// `calloc`s `alloc_size` bytes, initialises the `verbs_context` at byte
    /// offset `context_offset` (passed as a pointer value) and takes
    /// ownership of `cmd_fd` (closed on failure).  NULL + errno on failure.
    pub fn _verbs_init_and_alloc_context(
        device: *mut IbvDevice,
        cmd_fd: c_int,
        alloc_size: usize,
        context_offset: *mut VerbsContext,
        driver_id: u32,
    ) -> *mut c_void;

    /// Releases what `_verbs_init_and_alloc_context` set up (including the
    /// command fd), but not the allocation itself.
    pub fn verbs_uninit_context(context: *mut VerbsContext);

    /// Installs the non-NULL members of `ops` in `vctx`.
    pub fn verbs_set_ops(vctx: *mut VerbsContext, ops: *const VerbsContextOps);

    /// GET_CONTEXT; `resp` may extend past the core response with driver
    /// data (`resp_size` counts both).  Returns 0 or an errno value.
    pub fn ibv_cmd_get_context(
        context: *mut VerbsContext,
        cmd: *mut IbvGetContext,
        cmd_size: usize,
        resp: *mut IbUverbsGetContextResp,
        resp_size: usize,
    ) -> c_int;

    /// QUERY_DEVICE / EX_QUERY_DEVICE into `attr`.  Returns 0 or an errno.
    pub fn ibv_cmd_query_device_any(
        context: *mut IbvContext,
        input: *const IbvQueryDeviceExInput,
        attr: *mut IbvDeviceAttrEx,
        attr_size: usize,
        resp: *mut IbUverbsExQueryDeviceResp,
        resp_size: *mut usize,
    ) -> c_int;

    /// QUERY_PORT into `port_attr`.  Returns 0 or an errno value.
    pub fn ibv_cmd_query_port(
        context: *mut IbvContext,
        port_num: u8,
        port_attr: *mut IbvPortAttr,
        cmd: *mut IbvQueryPort,
        cmd_size: usize,
    ) -> c_int;

    /// ALLOC_PD; fills `pd->handle` and `pd->context`.  Returns 0 or errno.
    pub fn ibv_cmd_alloc_pd(
        context: *mut IbvContext,
        pd: *mut IbvPd,
        cmd: *mut IbvAllocPd,
        cmd_size: usize,
        resp: *mut IbUverbsAllocPdResp,
        resp_size: usize,
    ) -> c_int;

    /// DEALLOC_PD.  Returns 0 or an errno value.
    pub fn ibv_cmd_dealloc_pd(pd: *mut IbvPd) -> c_int;
}

#[cfg(test)]
mod c_layout {
    //! Compares the layouts above with the C compiler's view of the
    //! installed `infiniband/verbs.h` and `rdma/ib_user_verbs.h`.

    use super::*;
    use std::fmt::Write as _;
    use std::process::Command;

    /// (C expression, value Rust uses).
    fn expectations() -> Vec<(&'static str, usize)> {
        const P: usize = size_of::<*const c_void>();
        vec![
            ("sizeof(void *)", P),
            ("sizeof(size_t)", size_of::<usize>()),
            ("sizeof(pthread_mutex_t)", PTHREAD_MUTEX_SIZE),
            ("ENOMEM", ENOMEM as usize),
            ("EINVAL", EINVAL as usize),
            ("EIO", EIO as usize),
            ("EPROTO", EPROTO as usize),
            ("IBV_SYSFS_NAME_MAX", IBV_SYSFS_NAME_MAX),
            ("IBV_SYSFS_PATH_MAX", IBV_SYSFS_PATH_MAX),
            // struct ibv_device
            ("sizeof(struct ibv_device)", size_of::<IbvDevice>()),
            ("sizeof(struct _ibv_device_ops)", 2 * P),
            ("offsetof(struct ibv_device, node_type)", offset_of!(IbvDevice, node_type)),
            ("offsetof(struct ibv_device, transport_type)", offset_of!(IbvDevice, transport_type)),
            ("offsetof(struct ibv_device, name)", offset_of!(IbvDevice, name)),
            ("offsetof(struct ibv_device, dev_name)", offset_of!(IbvDevice, dev_name)),
            ("offsetof(struct ibv_device, dev_path)", offset_of!(IbvDevice, dev_path)),
            ("offsetof(struct ibv_device, ibdev_path)", offset_of!(IbvDevice, ibdev_path)),
            // struct ibv_context
            ("sizeof(struct ibv_context)", size_of::<IbvContext>()),
            ("sizeof(struct ibv_context_ops)", IBV_CONTEXT_OPS_SLOTS * P),
            ("offsetof(struct ibv_context, ops)", offset_of!(IbvContext, ops)),
            ("offsetof(struct ibv_context, cmd_fd)", offset_of!(IbvContext, cmd_fd)),
            ("offsetof(struct ibv_context, async_fd)", offset_of!(IbvContext, async_fd)),
            ("offsetof(struct ibv_context, num_comp_vectors)", offset_of!(IbvContext, num_comp_vectors)),
            ("offsetof(struct ibv_context, mutex)", offset_of!(IbvContext, mutex)),
            ("offsetof(struct ibv_context, abi_compat)", offset_of!(IbvContext, abi_compat)),
            // struct verbs_context
            ("sizeof(struct verbs_context)", size_of::<VerbsContext>()),
            ("offsetof(struct verbs_context, priv)", VERBS_CONTEXT_PRIV_SLOT * P),
            ("offsetof(struct verbs_context, query_device_ex)", VERBS_CONTEXT_QUERY_DEVICE_EX_SLOT * P),
            ("offsetof(struct verbs_context, close_xrcd)", VERBS_CONTEXT_CLOSE_XRCD_SLOT * P),
            ("offsetof(struct verbs_context, _ABI_placeholder3)", offset_of!(VerbsContext, abi_placeholder3)),
            ("offsetof(struct verbs_context, sz)", offset_of!(VerbsContext, sz)),
            ("offsetof(struct verbs_context, context)", offset_of!(VerbsContext, context)),
            // struct ibv_pd
            ("sizeof(struct ibv_pd)", size_of::<IbvPd>()),
            ("offsetof(struct ibv_pd, handle)", offset_of!(IbvPd, handle)),
            // struct ibv_device_attr(_ex)
            ("offsetof(struct ibv_device_attr_ex, orig_attr.fw_ver)", DEVICE_ATTR_FW_VER_OFFSET),
            ("sizeof(((struct ibv_device_attr *)0)->fw_ver)", DEVICE_ATTR_FW_VER_LEN),
            ("sizeof(struct ibv_device_attr)", IBV_DEVICE_ATTR_SIZE),
            // kernel uverbs ABI
            ("sizeof(struct ib_uverbs_cmd_hdr)", size_of::<IbUverbsCmdHdr>()),
            ("sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_get_context)", size_of::<IbvGetContext>()),
            ("sizeof(struct ib_uverbs_get_context_resp)", size_of::<IbUverbsGetContextResp>()),
            ("sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_query_port)", size_of::<IbvQueryPort>()),
            ("sizeof(struct ib_uverbs_cmd_hdr) + offsetof(struct ib_uverbs_query_port, port_num)", offset_of!(IbvQueryPort, port_num)),
            ("sizeof(struct ib_uverbs_cmd_hdr) + sizeof(struct ib_uverbs_alloc_pd)", size_of::<IbvAllocPd>()),
            ("sizeof(struct ib_uverbs_alloc_pd_resp)", size_of::<IbUverbsAllocPdResp>()),
            ("sizeof(struct ib_uverbs_query_device_resp)", offset_of!(IbUverbsExQueryDeviceResp, comp_mask)),
            ("offsetof(struct ib_uverbs_ex_query_device_resp, base.fw_ver)", offset_of!(IbUverbsExQueryDeviceResp, fw_ver)),
            ("offsetof(struct ib_uverbs_ex_query_device_resp, comp_mask)", offset_of!(IbUverbsExQueryDeviceResp, comp_mask)),
            ("offsetof(struct ib_uverbs_ex_query_device_resp, response_length)", offset_of!(IbUverbsExQueryDeviceResp, response_length)),
            ("offsetof(struct ib_uverbs_ex_query_device_resp, odp_caps)", offset_of!(IbUverbsExQueryDeviceResp, ext)),
            ("sizeof(struct ib_uverbs_ex_query_device_resp)", size_of::<IbUverbsExQueryDeviceResp>()),
        ]
    }

    #[test]
    fn matches_installed_headers() {
        let checks = expectations();
        let mut src = String::from(
            "#include <stddef.h>\n#include <stdio.h>\n#include <errno.h>\n\
             #include <pthread.h>\n#include <infiniband/verbs.h>\n\
             #include <rdma/ib_user_verbs.h>\nint main(void)\n{\n",
        );
        for (expr, _) in &checks {
            writeln!(src, "\tprintf(\"%zu\\n\", (size_t)({expr}));").unwrap();
        }
        src.push_str("\treturn 0;\n}\n");

        let dir = std::env::temp_dir().join(format!("rroce-layout-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let c_file = dir.join("layout.c");
        let exe = dir.join("layout");
        std::fs::write(&c_file, src).unwrap();
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let status = Command::new(cc)
            .args(["-std=gnu11", "-Wall", "-Werror", "-o"])
            .arg(&exe)
            .arg(&c_file)
            .status()
            .expect("run the C compiler");
        assert!(status.success(), "compiling {} failed", c_file.display());
        let out = Command::new(&exe).output().expect("run layout program");
        assert!(out.status.success());
        let _ = std::fs::remove_dir_all(&dir);

        let stdout = String::from_utf8(out.stdout).unwrap();
        let c_values: Vec<usize> = stdout.lines().map(|l| l.parse().unwrap()).collect();
        assert_eq!(c_values.len(), checks.len());
        let mut bad = Vec::new();
        for ((expr, rust), c) in checks.iter().zip(&c_values) {
            if rust != c {
                bad.push(format!("{expr}: C says {c}, Rust uses {rust}"));
            }
        }
        assert!(bad.is_empty(), "layout mismatches:\n{}", bad.join("\n"));
    }
}
