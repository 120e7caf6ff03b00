// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Every C type and C function the provider shares with libibverbs.
//!
//! This is the only module that spells out C layouts.  Debian ships no
//! `infiniband/driver.h`, so the provider-private ABI of rdma-core v44
//! (`IBVERBS_PRIVATE_34`) is declared here by hand.
//!
//! Each `#[repr(C)]` type is followed by its [`c_layout!`] table, the one
//! place where its size and field offsets are written down.  A table
//! expands to constant assertions (a wrong number fails the build) and,
//! unless it is `private`, to rows of the C cross-check: the unit test
//! `c_layout::matches_installed_headers` compiles a C program against the
//! installed headers that evaluates each row's `sizeof`/`offsetof`
//! expression, and compares the result with the value Rust uses.  The few
//! values that are not the layout of a Rust type (enum constants, errno
//! values, pointer-slot counts, offsets into opaque C types) are written
//! once as constants here and are explicit rows of that test.  Three kinds
//! of types:
//!
//! * public libibverbs types (`infiniband/verbs.h`, installed on the build
//!   host): their tables name the C type and are cross-checked;
//! * provider-private types of `libibverbs/driver.h` (not installed) and
//!   the provider's own command/response buffers: `private` tables, checked
//!   by the assertions only; their numbers are derived by hand from the
//!   v44.0 field lists recorded in each type's documentation;
//! * kernel uverbs structs (`rdma/ib_user_verbs.h`, installed by
//!   linux-libc-dev) and libibverbs' `DECLARE_CMD` buffers built from them
//!   (header + command): cross-checked like the public libibverbs types.
//!
//! The layouts assume an LP64 Linux target (x86_64 or aarch64), where
//! pointers, `size_t` and `long` are 8 bytes and `int`/`enum` are 4 bytes.

use core::ffi::{c_char, c_int, c_void};
use core::mem::{offset_of, size_of};
use core::sync::atomic::AtomicI32;

use super::layout::c_layout;
use rroce_proto::abi::{
    AllocUcontextResp, CreateAhResp, CreateCqCmd, CreateCqResp, CreateQpCmd, CreateQpResp,
    CreateQueueCmd, CreateSrqCmd, CreateSrqResp, ModifySrqCmd, ResizeCqCmd, ResizeCqResp,
};

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
/// `ENOENT`: `start_poll`/`next_poll` found no completion.
pub const ENOENT: c_int = 2;
/// `EPROTO` (asm-generic/errno.h).
pub const EPROTO: c_int = 71;
/// `EOPNOTSUPP` (asm-generic/errno.h).
pub const EOPNOTSUPP: c_int = 95;
/// `EBUSY` (asm-generic/errno-base.h): a PD or TD still in use.
pub const EBUSY: c_int = 16;

/// `PROT_READ` (asm-generic/mman-common.h).
pub const PROT_READ: c_int = 1;
/// `PROT_WRITE`.
pub const PROT_WRITE: c_int = 2;
/// `MAP_SHARED`.
pub const MAP_SHARED: c_int = 1;
/// `MAP_FAILED`: `(void *)-1`.
pub const MAP_FAILED: *mut c_void = usize::MAX as *mut c_void;
/// `CLOCK_REALTIME`.
pub const CLOCK_REALTIME: c_int = 0;
/// `CLOCK_MONOTONIC`: the clock of the kernel's `ktime_get_ns`, which
/// stamps rroce's CQEs.
pub const CLOCK_MONOTONIC: c_int = 1;

/// `struct timespec` (LP64: `time_t` and `long` of 8 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timespec {
    pub tv_sec: i64,
    pub tv_nsec: i64,
}
c_layout! {
    Timespec = "struct timespec", size 16;
    tv_sec @ 0, tv_nsec @ 8,
}

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
    /// glibc `mmap(2)` wrapper (64-bit `off_t` on LP64).
    pub fn mmap(
        addr: *mut c_void,
        length: usize,
        prot: c_int,
        flags: c_int,
        fd: c_int,
        offset: i64,
    ) -> *mut c_void;
    /// glibc `munmap(2)` wrapper.
    pub fn munmap(addr: *mut c_void, length: usize) -> c_int;
    /// glibc `write(2)` wrapper.
    pub fn write(fd: c_int, buf: *const c_void, count: usize) -> isize;
    /// glibc `clock_gettime(2)` (vDSO).
    pub fn clock_gettime(clock: c_int, tp: *mut Timespec) -> c_int;
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
c_layout! {
    IbvDevice = "struct ibv_device", size 664;
    node_type @ 16, transport_type @ 20, name @ 24, dev_name @ 88, dev_path @ 152,
    ibdev_path @ 408,
}

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
c_layout! {
    PthreadMutex = "pthread_mutex_t", size PTHREAD_MUTEX_SIZE;
}

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
c_layout! {
    IbvContext = "struct ibv_context", size 288 + PTHREAD_MUTEX_SIZE;
    device @ 0, ops @ 8, cmd_fd @ 264, async_fd @ 268, num_comp_vectors @ 272, mutex @ 280,
    abi_compat @ 280 + PTHREAD_MUTEX_SIZE,
}

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
c_layout! {
    VerbsContext = "struct verbs_context", size 320 + size_of::<IbvContext>();
    abi_placeholder3 as "_ABI_placeholder3" @ 304, sz @ 312, context @ 320,
}

/// `struct ibv_pd`: `struct ibv_context *context` @0, `uint32_t handle` @8;
/// size 16.  A parent domain is an `ibv_pd` too, with the context and
/// kernel handle of its protection domain (driver.h's
/// `ibv_initialize_parent_domain`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvPd {
    pub context: *mut IbvContext,
    pub handle: u32,
}
c_layout! {
    IbvPd = "struct ibv_pd", size 16;
    context @ 0, handle @ 8,
}

/// `struct ibv_td`: `struct ibv_context *context` @0; size 8.
#[repr(C)]
pub struct IbvTd {
    pub context: *mut IbvContext,
}
c_layout! {
    IbvTd = "struct ibv_td", size 8;
    context @ 0,
}

/// `struct ibv_td_init_attr`: `uint32_t comp_mask` (no bit defined); size 4.
#[repr(C)]
pub struct IbvTdInitAttr {
    pub comp_mask: u32,
}
c_layout! {
    IbvTdInitAttr = "struct ibv_td_init_attr", size 4;
    comp_mask @ 0,
}

/// `IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS` of `enum
/// ibv_parent_domain_init_attr_mask`: `alloc`/`free` are valid.
pub const IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS: u32 = 1 << 0;
/// `IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT`: `pd_context` is valid.
pub const IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT: u32 = 1 << 1;
/// `IBV_ALLOCATOR_USE_DEFAULT`: `((void *)-1)`, what a parent domain's
/// `alloc` returns to ask for the provider's own allocation.
pub const IBV_ALLOCATOR_USE_DEFAULT: *mut c_void = usize::MAX as *mut c_void;

/// `ibv_parent_domain_init_attr::alloc(pd, pd_context, size, alignment,
/// resource_type)`.
pub type ParentAllocFn = unsafe extern "C" fn(
    pd: *mut IbvPd,
    pd_context: *mut c_void,
    size: usize,
    alignment: usize,
    resource_type: u64,
) -> *mut c_void;
/// `ibv_parent_domain_init_attr::free(pd, pd_context, ptr, resource_type)`.
pub type ParentFreeFn = unsafe extern "C" fn(
    pd: *mut IbvPd,
    pd_context: *mut c_void,
    ptr: *mut c_void,
    resource_type: u64,
);

/// `struct ibv_parent_domain_init_attr`: `struct ibv_pd *pd` @0, `struct
/// ibv_td *td` @8, `uint32_t comp_mask` @16, `alloc` @24, `free` @32,
/// `void *pd_context` @40; size 48.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvParentDomainInitAttr {
    pub pd: *mut IbvPd,
    pub td: *mut IbvTd,
    pub comp_mask: u32,
    pub alloc: Option<ParentAllocFn>,
    pub free: Option<ParentFreeFn>,
    pub pd_context: *mut c_void,
}
c_layout! {
    IbvParentDomainInitAttr = "struct ibv_parent_domain_init_attr", size 48;
    pd @ 0, td @ 8, comp_mask @ 16, alloc @ 24, free @ 32, pd_context @ 40,
}

/// Size of glibc's `pthread_cond_t` (`__SIZEOF_PTHREAD_COND_T`, 48 on every
/// 64-bit target).
pub const PTHREAD_COND_SIZE: usize = 48;

/// glibc `pthread_cond_t`: an opaque, 8-byte aligned blob.
#[repr(C)]
pub struct PthreadCond {
    _opaque: [u64; PTHREAD_COND_SIZE / 8],
}
c_layout! {
    PthreadCond = "pthread_cond_t", size PTHREAD_COND_SIZE;
}

/// `struct ibv_comp_channel`; only passed through.
#[repr(C)]
pub struct IbvCompChannel {
    _opaque: [u8; 0],
}

/// `struct ibv_cq`.
///
/// Fields: `struct ibv_context *context` @0, `struct ibv_comp_channel
/// *channel` @8, `void *cq_context` @16, `uint32_t handle` @24, `int cqe`
/// @28, `pthread_mutex_t mutex` @32, `pthread_cond_t cond` @32+mutex,
/// `uint32_t comp_events_completed`, `uint32_t async_events_completed`;
/// size 128 on x86_64.  libibverbs fills every field but `cqe`/`handle`
/// (set by `ibv_cmd_create_cq`).
#[repr(C)]
pub struct IbvCq {
    pub context: *mut IbvContext,
    pub channel: *mut IbvCompChannel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: PthreadMutex,
    pub cond: PthreadCond,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}
c_layout! {
    IbvCq = "struct ibv_cq", size 40 + PTHREAD_MUTEX_SIZE + 48;
    context @ 0, channel @ 8, cq_context @ 16, handle @ 24, cqe @ 28, mutex @ 32,
    cond @ 32 + PTHREAD_MUTEX_SIZE,
    comp_events_completed @ 32 + PTHREAD_MUTEX_SIZE + 48,
    async_events_completed @ 36 + PTHREAD_MUTEX_SIZE + 48,
}

/// `enum ibv_create_cq_wc_flags`: `IBV_WC_EX_WITH_BYTE_LEN`.
pub const IBV_WC_EX_WITH_BYTE_LEN: u64 = 1 << 0;
/// `IBV_WC_EX_WITH_IMM`.
pub const IBV_WC_EX_WITH_IMM: u64 = 1 << 1;
/// `IBV_WC_EX_WITH_QP_NUM`.
pub const IBV_WC_EX_WITH_QP_NUM: u64 = 1 << 2;
/// `IBV_WC_EX_WITH_SRC_QP`.
pub const IBV_WC_EX_WITH_SRC_QP: u64 = 1 << 3;
/// `IBV_WC_EX_WITH_SLID`.
pub const IBV_WC_EX_WITH_SLID: u64 = 1 << 4;
/// `IBV_WC_EX_WITH_SL`.
pub const IBV_WC_EX_WITH_SL: u64 = 1 << 5;
/// `IBV_WC_EX_WITH_DLID_PATH_BITS`.
pub const IBV_WC_EX_WITH_DLID_PATH_BITS: u64 = 1 << 6;
/// `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`.
pub const IBV_WC_EX_WITH_COMPLETION_TIMESTAMP: u64 = 1 << 7;
/// `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK`.
pub const IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK: u64 = 1 << 11;
/// `IBV_WC_STANDARD_FLAGS`: the seven above.
pub const IBV_WC_STANDARD_FLAGS: u64 = IBV_WC_EX_WITH_BYTE_LEN
    | IBV_WC_EX_WITH_IMM
    | IBV_WC_EX_WITH_QP_NUM
    | IBV_WC_EX_WITH_SRC_QP
    | IBV_WC_EX_WITH_SLID
    | IBV_WC_EX_WITH_SL
    | IBV_WC_EX_WITH_DLID_PATH_BITS;

/// `IBV_CQ_INIT_ATTR_MASK_FLAGS` of `enum ibv_cq_init_attr_mask`.
pub const IBV_CQ_INIT_ATTR_MASK_FLAGS: u32 = 1 << 0;
/// `IBV_CQ_INIT_ATTR_MASK_PD`: `parent_domain` is valid (and must be a
/// parent domain).
pub const IBV_CQ_INIT_ATTR_MASK_PD: u32 = 1 << 1;
/// `IBV_CREATE_CQ_ATTR_SINGLE_THREADED` of `enum ibv_create_cq_attr_flags`.
pub const IBV_CREATE_CQ_ATTR_SINGLE_THREADED: u32 = 1 << 0;

/// `struct ibv_cq_init_attr_ex`: `uint32_t cqe` @0, `cq_context` @8,
/// `channel` @16, `uint32_t comp_vector` @24, `uint64_t wc_flags` @32,
/// `uint32_t comp_mask` @40, `uint32_t flags` @44, `parent_domain` @48;
/// size 56.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvCqInitAttrEx {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut IbvCompChannel,
    pub comp_vector: u32,
    pub wc_flags: u64,
    pub comp_mask: u32,
    pub flags: u32,
    pub parent_domain: *mut IbvPd,
}
c_layout! {
    IbvCqInitAttrEx = "struct ibv_cq_init_attr_ex", size 56;
    cqe @ 0, cq_context @ 8, channel @ 16, comp_vector @ 24, wc_flags @ 32, comp_mask @ 40,
    flags @ 44, parent_domain @ 48,
}

/// `struct ibv_poll_cq_attr`: `uint32_t comp_mask` (must be 0).
#[repr(C)]
pub struct IbvPollCqAttr {
    pub comp_mask: u32,
}
c_layout! {
    IbvPollCqAttr = "struct ibv_poll_cq_attr", size 4;
    comp_mask @ 0,
}

/// `start_poll(cq, attr)`.
pub type StartPollFn = unsafe extern "C" fn(cq: *mut IbvCqEx, attr: *mut IbvPollCqAttr) -> c_int;
/// `next_poll(cq)`.
pub type NextPollFn = unsafe extern "C" fn(cq: *mut IbvCqEx) -> c_int;
/// `end_poll(cq)`.
pub type EndPollFn = unsafe extern "C" fn(cq: *mut IbvCqEx);
/// `read_*` returning a 32-bit value (`read_opcode` returns an enum).
pub type ReadU32Fn = unsafe extern "C" fn(cq: *mut IbvCqEx) -> u32;
/// `read_*` returning a 8-bit value.
pub type ReadU8Fn = unsafe extern "C" fn(cq: *mut IbvCqEx) -> u8;
/// `read_completion_ts`/`read_completion_wallclock_ns`.
pub type ReadU64Fn = unsafe extern "C" fn(cq: *mut IbvCqEx) -> u64;

