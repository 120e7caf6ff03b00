// SPDX-License-Identifier: GPL-2.0
//! InfiniBand core objects (part of the abstraction layer): memory shared
//! with user space through `rdma_user_mmap_entry` (the mapped rings).
//!
//! See [`crate::sync`] for the layer's rule.

pub(crate) mod shm;
