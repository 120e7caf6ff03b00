// SPDX-License-Identifier: GPL-2.0
//! The verbs of an rroce device: the `ib_device_ops` table, the device's
//! limits and attributes, and the device-wide verbs ([`DeviceOps`]).
//!
//! The layer builds the table from the driver's types ([`Rroce`]), so that
//! its entry points and object sizes all name the same ones.

#![forbid(unsafe_code)]

use core::sync::atomic::Ordering;
use kernel::bindings;
use kernel::ffi::c_int;
use kernel::prelude::*;

use crate::ah;
use crate::cq;
use crate::mr;
use crate::qp;
use crate::device::{self, DevPriv, RroceDev};
use crate::ib::device::DeviceOps;
use crate::ib::driver::Driver;
use crate::ib::udata::UData;
use crate::limits;
use crate::ib::ucontext::UcontextOps;
use crate::proto::abi;
use crate::proto::link;

/// The driver's types, from which the layer builds the ops table
/// ([`crate::ib::driver::ops`]).
pub(crate) struct Rroce;

impl Driver for Rroce {
    type Dev = DevPriv;
    type Ucontext = UserAbi;
    type Cq = cq::CqPriv;
    type Qp = qp::QpPriv;
    type Srq = crate::srq::SrqPriv;
    type Ah = ah::RroceAh;
    type Mr = mr::MrPart;
    type Mw = crate::mw::MwPart;
    type Stats = crate::stats::Stats;
    const ABI_VERSION: u32 = abi::ABI_VERSION;
}

/// The ops table; ib_core copies it into each device.
pub(crate) fn device_ops(module: &'static ThisModule) -> bindings::ib_device_ops {
    crate::ib::driver::ops::<Rroce>(module)
}

impl crate::ib::qp::HasQps for DevPriv {
    type Qp = qp::QpPriv;
}

impl crate::ib::srq::HasSrqs for DevPriv {
    type Srq = crate::srq::SrqPriv;
}

/// The user ABI: what `alloc_ucontext` answers.
pub(crate) struct UserAbi;

impl UcontextOps for UserAbi {
    fn alloc(udata: UData<'_>) -> Result {
        let resp = abi::AllocUcontextResp { abi_version: abi::ABI_VERSION, ..Default::default() };
        udata.write(&resp.to_bytes())
    }
}

impl DeviceOps for DevPriv {
    fn rx_devices() -> &'static crate::ib::device::RxDevices<Self> {
        &device::RX_DEVS
    }

    fn netdev(&self) -> &crate::net::netdev::NetDevRef {
        &self.ndev
    }

    fn dealloc(p: Self, id: crate::ib::device::DevId) {
        device::dealloc(p, id)
    }

    fn attrs(dev: &RroceDev) -> bindings::ib_device_attr {
        // ib_core zeroes `ib.attrs` before asking, so the attributes live
        // with us.
        dev.p.attrs
    }

    fn query_port(dev: &RroceDev, port: u32, a: &mut bindings::ib_port_attr) -> Result {
        if port != 1 {
            return Err(EINVAL);
        }
        let active = dev.link_active();
        a.state = if active {
            bindings::ib_port_state_IB_PORT_ACTIVE
        } else {
            bindings::ib_port_state_IB_PORT_DOWN
        };
        // Administratively up without carrier: still training, in IB terms.
        a.phys_state = if active {
            bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_LINK_UP
        } else if dev.p.ndev.is_running() {
            bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_POLLING
        } else {
            bindings::ib_port_phys_state_IB_PORT_PHYS_STATE_DISABLED
        } as u8;
        let eth_mtu = dev.p.ndev.mtu();
        a.max_mtu = link::IbMtu::Mtu4096.code();
        a.active_mtu = link::active_mtu(eth_mtu).map_or(link::IbMtu::Mtu256.code(), |m| m.code());
        a.phys_mtu = eth_mtu;
        a.gid_tbl_len = limits::GID_TABLE_LEN as c_int;
        a.set_ip_gids(1);
        a.max_msg_sz = limits::MAX_MSG_SZ;
        a.pkey_tbl_len = 1;
        a.max_vl_num = 1;
        // The netdev is going away (or hides its speed): the port query
        // itself still succeeds, with the slowest rate.
        (a.active_speed, a.active_width) = dev.eth_speed(port).unwrap_or((
            bindings::ib_port_speed_IB_SPEED_SDR as u16,
            bindings::ib_port_width_IB_WIDTH_1X as u8,
        ));
        Ok(())
    }

    fn port_immutable(dev: &RroceDev, port: u32, imm: &mut bindings::ib_port_immutable) -> Result {
        let attr = dev.query_port_core(port)?;
        imm.pkey_tbl_len = attr.pkey_tbl_len.into();
        imm.gid_tbl_len = attr.gid_tbl_len;
        // RoCEv2 with the GSI QP: ib_core's MAD layer opens QP1 on the port
        // and the CM (and so rdma_cm) runs over it.
        imm.core_cap_flags = bindings::RDMA_CORE_CAP_PROT_ROCE_UDP_ENCAP
            | bindings::RDMA_CORE_CAP_IB_MAD
            | bindings::RDMA_CORE_CAP_IB_CM
            | bindings::RDMA_CORE_CAP_AF_IB
            | bindings::RDMA_CORE_CAP_ETH_AH;
        // IB_MGMT_MAD_SIZE
        imm.max_mad_size = 256;
        Ok(())
    }

    fn query_pkey(_dev: &RroceDev, _port: u32, index: u16) -> Result<u16> {
        if index != 0 {
            return Err(EINVAL);
        }
        Ok(0xffff)
    }

    fn alloc_pd(dev: &RroceDev) -> Result {
        count_one(&dev.p.pds, dev.p.attrs.max_pd as u32)
    }

    fn dealloc_pd(dev: &RroceDev) {
        dev.p.pds.fetch_sub(1, Ordering::Relaxed);
    }

    fn alloc_xrcd(dev: &RroceDev) -> Result {
        // As many as PDs: a domain costs nothing but the core's object.
        count_one(&dev.p.xrcds, dev.p.attrs.max_pd as u32)
    }

    fn dealloc_xrcd(dev: &RroceDev) {
        dev.p.xrcds.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Counts one more object in `n` if fewer than `max` exist (`ENOMEM`
/// otherwise, like hardware out of contexts).
fn count_one(n: &core::sync::atomic::AtomicU32, max: u32) -> Result {
    n.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < max).then_some(n + 1))
        .map(|_| ())
        .map_err(|_| ENOMEM)
}