/// `struct ibv_cq_ex` (verbs.h of rdma-core 44): the fields of `ibv_cq`,
/// `uint32_t comp_mask`, `enum ibv_wc_status status`, `uint64_t wr_id`,
/// then 18 function pointers.  Readers of fields the provider does not
/// offer (cvlan, flow tag, TM info) stay NULL.
#[repr(C)]
pub struct IbvCqEx {
    pub cq: IbvCq,
    pub comp_mask: u32,
    pub status: c_int,
    pub wr_id: u64,
    pub start_poll: Option<StartPollFn>,
    pub next_poll: Option<NextPollFn>,
    pub end_poll: Option<EndPollFn>,
    pub read_opcode: Option<ReadU32Fn>,
    pub read_vendor_err: Option<ReadU32Fn>,
    pub read_byte_len: Option<ReadU32Fn>,
    pub read_imm_data: Option<ReadU32Fn>,
    pub read_qp_num: Option<ReadU32Fn>,
    pub read_src_qp: Option<ReadU32Fn>,
    pub read_wc_flags: Option<ReadU32Fn>,
    pub read_slid: Option<ReadU32Fn>,
    pub read_sl: Option<ReadU8Fn>,
    pub read_dlid_path_bits: Option<ReadU8Fn>,
    pub read_completion_ts: Option<ReadU64Fn>,
    pub read_cvlan: UnusedOp,
    pub read_flow_tag: UnusedOp,
    pub read_tm_info: UnusedOp,
    pub read_completion_wallclock_ns: Option<ReadU64Fn>,
}
c_layout! {
    IbvCqEx = "struct ibv_cq_ex", size size_of::<IbvCq>() + 16 + 18 * 8;
    comp_mask @ size_of::<IbvCq>(),
    status @ size_of::<IbvCq>() + 4,
    wr_id @ size_of::<IbvCq>() + 8,
    start_poll @ size_of::<IbvCq>() + 16,
    next_poll @ size_of::<IbvCq>() + 16 + 8,
    end_poll @ size_of::<IbvCq>() + 16 + 2 * 8,
    read_opcode @ size_of::<IbvCq>() + 16 + 3 * 8,
    read_vendor_err @ size_of::<IbvCq>() + 16 + 4 * 8,
    read_byte_len @ size_of::<IbvCq>() + 16 + 5 * 8,
    read_imm_data @ size_of::<IbvCq>() + 16 + 6 * 8,
    read_qp_num @ size_of::<IbvCq>() + 16 + 7 * 8,
    read_src_qp @ size_of::<IbvCq>() + 16 + 8 * 8,
    read_wc_flags @ size_of::<IbvCq>() + 16 + 9 * 8,
    read_slid @ size_of::<IbvCq>() + 16 + 10 * 8,
    read_sl @ size_of::<IbvCq>() + 16 + 11 * 8,
    read_dlid_path_bits @ size_of::<IbvCq>() + 16 + 12 * 8,
    read_completion_ts @ size_of::<IbvCq>() + 16 + 13 * 8,
    read_cvlan @ size_of::<IbvCq>() + 16 + 14 * 8,
    read_flow_tag @ size_of::<IbvCq>() + 16 + 15 * 8,
    read_tm_info @ size_of::<IbvCq>() + 16 + 16 * 8,
    read_completion_wallclock_ns @ size_of::<IbvCq>() + 16 + 17 * 8,
}

/// `enum ibv_qp_type` values the provider handles.
pub const IBV_QPT_RC: c_int = 2;
/// `IBV_QPT_UC`.
pub const IBV_QPT_UC: c_int = 3;
/// `IBV_QPT_UD`.
pub const IBV_QPT_UD: c_int = 4;
/// `IBV_QPT_XRC_SEND`: an XRC initiator (send queue only).
pub const IBV_QPT_XRC_SEND: c_int = 9;
/// `IBV_QPT_XRC_RECV`: an XRC target (no queues of its own).
pub const IBV_QPT_XRC_RECV: c_int = 10;

/// `enum ibv_qp_state`: `IBV_QPS_RESET`.
pub const IBV_QPS_RESET: c_int = 0;
/// `IBV_QPS_RTS`.
pub const IBV_QPS_RTS: c_int = 3;

/// `struct ibv_qp`.
///
/// Fields: `context` @0, `qp_context` @8, `pd` @16, `send_cq` @24,
/// `recv_cq` @32, `srq` @40 (pointers), `uint32_t handle` @48,
/// `uint32_t qp_num` @52, `enum ibv_qp_state state` @56, `enum ibv_qp_type
/// qp_type` @60, `pthread_mutex_t mutex` @64, `pthread_cond_t cond`,
/// `uint32_t events_completed`; size 160 on x86_64.
#[repr(C)]
pub struct IbvQp {
    pub context: *mut IbvContext,
    pub qp_context: *mut c_void,
    pub pd: *mut IbvPd,
    pub send_cq: *mut IbvCq,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut c_void,
    pub handle: u32,
    pub qp_num: u32,
    pub state: c_int,
    pub qp_type: c_int,
    pub mutex: PthreadMutex,
    pub cond: PthreadCond,
    pub events_completed: u32,
}
c_layout! {
    IbvQp = "struct ibv_qp", size 64 + PTHREAD_MUTEX_SIZE + 56;
    context @ 0, qp_context @ 8, pd @ 16, send_cq @ 24, recv_cq @ 32, srq @ 40, handle @ 48,
    qp_num @ 52, state @ 56, qp_type @ 60, mutex @ 64,
    cond @ 64 + PTHREAD_MUTEX_SIZE,
    events_completed @ 64 + PTHREAD_MUTEX_SIZE + 48,
}

/// Bytes of `struct ibv_qp_ex` after its first member `struct ibv_qp
/// qp_base`: `uint64_t comp_mask`, `uint64_t wr_id`, `unsigned int
/// wr_flags` (padded to 8) and 21 function pointers (`wr_*`).
pub const IBV_QP_EX_TAIL: usize = 8 + 23 * 8;

/// `void (*)(struct ibv_qp_ex *)`: `wr_send`, `wr_start`, `wr_abort`.
pub type WrFn = unsafe extern "C" fn(qp: *mut IbvQpEx);
/// `wr_complete`.
pub type WrCompleteFn = unsafe extern "C" fn(qp: *mut IbvQpEx) -> c_int;
/// `wr_send_imm(qp, __be32 imm)`.
pub type WrImmFn = unsafe extern "C" fn(qp: *mut IbvQpEx, imm: u32);
/// `wr_rdma_read`/`wr_rdma_write(qp, rkey, remote_addr)`.
pub type WrRdmaFn = unsafe extern "C" fn(qp: *mut IbvQpEx, rkey: u32, remote_addr: u64);
/// `wr_rdma_write_imm(qp, rkey, remote_addr, __be32 imm)`.
pub type WrRdmaImmFn =
    unsafe extern "C" fn(qp: *mut IbvQpEx, rkey: u32, remote_addr: u64, imm: u32);
/// `wr_atomic_cmp_swp(qp, rkey, remote_addr, compare, swap)`.
pub type WrCmpSwpFn =
    unsafe extern "C" fn(qp: *mut IbvQpEx, rkey: u32, remote_addr: u64, compare: u64, swap: u64);
/// `wr_atomic_fetch_add(qp, rkey, remote_addr, add)`.
pub type WrFetchAddFn =
    unsafe extern "C" fn(qp: *mut IbvQpEx, rkey: u32, remote_addr: u64, add: u64);
/// `wr_atomic_write(qp, rkey, remote_addr, atomic_wr)`: `atomic_wr`
/// points to the 8 bytes to write.
pub type WrAtomicWriteFn =
    unsafe extern "C" fn(qp: *mut IbvQpEx, rkey: u32, remote_addr: u64, atomic_wr: *const c_void);
/// `wr_set_ud_addr(qp, ah, remote_qpn, remote_qkey)`.
pub type WrUdAddrFn =
    unsafe extern "C" fn(qp: *mut IbvQpEx, ah: *mut IbvAh, remote_qpn: u32, remote_qkey: u32);
/// `wr_set_xrc_srqn(qp, remote_srqn)`.
pub type WrXrcSrqnFn = unsafe extern "C" fn(qp: *mut IbvQpEx, remote_srqn: u32);
/// `wr_set_inline_data(qp, addr, length)`.
pub type WrInlineFn = unsafe extern "C" fn(qp: *mut IbvQpEx, addr: *mut c_void, length: usize);
/// `wr_set_inline_data_list(qp, num_buf, buf_list)`.
pub type WrInlineListFn =
    unsafe extern "C" fn(qp: *mut IbvQpEx, num_buf: usize, list: *const IbvDataBuf);
/// `wr_set_sge(qp, lkey, addr, length)`.
pub type WrSgeFn = unsafe extern "C" fn(qp: *mut IbvQpEx, lkey: u32, addr: u64, length: u32);
/// `wr_set_sge_list(qp, num_sge, sg_list)`.
pub type WrSgeListFn = unsafe extern "C" fn(qp: *mut IbvQpEx, num_sge: usize, list: *const IbvSge);

/// `struct ibv_data_buf`: `void *addr`, `size_t length`; size 16.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct IbvDataBuf {
    pub addr: *mut c_void,
    pub length: usize,
}
c_layout! {
    IbvDataBuf = "struct ibv_data_buf", size 16;
    addr @ 0, length @ 8,
}

/// `struct ibv_qp_ex` (verbs.h of rdma-core 44): the `ibv_qp` followed by
/// the fields of the work-request API.  The unsupported operation
/// (`wr_send_tso`) stays NULL.
#[repr(C)]
pub struct IbvQpEx {
    pub qp_base: IbvQp,
    pub comp_mask: u64,
    pub wr_id: u64,
    pub wr_flags: u32,
    pub wr_atomic_cmp_swp: Option<WrCmpSwpFn>,
    pub wr_atomic_fetch_add: Option<WrFetchAddFn>,
    pub wr_bind_mw: Option<WrBindMwFn>,
    pub wr_local_inv: Option<WrInvFn>,
    pub wr_rdma_read: Option<WrRdmaFn>,
    pub wr_rdma_write: Option<WrRdmaFn>,
    pub wr_rdma_write_imm: Option<WrRdmaImmFn>,
    pub wr_send: Option<WrFn>,
    pub wr_send_imm: Option<WrImmFn>,
    pub wr_send_inv: Option<WrInvFn>,
    pub wr_send_tso: UnusedOp,
    pub wr_set_ud_addr: Option<WrUdAddrFn>,
    pub wr_set_xrc_srqn: Option<WrXrcSrqnFn>,
    pub wr_set_inline_data: Option<WrInlineFn>,
    pub wr_set_inline_data_list: Option<WrInlineListFn>,
    pub wr_set_sge: Option<WrSgeFn>,
    pub wr_set_sge_list: Option<WrSgeListFn>,
    pub wr_start: Option<WrFn>,
    pub wr_complete: Option<WrCompleteFn>,
    pub wr_abort: Option<WrFn>,
    pub wr_atomic_write: Option<WrAtomicWriteFn>,
}
c_layout! {
    IbvQpEx = "struct ibv_qp_ex", size size_of::<IbvQp>() + IBV_QP_EX_TAIL;
    qp_base @ 0,
    comp_mask @ size_of::<IbvQp>(),
    wr_id @ size_of::<IbvQp>() + 8,
    wr_flags @ size_of::<IbvQp>() + 16,
    wr_atomic_cmp_swp @ size_of::<IbvQp>() + 24,
    wr_atomic_fetch_add @ size_of::<IbvQp>() + 24 + 8,
    wr_bind_mw @ size_of::<IbvQp>() + 24 + 2 * 8,
    wr_local_inv @ size_of::<IbvQp>() + 24 + 3 * 8,
    wr_rdma_read @ size_of::<IbvQp>() + 24 + 4 * 8,
    wr_rdma_write @ size_of::<IbvQp>() + 24 + 5 * 8,
    wr_rdma_write_imm @ size_of::<IbvQp>() + 24 + 6 * 8,
    wr_send @ size_of::<IbvQp>() + 24 + 7 * 8,
    wr_send_imm @ size_of::<IbvQp>() + 24 + 8 * 8,
    wr_send_inv @ size_of::<IbvQp>() + 24 + 9 * 8,
    wr_send_tso @ size_of::<IbvQp>() + 24 + 10 * 8,
    wr_set_ud_addr @ size_of::<IbvQp>() + 24 + 11 * 8,
    wr_set_xrc_srqn @ size_of::<IbvQp>() + 24 + 12 * 8,
    wr_set_inline_data @ size_of::<IbvQp>() + 24 + 13 * 8,
    wr_set_inline_data_list @ size_of::<IbvQp>() + 24 + 14 * 8,
    wr_set_sge @ size_of::<IbvQp>() + 24 + 15 * 8,
    wr_set_sge_list @ size_of::<IbvQp>() + 24 + 16 * 8,
    wr_start @ size_of::<IbvQp>() + 24 + 17 * 8,
    wr_complete @ size_of::<IbvQp>() + 24 + 18 * 8,
    wr_abort @ size_of::<IbvQp>() + 24 + 19 * 8,
    wr_atomic_write @ size_of::<IbvQp>() + 24 + 20 * 8,
}

/// `VERBS_QP_EX` of `enum verbs_qp_mask` (driver.h): `ibv_qp_to_qp_ex()`
/// returns the `ibv_qp_ex` only if this bit is set in `verbs_qp.comp_mask`.
pub const VERBS_QP_EX: u32 = 1 << 1;

/// `struct verbs_qp` (driver.h): `union { struct ibv_qp qp; struct
/// ibv_qp_ex qp_ex; }` @0, `uint32_t comp_mask`, `struct verbs_xrcd *xrcd`
/// (set by libibverbs for XRC QPs).
///
/// The provider always allocates the whole `verbs_qp`, zeroed, so
/// `ibv_qp_to_qp_ex()` reads `comp_mask == 0` (no `qp_ex`) from our memory
/// for a QP without the work-request API.
#[repr(C)]
pub struct VerbsQp {
    pub qp_ex: IbvQpEx,
    pub comp_mask: u32,
    pub xrcd: *mut VerbsXrcd,
}
c_layout! {
    VerbsQp = private "struct verbs_qp", size size_of::<IbvQp>() + IBV_QP_EX_TAIL + 16;
    qp_ex @ 0,
    comp_mask @ size_of::<IbvQp>() + IBV_QP_EX_TAIL,
    xrcd @ size_of::<IbvQp>() + IBV_QP_EX_TAIL + 8,
}

/// `struct ibv_qp_cap`: five `uint32_t`; size 20.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IbvQpCap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}
c_layout! {
    IbvQpCap = "struct ibv_qp_cap", size 20;
    max_send_wr @ 0, max_recv_wr @ 4, max_send_sge @ 8, max_recv_sge @ 12, max_inline_data @ 16,
}

/// `struct ibv_qp_init_attr`.
///
/// Fields: `qp_context` @0, `send_cq` @8, `recv_cq` @16, `srq` @24,
/// `struct ibv_qp_cap cap` @32, `enum ibv_qp_type qp_type` @52,
/// `int sq_sig_all` @56; size 64.
#[repr(C)]
pub struct IbvQpInitAttr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut IbvCq,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut c_void,
    pub cap: IbvQpCap,
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
}
c_layout! {
    IbvQpInitAttr = "struct ibv_qp_init_attr", size 64;
    qp_context @ 0, send_cq @ 8, recv_cq @ 16, srq @ 24, cap @ 32, qp_type @ 52,
    sq_sig_all @ 56,
}

/// `IBV_QP_INIT_ATTR_PD` of `enum ibv_qp_init_attr_mask`.
pub const IBV_QP_INIT_ATTR_PD: u32 = 1 << 0;
/// `IBV_QP_INIT_ATTR_XRCD`: `xrcd` is valid (an XRC_RECV QP's domain).
pub const IBV_QP_INIT_ATTR_XRCD: u32 = 1 << 1;
/// `IBV_QP_INIT_ATTR_CREATE_FLAGS`.
pub const IBV_QP_INIT_ATTR_CREATE_FLAGS: u32 = 1 << 2;
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
pub const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;

/// `enum ibv_qp_create_send_ops_flags`: `IBV_QP_EX_WITH_RDMA_WRITE`.
pub const IBV_QP_EX_WITH_RDMA_WRITE: u64 = 1 << 0;
/// `IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM`.
pub const IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM: u64 = 1 << 1;
/// `IBV_QP_EX_WITH_SEND`.
pub const IBV_QP_EX_WITH_SEND: u64 = 1 << 2;
/// `IBV_QP_EX_WITH_SEND_WITH_IMM`.
pub const IBV_QP_EX_WITH_SEND_WITH_IMM: u64 = 1 << 3;
/// `IBV_QP_EX_WITH_RDMA_READ`.
pub const IBV_QP_EX_WITH_RDMA_READ: u64 = 1 << 4;
/// `IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP`.
pub const IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP: u64 = 1 << 5;
/// `IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD`.
pub const IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD: u64 = 1 << 6;
/// `IBV_QP_EX_WITH_ATOMIC_WRITE`.
pub const IBV_QP_EX_WITH_ATOMIC_WRITE: u64 = 1 << 12;

