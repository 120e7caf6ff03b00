// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! `librroce-rdmav34.so`: the libibverbs provider for rroce devices.
//!
//! libibverbs (rdma-core 44, private ABI `IBVERBS_PRIVATE_34`) dlopens this
//! library; its ELF constructor registers [`DEVICE_OPS`].  libibverbs then
//! offers us every uverbs device whose name starts with
//! [`DEVICE_NAME_PREFIX`] and whose uverbs ABI version is [`ABI_VERSION`].
//!
//! Implemented verbs: open/close device, query device, query port, alloc/
//! dealloc PD, alloc/dealloc TD and parent domain (see [`pd`] and below),
//! reg/dereg MR, create/destroy AH, open/close XRC domain,
//! create/modify/query/destroy QP (RC, UC, UD, XRC_SEND, XRC_RECV; `open_qp`
//! of an XRC_RECV QP), create/modify/query/destroy SRQ (basic and XRC,
//! `get_srq_num`) and create/destroy/req_notify/resize CQ through the
//! `ibv_cmd_*` helpers of libibverbs, also in their extended forms
//! (`create_cq_ex` with `start_poll`/`next_poll`/`read_*`, `create_qp_ex`
//! with the `ibv_wr_*` work-request API, `create_srq_ex`); the data path (`post_send`, `post_recv`,
//! `post_srq_recv`, `poll_cq`) runs on rings shared with the kernel (see
//! [`cq`], [`qp`] and [`srq`]).  Every other op stays NULL, so libibverbs
//! answers it with `EOPNOTSUPP`.
//!
//! Error conventions (those of libibverbs): ops returning a pointer return
//! NULL and set `errno`; ops returning `int` return an errno value.  Nothing
//! here panics: pointers from C are checked, and warnings are written to
//! stderr ignoring write errors.
//!
//! # Parent domains, thread domains and their allocators
//!
//! `ibv_alloc_td`, `ibv_alloc_parent_domain` and `ibv_dealloc_pd`/`_td`
//! follow mlx5 (details in [`pd`]): a parent domain carries its protection
//! domain's kernel handle, so every verb that takes a PD takes it too
//! (QPs, SRQs, `ibv_create_cq_ex` with `IBV_CQ_INIT_ATTR_MASK_PD`, MRs,
//! MWs, AHs); unknown `comp_mask` bits give `EINVAL`, and a PD, parent
//! domain or TD still in use gives `EBUSY`.  Basic SRQs come through
//! `create_srq` (libibverbs routes `ibv_create_srq_ex` with only PD/TYPE
//! there) or `create_srq_ex`, XRC SRQs through `create_srq_ex` (both with
//! the same driver data and ring, see [`srq`]); tag-matching SRQs are not
//! supported: `EOPNOTSUPP`.
//!
//! # XRC
//!
//! An XRC domain (`ibv_open_xrcd`) is a kernel object only
//! ([`pd::RroceXrcd`]).  An XRC SRQ is a basic SRQ with an SRQ number
//! (`ibv_get_srq_num`).  An XRC_SEND QP has an SQ and no RQ, and each of
//! its requests names the remote XRC SRQ in the WQE's `remote_qpn` field
//! (`qp_type.xrc.remote_srqn` of `ibv_send_wr`, `ibv_wr_set_xrc_srqn`);
//! an XRC_RECV QP (`ibv_create_qp_ex` with an XRC domain, or
//! `ibv_open_qp`) has no queues: nothing is mapped and posting on it gives
//! `EINVAL` (see [`qp`]).
//! A thread domain is accepted and changes nothing: locking stays as it
//! is (see [`pd`] for why).
//!
//! What the allocator (`alloc`/`free` of a parent domain) is used for:
//! the provider's own scratch buffers of each QP and SRQ created on that
//! parent domain, allocated once at creation and given back to `free` at
//! destruction — per SQ the staging entry (one WQE, `sq_entry_size`
//! bytes), the SGE list (`max_send_sge` × 16 bytes) and the inline buffer
//! (`max_inline_data` bytes), per RQ or SRQ the staging entry and the SGE
//! list — each with alignment 64 and resource type `RES_TYPE_QP` (1) or
//! `RES_TYPE_SRQ` (4) (upper 32 bits 0: rroce has no `rdma_driver_id`).
//! `IBV_ALLOCATOR_USE_DEFAULT` gives the provider's heap, NULL fails the
//! creation with `ENOMEM`.  Not from the allocator: the SQ, RQ, SRQ and CQ
//! rings, which are kernel memory (`vmalloc_user`) mapped from the uverbs
//! fd and cannot come from user memory; the provider objects libibverbs
//! sees (`verbs_qp`, `ibv_cq_ex`, ...); and the batch of the `ibv_wr_*`
//! API, which grows on the heap with the batches the application builds.
//! A CQ has no buffer of its own, so the allocator is never asked for one
//! (the CQ still holds its parent domain).  The buffers are
//! `ffi::ProviderBuf`/`ffi::BufVec`: the raw pointers stay in `ffi`, the
//! safe code sees slices.
//!
//! # Layers
//!
//! `unsafe` lives in two modules only, the crate denies it everywhere else:
//!
//! * [`ffi`] (bottom): the raw C declarations, each ABI size and offset
//!   written once, and the few safe wrappers whose soundness rests on C
//!   contracts alone ([`ffi::Opaque`], [`ffi::RingMap`], [`ffi::InlineData`],
//!   `errno`, the doorbell);
//! * `ops` (top): every C entry point; it turns raw pointers into
//!   references to provider objects and safe views of the application's
//!   requests, and calls the safe code;
//! * in between, safe: [`device`] (names, firmware version, errno
//!   conventions), [`cq`], [`qp`] (with the work-request API in `qp::ex`)
//!   and [`srq`] — the ring protocol, validation and encoding.
//!
//! The import graph follows the layers: `ops` uses everything, the safe
//! modules use `ffi` and each other, `ffi` uses nothing of the crate.

#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub(crate) mod cq;
pub(crate) mod device;
#[allow(unsafe_code)]
pub(crate) mod ffi;
#[allow(unsafe_code)]
mod ops;
pub(crate) mod pd;
pub(crate) mod qp;
pub(crate) mod session;
pub(crate) mod srq;

// The provider objects are shared by every thread of the application
// (libibverbs hands the same pointers to all of them).
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<cq::RroceCq>();
    shared::<pd::RrocePd>();
    shared::<pd::RroceTd>();
    shared::<pd::RroceXrcd>();
    shared::<qp::RroceQp>();
    shared::<srq::RroceSrq>();
};
