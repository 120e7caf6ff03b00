// SPDX-License-Identifier: GPL-2.0
//! rroce: a software RoCEv2 RDMA device.
//!
//! `rdma link add rroce0 type rroce netdev eth0` makes an InfiniBand device
//! that speaks RoCEv2 (UDP port 4791) over any Ethernet netdev, in any
//! network namespace.
//!
//! Layout: `proto/` is the safe, `no_std`, host-tested core shared with the
//! user-space provider.  The abstraction layer — `ffi` (with `rroce_glue.c`,
//! one-line forwards of static inline kernel functions), `sync`, `net` and
//! `ib` — wraps the kernel objects the driver uses and is the only place
//! allowed to hold `unsafe`; the driver above it forbids it
//! (`scripts/layer_check.py` checks the rule).

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

// The abstraction layer: the only modules that may use `unsafe`.
mod ffi;
mod ib;
mod net;
mod sync;

// The driver, on top of the layer.
mod ah;
mod av;
mod cq;
mod crc;
mod device;
mod dp;
mod keys;
mod limits;
mod loopback;
mod mcast;
mod mr;
mod mw;
mod qp;
mod recv;
mod ring;
mod srq;
mod stats;

mod verbs;

struct RroceModule {
    _reg: crate::sync::global::GlobalOwner<device::Registration>,
    // Dropped after the devices: waits for the packets they sent.
    _tx: crate::net::txgauge::DrainOnDrop,
    // Dropped last: the QPs' work items run on it.
    _wq: crate::sync::global::GlobalOwner<crate::sync::timer::WorkQueue>,
}

impl kernel::Module for RroceModule {
    fn init(module: &'static ThisModule) -> Result<Self> {
        let wq = crate::sync::timer::WorkQueue::publish()?;
        Ok(Self {
            _reg: device::Registration::new(module, verbs::device_ops, recv::rx, recv::rx_local)?,
            _tx: crate::net::txgauge::DrainOnDrop,
            _wq: wq,
        })
    }
}