/// `struct ibv_qp_init_attr_ex`: the fields of `ibv_qp_init_attr` @0..60,
/// `uint32_t comp_mask` @60, `pd` @64, `xrcd` @72, `uint32_t create_flags`
/// @80, `uint16_t max_tso_header` @84, `rwq_ind_tbl` @88, `struct
/// ibv_rx_hash_conf` (24 bytes) @96, `uint32_t source_qpn` @120, `uint64_t
/// send_ops_flags` @128; size 136.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvQpInitAttrEx {
    pub qp_context: *mut c_void,
    pub send_cq: *mut IbvCq,
    pub recv_cq: *mut IbvCq,
    pub srq: *mut c_void,
    pub cap: IbvQpCap,
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
    pub comp_mask: u32,
    pub pd: *mut IbvPd,
    pub xrcd: *mut IbvXrcd,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut c_void,
    pub rx_hash_conf: [u64; 3],
    pub source_qpn: u32,
    pub send_ops_flags: u64,
}
c_layout! {
    IbvQpInitAttrEx = "struct ibv_qp_init_attr_ex", size 136;
    qp_context @ 0, send_cq @ 8, recv_cq @ 16, srq @ 24, cap @ 32, qp_type @ 52,
    sq_sig_all @ 56, comp_mask @ 60, pd @ 64, xrcd @ 72, create_flags @ 80,
    max_tso_header @ 84, rwq_ind_tbl @ 88, rx_hash_conf @ 96, source_qpn @ 120,
    send_ops_flags @ 128,
}

/// `IBV_QP_OPEN_ATTR_NUM` of `enum ibv_qp_open_attr_mask`: `qp_num` is
/// valid.
pub const IBV_QP_OPEN_ATTR_NUM: u32 = 1 << 0;
/// `IBV_QP_OPEN_ATTR_XRCD`: `xrcd` is valid.
pub const IBV_QP_OPEN_ATTR_XRCD: u32 = 1 << 1;
/// `IBV_QP_OPEN_ATTR_CONTEXT`: `qp_context` is valid.
pub const IBV_QP_OPEN_ATTR_CONTEXT: u32 = 1 << 2;
/// `IBV_QP_OPEN_ATTR_TYPE`: `qp_type` is valid.
pub const IBV_QP_OPEN_ATTR_TYPE: u32 = 1 << 3;

/// `struct ibv_qp_open_attr` (`ibv_open_qp`): `uint32_t comp_mask` @0,
/// `uint32_t qp_num` @4, `struct ibv_xrcd *xrcd` @8, `void *qp_context`
/// @16, `enum ibv_qp_type qp_type` @24; size 32.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvQpOpenAttr {
    pub comp_mask: u32,
    pub qp_num: u32,
    pub xrcd: *mut IbvXrcd,
    pub qp_context: *mut c_void,
    pub qp_type: c_int,
}
c_layout! {
    IbvQpOpenAttr = "struct ibv_qp_open_attr", size 32;
    comp_mask @ 0, qp_num @ 4, xrcd @ 8, qp_context @ 16, qp_type @ 24,
}

/// `struct ibv_xrcd`: `struct ibv_context *context` @0; size 8.
#[repr(C)]
pub struct IbvXrcd {
    pub context: *mut IbvContext,
}
c_layout! {
    IbvXrcd = "struct ibv_xrcd", size 8;
    context @ 0,
}

/// `struct ibv_xrcd_init_attr`; only passed through to
/// `ibv_cmd_open_xrcd`, which checks it.
#[repr(C)]
pub struct IbvXrcdInitAttr {
    _opaque: [u8; 0],
}

/// `struct ibv_qp_attr`; opaque except for `cap`.
#[repr(C)]
pub struct IbvQpAttr {
    _opaque: [u8; 0],
}

/// `offsetof(struct ibv_qp_attr, qp_state)`: the first field (an enum).
pub const QP_ATTR_STATE_OFFSET: usize = 0;

/// `enum ibv_qp_attr_mask`: `IBV_QP_STATE`.
pub const IBV_QP_STATE: c_int = 1;

/// `offsetof(struct ibv_qp_attr, cap)`: after four enums and five
/// `uint32_t`/`unsigned int` fields.
pub const QP_ATTR_CAP_OFFSET: usize = 36;

/// `struct ibv_sge`: `uint64_t addr`, `uint32_t length`, `uint32_t lkey`;
/// size 16.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct IbvSge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}
c_layout! {
    IbvSge = "struct ibv_sge", size 16;
    addr @ 0, length @ 8, lkey @ 12,
}

/// `wr.rdma` of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvSendWrRdma {
    pub remote_addr: u64,
    pub rkey: u32,
}
c_layout! {
    IbvSendWrRdma = "wr.rdma" in "struct ibv_send_wr" @ offset_of!(IbvSendWr, wr), size 16;
    remote_addr @ 0, rkey @ 8,
}

/// `wr.atomic` of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvSendWrAtomic {
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
}
c_layout! {
    IbvSendWrAtomic = "wr.atomic" in "struct ibv_send_wr" @ offset_of!(IbvSendWr, wr), size 32;
    remote_addr @ 0, compare_add @ 8, swap @ 16, rkey @ 24,
}

/// `wr.ud` of `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvSendWrUd {
    pub ah: *mut IbvAh,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}
c_layout! {
    IbvSendWrUd = "wr.ud" in "struct ibv_send_wr" @ offset_of!(IbvSendWr, wr), size 16;
    ah @ 0, remote_qpn @ 8, remote_qkey @ 12,
}

/// The `wr` union of `struct ibv_send_wr` (32 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub union IbvSendWrWr {
    pub rdma: IbvSendWrRdma,
    pub atomic: IbvSendWrAtomic,
    pub ud: IbvSendWrUd,
}
c_layout! {
    IbvSendWrWr = "wr" in "struct ibv_send_wr" @ offset_of!(IbvSendWr, wr), size 32;
    rdma @ 0, atomic @ 0, ud @ 0,
}

/// `struct ibv_send_wr`.
///
/// Fields: `uint64_t wr_id` @0, `next` @8, `sg_list` @16, `int num_sge` @24,
/// `enum ibv_wr_opcode opcode` @28, `unsigned int send_flags` @32,
/// `union { __be32 imm_data; uint32_t invalidate_rkey; }` @36, `wr` union
/// @40 (32 bytes), `qp_type` union (`xrc.remote_srqn`) @72, then the
/// `bind_mw`/`tso` union @80 (48 bytes); size 128.
#[repr(C)]
pub struct IbvSendWr {
    pub wr_id: u64,
    pub next: *mut IbvSendWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: c_int,
    pub opcode: c_int,
    pub send_flags: u32,
    /// `imm_data` (a `__be32`: its memory bytes are the wire bytes) or
    /// `invalidate_rkey` (host order).
    pub imm_data_or_inv: u32,
    pub wr: IbvSendWrWr,
    pub xrc_remote_srqn: u32,
    pub bind_mw_or_tso: IbvSendWrBindTso,
}
c_layout! {
    IbvSendWr = "struct ibv_send_wr", size 128;
    wr_id @ 0, next @ 8, sg_list @ 16, num_sge @ 24, opcode @ 28, send_flags @ 32,
    imm_data_or_inv as "imm_data" | "invalidate_rkey" @ 36,
    wr @ 40,
    xrc_remote_srqn as "qp_type.xrc.remote_srqn" @ 72,
    bind_mw_or_tso as "bind_mw" | "tso" @ 80,
}

/// `struct ibv_mw_bind_info`: `mr` @0, `uint64_t addr` @8, `uint64_t
/// length` @16, `unsigned int mw_access_flags` @24; size 32.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct IbvMwBindInfo {
    pub mr: *mut IbvMr,
    pub addr: u64,
    pub length: u64,
    pub mw_access_flags: u32,
}
c_layout! {
    IbvMwBindInfo = "struct ibv_mw_bind_info", size 32;
    mr @ 0, addr @ 8, length @ 16, mw_access_flags @ 24,
}

/// `bind_mw` of `struct ibv_send_wr`: `struct ibv_mw *mw` @0, `uint32_t
/// rkey` @8, `bind_info` @16; size 48.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct IbvSendWrBindMw {
    pub mw: *mut IbvMw,
    pub rkey: u32,
    pub bind_info: IbvMwBindInfo,
}
c_layout! {
    IbvSendWrBindMw = "bind_mw" in "struct ibv_send_wr" @ offset_of!(IbvSendWr, bind_mw_or_tso),
        size 48;
    mw @ 0, rkey @ 8, bind_info @ 16,
}

/// The `bind_mw`/`tso` union of `struct ibv_send_wr` (48 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub union IbvSendWrBindTso {
    pub bind_mw: IbvSendWrBindMw,
    pub raw: [u64; 6],
}
c_layout! {
    IbvSendWrBindTso = private, size 48;
}

/// `struct ibv_mw_bind` (the argument of `ibv_bind_mw`): `uint64_t wr_id`
/// @0, `unsigned int send_flags` @8, `bind_info` @16; size 48.
#[repr(C)]
pub struct IbvMwBind {
    pub wr_id: u64,
    pub send_flags: u32,
    pub bind_info: IbvMwBindInfo,
}
c_layout! {
    IbvMwBind = "struct ibv_mw_bind", size 48;
    wr_id @ 0, send_flags @ 8, bind_info @ 16,
}

/// `struct ibv_mw`: `context` @0, `pd` @8, `uint32_t rkey` @16, `uint32_t
/// handle` @20, `enum ibv_mw_type type` @24; size 32.
#[repr(C)]
pub struct IbvMw {
    pub context: *mut IbvContext,
    pub pd: *mut IbvPd,
    pub rkey: u32,
    pub handle: u32,
    pub mw_type: c_int,
}
c_layout! {
    IbvMw = "struct ibv_mw", size 32;
    context @ 0, pd @ 8, rkey @ 16, handle @ 20, mw_type as "type" @ 24,
}

/// `IBV_MW_TYPE_1` of `enum ibv_mw_type`.
pub const IBV_MW_TYPE_1: c_int = 1;
/// `IBV_MW_TYPE_2`.
pub const IBV_MW_TYPE_2: c_int = 2;

/// `struct ibv_alloc_mw`: header + `struct ib_uverbs_alloc_mw`
/// (`response`, `u32 pd_handle`, `u8 mw_type`, `u8 reserved[3]`); size 24.
#[repr(C)]
#[derive(Default)]
pub struct IbvAllocMw {
    pub hdr: IbUverbsCmdHdr,
    pub response: u64,
    pub pd_handle: u32,
    pub mw_type: u8,
    pub reserved: [u8; 3],
}
c_layout! {
    IbvAllocMw = "struct ib_uverbs_cmd_hdr" + "struct ib_uverbs_alloc_mw", size 24;
    response @ 8, pd_handle @ 16, mw_type @ 20,
}

/// `struct ib_uverbs_alloc_mw_resp`: `u32 mw_handle`, `u32 rkey`; size 8.
#[repr(C)]
#[derive(Default)]
pub struct IbUverbsAllocMwResp {
    pub mw_handle: u32,
    pub rkey: u32,
}
c_layout! {
    IbUverbsAllocMwResp = "struct ib_uverbs_alloc_mw_resp", size 8;
    mw_handle @ 0, rkey @ 4,
}

/// `verbs_context_ops::alloc_mw`.
pub type AllocMwFn = unsafe extern "C" fn(pd: *mut IbvPd, mw_type: c_int) -> *mut IbvMw;
/// `verbs_context_ops::dealloc_mw`.
pub type DeallocMwFn = unsafe extern "C" fn(mw: *mut IbvMw) -> c_int;
/// `verbs_context_ops::bind_mw`.
pub type BindMwFn =
    unsafe extern "C" fn(qp: *mut IbvQp, mw: *mut IbvMw, bind: *mut IbvMwBind) -> c_int;
/// `wr_bind_mw(qp, mw, rkey, bind_info)`.
pub type WrBindMwFn =
    unsafe extern "C" fn(qp: *mut IbvQpEx, mw: *mut IbvMw, rkey: u32, info: *const IbvMwBindInfo);
/// `wr_local_inv(qp, invalidate_rkey)`, `wr_send_inv(qp, invalidate_rkey)`.
pub type WrInvFn = unsafe extern "C" fn(qp: *mut IbvQpEx, invalidate_rkey: u32);

/// `IBV_QP_EX_WITH_LOCAL_INV`.
pub const IBV_QP_EX_WITH_LOCAL_INV: u64 = 1 << 7;
/// `IBV_QP_EX_WITH_BIND_MW`.
pub const IBV_QP_EX_WITH_BIND_MW: u64 = 1 << 8;
/// `IBV_QP_EX_WITH_SEND_WITH_INV`.
pub const IBV_QP_EX_WITH_SEND_WITH_INV: u64 = 1 << 9;

/// `enum ibv_send_flags` bits the provider accepts: `IBV_SEND_FENCE` 1,
/// `IBV_SEND_SIGNALED` 2, `IBV_SEND_SOLICITED` 4, `IBV_SEND_INLINE` 8 (the
/// same values as `wqe::SEND_*`).  `IBV_SEND_IP_CSUM` (16) is refused.
pub const IBV_SEND_INLINE: u32 = 8;

/// `struct ibv_recv_wr`: `wr_id` @0, `next` @8, `sg_list` @16,
/// `int num_sge` @24; size 32.
#[repr(C)]
pub struct IbvRecvWr {
    pub wr_id: u64,
    pub next: *mut IbvRecvWr,
    pub sg_list: *mut IbvSge,
    pub num_sge: c_int,
}
c_layout! {
    IbvRecvWr = "struct ibv_recv_wr", size 32;
    wr_id @ 0, next @ 8, sg_list @ 16, num_sge @ 24,
}

/// `struct ibv_srq`.
///
/// Fields: `context` @0, `srq_context` @8, `pd` @16 (pointers),
/// `uint32_t handle` @24, `pthread_mutex_t mutex` @32, `pthread_cond_t
/// cond`, `uint32_t events_completed`; size 128 on x86_64.
#[repr(C)]
pub struct IbvSrq {
    pub context: *mut IbvContext,
    pub srq_context: *mut c_void,
    pub pd: *mut IbvPd,
    pub handle: u32,
    pub mutex: PthreadMutex,
    pub cond: PthreadCond,
    pub events_completed: u32,
}
c_layout! {
    IbvSrq = "struct ibv_srq", size 32 + PTHREAD_MUTEX_SIZE + 56;
    context @ 0, srq_context @ 8, pd @ 16, handle @ 24, mutex @ 32,
    cond @ 32 + PTHREAD_MUTEX_SIZE,
    events_completed @ 32 + PTHREAD_MUTEX_SIZE + 48,
}

/// `enum ibv_srq_type`: `IBV_SRQT_BASIC`.
pub const IBV_SRQT_BASIC: c_int = 0;
/// `IBV_SRQT_XRC`.
pub const IBV_SRQT_XRC: c_int = 1;

