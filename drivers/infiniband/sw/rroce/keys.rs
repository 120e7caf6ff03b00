// SPDX-License-Identifier: GPL-2.0
//! The key space shared by memory regions and memory windows: what a key
//! names, as the data path sees it.
//!
//! A key is `index << 8 | key byte`.  The index names an entry of the
//! device's [`Keys`] table, which holds a counted reference to the
//! region's [`Region`] or the window's [`Window`]; the data path borrows
//! them under RCU.  The rules live in `proto::mr` and `proto::mw`, the
//! verbs and the data-path operations in `mr` and `mw`; this leaf only
//! defines the shared state, so that the device (which owns the table)
//! does not depend on them.

#![forbid(unsafe_code)]

use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
use kernel::prelude::*;
use kernel::sync::Arc;

use crate::ib::umem::{KernelMem, OdpMem, Umem};
use crate::ib::PdId;
use crate::proto::mw as mw_rules;
use crate::sync::idtable::KeyTable;
use crate::sync::lock::SpinLockBh;

/// The device's key table.
pub(crate) type Keys = KeyTable<Region, Window>;

/// A memory region as the data path sees it.
///
/// # Invariants
///
/// The region's first byte (`iova`) is at offset `page_off` of the first
/// page of `umem`.
pub(crate) struct Region {
    /// Pinned user pages; `None` for a kernel DMA MR or a fast-registration
    /// MR (addresses are kernel virtual addresses).  Shared by the regions
    /// a re-registration that keeps the translation made of one another.
    pub(crate) umem: Option<Arc<Umem>>,
    /// User memory registered for on-demand paging (`IB_ACCESS_ON_DEMAND`):
    /// then `umem` is `None`.
    pub(crate) odp: Option<OdpMem>,
    /// The PD it was registered in.
    pub(crate) pd: PdId,
    /// Offset of the first byte in the first page.
    pub(crate) page_off: u64,
    /// User virtual address of the first byte (user MRs; `rereg` pins the
    /// same range again when the translation is kept).
    pub(crate) user_start: u64,
    /// I/O virtual address of the first byte and length (user MRs).
    pub(crate) iova: u64,
    pub(crate) length: u64,
    /// `IB_ACCESS_*` flags.
    pub(crate) access: u32,
    /// Index in the device's key table (set when published).
    pub(crate) index: AtomicU32,
    /// Memory windows bound to the region, and `MR_DEAD` once `dereg_mr`
    /// has committed to freeing it (see `mr`).
    pub(crate) binds: AtomicU32,
    /// The key accesses must carry (lkey == rkey).  Not ib_core's `lkey`:
    /// a consumer changes that with `ib_update_fast_reg_key` before posting
    /// the registration that makes the new key valid.
    pub(crate) key: AtomicU32,
    /// Fast-registration state (`ib_alloc_mr` MRs only).
    pub(crate) fr: Option<Fr>,
    /// Kernel DMA and fast-registration MRs: their kernel memory, through
    /// which the data path reaches its pages.
    pub(crate) kmem: Option<KernelMem>,
}

/// The page list and registration of a fast-registration MR, kept in
/// atomics: the data path of other QPs reads it concurrently.
pub(crate) struct Fr {
    /// Page-size aligned kernel virtual addresses, written by `map_mr_sg`.
    pub(crate) list: KVVec<AtomicU64>,
    /// Entries of `list` written by the last `map_mr_sg`.
    pub(crate) nmapped: AtomicU32,
    /// Registered (valid) or not (free).
    pub(crate) valid: AtomicBool,
    pub(crate) iova: AtomicU64,
    pub(crate) length: AtomicU64,
    pub(crate) page_size: AtomicU64,
    /// Pages of `list` in use (≤ `list.len()`).
    pub(crate) npages: AtomicU32,
    pub(crate) access: AtomicU32,
}

/// A memory window as the data path sees it.
#[pin_data]
pub(crate) struct Window {
    /// The PD it was allocated in.
    pub(crate) pd: PdId,
    /// Type 2 (2B) rather than type 1.
    pub(crate) type2: bool,
    /// Index in the device's key table.
    pub(crate) index: u32,
    /// The binding, under a `_bh` lock taken inside the QP lock of
    /// whichever QP binds, uses or invalidates it (never two windows at
    /// once).
    #[pin]
    pub(crate) st: SpinLockBh<WindowState>,
}

/// The state under a window's lock.
pub(crate) struct WindowState {
    /// The current key (index part fixed).
    pub(crate) rkey: u32,
    pub(crate) bound: Option<Binding>,
}

/// A bound window.
pub(crate) struct Binding {
    /// The region, counted (`binds`) so that `dereg_mr` refuses it.
    pub(crate) mr: Arc<Region>,
    /// Range, access, zero-based, QP (2B).
    pub(crate) b: mw_rules::Binding,
}
