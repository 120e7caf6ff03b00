// SPDX-License-Identifier: GPL-2.0
//! Networking objects (part of the abstraction layer): the CRC-32 of the
//! ICRC, counted netdev references, the sysfs parent device for netdevs without one, owned
//! socket buffers, route caches and transmission, transmit
//! back-pressure, the RoCEv2 UDP
//! sockets.
//!
//! See [`crate::sync`] for the layer's rule.

pub(crate) mod crc;
pub(crate) mod netdev;
pub(crate) mod parent;
pub(crate) mod pernet;
pub(crate) mod route;
pub(crate) mod skb;
pub(crate) mod txgauge;
pub(crate) mod udp;