/// `struct verbs_srq` (driver.h v44.0): `struct ibv_srq srq` @0, `enum
/// ibv_srq_type srq_type`, `struct verbs_xrcd *xrcd`, `struct ibv_cq *cq`,
/// `uint32_t srq_num` (+ 4 bytes padding); size 160 on x86_64.
/// `ibv_cmd_create_srq_ex` fills the tail (`srq_num`: the SRQ number of
/// the core response) for an XRC SRQ; the provider zeroes it (`srq_type`
/// 0: `IBV_SRQT_BASIC`).
#[repr(C)]
pub struct VerbsSrq {
    pub srq: IbvSrq,
    pub srq_type: c_int,
    pub xrcd: *mut VerbsXrcd,
    pub cq: *mut IbvCq,
    pub srq_num: u32,
}
c_layout! {
    VerbsSrq = private "struct verbs_srq", size size_of::<IbvSrq>() + 32;
    srq @ 0, srq_type @ size_of::<IbvSrq>(), xrcd @ size_of::<IbvSrq>() + 8,
    cq @ size_of::<IbvSrq>() + 16, srq_num @ size_of::<IbvSrq>() + 24,
}

/// `struct ibv_srq_attr`: `max_wr`, `max_sge`, `srq_limit`; size 12.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IbvSrqAttr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}
c_layout! {
    IbvSrqAttr = "struct ibv_srq_attr", size 12;
    max_wr @ 0, max_sge @ 4, srq_limit @ 8,
}

/// `struct ibv_srq_init_attr`: `void *srq_context` @0, `struct
/// ibv_srq_attr attr` @8; size 24.
#[repr(C)]
pub struct IbvSrqInitAttr {
    pub srq_context: *mut c_void,
    pub attr: IbvSrqAttr,
}
c_layout! {
    IbvSrqInitAttr = "struct ibv_srq_init_attr", size 24;
    srq_context @ 0, attr @ 8,
}

/// `IBV_SRQ_INIT_ATTR_TYPE` of `enum ibv_srq_init_attr_mask`.
pub const IBV_SRQ_INIT_ATTR_TYPE: u32 = 1 << 0;
/// `IBV_SRQ_INIT_ATTR_PD`.
pub const IBV_SRQ_INIT_ATTR_PD: u32 = 1 << 1;
/// `IBV_SRQ_INIT_ATTR_XRCD`.
pub const IBV_SRQ_INIT_ATTR_XRCD: u32 = 1 << 2;
/// `IBV_SRQ_INIT_ATTR_CQ`.
pub const IBV_SRQ_INIT_ATTR_CQ: u32 = 1 << 3;

/// `struct ibv_srq_init_attr_ex`: the fields of `ibv_srq_init_attr`
/// @0..20, `uint32_t comp_mask` @20, `enum ibv_srq_type srq_type` @24,
/// `pd` @32, `xrcd` @40, `cq` @48, `struct ibv_tm_cap tm_cap` (two
/// `uint32_t`) @56; size 64.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct IbvSrqInitAttrEx {
    pub srq_context: *mut c_void,
    pub attr: IbvSrqAttr,
    pub comp_mask: u32,
    pub srq_type: c_int,
    pub pd: *mut IbvPd,
    pub xrcd: *mut IbvXrcd,
    pub cq: *mut IbvCq,
    pub tm_cap: [u32; 2],
}
c_layout! {
    IbvSrqInitAttrEx = "struct ibv_srq_init_attr_ex", size 64;
    srq_context @ 0, attr @ 8, comp_mask @ 20, srq_type @ 24, pd @ 32, xrcd @ 40, cq @ 48,
    tm_cap @ 56,
}

/// `struct ibv_wc`.
///
/// Fields: `uint64_t wr_id` @0, `enum ibv_wc_status status` @8,
/// `enum ibv_wc_opcode opcode` @12, `uint32_t vendor_err` @16,
/// `uint32_t byte_len` @20, `union { __be32 imm_data; uint32_t
/// invalidated_rkey; }` @24, `uint32_t qp_num` @28, `uint32_t src_qp` @32,
/// `unsigned int wc_flags` @36, `uint16_t pkey_index` @40, `uint16_t slid`
/// @42, `uint8_t sl` @44, `uint8_t dlid_path_bits` @45; size 48.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IbvWc {
    pub wr_id: u64,
    pub status: c_int,
    pub opcode: c_int,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: u32,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}
c_layout! {
    IbvWc = "struct ibv_wc", size 48;
    wr_id @ 0, status @ 8, opcode @ 12, vendor_err @ 16, byte_len @ 20,
    imm_data as "imm_data" | "invalidated_rkey" @ 24,
    qp_num @ 28, src_qp @ 32, wc_flags @ 36, pkey_index @ 40, slid @ 42, sl @ 44,
    dlid_path_bits @ 45,
}

/// `struct ibv_mr`: `context` @0, `pd` @8, `void *addr` @16, `size_t
/// length` @24, `uint32_t handle` @32, `lkey` @36, `rkey` @40; size 48.
#[repr(C)]
pub struct IbvMr {
    pub context: *mut IbvContext,
    pub pd: *mut IbvPd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}
c_layout! {
    IbvMr = "struct ibv_mr", size 48;
    context @ 0, pd @ 8, addr @ 16, length @ 24, handle @ 32, lkey @ 36, rkey @ 40,
}

/// `struct ibv_ah`: `context` @0, `pd` @8, `uint32_t handle` @16; size 24.
#[repr(C)]
pub struct IbvAh {
    pub context: *mut IbvContext,
    pub pd: *mut IbvPd,
    pub handle: u32,
}
c_layout! {
    IbvAh = "struct ibv_ah", size 24;
    context @ 0, pd @ 8, handle @ 16,
}

/// `struct ibv_ah_attr`; only passed through to `ibv_cmd_create_ah`.
#[repr(C)]
pub struct IbvAhAttr {
    _opaque: [u8; 0],
}

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
c_layout! {
    ListNode = private "struct list_node", size 16;
    next @ 0, prev @ 8,
}

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
c_layout! {
    VerbsMatchEnt = private "struct verbs_match_ent", size 24;
    driver_data @ 0, u @ 8, vendor @ 16, device @ 18, kind @ 20,
}

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
c_layout! {
    VerbsDeviceOps = private "struct verbs_device_ops", size 72;
    name @ 0, match_min_abi_version @ 8, match_max_abi_version @ 12, match_table @ 16,
    static_providers @ 24, match_device @ 32, alloc_context @ 40, import_context @ 48,
    alloc_device @ 56, uninit_device @ 64,
}

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
c_layout! {
    VerbsDevice = private "struct verbs_device", size 712;
    device @ 0, ops @ 664, refcount @ 672, entry @ 680, sysfs @ 696, core_support @ 704,
}

/// `struct verbs_mr` (driver.h): `struct ibv_mr ibv_mr` @0, `enum
/// ibv_mr_type mr_type` @48, `int access` @52; size 56.
#[repr(C)]
pub struct VerbsMr {
    pub ibv_mr: IbvMr,
    pub mr_type: c_int,
    pub access: c_int,
}
c_layout! {
    VerbsMr = private "struct verbs_mr", size 56;
    ibv_mr @ 0, mr_type @ 48, access @ 52,
}

/// `struct verbs_xrcd` (driver.h): `struct ibv_xrcd xrcd` @0, `uint32_t
/// comp_mask` @8, `uint32_t handle` @12; size 16.  `ibv_cmd_open_xrcd`
/// fills it in.
#[repr(C)]
pub struct VerbsXrcd {
    pub xrcd: IbvXrcd,
    pub comp_mask: u32,
    pub handle: u32,
}
c_layout! {
    VerbsXrcd = private "struct verbs_xrcd", size 16;
    xrcd @ 0, comp_mask @ 8, handle @ 12,
}

/// A context op the provider does not implement (always `None`).
pub type UnusedOp = Option<unsafe extern "C" fn()>;

/// `verbs_context_ops::alloc_pd`.
pub type AllocPdFn = unsafe extern "C" fn(context: *mut IbvContext) -> *mut IbvPd;
/// `verbs_context_ops::dealloc_pd`.
pub type DeallocPdFn = unsafe extern "C" fn(pd: *mut IbvPd) -> c_int;
/// `verbs_context_ops::alloc_parent_domain`.
pub type AllocParentDomainFn = unsafe extern "C" fn(
    context: *mut IbvContext,
    attr: *mut IbvParentDomainInitAttr,
) -> *mut IbvPd;
/// `verbs_context_ops::alloc_td`.
pub type AllocTdFn =
    unsafe extern "C" fn(context: *mut IbvContext, init_attr: *mut IbvTdInitAttr) -> *mut IbvTd;
/// `verbs_context_ops::dealloc_td`.
pub type DeallocTdFn = unsafe extern "C" fn(td: *mut IbvTd) -> c_int;
/// `verbs_context_ops::free_context`.
pub type FreeContextFn = unsafe extern "C" fn(context: *mut IbvContext);
/// `IBV_VALUES_MASK_RAW_CLOCK` of `enum ibv_values_mask`.
pub const IBV_VALUES_MASK_RAW_CLOCK: u32 = 1 << 0;

/// `struct ibv_values_ex`: `uint32_t comp_mask` @0, `struct timespec
/// raw_clock` @8; size 24.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct IbvValuesEx {
    pub comp_mask: u32,
    pub raw_clock: Timespec,
}
c_layout! {
    IbvValuesEx = "struct ibv_values_ex", size 24;
    comp_mask @ 0, raw_clock @ 8,
}

/// `verbs_context_ops::query_rt_values` (`ibv_query_rt_values_ex`).
pub type QueryRtValuesFn =
    unsafe extern "C" fn(context: *mut IbvContext, values: *mut IbvValuesEx) -> c_int;
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

/// `verbs_context_ops::create_cq`.
pub type CreateCqFn = unsafe extern "C" fn(
    context: *mut IbvContext,
    cqe: c_int,
    channel: *mut IbvCompChannel,
    comp_vector: c_int,
) -> *mut IbvCq;
/// `verbs_context_ops::poll_cq`.
pub type PollCqFn =
    unsafe extern "C" fn(cq: *mut IbvCq, num_entries: c_int, wc: *mut IbvWc) -> c_int;
/// `verbs_context_ops::create_cq_ex`.
pub type CreateCqExFn =
    unsafe extern "C" fn(context: *mut IbvContext, attr: *mut IbvCqInitAttrEx) -> *mut IbvCqEx;
/// `verbs_context_ops::create_qp_ex`.
pub type CreateQpExFn =
    unsafe extern "C" fn(context: *mut IbvContext, attr: *mut IbvQpInitAttrEx) -> *mut IbvQp;
/// `verbs_context_ops::req_notify_cq`.
pub type ReqNotifyCqFn = unsafe extern "C" fn(cq: *mut IbvCq, solicited_only: c_int) -> c_int;
/// `verbs_context_ops::destroy_cq`.
pub type DestroyCqFn = unsafe extern "C" fn(cq: *mut IbvCq) -> c_int;
/// `verbs_context_ops::resize_cq`: 0 or an errno value.
pub type ResizeCqFn = unsafe extern "C" fn(cq: *mut IbvCq, cqe: c_int) -> c_int;
/// `verbs_context_ops::attach_mcast` / `detach_mcast`; `gid` points to a
/// 16-byte `union ibv_gid`.
pub type McastFn = unsafe extern "C" fn(qp: *mut IbvQp, gid: *const [u8; 16], lid: u16) -> c_int;
/// `verbs_context_ops::create_qp`.
pub type CreateQpFn = unsafe extern "C" fn(pd: *mut IbvPd, attr: *mut IbvQpInitAttr) -> *mut IbvQp;
/// `verbs_context_ops::modify_qp`.
pub type ModifyQpFn =
    unsafe extern "C" fn(qp: *mut IbvQp, attr: *mut IbvQpAttr, attr_mask: c_int) -> c_int;
/// `verbs_context_ops::query_qp`.
pub type QueryQpFn = unsafe extern "C" fn(
    qp: *mut IbvQp,
    attr: *mut IbvQpAttr,
    attr_mask: c_int,
    init_attr: *mut IbvQpInitAttr,
) -> c_int;
/// `verbs_context_ops::destroy_qp`.
pub type DestroyQpFn = unsafe extern "C" fn(qp: *mut IbvQp) -> c_int;
/// `verbs_context_ops::post_send`.
pub type PostSendFn =
    unsafe extern "C" fn(qp: *mut IbvQp, wr: *mut IbvSendWr, bad_wr: *mut *mut IbvSendWr) -> c_int;
/// `verbs_context_ops::post_recv`.
pub type PostRecvFn =
    unsafe extern "C" fn(qp: *mut IbvQp, wr: *mut IbvRecvWr, bad_wr: *mut *mut IbvRecvWr) -> c_int;
/// `verbs_context_ops::create_srq`.
pub type CreateSrqFn =
    unsafe extern "C" fn(pd: *mut IbvPd, attr: *mut IbvSrqInitAttr) -> *mut IbvSrq;
/// `verbs_context_ops::modify_srq`.
pub type ModifySrqFn =
    unsafe extern "C" fn(srq: *mut IbvSrq, attr: *mut IbvSrqAttr, attr_mask: c_int) -> c_int;
/// `verbs_context_ops::query_srq`.
pub type QuerySrqFn = unsafe extern "C" fn(srq: *mut IbvSrq, attr: *mut IbvSrqAttr) -> c_int;
/// `verbs_context_ops::destroy_srq`.
pub type DestroySrqFn = unsafe extern "C" fn(srq: *mut IbvSrq) -> c_int;
/// `verbs_context_ops::create_srq_ex`.
pub type CreateSrqExFn =
    unsafe extern "C" fn(context: *mut IbvContext, attr: *mut IbvSrqInitAttrEx) -> *mut IbvSrq;
/// `verbs_context_ops::get_srq_num`.
pub type GetSrqNumFn = unsafe extern "C" fn(srq: *mut IbvSrq, srq_num: *mut u32) -> c_int;
/// `verbs_context_ops::open_xrcd`.
pub type OpenXrcdFn =
    unsafe extern "C" fn(context: *mut IbvContext, attr: *mut IbvXrcdInitAttr) -> *mut IbvXrcd;
/// `verbs_context_ops::close_xrcd`.
pub type CloseXrcdFn = unsafe extern "C" fn(xrcd: *mut IbvXrcd) -> c_int;
/// `verbs_context_ops::open_qp`.
pub type OpenQpFn =
    unsafe extern "C" fn(context: *mut IbvContext, attr: *mut IbvQpOpenAttr) -> *mut IbvQp;
