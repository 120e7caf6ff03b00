// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! The provider's C boundary, bottom half: raw declarations of libc,
//! libibverbs and the kernel's uverbs ABI ([`abi`]), and the few safe
//! wrappers whose soundness rests on C contracts alone.
pub(crate) mod abi;
mod layout;
pub(crate) use abi::*;
