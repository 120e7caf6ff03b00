// SPDX-License-Identifier: GPL-2.0
//! Networking objects (part of the abstraction layer): counted netdev
//! references and the sysfs parent device for netdevs without one.
//!
//! See [`crate::sync`] for the layer's rule.

pub(crate) mod netdev;
pub(crate) mod parent;