/// `verbs_context_ops::post_srq_recv`.
pub type PostSrqRecvFn = unsafe extern "C" fn(
    srq: *mut IbvSrq,
    wr: *mut IbvRecvWr,
    bad_wr: *mut *mut IbvRecvWr,
) -> c_int;
/// `verbs_context_ops::reg_mr`.
pub type RegMrFn = unsafe extern "C" fn(
    pd: *mut IbvPd,
    addr: *mut c_void,
    length: usize,
    hca_va: u64,
    access: c_int,
) -> *mut IbvMr;
/// `verbs_context_ops::rereg_mr`: 0 or an errno value.
pub type ReregMrFn = unsafe extern "C" fn(
    vmr: *mut VerbsMr,
    flags: c_int,
    pd: *mut IbvPd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int;
/// `verbs_context_ops::import_pd`.
pub type ImportPdFn = unsafe extern "C" fn(context: *mut IbvContext, pd_handle: u32) -> *mut IbvPd;
/// `verbs_context_ops::unimport_pd`.
pub type UnimportPdFn = unsafe extern "C" fn(pd: *mut IbvPd);
/// `verbs_context_ops::import_mr`.
pub type ImportMrFn = unsafe extern "C" fn(pd: *mut IbvPd, mr_handle: u32) -> *mut IbvMr;
/// `verbs_context_ops::unimport_mr`.
pub type UnimportMrFn = unsafe extern "C" fn(mr: *mut IbvMr);
/// `verbs_context_ops::advise_mr` (`advice` is `enum ibv_advise_mr_advice`).
pub type AdviseMrFn = unsafe extern "C" fn(
    pd: *mut IbvPd,
    advice: c_int,
    flags: u32,
    sg_list: *mut IbvSge,
    num_sge: u32,
) -> c_int;
/// `verbs_context_ops::dereg_mr`.
pub type DeregMrFn = unsafe extern "C" fn(vmr: *mut VerbsMr) -> c_int;
/// `verbs_context_ops::create_ah`.
pub type CreateAhFn = unsafe extern "C" fn(pd: *mut IbvPd, attr: *mut IbvAhAttr) -> *mut IbvAh;
/// `verbs_context_ops::destroy_ah`.
pub type DestroyAhFn = unsafe extern "C" fn(ah: *mut IbvAh) -> c_int;

/// `struct verbs_context_ops`: 76 function pointers, in the (alphabetical)
/// order of driver.h v44.0; size 608.  `verbs_set_ops` copies the non-NULL
/// entries into the context, NULL ones keep libibverbs' EOPNOTSUPP stubs.
#[repr(C)]
pub struct VerbsContextOps {
    pub advise_mr: Option<AdviseMrFn>,
    pub alloc_dm: UnusedOp,
    pub alloc_mw: Option<AllocMwFn>,
    pub alloc_null_mr: UnusedOp,
    pub alloc_parent_domain: Option<AllocParentDomainFn>,
    pub alloc_pd: Option<AllocPdFn>,
    pub alloc_td: Option<AllocTdFn>,
    pub async_event: UnusedOp,
    pub attach_counters_point_flow: UnusedOp,
    pub attach_mcast: Option<McastFn>,
    pub bind_mw: Option<BindMwFn>,
    pub close_xrcd: Option<CloseXrcdFn>,
    pub cq_event: UnusedOp,
    pub create_ah: Option<CreateAhFn>,
    pub create_counters: UnusedOp,
    pub create_cq: Option<CreateCqFn>,
    pub create_cq_ex: Option<CreateCqExFn>,
    pub create_flow: UnusedOp,
    pub create_flow_action_esp: UnusedOp,
    pub create_qp: Option<CreateQpFn>,
    pub create_qp_ex: Option<CreateQpExFn>,
    pub create_rwq_ind_table: UnusedOp,
    pub create_srq: Option<CreateSrqFn>,
    pub create_srq_ex: Option<CreateSrqExFn>,
    pub create_wq: UnusedOp,
    pub dealloc_mw: Option<DeallocMwFn>,
    pub dealloc_pd: Option<DeallocPdFn>,
    pub dealloc_td: Option<DeallocTdFn>,
    pub dereg_mr: Option<DeregMrFn>,
    pub destroy_ah: Option<DestroyAhFn>,
    pub destroy_counters: UnusedOp,
    pub destroy_cq: Option<DestroyCqFn>,
    pub destroy_flow: UnusedOp,
    pub destroy_flow_action: UnusedOp,
    pub destroy_qp: Option<DestroyQpFn>,
    pub destroy_rwq_ind_table: UnusedOp,
    pub destroy_srq: Option<DestroySrqFn>,
    pub destroy_wq: UnusedOp,
    pub detach_mcast: Option<McastFn>,
    pub free_context: Option<FreeContextFn>,
    pub free_dm: UnusedOp,
    pub get_srq_num: Option<GetSrqNumFn>,
    pub import_dm: UnusedOp,
    pub import_mr: Option<ImportMrFn>,
    pub import_pd: Option<ImportPdFn>,
    pub modify_cq: UnusedOp,
    pub modify_flow_action_esp: UnusedOp,
    pub modify_qp: Option<ModifyQpFn>,
    pub modify_qp_rate_limit: UnusedOp,
    pub modify_srq: Option<ModifySrqFn>,
    pub modify_wq: UnusedOp,
    pub open_qp: Option<OpenQpFn>,
    pub open_xrcd: Option<OpenXrcdFn>,
    pub poll_cq: Option<PollCqFn>,
    pub post_recv: Option<PostRecvFn>,
    pub post_send: Option<PostSendFn>,
    pub post_srq_ops: UnusedOp,
    pub post_srq_recv: Option<PostSrqRecvFn>,
    pub query_device_ex: Option<QueryDeviceExFn>,
    pub query_ece: UnusedOp,
    pub query_port: Option<QueryPortFn>,
    pub query_qp: Option<QueryQpFn>,
    pub query_qp_data_in_order: UnusedOp,
    pub query_rt_values: Option<QueryRtValuesFn>,
    pub query_srq: Option<QuerySrqFn>,
    pub read_counters: UnusedOp,
    pub reg_dm_mr: UnusedOp,
    pub reg_dmabuf_mr: UnusedOp,
    pub reg_mr: Option<RegMrFn>,
    pub req_notify_cq: Option<ReqNotifyCqFn>,
    pub rereg_mr: Option<ReregMrFn>,
    pub resize_cq: Option<ResizeCqFn>,
    pub set_ece: UnusedOp,
    pub unimport_dm: UnusedOp,
    pub unimport_mr: Option<UnimportMrFn>,
    pub unimport_pd: Option<UnimportPdFn>,
}
// Index in the alphabetical list times 8.
c_layout! {
    VerbsContextOps = private "struct verbs_context_ops", size 76 * 8;
    alloc_parent_domain @ 4 * 8, alloc_pd @ 5 * 8, alloc_td @ 6 * 8, create_ah @ 13 * 8, create_cq @ 15 * 8, create_cq_ex @ 16 * 8,
    create_qp @ 19 * 8, create_qp_ex @ 20 * 8, create_srq @ 22 * 8, dealloc_pd @ 26 * 8, dealloc_td @ 27 * 8,
    dereg_mr @ 28 * 8, destroy_ah @ 29 * 8, destroy_cq @ 31 * 8, destroy_qp @ 34 * 8,
    destroy_srq @ 36 * 8, free_context @ 39 * 8, modify_qp @ 47 * 8, modify_srq @ 49 * 8,
    poll_cq @ 53 * 8, post_recv @ 54 * 8, post_send @ 55 * 8, post_srq_recv @ 57 * 8,
    query_device_ex @ 58 * 8, query_port @ 60 * 8, query_qp @ 61 * 8, query_srq @ 64 * 8,
    reg_mr @ 68 * 8, req_notify_cq @ 69 * 8, resize_cq @ 71 * 8, unimport_pd @ 75 * 8,
    close_xrcd @ 11 * 8, create_srq_ex @ 23 * 8, get_srq_num @ 41 * 8, open_qp @ 51 * 8,
    open_xrcd @ 52 * 8,
}

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
c_layout! {
    IbUverbsCmdHdr = "struct ib_uverbs_cmd_hdr", size 8;
    command @ 0, in_words @ 4, out_words @ 6,
}

/// `struct ibv_get_context`: header + `struct ib_uverbs_get_context`
/// (`__aligned_u64 response`); size 16.  libibverbs fills it in.
#[repr(C)]
#[derive(Default)]
pub struct IbvGetContext {
    pub hdr: IbUverbsCmdHdr,
    pub response: u64,
}
c_layout! {
    IbvGetContext = "struct ib_uverbs_cmd_hdr" + "struct ib_uverbs_get_context", size 16;
    response @ 8,
}

/// `struct ib_uverbs_get_context_resp`: `u32 async_fd`,
/// `u32 num_comp_vectors`; size 8.
#[repr(C)]
#[derive(Default)]
pub struct IbUverbsGetContextResp {
    pub async_fd: u32,
    pub num_comp_vectors: u32,
}
c_layout! {
    IbUverbsGetContextResp = "struct ib_uverbs_get_context_resp", size 8;
    async_fd @ 0, num_comp_vectors @ 4,
}

/// Response buffer handed to `ibv_cmd_get_context`: the core response
/// followed directly by rroce's driver data, which libibverbs passes to the
/// kernel as the udata output buffer (`resp_size - sizeof(core)` bytes).
#[repr(C)]
#[derive(Default)]
pub struct RroceGetContextResp {
    pub core: IbUverbsGetContextResp,
    pub drv: AllocUcontextResp,
}
c_layout! {
    RroceGetContextResp = private, size 8 + AllocUcontextResp::SIZE;
    drv @ size_of::<IbUverbsGetContextResp>(),
}

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
c_layout! {
    IbvQueryPort = "struct ib_uverbs_cmd_hdr" + "struct ib_uverbs_query_port", size 24;
    response @ 8, port_num @ 16,
}

/// `struct ibv_alloc_pd`: header + `struct ib_uverbs_alloc_pd`
/// (`__aligned_u64 response`); size 16.
#[repr(C)]
#[derive(Default)]
pub struct IbvAllocPd {
    pub hdr: IbUverbsCmdHdr,
    pub response: u64,
}
c_layout! {
    IbvAllocPd = "struct ib_uverbs_cmd_hdr" + "struct ib_uverbs_alloc_pd", size 16;
    response @ 8,
}

/// `struct ib_uverbs_alloc_pd_resp`: `u32 pd_handle`; size 4.
#[repr(C)]
#[derive(Default)]
pub struct IbUverbsAllocPdResp {
    pub pd_handle: u32,
}
c_layout! {
    IbUverbsAllocPdResp = "struct ib_uverbs_alloc_pd_resp", size 4;
    pd_handle @ 0,
}

/// `struct ibv_create_cq`: header + `struct ib_uverbs_create_cq`
/// (`response`, `user_handle`, `u32 cqe`, `u32 comp_vector`, `s32
/// comp_channel`, `u32 reserved`); size 40.  libibverbs fills it in.
#[repr(C)]
#[derive(Default)]
pub struct IbvCreateCq {
    pub hdr: IbUverbsCmdHdr,
    pub response: u64,
    pub user_handle: u64,
    pub cqe: u32,
    pub comp_vector: u32,
    pub comp_channel: i32,
    pub reserved: u32,
}
c_layout! {
    IbvCreateCq = "struct ib_uverbs_cmd_hdr" + "struct ib_uverbs_create_cq", size 40;
    response @ 8, user_handle @ 16, cqe @ 24, comp_vector @ 28, comp_channel @ 32,
}

/// Command buffer of `ibv_cmd_create_cq`: the core command followed by
/// rroce's driver data (`udata` in).
#[repr(C)]
#[derive(Default)]
pub struct RroceCreateCqCmd {
    pub core: IbvCreateCq,
    pub drv: CreateCqCmd,
}
c_layout! {
    RroceCreateCqCmd = private, size 40 + CreateQueueCmd::SIZE;
    drv @ size_of::<IbvCreateCq>(),
}

/// `struct ib_uverbs_create_cq_resp`: `u32 cq_handle`, `u32 cqe`, then
/// `__aligned_u64 driver_data[]`; size 8.
#[repr(C)]
#[derive(Default)]
pub struct IbUverbsCreateCqResp {
    pub cq_handle: u32,
    pub cqe: u32,
}
c_layout! {
    IbUverbsCreateCqResp = "struct ib_uverbs_create_cq_resp", size 8;
    cq_handle @ 0, cqe @ 4,
}

/// Response buffer of `ibv_cmd_create_cq`: core response + `CreateCqResp`.
#[repr(C)]
#[derive(Default)]
pub struct RroceCreateCqResp {
    pub core: IbUverbsCreateCqResp,
    pub drv: CreateCqResp,
}
c_layout! {
    RroceCreateCqResp = private, size 8 + CreateCqResp::SIZE;
    drv @ 8,
}

/// `struct ibv_create_cq_ex`: `struct ib_uverbs_cmd_hdr` + `struct
/// ib_uverbs_ex_cmd_hdr` (`response`, `u16 provider_in_words`, `u16
/// provider_out_words`, `u32 cmd_hdr_reserved`) + `struct
/// ib_uverbs_ex_create_cq` (`user_handle`, `u32 cqe`, `u32 comp_vector`,
/// `s32 comp_channel`, `u32 comp_mask`, `u32 flags`, `u32 reserved`);
/// size 56.  libibverbs fills it in.
#[repr(C)]
#[derive(Default)]
pub struct IbvCreateCqEx {
    pub hdr: IbUverbsCmdHdr,
    pub ex_hdr: [u64; 2],
    pub core: [u64; 4],
}
c_layout! {
    IbvCreateCqEx = "struct ib_uverbs_cmd_hdr" + "struct ib_uverbs_ex_cmd_hdr"
        + "struct ib_uverbs_ex_create_cq", size 56;
}

/// Command buffer of `ibv_cmd_create_cq_ex`: the core command followed by
/// the same driver data as [`RroceCreateCqCmd`].
#[repr(C)]
#[derive(Default)]
pub struct RroceCreateCqExCmd {
    pub core: IbvCreateCqEx,
    pub drv: CreateCqCmd,
}
c_layout! {
    RroceCreateCqExCmd = private, size 56 + CreateQueueCmd::SIZE;
    drv @ size_of::<IbvCreateCqEx>(),
}

/// `struct ib_uverbs_ex_create_cq_resp`: `struct ib_uverbs_create_cq_resp
/// base`, `u32 comp_mask`, `u32 response_length`; size 16.
#[repr(C)]
#[derive(Default)]
pub struct IbUverbsExCreateCqResp {
    pub base: IbUverbsCreateCqResp,
    pub comp_mask: u32,
    pub response_length: u32,
}
c_layout! {
    IbUverbsExCreateCqResp = "struct ib_uverbs_ex_create_cq_resp", size 16;
    base @ 0, comp_mask @ 8, response_length @ 12,
}

/// Response buffer of `ibv_cmd_create_cq_ex`: core response +
/// `CreateCqResp`.
#[repr(C)]
#[derive(Default)]
pub struct RroceCreateCqExResp {
    pub core: IbUverbsExCreateCqResp,
    pub drv: CreateCqResp,
}
c_layout! {
    RroceCreateCqExResp = private, size 16 + CreateCqResp::SIZE;
    drv @ 16,
}

/// `struct ibv_resize_cq`: header + `struct ib_uverbs_resize_cq`
/// (`__aligned_u64 response`, `u32 cq_handle`, `u32 cqe`); size 24.
/// libibverbs fills it in.
#[repr(C)]
#[derive(Default)]
pub struct IbvResizeCq {
    pub hdr: IbUverbsCmdHdr,
    pub response: u64,
    pub cq_handle: u32,
    pub cqe: u32,
}
c_layout! {
    IbvResizeCq = "struct ib_uverbs_cmd_hdr" + "struct ib_uverbs_resize_cq", size 24;
    response @ 8, cq_handle @ 16, cqe @ 20,
}

/// Command buffer of `ibv_cmd_resize_cq`: core command + `ResizeCqCmd`.
#[repr(C)]
#[derive(Default)]
pub struct RroceResizeCqCmd {
    pub core: IbvResizeCq,
    pub drv: ResizeCqCmd,
}
c_layout! {
    RroceResizeCqCmd = private, size 24 + ResizeCqCmd::SIZE;
    drv @ size_of::<IbvResizeCq>(),
}

/// `struct ib_uverbs_resize_cq_resp`: `u32 cqe`, `u32 reserved`, then
/// `__aligned_u64 driver_data[]`; size 8.
#[repr(C)]
#[derive(Default)]
pub struct IbUverbsResizeCqResp {
    pub cqe: u32,
    pub reserved: u32,
}
c_layout! {
    IbUverbsResizeCqResp = "struct ib_uverbs_resize_cq_resp", size 8;
    cqe @ 0, reserved @ 4,
}

/// Response buffer of `ibv_cmd_resize_cq`: core response + `ResizeCqResp`.
#[repr(C)]
#[derive(Default)]
pub struct RroceResizeCqResp {
    pub core: IbUverbsResizeCqResp,
    pub drv: ResizeCqResp,
}
c_layout! {
    RroceResizeCqResp = private, size 8 + ResizeCqResp::SIZE;
    drv @ 8,
}

/// `struct ibv_create_qp`: header + `struct ib_uverbs_create_qp`
/// (`response`, `user_handle`, nine `u32` handles and caps, four `u8`
/// `sq_sig_all`, `qp_type`, `is_srq`, `reserved`); size 64.
#[repr(C)]
#[derive(Default)]
pub struct IbvCreateQp {
    pub hdr: IbUverbsCmdHdr,
    pub response: u64,
    pub user_handle: u64,
    pub pd_handle: u32,
    pub send_cq_handle: u32,
    pub recv_cq_handle: u32,
    pub srq_handle: u32,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
    pub sq_sig_all: u8,
    pub qp_type: u8,
    pub is_srq: u8,
    pub reserved: u8,
}
c_layout! {
    IbvCreateQp = "struct ib_uverbs_cmd_hdr" + "struct ib_uverbs_create_qp", size 64;
    response @ 8, user_handle @ 16, pd_handle @ 24, send_cq_handle @ 28, recv_cq_handle @ 32,
    srq_handle @ 36, max_send_wr @ 40, max_recv_wr @ 44, max_send_sge @ 48,
    max_recv_sge @ 52, max_inline_data @ 56, sq_sig_all @ 60, qp_type @ 61, is_srq @ 62,
}

/// Command buffer of `ibv_cmd_create_qp`: core command + `CreateQpCmd`.
#[repr(C)]
#[derive(Default)]
pub struct RroceCreateQpCmd {
    pub core: IbvCreateQp,
    pub drv: CreateQpCmd,
}
c_layout! {
    RroceCreateQpCmd = private, size 64 + CreateQueueCmd::SIZE;
    drv @ 64,
}

/// `struct ib_uverbs_create_qp_resp`: eight `u32` (`qp_handle`, `qpn`,
/// the five caps, `reserved`), then `driver_data[]`; size 32.
#[repr(C)]
#[derive(Default)]
pub struct IbUverbsCreateQpResp {
    pub qp_handle: u32,
    pub qpn: u32,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
    pub reserved: u32,
}
c_layout! {
    IbUverbsCreateQpResp = "struct ib_uverbs_create_qp_resp", size 32;
    qp_handle @ 0, qpn @ 4, max_send_wr @ 8, max_recv_wr @ 12, max_send_sge @ 16,
    max_recv_sge @ 20, max_inline_data @ 24,
}

/// Response buffer of `ibv_cmd_create_qp`: core response + `CreateQpResp`.
#[repr(C)]
#[derive(Default)]
pub struct RroceCreateQpResp {
    pub core: IbUverbsCreateQpResp,
    pub drv: CreateQpResp,
}
c_layout! {
    RroceCreateQpResp = private, size 32 + CreateQpResp::SIZE;
    drv @ 32,
}

/// `struct ibv_create_srq`: header + `struct ib_uverbs_create_srq`
/// (`response`, `user_handle`, `u32 pd_handle`, `max_wr`, `max_sge`,
/// `srq_limit`); size 40.
#[repr(C)]
#[derive(Default)]
pub struct IbvCreateSrq {
    pub hdr: IbUverbsCmdHdr,
    pub response: u64,
    pub user_handle: u64,
    pub pd_handle: u32,
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}
c_layout! {
    IbvCreateSrq = "struct ib_uverbs_cmd_hdr" + "struct ib_uverbs_create_srq", size 40;
    response @ 8, user_handle @ 16, pd_handle @ 24, max_wr @ 28, max_sge @ 32,
    srq_limit @ 36,
}

/// Command buffer of `ibv_cmd_create_srq`: core command + `CreateSrqCmd`.
#[repr(C)]
#[derive(Default)]
pub struct RroceCreateSrqCmd {
    pub core: IbvCreateSrq,
    pub drv: CreateSrqCmd,
}
c_layout! {
    RroceCreateSrqCmd = private, size 40 + CreateQueueCmd::SIZE;
    drv @ 40,
}

/// `struct ib_uverbs_create_srq_resp`: `srq_handle`, `max_wr`, `max_sge`,
/// `srqn` (`u32`), then `driver_data[]`; size 16.
#[repr(C)]
#[derive(Default)]
pub struct IbUverbsCreateSrqResp {
    pub srq_handle: u32,
    pub max_wr: u32,
    pub max_sge: u32,
    pub srqn: u32,
}
c_layout! {
    IbUverbsCreateSrqResp = "struct ib_uverbs_create_srq_resp", size 16;
    srq_handle @ 0, max_wr @ 4, max_sge @ 8, srqn @ 12,
}

/// Response buffer of `ibv_cmd_create_srq`: core response + `CreateSrqResp`.
#[repr(C)]
#[derive(Default)]
pub struct RroceCreateSrqResp {
    pub core: IbUverbsCreateSrqResp,
    pub drv: CreateSrqResp,
}
c_layout! {
    RroceCreateSrqResp = private, size 16 + CreateSrqResp::SIZE;
    drv @ 16,
}

/// `struct ibv_create_xsrq`: header + `struct ib_uverbs_create_xsrq`
/// (`response`, `user_handle`, `u32 srq_type`, `pd_handle`, `max_wr`,
/// `max_sge`, `srq_limit`, `max_num_tags`, `xrcd_handle`, `cq_handle`);
/// size 56.  libibverbs fills it in.
#[repr(C)]
#[derive(Default)]
pub struct IbvCreateXsrq {
    pub hdr: IbUverbsCmdHdr,
    pub response: u64,
    pub user_handle: u64,
    pub srq_type: u32,
    pub pd_handle: u32,
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
    pub max_num_tags: u32,
    pub xrcd_handle: u32,
    pub cq_handle: u32,
}
c_layout! {
    IbvCreateXsrq = "struct ib_uverbs_cmd_hdr" + "struct ib_uverbs_create_xsrq", size 56;
    response @ 8, user_handle @ 16, srq_type @ 24, pd_handle @ 28, max_wr @ 32, max_sge @ 36,
    srq_limit @ 40, max_num_tags @ 44, xrcd_handle @ 48, cq_handle @ 52,
}

/// Command buffer of `ibv_cmd_create_srq_ex`: core command + the same
/// `CreateSrqCmd` as [`RroceCreateSrqCmd`] (the response is a
/// [`RroceCreateSrqResp`] too).
#[repr(C)]
#[derive(Default)]
pub struct RroceCreateXsrqCmd {
    pub core: IbvCreateXsrq,
    pub drv: CreateSrqCmd,
}
c_layout! {
    RroceCreateXsrqCmd = private, size 56 + CreateQueueCmd::SIZE;
    drv @ 56,
}

/// `struct ibv_open_xrcd`: header + `struct ib_uverbs_open_xrcd`
/// (`response`, `u32 fd`, `u32 oflags`); size 24.  libibverbs fills it in.
#[repr(C)]
#[derive(Default)]
pub struct IbvOpenXrcd {
    pub hdr: IbUverbsCmdHdr,
    pub response: u64,
    pub fd: u32,
    pub oflags: u32,
}
c_layout! {
    IbvOpenXrcd = "struct ib_uverbs_cmd_hdr" + "struct ib_uverbs_open_xrcd", size 24;
    response @ 8, fd @ 16, oflags @ 20,
}

/// `struct ib_uverbs_open_xrcd_resp`: `u32 xrcd_handle`; size 4.
#[repr(C)]
#[derive(Default)]
pub struct IbUverbsOpenXrcdResp {
    pub xrcd_handle: u32,
}
c_layout! {
    IbUverbsOpenXrcdResp = "struct ib_uverbs_open_xrcd_resp", size 4;
    xrcd_handle @ 0,
}

/// `struct ibv_open_qp`: header + `struct ib_uverbs_open_qp` (`response`,
/// `user_handle`, `u32 pd_handle` (the XRCD's), `u32 qpn`, `u8 qp_type`,
/// `u8 reserved[7]`); size 40.  libibverbs fills it in; the answer is a
/// plain `ib_uverbs_create_qp_resp` (no driver data: ib_core opens the QP).
#[repr(C)]
#[derive(Default)]
pub struct IbvOpenQp {
    pub hdr: IbUverbsCmdHdr,
    pub response: u64,
    pub user_handle: u64,
    pub pd_handle: u32,
    pub qpn: u32,
    pub qp_type: u8,
    pub reserved: [u8; 7],
}
c_layout! {
    IbvOpenQp = "struct ib_uverbs_cmd_hdr" + "struct ib_uverbs_open_qp", size 40;
    response @ 8, user_handle @ 16, pd_handle @ 24, qpn @ 28, qp_type @ 32,
}

/// `struct ibv_modify_srq`: header + `struct ib_uverbs_modify_srq`
/// (`srq_handle`, `attr_mask`, `max_wr`, `srq_limit`); size 24.
#[repr(C)]
#[derive(Default)]
pub struct IbvModifySrq {
    pub hdr: IbUverbsCmdHdr,
    pub srq_handle: u32,
    pub attr_mask: u32,
    pub max_wr: u32,
    pub srq_limit: u32,
}
c_layout! {
    IbvModifySrq = "struct ib_uverbs_cmd_hdr" + "struct ib_uverbs_modify_srq", size 24;
    srq_handle @ 8, attr_mask @ 12, max_wr @ 16, srq_limit @ 20,
}

/// `IBV_SRQ_MAX_WR` of `enum ibv_srq_attr_mask`.
pub const IBV_SRQ_MAX_WR: c_int = 1 << 0;

/// MODIFY_SRQ with rroce's driver data (where a resize's answer goes).
#[repr(C)]
#[derive(Default)]
pub struct RroceModifySrqCmd {
    pub core: IbvModifySrq,
    pub drv: ModifySrqCmd,
}
c_layout! {
    RroceModifySrqCmd = private, size 24 + ModifySrqCmd::SIZE;
    drv @ 24,
}

/// `struct ibv_query_srq`: header + `struct ib_uverbs_query_srq`
/// (`response`, `srq_handle`, `reserved`); size 24.
#[repr(C)]
#[derive(Default)]
pub struct IbvQuerySrq {
    pub hdr: IbUverbsCmdHdr,
    pub response: u64,
    pub srq_handle: u32,
    pub reserved: u32,
}
c_layout! {
    IbvQuerySrq = "struct ib_uverbs_cmd_hdr" + "struct ib_uverbs_query_srq", size 24;
    response @ 8, srq_handle @ 16,
}

/// Size of `struct ib_uverbs_modify_qp` (two 32-byte `ib_uverbs_qp_dest`,
/// handle, mask and attributes).
pub const IB_UVERBS_MODIFY_QP_SIZE: usize = 112;

/// `struct ibv_modify_qp`: header + `struct ib_uverbs_modify_qp`; size 120.
/// Filled in entirely by `ibv_cmd_modify_qp`.
#[repr(C)]
#[derive(Default)]
pub struct IbvModifyQp {
    pub hdr: IbUverbsCmdHdr,
    pub core: [u64; IB_UVERBS_MODIFY_QP_SIZE / 8],
}
c_layout! {
    IbvModifyQp = "struct ib_uverbs_cmd_hdr" + "struct ib_uverbs_modify_qp",
        size 8 + IB_UVERBS_MODIFY_QP_SIZE;
}

/// `struct ibv_query_qp`: header + `struct ib_uverbs_query_qp`
/// (`response`, `u32 qp_handle`, `u32 attr_mask`); size 24.
#[repr(C)]
#[derive(Default)]
pub struct IbvQueryQp {
    pub hdr: IbUverbsCmdHdr,
    pub response: u64,
    pub qp_handle: u32,
    pub attr_mask: u32,
}
c_layout! {
    IbvQueryQp = "struct ib_uverbs_cmd_hdr" + "struct ib_uverbs_query_qp", size 24;
    response @ 8, qp_handle @ 16, attr_mask @ 20,
}

/// `struct ibv_reg_mr`: header + `struct ib_uverbs_reg_mr` (`response`,
/// `start`, `length`, `hca_va`, `u32 pd_handle`, `u32 access_flags`);
/// size 48.
#[repr(C)]
#[derive(Default)]
pub struct IbvRegMr {
    pub hdr: IbUverbsCmdHdr,
    pub response: u64,
    pub start: u64,
    pub length: u64,
    pub hca_va: u64,
    pub pd_handle: u32,
    pub access_flags: u32,
}
c_layout! {
    IbvRegMr = "struct ib_uverbs_cmd_hdr" + "struct ib_uverbs_reg_mr", size 48;
    response @ 8, start @ 16, length @ 24, hca_va @ 32, pd_handle @ 40, access_flags @ 44,
}

/// `struct ib_uverbs_reg_mr_resp`: `u32 mr_handle`, `lkey`, `rkey`; size 12.
#[repr(C)]
#[derive(Default)]
pub struct IbUverbsRegMrResp {
    pub mr_handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}
c_layout! {
    IbUverbsRegMrResp = "struct ib_uverbs_reg_mr_resp", size 12;
    mr_handle @ 0, lkey @ 4, rkey @ 8,
}

/// `enum ibv_rereg_mr_flags`: `IBV_REREG_MR_CHANGE_PD`.
pub const IBV_REREG_MR_CHANGE_PD: c_int = 1 << 1;

/// `struct ibv_rereg_mr`: header + `struct ib_uverbs_rereg_mr` (`response`,
/// `u32 mr_handle`, `u32 flags`, `start`, `length`, `hca_va`,
/// `u32 pd_handle`, `u32 access_flags`); size 56.
#[repr(C)]
#[derive(Default)]
pub struct IbvReregMr {
    pub hdr: IbUverbsCmdHdr,
    pub response: u64,
    pub mr_handle: u32,
    pub flags: u32,
    pub start: u64,
    pub length: u64,
    pub hca_va: u64,
    pub pd_handle: u32,
    pub access_flags: u32,
}
c_layout! {
    IbvReregMr = "struct ib_uverbs_cmd_hdr" + "struct ib_uverbs_rereg_mr", size 56;
    response @ 8, mr_handle @ 16, flags @ 20, start @ 24, length @ 32, hca_va @ 40,
    pd_handle @ 48, access_flags @ 52,
}

/// `struct ib_uverbs_rereg_mr_resp`: `u32 lkey`, `u32 rkey`; size 8.
#[repr(C)]
#[derive(Default)]
pub struct IbUverbsReregMrResp {
    pub lkey: u32,
    pub rkey: u32,
}
c_layout! {
    IbUverbsReregMrResp = "struct ib_uverbs_rereg_mr_resp", size 8;
    lkey @ 0, rkey @ 4,
}

/// `struct ib_uverbs_create_ah_resp`: `u32 ah_handle`, then
/// `driver_data[]` (`u32`); size 4.
#[repr(C)]
#[derive(Default)]
pub struct IbUverbsCreateAhResp {
    pub ah_handle: u32,
}
c_layout! {
    IbUverbsCreateAhResp = "struct ib_uverbs_create_ah_resp", size 4;
    ah_handle @ 0,
}

/// Response buffer of `ibv_cmd_create_ah`: core response + `CreateAhResp`.
#[repr(C)]
#[derive(Default)]
pub struct RroceCreateAhResp {
    pub core: IbUverbsCreateAhResp,
    pub drv: CreateAhResp,
}
c_layout! {
    RroceCreateAhResp = private, size 4 + CreateAhResp::SIZE;
    drv @ 4,
}

/// `IB_USER_VERBS_CMD_POST_SEND`.
pub const IB_USER_VERBS_CMD_POST_SEND: u32 = 28;

/// `struct ibv_post_send` as the doorbell uses it: header + `struct
/// ib_uverbs_post_send` (`response`, `u32 qp_handle`, `u32 wr_count`,
/// `u32 sge_count`, `u32 wqe_size`) with no work requests after it;
/// size 32.
#[repr(C)]
#[derive(Default)]
pub struct IbvPostSend {
    pub hdr: IbUverbsCmdHdr,
    pub response: u64,
    pub qp_handle: u32,
    pub wr_count: u32,
    pub sge_count: u32,
    pub wqe_size: u32,
}
c_layout! {
    IbvPostSend = "struct ib_uverbs_cmd_hdr" + "struct ib_uverbs_post_send", size 32;
    response @ 8, qp_handle @ 16, wr_count @ 20, sge_count @ 24, wqe_size @ 28,
}

/// `struct ib_uverbs_post_send_resp`: `u32 bad_wr`; size 4.
#[repr(C)]
#[derive(Default)]
pub struct IbUverbsPostSendResp {
    pub bad_wr: u32,
}
c_layout! {
    IbUverbsPostSendResp = "struct ib_uverbs_post_send_resp", size 4;
    bad_wr @ 0,
}

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
c_layout! {
    IbUverbsExQueryDeviceResp = "struct ib_uverbs_ex_query_device_resp", size 304;
    fw_ver as "base.fw_ver" @ 0, base_rest as "base.node_guid" @ 8, comp_mask @ 176,
    response_length @ 180, ext as "odp_caps" @ 184,
}

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

    /// CREATE_CQ (ioctl, or write with `cmd`/`resp` as the legacy buffers);
    /// fills `cq->handle`, `cq->cqe` and `cq->context`.  `cmd_size` and
    /// `resp_size` include the driver data after the core structs.
    /// Returns 0 or an errno value.
    pub fn ibv_cmd_create_cq(
        context: *mut IbvContext,
        cqe: c_int,
        channel: *mut IbvCompChannel,
        comp_vector: c_int,
        cq: *mut IbvCq,
        cmd: *mut IbvCreateCq,
        cmd_size: usize,
        resp: *mut IbUverbsCreateCqResp,
        resp_size: usize,
    ) -> c_int;

    /// CREATE_CQ through the extended command (ioctl, or `EX_CREATE_CQ` /
    /// `CREATE_CQ` write); like `ibv_cmd_create_cq`, with the attributes of
    /// `ibv_create_cq_ex`.  `cmd_flags` 0.  Returns 0 or an errno value.
    pub fn ibv_cmd_create_cq_ex(
        context: *mut IbvContext,
        cq_attr: *const IbvCqInitAttrEx,
        cq: *mut IbvCqEx,
        cmd: *mut IbvCreateCqEx,
        cmd_size: usize,
        resp: *mut IbUverbsExCreateCqResp,
        resp_size: usize,
        cmd_flags: u32,
    ) -> c_int;

    /// REQ_NOTIFY_CQ (write only).  Returns 0 or an errno value.
    pub fn ibv_cmd_req_notify_cq(cq: *mut IbvCq, solicited_only: c_int) -> c_int;

    /// DESTROY_CQ; waits for the CQ's events to be acknowledged.
    pub fn ibv_cmd_destroy_cq(cq: *mut IbvCq) -> c_int;

    /// RESIZE_CQ (write only); on success sets `cq->cqe` to the kernel's
    /// new depth.  `cmd_size` and `resp_size` include the driver data after
    /// the core structs.  Returns 0 or an errno value.
    pub fn ibv_cmd_resize_cq(
        cq: *mut IbvCq,
        cqe: c_int,
        cmd: *mut IbvResizeCq,
        cmd_size: usize,
        resp: *mut IbUverbsResizeCqResp,
        resp_size: usize,
    ) -> c_int;

    /// CREATE_QP; fills `qp` (handle, qp_num, state RESET, pointers) and
    /// copies the kernel's caps into `attr->cap`.  Returns 0 or an errno.
    pub fn ibv_cmd_create_qp(
        pd: *mut IbvPd,
        qp: *mut IbvQp,
        attr: *mut IbvQpInitAttr,
        cmd: *mut IbvCreateQp,
        cmd_size: usize,
        resp: *mut IbUverbsCreateQpResp,
        resp_size: usize,
    ) -> c_int;

    /// CREATE_QP for `ibv_create_qp_ex` with the legacy command layout
    /// (`attr_ex->comp_mask` may hold only PD, XRCD and SEND_OPS_FLAGS);
    /// fills `qp` and `attr_ex->cap` like `ibv_cmd_create_qp` and resets
    /// `qp->comp_mask`.  Returns 0 or an errno value.
    pub fn ibv_cmd_create_qp_ex(
        context: *mut IbvContext,
        qp: *mut VerbsQp,
        attr_ex: *mut IbvQpInitAttrEx,
        cmd: *mut IbvCreateQp,
        cmd_size: usize,
        resp: *mut IbUverbsCreateQpResp,
        resp_size: usize,
    ) -> c_int;

    /// MODIFY_QP (write only).  Returns 0 or an errno value.
    pub fn ibv_cmd_modify_qp(
        qp: *mut IbvQp,
        attr: *mut IbvQpAttr,
        attr_mask: c_int,
        cmd: *mut IbvModifyQp,
        cmd_size: usize,
    ) -> c_int;

    /// QUERY_QP (write only).  Returns 0 or an errno value.
    pub fn ibv_cmd_query_qp(
        qp: *mut IbvQp,
        attr: *mut IbvQpAttr,
        attr_mask: c_int,
        init_attr: *mut IbvQpInitAttr,
        cmd: *mut IbvQueryQp,
        cmd_size: usize,
    ) -> c_int;

    /// DESTROY_QP; waits for the QP's events to be acknowledged.
    pub fn ibv_cmd_destroy_qp(qp: *mut IbvQp) -> c_int;

    /// QUERY_CONTEXT (ioctl): the context's `num_comp_vectors`; `driver`
    /// NULL.  0 or an errno value.
    pub fn ibv_cmd_query_context(ctx: *mut IbvContext, driver: *mut c_void) -> c_int;

    /// QUERY_MR (ioctl): keys and length of the MR `mr_handle` of `pd`'s
    /// context, into `vmr` (type IMPORTED).  0 or an errno value.
    pub fn ibv_cmd_query_mr(pd: *mut IbvPd, vmr: *mut VerbsMr, mr_handle: u32) -> c_int;

    /// ADVISE_MR (ioctl): 0 or an errno value.
    pub fn ibv_cmd_advise_mr(
        pd: *mut IbvPd,
        advice: c_int,
        flags: u32,
        sg_list: *mut IbvSge,
        num_sge: u32,
    ) -> c_int;

    /// REG_MR (write only); fills handle, keys, context, type and access.
    pub fn ibv_cmd_reg_mr(
        pd: *mut IbvPd,
        addr: *mut c_void,
        length: usize,
        hca_va: u64,
        access: c_int,
        vmr: *mut VerbsMr,
        cmd: *mut IbvRegMr,
        cmd_size: usize,
        resp: *mut IbUverbsRegMrResp,
        resp_size: usize,
    ) -> c_int;

    /// REREG_MR (write only); updates `vmr`'s keys (and context for a PD
    /// change).  Returns 0 or an errno value.
    pub fn ibv_cmd_rereg_mr(
        vmr: *mut VerbsMr,
        flags: u32,
        addr: *mut c_void,
        length: usize,
        hca_va: u64,
        access: c_int,
        pd: *mut IbvPd,
        cmd: *mut IbvReregMr,
        cmd_size: usize,
        resp: *mut IbUverbsReregMrResp,
        resp_size: usize,
    ) -> c_int;

    /// ATTACH_MCAST: the whole verb (no driver data).  0 or an errno value.
    pub fn ibv_cmd_attach_mcast(qp: *mut IbvQp, gid: *const [u8; 16], lid: u16) -> c_int;

    /// DETACH_MCAST: the whole verb.  0 or an errno value.
    pub fn ibv_cmd_detach_mcast(qp: *mut IbvQp, gid: *const [u8; 16], lid: u16) -> c_int;

    /// DEREG_MR.  Returns 0 or an errno value.
    pub fn ibv_cmd_dereg_mr(vmr: *mut VerbsMr) -> c_int;

    /// ALLOC_MW (write only); fills context, pd, rkey, handle and type.
    pub fn ibv_cmd_alloc_mw(
        pd: *mut IbvPd,
        mw_type: c_int,
        mw: *mut IbvMw,
        cmd: *mut IbvAllocMw,
        cmd_size: usize,
        resp: *mut IbUverbsAllocMwResp,
        resp_size: usize,
    ) -> c_int;

    /// DEALLOC_MW.  Returns 0 or an errno value.
    pub fn ibv_cmd_dealloc_mw(mw: *mut IbvMw) -> c_int;

    /// CREATE_AH (write only); fills `ah->handle` and `ah->context`.
    pub fn ibv_cmd_create_ah(
        pd: *mut IbvPd,
        ah: *mut IbvAh,
        attr: *mut IbvAhAttr,
        resp: *mut IbUverbsCreateAhResp,
        resp_size: usize,
    ) -> c_int;

    /// DESTROY_AH.  Returns 0 or an errno value.
    pub fn ibv_cmd_destroy_ah(ah: *mut IbvAh) -> c_int;

    /// CREATE_SRQ; fills `srq` (handle, context, pd) and writes the real
    /// capacities into `attr->attr`.  Returns 0 or an errno value.
    pub fn ibv_cmd_create_srq(
        pd: *mut IbvPd,
        srq: *mut IbvSrq,
        attr: *mut IbvSrqInitAttr,
        cmd: *mut IbvCreateSrq,
        cmd_size: usize,
        resp: *mut IbUverbsCreateSrqResp,
        resp_size: usize,
    ) -> c_int;

    /// MODIFY_SRQ (write only).  Returns 0 or an errno value.
    pub fn ibv_cmd_modify_srq(
        srq: *mut IbvSrq,
        attr: *mut IbvSrqAttr,
        attr_mask: c_int,
        cmd: *mut IbvModifySrq,
        cmd_size: usize,
    ) -> c_int;

    /// QUERY_SRQ (write only).  Returns 0 or an errno value.
    pub fn ibv_cmd_query_srq(
        srq: *mut IbvSrq,
        attr: *mut IbvSrqAttr,
        cmd: *mut IbvQuerySrq,
        cmd_size: usize,
    ) -> c_int;

    /// DESTROY_SRQ; waits for the SRQ's events to be acknowledged.
    pub fn ibv_cmd_destroy_srq(srq: *mut IbvSrq) -> c_int;

    /// CREATE_SRQ (basic) or CREATE_XSRQ (XRC) for `ibv_create_srq_ex`
    /// (`attr_ex->pd` required); fills `srq` like `ibv_cmd_create_srq`
    /// and, for an XRC SRQ, its `srq_type`, `xrcd`, `cq` and `srq_num`
    /// (the core response's `srqn`).  Writes the real capacities into
    /// `attr_ex->attr`.  Returns 0 or an errno value.
    pub fn ibv_cmd_create_srq_ex(
        context: *mut IbvContext,
        srq: *mut VerbsSrq,
        attr_ex: *mut IbvSrqInitAttrEx,
        cmd: *mut IbvCreateXsrq,
        cmd_size: usize,
        resp: *mut IbUverbsCreateSrqResp,
        resp_size: usize,
    ) -> c_int;

    /// OPEN_XRCD (write only); fills `xrcd` (context, handle and
    /// `VERBS_XRCD_HANDLE` when `vxrcd_size` covers the handle).  Returns
    /// 0 or an errno value (`EINVAL` without the FD/OFLAGS attributes).
    pub fn ibv_cmd_open_xrcd(
        context: *mut IbvContext,
        xrcd: *mut VerbsXrcd,
        vxrcd_size: c_int,
        attr: *mut IbvXrcdInitAttr,
        cmd: *mut IbvOpenXrcd,
        cmd_size: usize,
        resp: *mut IbUverbsOpenXrcdResp,
        resp_size: usize,
    ) -> c_int;

    /// CLOSE_XRCD.  Returns 0 or an errno value.
    pub fn ibv_cmd_close_xrcd(xrcd: *mut VerbsXrcd) -> c_int;

    /// OPEN_QP (write only): a handle to the QP `attr->qp_num` of the
    /// XRCD `attr->xrcd`; fills `qp` (handle, context, number, type, state
    /// `IBV_QPS_UNKNOWN`, NULL PD/CQs/SRQ, and `xrcd` when `vqp_sz` covers
    /// it).  Returns 0 or an errno value.
    pub fn ibv_cmd_open_qp(
        context: *mut IbvContext,
        qp: *mut VerbsQp,
        vqp_sz: c_int,
        attr: *mut IbvQpOpenAttr,
        cmd: *mut IbvOpenQp,
        cmd_size: usize,
        resp: *mut IbUverbsCreateQpResp,
        resp_size: usize,
    ) -> c_int;
}

