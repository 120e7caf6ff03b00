// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! `librroce-rdmav34.so`: the libibverbs provider for rroce devices.
//!
//! libibverbs (rdma-core 44, private ABI `IBVERBS_PRIVATE_34`) dlopens this
//! library; its ELF constructor registers [`DEVICE_OPS`].  libibverbs then
//! offers us every uverbs device whose name starts with
//! [`DEVICE_NAME_PREFIX`] and whose uverbs ABI version is [`ABI_VERSION`].
//!
//! Implemented verbs: open/close device, query device, query port, alloc/
//! dealloc PD, reg/dereg MR, create/destroy AH, create/modify/query/destroy
//! QP (RC, UC, UD), create/modify/query/destroy SRQ and
//! create/destroy/req_notify/resize CQ through the `ibv_cmd_*` helpers of
//! libibverbs, also in their extended forms (`create_cq_ex` with
//! `start_poll`/`next_poll`/`read_*`, `create_qp_ex` with the `ibv_wr_*`
//! work-request API); the data path (`post_send`, `post_recv`,
//! `post_srq_recv`, `poll_cq`) runs on rings shared with the kernel (see
//! [`cq`], [`qp`] and [`srq`]).  Every other op stays NULL, so libibverbs
//! answers it with `EOPNOTSUPP`.
//!
//! Error conventions (those of libibverbs): ops returning a pointer return
//! NULL and set `errno`; ops returning `int` return an errno value.  Nothing
//! here panics: pointers from C are checked, and warnings are written to
//! stderr ignoring write errors.

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
pub(crate) mod qp;
pub(crate) mod srq;
