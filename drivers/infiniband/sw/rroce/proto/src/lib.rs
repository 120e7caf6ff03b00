// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
//! Safe, `no_std` core of rroce shared by the kernel driver and the provider.
//!
//! Everything here is plain Rust without `unsafe`, so it builds and is tested
//! on the host with `cargo test`.  The kernel driver compiles these very files
//! as modules of `rroce.ko` (see `rroce.rs`), so modules refer to each other
//! with `super::`, never `crate::`, and never panic on input: arithmetic that
//! may overflow is explicit (`wrapping_*`/`checked_*`) and slices are read with
//! `get()`.
// In the kernel (`CONFIG_RUST`) this file is a module of `rroce.ko`, whose
// crate is already `no_std`.
#![cfg_attr(not(CONFIG_RUST), no_std)]
#![forbid(unsafe_code)]

pub mod abi;
mod bytes;
pub mod hdr;
pub mod icrc;
pub mod link;
pub mod mr;
pub mod mw;
pub mod net;
pub mod opcode;
pub mod psn;
pub mod qp;
pub mod rc;
pub mod ring;
pub mod split;
pub mod srq;
pub mod ud;
pub mod wqe;
