// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! The provider's C boundary, bottom half: the raw declarations of libc,
//! libibverbs and the kernel's uverbs ABI ([`abi`]), and the few safe
//! wrappers whose soundness rests on C contracts alone:
//!
//! * [`opaque`]: [`Opaque`], the C part of a provider object (an
//!   `ibv_cq_ex`, a `verbs_qp`, ...), which libibverbs writes behind
//!   Rust's back;
//! * [`user`]: the application's scatter/gather lists and inline buffers,
//!   borrowed for one call;
//! * [`sys`]: `errno`, the ring mappings ([`RingMap`]) and the doorbell;
//! * [`alloc`]: the provider's own per-object buffers ([`ProviderBuf`],
//!   [`BufVec`]), from a parent domain's allocator or the heap.
//!
//! `layout` holds `c_layout!`, the one table per C struct from which both
//! the compile-time layout assertions and the C cross-check are made.
//!
//! Together with `ops` (the C entry points), this is the only code of the
//! provider with `unsafe`; the crate root denies it everywhere else.

pub(crate) mod abi;
pub(crate) mod alloc;
mod layout;
pub(crate) mod opaque;
pub(crate) mod sys;
pub(crate) mod user;

pub(crate) use abi::*;
pub(crate) use alloc::{Allocator, BufVec, ProviderBuf, Source};
pub(crate) use opaque::Opaque;
pub(crate) use sys::{ring_doorbell, set_errno, thread_token, RingMap};
pub(crate) use user::InlineData;
