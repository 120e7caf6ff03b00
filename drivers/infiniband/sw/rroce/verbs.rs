// SPDX-License-Identifier: GPL-2.0
//! The verbs of an rroce device: the `ib_device_ops` table, the device's
//! limits and attributes, and the device-wide verbs ([`DeviceOps`]).
//!
//! The table names the abstraction layer's generic entry points (`ib::*`)
//! instantiated with the driver's types.

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
use crate::ib::device::{self as ibdev, DeviceOps};
use crate::ib::udata::UData;
use crate::limits;
use crate::ib::ucontext::{self, UcontextOps};
use crate::proto::abi;
use crate::proto::link;

/// The ops table; ib_core copies it into each device.
pub(crate) fn device_ops(module: &'static ThisModule) -> bindings::ib_device_ops {
    bindings::ib_device_ops {
        owner: module.as_ptr(),
        driver_id: bindings::rdma_driver_id_RDMA_DRIVER_UNKNOWN,
        uverbs_abi_ver: abi::ABI_VERSION,
        dealloc_driver: Some(ibdev::dealloc_driver::<DevPriv>),
        query_device: Some(ibdev::query_device::<DevPriv>),
        query_port: Some(ibdev::query_port::<DevPriv>),
        get_port_immutable: Some(ibdev::get_port_immutable::<DevPriv>),
        get_link_layer: Some(ibdev::get_link_layer),
        query_gid: Some(ibdev::query_gid),
        query_pkey: Some(ibdev::query_pkey::<DevPriv>),
        alloc_ucontext: Some(ucontext::alloc_ucontext::<UserAbi>),
        dealloc_ucontext: Some(ucontext::dealloc_ucontext),
        query_ucontext: Some(ucontext::query_ucontext),
        disassociate_ucontext: Some(ucontext::disassociate_ucontext),
        mmap: Some(ucontext::mmap),
        mmap_free: Some(ucontext::mmap_free),
        alloc_pd: Some(ibdev::alloc_pd::<DevPriv>),
        dealloc_pd: Some(ibdev::dealloc_pd::<DevPriv>),
        alloc_xrcd: Some(ibdev::alloc_xrcd::<DevPriv>),
        dealloc_xrcd: Some(ibdev::dealloc_xrcd::<DevPriv>),
        create_cq: Some(crate::ib::cq::create_cq::<cq::CqPriv>),
        destroy_cq: Some(crate::ib::cq::destroy_cq::<cq::CqPriv>),
        req_notify_cq: Some(crate::ib::cq::req_notify_cq::<cq::CqPriv>),
        resize_cq: Some(crate::ib::cq::resize_cq::<cq::CqPriv>),
        poll_cq: Some(crate::ib::cq::poll_cq::<cq::CqPriv>),
        post_send: Some(crate::ib::qp::post_send::<qp::QpPriv>),
        post_recv: Some(crate::ib::qp::post_recv::<qp::QpPriv>),
        alloc_hw_port_stats: Some(crate::ib::stats::alloc_hw_port_stats::<crate::stats::Stats>),
        get_hw_stats: Some(crate::ib::stats::get_hw_stats::<crate::stats::Stats>),
        size_ib_cq: crate::ib::cq::size::<cq::CqPriv>(),
        create_ah: Some(crate::ib::ah::create_ah::<ah::RroceAh>),
        create_user_ah: Some(crate::ib::ah::create_ah::<ah::RroceAh>),
        destroy_ah: Some(crate::ib::ah::destroy_ah::<ah::RroceAh>),
        size_ib_ah: crate::ib::ah::size::<ah::RroceAh>(),
        create_qp: Some(crate::ib::qp::create_qp::<qp::QpPriv>),
        modify_qp: Some(crate::ib::qp::modify_qp::<qp::QpPriv>),
        query_qp: Some(crate::ib::qp::query_qp::<qp::QpPriv>),
        destroy_qp: Some(crate::ib::qp::destroy_qp::<qp::QpPriv>),
        attach_mcast: Some(crate::ib::qp::attach_mcast::<qp::QpPriv>),
        detach_mcast: Some(crate::ib::qp::detach_mcast::<qp::QpPriv>),
        size_ib_qp: crate::ib::qp::size::<qp::QpPriv>(),
        create_srq: Some(crate::ib::srq::create_srq::<crate::srq::SrqPriv>),
        modify_srq: Some(crate::ib::srq::modify_srq::<crate::srq::SrqPriv>),
        query_srq: Some(crate::ib::srq::query_srq::<crate::srq::SrqPriv>),
        destroy_srq: Some(crate::ib::srq::destroy_srq::<crate::srq::SrqPriv>),
        post_srq_recv: Some(crate::ib::srq::post_srq_recv::<crate::srq::SrqPriv>),
        size_ib_srq: crate::ib::srq::size::<crate::srq::SrqPriv>(),
        reg_user_mr: Some(crate::ib::mr::reg_user_mr::<mr::MrPart>),
        rereg_user_mr: Some(crate::ib::mr::rereg_user_mr::<mr::MrPart>),
        get_dma_mr: Some(crate::ib::mr::get_dma_mr::<mr::MrPart>),
        dereg_mr: Some(crate::ib::mr::dereg_mr::<mr::MrPart>),
        advise_mr: Some(crate::ib::mr::advise_mr::<mr::MrPart>),
        alloc_mw: Some(crate::ib::mw::alloc_mw::<crate::mw::MwPart>),
        dealloc_mw: Some(crate::ib::mw::dealloc_mw::<crate::mw::MwPart>),
        size_ib_mw: crate::ib::mw::size::<crate::mw::MwPart>(),
        alloc_mr: Some(crate::ib::mr::alloc_mr::<mr::MrPart>),
        map_mr_sg: Some(crate::ib::mr::map_mr_sg::<mr::MrPart>),
        size_ib_pd: ibdev::PD_SIZE,
        size_ib_xrcd: ibdev::XRCD_SIZE,
        size_ib_ucontext: ucontext::SIZE,
        ..Default::default()
    }
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