#[cfg(test)]
mod c_layout {
    //! Compares the layouts above with the C compiler's view of the
    //! installed `infiniband/verbs.h` and `rdma/ib_user_verbs.h`.

    use super::*;
    use crate::ffi::layout::CLayout;
    use std::fmt::Write as _;
    use std::process::Command;

    /// A `(C expression, value Rust uses)` row of the C program.
    type Row = (&'static str, usize);
    /// [`CLayout::c_rows`] of one type.
    type AddRows = fn(&mut Vec<Row>);

    /// `(type, its rows)` for the `c_layout!` table of each type.
    macro_rules! tables {
        ($($t:ident),* $(,)?) => {
            &[$((stringify!($t), <$t as CLayout>::c_rows as AddRows)),*]
        };
    }

    /// Every `c_layout!` table of this file but the `private` ones (see
    /// [`every_table_is_cross_checked`]).
    const TABLES: &[(&str, AddRows)] = tables! {
        Timespec, IbvValuesEx, IbvDevice, PthreadMutex, IbvContext, VerbsContext, IbvPd, IbvTd, IbvTdInitAttr,
        IbvParentDomainInitAttr, PthreadCond, IbvCq,
        IbvCqInitAttrEx, IbvPollCqAttr, IbvCqEx, IbvQp, IbvDataBuf, IbvQpEx, IbvQpCap,
        IbvQpInitAttr, IbvQpInitAttrEx, IbvSge, IbvSendWrRdma, IbvSendWrAtomic, IbvSendWrUd,
        IbvSendWrWr, IbvSendWr, IbvMwBindInfo, IbvSendWrBindMw, IbvMwBind, IbvMw, IbvAllocMw,
        IbUverbsAllocMwResp, IbvRecvWr, IbvSrq, IbvSrqAttr, IbvSrqInitAttr, IbvWc, IbvMr, IbvAh,
        IbUverbsCmdHdr, IbvGetContext, IbUverbsGetContextResp, IbvQueryPort, IbvAllocPd,
        IbUverbsAllocPdResp, IbvCreateCq, IbUverbsCreateCqResp, IbvCreateCqEx,
        IbUverbsExCreateCqResp, IbvResizeCq, IbUverbsResizeCqResp, IbvCreateQp,
        IbUverbsCreateQpResp, IbvCreateSrq, IbUverbsCreateSrqResp, IbvModifySrq, IbvQuerySrq,
        IbvModifyQp, IbvQueryQp, IbvRegMr, IbUverbsRegMrResp, IbvReregMr, IbUverbsReregMrResp,
        IbUverbsCreateAhResp, IbvPostSend, IbUverbsPostSendResp, IbUverbsExQueryDeviceResp,
        IbvQpOpenAttr, IbvXrcd, IbvSrqInitAttrEx, IbvCreateXsrq, IbvOpenXrcd, IbUverbsOpenXrcdResp,
        IbvOpenQp,
    };

    /// The rows of the C program: the values that are not the layout of a
    /// Rust type (constants, C types the provider only counts in pointer
    /// slots or bytes), then the rows of every `c_layout!` table.
    fn expectations() -> Vec<Row> {
        const P: usize = size_of::<*const c_void>();
        let mut rows = vec![
            // libc and the LP64 model
            ("sizeof(void *)", P),
            ("sizeof(size_t)", size_of::<usize>()),
            ("ENOMEM", ENOMEM as usize),
            ("EINVAL", EINVAL as usize),
            ("EIO", EIO as usize),
            ("EPROTO", EPROTO as usize),
            ("ENOENT", ENOENT as usize),
            ("EOPNOTSUPP", EOPNOTSUPP as usize),
            ("EBUSY", EBUSY as usize),
            ("PROT_READ", PROT_READ as usize),
            ("PROT_WRITE", PROT_WRITE as usize),
            ("MAP_SHARED", MAP_SHARED as usize),
            ("CLOCK_REALTIME", CLOCK_REALTIME as usize),
            ("CLOCK_MONOTONIC", CLOCK_MONOTONIC as usize),
            (
                "IBV_VALUES_MASK_RAW_CLOCK",
                IBV_VALUES_MASK_RAW_CLOCK as usize,
            ),
            (
                "IBV_WC_EX_WITH_COMPLETION_TIMESTAMP",
                IBV_WC_EX_WITH_COMPLETION_TIMESTAMP as usize,
            ),
            (
                "IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK",
                IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK as usize,
            ),
            // parent and thread domains
            (
                "IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS",
                IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS as usize,
            ),
            (
                "IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT",
                IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT as usize,
            ),
            (
                "(uintptr_t)IBV_ALLOCATOR_USE_DEFAULT",
                IBV_ALLOCATOR_USE_DEFAULT.addr(),
            ),
            ("RDMA_DRIVER_UNKNOWN", RDMA_DRIVER_UNKNOWN as usize),
            (
                "IBV_CQ_INIT_ATTR_MASK_PD",
                IBV_CQ_INIT_ATTR_MASK_PD as usize,
            ),
            // struct ibv_device, ibv_context, verbs_context: pointer slots
            ("IBV_SYSFS_NAME_MAX", IBV_SYSFS_NAME_MAX),
            ("IBV_SYSFS_PATH_MAX", IBV_SYSFS_PATH_MAX),
            ("sizeof(struct _ibv_device_ops)", 2 * P),
            ("sizeof(struct ibv_context_ops)", IBV_CONTEXT_OPS_SLOTS * P),
            (
                "offsetof(struct verbs_context, priv)",
                VERBS_CONTEXT_PRIV_SLOT * P,
            ),
            (
                "offsetof(struct verbs_context, query_device_ex)",
                VERBS_CONTEXT_QUERY_DEVICE_EX_SLOT * P,
            ),
            (
                "offsetof(struct verbs_context, close_xrcd)",
                VERBS_CONTEXT_CLOSE_XRCD_SLOT * P,
            ),
            // struct ibv_device_attr(_ex) and the kernel's query_device response
            (
                "offsetof(struct ibv_device_attr_ex, orig_attr.fw_ver)",
                DEVICE_ATTR_FW_VER_OFFSET,
            ),
            (
                "sizeof(((struct ibv_device_attr *)0)->fw_ver)",
                DEVICE_ATTR_FW_VER_LEN,
            ),
            ("sizeof(struct ibv_device_attr)", IBV_DEVICE_ATTR_SIZE),
            (
                "sizeof(struct ib_uverbs_query_device_resp)",
                offset_of!(IbUverbsExQueryDeviceResp, comp_mask),
            ),
            // struct ibv_qp_attr (opaque) and the QP enums
            (
                "offsetof(struct ibv_qp_attr, qp_state)",
                QP_ATTR_STATE_OFFSET,
            ),
            ("offsetof(struct ibv_qp_attr, cap)", QP_ATTR_CAP_OFFSET),
            ("sizeof(struct ibv_rx_hash_conf)", size_of::<[u64; 3]>()),
            ("IBV_QPT_RC", IBV_QPT_RC as usize),
            ("IBV_QPT_UC", IBV_QPT_UC as usize),
            ("IBV_QPT_UD", IBV_QPT_UD as usize),
            ("IBV_QPT_XRC_SEND", IBV_QPT_XRC_SEND as usize),
            ("IBV_QPT_XRC_RECV", IBV_QPT_XRC_RECV as usize),
            ("IBV_QP_INIT_ATTR_XRCD", IBV_QP_INIT_ATTR_XRCD as usize),
            ("IBV_QP_OPEN_ATTR_NUM", IBV_QP_OPEN_ATTR_NUM as usize),
            ("IBV_QP_OPEN_ATTR_XRCD", IBV_QP_OPEN_ATTR_XRCD as usize),
            (
                "IBV_QP_OPEN_ATTR_CONTEXT",
                IBV_QP_OPEN_ATTR_CONTEXT as usize,
            ),
            ("IBV_QP_OPEN_ATTR_TYPE", IBV_QP_OPEN_ATTR_TYPE as usize),
            // SRQ enums
            ("IBV_SRQT_BASIC", IBV_SRQT_BASIC as usize),
            ("IBV_SRQT_XRC", IBV_SRQT_XRC as usize),
            ("IBV_SRQ_INIT_ATTR_TYPE", IBV_SRQ_INIT_ATTR_TYPE as usize),
            ("IBV_SRQ_INIT_ATTR_PD", IBV_SRQ_INIT_ATTR_PD as usize),
            ("IBV_SRQ_INIT_ATTR_XRCD", IBV_SRQ_INIT_ATTR_XRCD as usize),
            ("IBV_SRQ_INIT_ATTR_CQ", IBV_SRQ_INIT_ATTR_CQ as usize),
            ("IBV_QPS_RESET", IBV_QPS_RESET as usize),
            ("IBV_QPS_RTS", IBV_QPS_RTS as usize),
            ("IBV_QP_STATE", IBV_QP_STATE as usize),
            ("IBV_QP_INIT_ATTR_PD", IBV_QP_INIT_ATTR_PD as usize),
            (
                "IBV_QP_INIT_ATTR_CREATE_FLAGS",
                IBV_QP_INIT_ATTR_CREATE_FLAGS as usize,
            ),
            (
                "IBV_QP_INIT_ATTR_SEND_OPS_FLAGS",
                IBV_QP_INIT_ATTR_SEND_OPS_FLAGS as usize,
            ),
            (
                "IBV_QP_EX_WITH_RDMA_WRITE",
                IBV_QP_EX_WITH_RDMA_WRITE as usize,
            ),
            (
                "IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM",
                IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM as usize,
            ),
            ("IBV_QP_EX_WITH_SEND", IBV_QP_EX_WITH_SEND as usize),
            (
                "IBV_QP_EX_WITH_SEND_WITH_IMM",
                IBV_QP_EX_WITH_SEND_WITH_IMM as usize,
            ),
            (
                "IBV_QP_EX_WITH_RDMA_READ",
                IBV_QP_EX_WITH_RDMA_READ as usize,
            ),
            (
                "IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP",
                IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP as usize,
            ),
            (
                "IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD",
                IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD as usize,
            ),
            (
                "IBV_QP_EX_WITH_ATOMIC_WRITE",
                IBV_QP_EX_WITH_ATOMIC_WRITE as usize,
            ),
            (
                "IBV_QP_EX_WITH_LOCAL_INV",
                IBV_QP_EX_WITH_LOCAL_INV as usize,
            ),
            ("IBV_QP_EX_WITH_BIND_MW", IBV_QP_EX_WITH_BIND_MW as usize),
            (
                "IBV_QP_EX_WITH_SEND_WITH_INV",
                IBV_QP_EX_WITH_SEND_WITH_INV as usize,
            ),
            // CQ enums
            ("IBV_WC_EX_WITH_BYTE_LEN", IBV_WC_EX_WITH_BYTE_LEN as usize),
            ("IBV_WC_EX_WITH_IMM", IBV_WC_EX_WITH_IMM as usize),
            ("IBV_WC_EX_WITH_QP_NUM", IBV_WC_EX_WITH_QP_NUM as usize),
            ("IBV_WC_EX_WITH_SRC_QP", IBV_WC_EX_WITH_SRC_QP as usize),
            ("IBV_WC_EX_WITH_SLID", IBV_WC_EX_WITH_SLID as usize),
            ("IBV_WC_EX_WITH_SL", IBV_WC_EX_WITH_SL as usize),
            (
                "IBV_WC_EX_WITH_DLID_PATH_BITS",
                IBV_WC_EX_WITH_DLID_PATH_BITS as usize,
            ),
            ("IBV_WC_STANDARD_FLAGS", IBV_WC_STANDARD_FLAGS as usize),
            (
                "IBV_CQ_INIT_ATTR_MASK_FLAGS",
                IBV_CQ_INIT_ATTR_MASK_FLAGS as usize,
            ),
            (
                "IBV_CREATE_CQ_ATTR_SINGLE_THREADED",
                IBV_CREATE_CQ_ATTR_SINGLE_THREADED as usize,
            ),
            // work requests
            ("IBV_SEND_FENCE", usize::from(rroce_proto::wqe::SEND_FENCE)),
            (
                "IBV_SEND_SIGNALED",
                usize::from(rroce_proto::wqe::SEND_SIGNALED),
            ),
            (
                "IBV_SEND_SOLICITED",
                usize::from(rroce_proto::wqe::SEND_SOLICITED),
            ),
            ("IBV_SEND_INLINE", IBV_SEND_INLINE as usize),
            (
                "IBV_SEND_INLINE",
                usize::from(rroce_proto::wqe::SEND_INLINE),
            ),
            (
                "IBV_WR_RDMA_WRITE",
                rroce_proto::wqe::SendOpcode::RdmaWrite as usize,
            ),
            (
                "IBV_WR_RDMA_WRITE_WITH_IMM",
                rroce_proto::wqe::SendOpcode::RdmaWriteWithImm as usize,
            ),
            ("IBV_WR_SEND", rroce_proto::wqe::SendOpcode::Send as usize),
            (
                "IBV_WR_SEND_WITH_IMM",
                rroce_proto::wqe::SendOpcode::SendWithImm as usize,
            ),
            (
                "IBV_WR_RDMA_READ",
                rroce_proto::wqe::SendOpcode::RdmaRead as usize,
            ),
            (
                "IBV_WR_ATOMIC_CMP_AND_SWP",
                rroce_proto::wqe::SendOpcode::AtomicCmpAndSwp as usize,
            ),
            (
                "IBV_WR_ATOMIC_FETCH_AND_ADD",
                rroce_proto::wqe::SendOpcode::AtomicFetchAndAdd as usize,
            ),
            (
                "IBV_WR_ATOMIC_WRITE",
                rroce_proto::wqe::SendOpcode::AtomicWrite as usize,
            ),
            (
                "IBV_WR_LOCAL_INV",
                rroce_proto::wqe::SendOpcode::LocalInv as usize,
            ),
            (
                "IBV_WR_BIND_MW",
                rroce_proto::wqe::SendOpcode::BindMw as usize,
            ),
            (
                "IBV_WR_SEND_WITH_INV",
                rroce_proto::wqe::SendOpcode::SendWithInv as usize,
            ),
            (
                "sizeof(struct ib_uverbs_send_wr) <= sizeof(struct ibv_send_wr)",
                1,
            ),
            (
                "IB_USER_VERBS_CMD_POST_SEND",
                IB_USER_VERBS_CMD_POST_SEND as usize,
            ),
            // struct ibv_wc's enums
            ("IBV_WC_GRH", usize::from(rroce_proto::wqe::WC_GRH)),
            (
                "IBV_WC_WITH_IMM",
                usize::from(rroce_proto::wqe::WC_WITH_IMM),
            ),
            (
                "IBV_WC_IP_CSUM_OK",
                usize::from(rroce_proto::wqe::WC_IP_CSUM_OK),
            ),
            (
                "IBV_WC_WITH_INV",
                usize::from(rroce_proto::wqe::WC_WITH_INV),
            ),
            (
                "IBV_WC_SUCCESS",
                rroce_proto::wqe::WcStatus::Success as usize,
            ),
            (
                "IBV_WC_WR_FLUSH_ERR",
                rroce_proto::wqe::WcStatus::WrFlushErr as usize,
            ),
            (
                "IBV_WC_GENERAL_ERR",
                rroce_proto::wqe::WcStatus::GeneralErr as usize,
            ),
            (
                "IBV_WC_MW_BIND_ERR",
                rroce_proto::wqe::WcStatus::MwBindErr as usize,
            ),
            ("IBV_WC_SEND", rroce_proto::wqe::WcOpcode::Send as usize),
            (
                "IBV_WC_RDMA_WRITE",
                rroce_proto::wqe::WcOpcode::RdmaWrite as usize,
            ),
            (
                "IBV_WC_RDMA_READ",
                rroce_proto::wqe::WcOpcode::RdmaRead as usize,
            ),
            (
                "IBV_WC_COMP_SWAP",
                rroce_proto::wqe::WcOpcode::CompSwap as usize,
            ),
            (
                "IBV_WC_FETCH_ADD",
                rroce_proto::wqe::WcOpcode::FetchAdd as usize,
            ),
            (
                "IBV_WC_BIND_MW",
                rroce_proto::wqe::WcOpcode::BindMw as usize,
            ),
            (
                "IBV_WC_LOCAL_INV",
                rroce_proto::wqe::WcOpcode::LocalInv as usize,
            ),
            (
                "IBV_WC_ATOMIC_WRITE",
                rroce_proto::wqe::WcOpcode::AtomicWrite as usize,
            ),
            ("IBV_WC_RECV", rroce_proto::wqe::WcOpcode::Recv as usize),
            (
                "IBV_WC_RECV_RDMA_WITH_IMM",
                rroce_proto::wqe::WcOpcode::RecvRdmaWithImm as usize,
            ),
            // MR, MW and kernel commands
            ("IBV_REREG_MR_CHANGE_PD", IBV_REREG_MR_CHANGE_PD as usize),
            ("IBV_ACCESS_MW_BIND", 16),
            ("IBV_ACCESS_ZERO_BASED", 32),
            ("IBV_MW_TYPE_1", IBV_MW_TYPE_1 as usize),
            ("IBV_MW_TYPE_2", IBV_MW_TYPE_2 as usize),
            (
                "sizeof(struct ib_uverbs_modify_qp)",
                IB_UVERBS_MODIFY_QP_SIZE,
            ),
        ];
        for (_, add_rows) in TABLES {
            add_rows(&mut rows);
        }
        rows
    }

    /// Every `c_layout!` table of this file that names a C type is in
    /// [`TABLES`], so none escapes the C cross-check.
    #[test]
    fn every_table_is_cross_checked() {
        let mut lines = include_str!("abi.rs").lines();
        let mut public = Vec::new();
        while let Some(line) = lines.next() {
            if line != "c_layout! {" {
                continue;
            }
            let head = lines.next().expect("a table after `c_layout! {`").trim();
            let (name, c_type) = head
                .split_once(" = ")
                .expect("`Type = C-TYPE` heads a table");
            if !c_type.starts_with("private") {
                public.push(name);
            }
        }
        let listed: Vec<&str> = TABLES.iter().map(|(name, _)| *name).collect();
        let missing: Vec<&&str> = public
            .iter()
            .filter(|name| !listed.contains(name))
            .collect();
        assert!(
            missing.is_empty(),
            "c_layout! tables missing from TABLES: {missing:?}"
        );
        assert_eq!(
            public.len(),
            listed.len(),
            "TABLES lists a type twice or a private one"
        );
    }

    #[test]
    fn matches_installed_headers() {
        let checks = expectations();
        let mut src = String::from(
            "#include <stddef.h>\n#include <stdio.h>\n#include <errno.h>\n#include <sys/mman.h>\n\
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
