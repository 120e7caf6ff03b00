// SPDX-License-Identifier: GPL-2.0
//! rroce: a software RoCEv2 RDMA device.
//!
//! `rdma link add rroce0 type rroce netdev eth0` makes an InfiniBand device
//! that speaks RoCEv2 (UDP port 4791) over any Ethernet netdev, in any
//! network namespace.
//!
//! Layout: `proto/` is the safe, `no_std`, host-tested core shared with the
//! user-space provider; `glue.rs` + `rroce_glue.c` bind static inline kernel
//! functions; `netdev`, `udp`, `parent`, `device` and `verbs` wrap the kernel
//! objects the driver uses.

use kernel::prelude::*;

module! {
    type: RroceModule,
    name: "rroce",
    author: "rroce developers",
    description: "Software RoCEv2 RDMA device",
    license: "GPL",
    alias: ["rdma-link-rroce"],
}

/// The safe protocol core: the shared crate's sources, compiled in.
///
/// It is a library shared with user space: its `pub` API is wider than
/// what the driver uses at any given time.
#[allow(unreachable_pub, dead_code, unused_imports)]
#[path = "proto/src/lib.rs"]
mod proto;

mod ah;
mod cq;
mod device;
mod dp;
mod glue;
mod idtable;
mod lock;
mod loopback;
mod mcast;
mod mr;
mod mw;
mod netdev;
mod parent;
mod qp;
mod shm;
mod srq;
mod stats;
mod udp;
mod util;
mod verbs;

struct RroceModule {
    _reg: Pin<KBox<device::Registration>>,
}

impl kernel::Module for RroceModule {
    fn init(module: &'static ThisModule) -> Result<Self> {
        Ok(Self { _reg: device::Registration::new(module)? })
    }
}
